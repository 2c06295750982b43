// SPDX-License-Identifier: MIT
#pragma once

// The classification of differences between tfslurm and scontrol: a difference is expected
// only when one of the documented causes (see main.cpp) explains it completely.

#include "scontrol.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::diff {

/// What expand_hostlist() made of a list.
struct OurResult {
    enum class Kind { hosts, rejected, too_large };
    Kind kind = Kind::hosts;
    std::vector<std::string> hosts;
    std::string message;
};

[[nodiscard]] OurResult expand_ours(const std::string& list);

/// `text` with control characters escaped, shortened to `limit` bytes.
[[nodiscard]] std::string printable(std::string_view text, std::size_t limit = 160);
[[nodiscard]] std::string describe_hosts(const std::vector<std::string>& hosts);
[[nodiscard]] std::string describe(const SlurmResult& result);
[[nodiscard]] std::string describe(const OurResult& result);

/// Counts the expected differences per category (with a few examples) and prints the others.
class Report {
  public:
    void expected(const std::string& category, const std::string& list, const std::string& why);
    void unexpected(const std::string& text);
    [[nodiscard]] std::size_t unexpected_count() const noexcept { return m_unexpected; }
    void print() const;

  private:
    struct Entry {
        std::size_t count = 0;
        std::vector<std::string> examples;
    };
    std::map<std::string, Entry> m_expected;
    std::size_t m_unexpected = 0;
};

/// Compare one list; returns true when ours and Slurm's are identical. A difference goes to
/// `report`, as expected (with its category) or unexpected. `before_2302`: the scontrol is
/// 22.05's (or older), whose own rules then explain differences too.
[[nodiscard]] bool compare_expansion(const std::string& list,
                                     const SlurmResult& slurm,
                                     bool before_2302,
                                     Report& report);

} // namespace tfslurm::diff
