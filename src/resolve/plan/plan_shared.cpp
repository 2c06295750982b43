// SPDX-License-Identifier: MIT
// Plan-building helpers shared by the native layout (plan.cpp) and tf-compat (tf_compat.cpp),
// with the system address resolver: in a file of their own so that neither layout depends on
// the other's file.
#include "resolve/plan/plan_shared.hpp"

#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/plan.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
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

/// The addresses the nodes chose (`iface`/`network`), which a task cannot compute: each node
/// reads its own interfaces, and the others' come from an exchange.
std::vector<std::string> chosen_addresses(const std::vector<std::string>& hosts,
                                          const PlanOptions& options) {
    std::vector<std::string> addresses;
    std::vector<std::string> unknown;
    addresses.reserve(hosts.size());
    for (const auto& host : hosts) {
        const auto found = options.node_addresses.find(host);
        if (found == options.node_addresses.end()) {
            if (std::find(unknown.begin(), unknown.end(), host) == unknown.end()) {
                unknown.push_back(host);
            }
            addresses.emplace_back();
        } else {
            addresses.push_back(found->second);
        }
    }
    if (unknown.empty()) {
        return addresses;
    }
    const auto& selection = options.address_selection;
    const bool by_interface = !selection.interfaces.empty();
    throw errors::invalid_setting(
        by_interface ? "iface" : "network",
        fmt::format("the chosen addresses of {} are unknown here (each node reads only its own "
                    "interfaces)",
                    detail::join(unknown, ", ")),
        by_interface ? detail::join(selection.interfaces, ",") : selection.network->text,
        "use tfslurm run (its coordinator exchanges every node's address before the trainers "
        "start) or tfslurm env under srun --mpi=pmi2 (it exchanges them through PMI2); a "
        "single-node step works anywhere");
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
    if (options.address_selection.active()) {
        return chosen_addresses(hosts, options);
    }
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

SelectedAddress select_own_address(const Plan& plan,
                                   const AddressSelection& selection,
                                   const std::vector<InterfaceAddress>& interfaces) {
    std::string node;
    if (plan.self_rank) {
        node = plan.ranks.at(*plan.self_rank).host;
    } else if (plan.hosts.size() == 1) {
        node = plan.hosts.front();
    } else {
        throw errors::missing_env("SLURM_PROCID",
                                  "the node of this task is unknown, so is its address");
    }
    auto selected = select_address(interfaces, selection, node);
    logger().debug("{} chose {} on {}", node, selected.address, selected.interface);
    return selected;
}

Plan plan_with_own_address(const StepInfo& step,
                           const Allocation& allocation,
                           PlanOptions options,
                           const std::vector<InterfaceAddress>& interfaces,
                           GpuDetail detail) {
    // Which node is this task's comes from the plan itself (placement, distribution): plan
    // once by name to learn it (no rank's GPU list needed), then again with the address it chose.
    auto by_name = options;
    by_name.address_selection = {};
    const auto named = make_plan(step, allocation, by_name, {}, GpuDetail::self_only);
    const auto selected = select_own_address(named, options.address_selection, interfaces);
    options.node_addresses.insert_or_assign(named.self_rank ? named.ranks[*named.self_rank].host
                                                            : named.hosts.front(),
                                            selected.address);
    auto plan = make_plan(step, allocation, options, {}, detail);
    plan.socket_interface = selected.interface;
    return plan;
}

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
