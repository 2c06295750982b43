// SPDX-License-Identifier: MIT
// Plan-building helpers shared by the native layout (plan.cpp) and tf-compat (tf_compat.cpp):
// in a file of their own so that neither layout depends on the other's file.
#include "detail/plan.hpp"
#include "detail/text.hpp"

#include <tfslurm/log.hpp>
#include <tfslurm/plan.hpp>

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

} // namespace tfslurm
