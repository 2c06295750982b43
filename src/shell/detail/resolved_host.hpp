// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The coordinator's host name, resolved once per launcher (issue #33). A node leader dials
/// every control port candidate, and again every millisecond until rank 0 listens: resolving
/// the name for each attempt read /etc/hosts each time, or asked the site's DNS, from every
/// leader of the step at once while rank 0 starts.

#include <boost/asio/ip/address.hpp>

#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace tfslurm::detail {

/// A name's address, asked of `resolve` the first time and kept; asked again only for another
/// name, or after `resolve` found none (nullopt, with the reason in `error`).
class ResolvedHost {
  public:
    /// The address of a name (the first IPv4 one, else the first one), or nullopt and why not.
    using Resolve = std::function<std::optional<boost::asio::ip::address>(const std::string& name,
                                                                          std::string& error)>;

    explicit ResolvedHost(Resolve resolve) : m_resolve(std::move(resolve)) {}

    /// The address of `name`: the one kept for it, else `resolve`'s (kept when there is one).
    /// nullopt, with `resolve`'s reason in `error`, when it has none.
    [[nodiscard]] std::optional<boost::asio::ip::address> address(const std::string& name,
                                                                  std::string& error) {
        if (m_kept && m_kept->first == name) {
            return m_kept->second;
        }
        auto found = m_resolve(name, error);
        if (found) {
            m_kept.emplace(name, *found);
        }
        return found;
    }

  private:
    Resolve m_resolve;
    std::optional<std::pair<std::string, boost::asio::ip::address>> m_kept;
};

} // namespace tfslurm::detail
