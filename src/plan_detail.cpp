// SPDX-License-Identifier: MIT
// Plan-building helpers shared by the native layout (plan.cpp) and tf-compat (tf_compat.cpp),
// with the system address resolver: in a file of their own so that neither layout depends on
// the other's file.
#include "detail/plan.hpp"
#include "detail/text.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/plan.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm {
namespace {

/// `{host}` is the only placeholder; anything else in braces is a mistake worth reporting.
std::string apply_pattern(std::string_view pattern, std::string_view host) {
    if (pattern.empty()) {
        return std::string{host};
    }
    std::string out;
    std::size_t pos = 0;
    while (pos < pattern.size()) {
        const auto open = pattern.find('{', pos);
        if (open == std::string_view::npos) {
            out += pattern.substr(pos);
            break;
        }
        out += pattern.substr(pos, open - pos);
        out += host; // validated: every '{' starts "{host}"
        pos = open + 6;
    }
    return out;
}

} // namespace

namespace detail {

std::string join_roles(const std::vector<Role>& roles) {
    std::vector<std::string> names;
    names.reserve(roles.size());
    for (const auto role : roles) {
        names.emplace_back(to_string(role));
    }
    return detail::join(names, ",");
}

void number_roles(Plan& plan) {
    std::map<Role, std::uint32_t> next;
    for (auto& rank : plan.ranks) {
        rank.index = next[rank.role]++;
    }
}

std::vector<std::string> resolve_addresses(const std::vector<std::string>& hosts,
                                           const PlanOptions& options,
                                           const AddressResolver& resolve) {
    std::vector<std::string> addresses;
    addresses.reserve(hosts.size());
    std::map<std::string, std::string, std::less<>> cache;
    for (const auto& host : hosts) {
        auto name = apply_pattern(options.host_pattern, host);
        if (options.address == AddressMode::ip) {
            auto found = cache.find(name);
            if (found == cache.end()) {
                auto address = resolve ? resolve(name) : system_address_resolver()(name);
                logger().debug("address of {}: {}", name, address);
                found = cache.emplace(name, std::move(address)).first;
            }
            addresses.push_back(found->second);
        } else {
            addresses.push_back(std::move(name));
        }
    }
    return addresses;
}

} // namespace detail

AddressResolver system_address_resolver() {
    return [](const std::string& name) {
        addrinfo hints{};
        hints.ai_family = AF_INET;
        hints.ai_socktype = SOCK_STREAM;
        addrinfo* found = nullptr;
        const int rc = ::getaddrinfo(name.c_str(), nullptr, &hints, &found);
        if (rc != 0 || found == nullptr) {
            throw errors::make(Errc::io,
                               setting_ref("address", "ip"),
                               fmt::format("cannot resolve {} to an IPv4 address ({})",
                                           quote(name),
                                           ::gai_strerror(rc)),
                               "check " + setting_ref("host_pattern") + " or use " +
                                   setting_ref("address", "name"));
        }
        std::array<char, INET_ADDRSTRLEN> text{};
        const auto* address = reinterpret_cast<const sockaddr_in*>(found->ai_addr); // NOLINT
        ::inet_ntop(AF_INET, &address->sin_addr, text.data(), text.size());
        ::freeaddrinfo(found);
        return std::string{text.data()};
    };
}

} // namespace tfslurm
