// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <numeric>
#include <utility>

namespace tfslurm {
namespace {

constexpr std::uint32_t k_derived_port_first = 20000;
constexpr std::uint32_t k_derived_port_end = 32000; // below Linux's ephemeral range (32768)
/// Fallback control ports: between the derived range and Linux's ephemeral range (32768), so
/// that a fallback never takes a port another job's derived window gives one of its trainers.
constexpr std::uint32_t k_fallback_port_first = 32000;
constexpr std::uint32_t k_fallback_port_end = 32768;
constexpr std::size_t k_control_candidates = 8;
/// Distinguishes the control port sequence from the window choice (any odd constant).
constexpr std::uint64_t k_control_sequence_seed = 0x636f6e74726f6c31ULL; // "control1"

/// SplitMix64's finaliser: every input bit affects every output bit.
[[nodiscard]] std::uint64_t splitmix64(std::uint64_t x) noexcept {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30U)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27U)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31U);
}

/// One well-mixed number per (job, step).
[[nodiscard]] std::uint64_t mix_job_step(std::uint64_t job_id, std::uint64_t step_id) noexcept {
    return splitmix64(splitmix64(job_id) ^ step_id);
}

} // namespace

std::string_view to_string(Role role) noexcept {
    switch (role) {
    case Role::chief:
        return "chief";
    case Role::evaluator:
        return "evaluator";
    case Role::ps:
        return "ps";
    case Role::worker:
        return "worker";
    }
    return "worker";
}

std::string_view to_string(PsPlacement value) noexcept {
    return value == PsPlacement::first ? "first" : "spread";
}

std::string_view to_string(Layout value) noexcept {
    return value == Layout::native ? "native" : "tf-compat";
}

std::string_view to_string(AddressMode value) noexcept {
    return value == AddressMode::name ? "name" : "ip";
}

std::string_view to_string(Exchange value) noexcept {
    switch (value) {
    case Exchange::automatic:
        return "auto";
    case Exchange::env:
        return "env";
    case Exchange::pmi2:
        return "pmi2";
    case Exchange::coordinator:
        return "coordinator";
    }
    return "auto";
}

std::string_view to_string(PortSource value) noexcept {
    switch (value) {
    case PortSource::reserved:
        return "reserved";
    case PortSource::derived:
        return "derived";
    case PortSource::explicit_base:
        return "explicit";
    }
    return "derived";
}

std::string_view to_string(GpuBind value) noexcept {
    switch (value) {
    case GpuBind::automatic:
        return "auto";
    case GpuBind::task:
        return "task";
    case GpuBind::node:
        return "node";
    }
    return "auto";
}

Role parse_role(std::string_view text, std::string_view subject) {
    if (text == "chief") {
        return Role::chief;
    }
    if (text == "evaluator") {
        return Role::evaluator;
    }
    if (text == "ps") {
        return Role::ps;
    }
    if (text == "worker") {
        return Role::worker;
    }
    throw errors::invalid_argument(
        subject, "expected a role: ps, worker, chief or evaluator", text);
}

std::vector<Role> parse_role_list(std::string_view text, std::string_view subject) {
    std::vector<Role> roles;
    for (const auto item : detail::split(text, ',')) {
        const auto star = item.find('*');
        const auto role = parse_role(item.substr(0, star), subject);
        std::uint64_t repeat = 1;
        if (star != std::string_view::npos) {
            const auto count = detail::parse_decimal(item.substr(star + 1));
            if (!count || *count == 0 || *count > k_max_expanded_hosts) {
                throw errors::invalid_argument(
                    subject,
                    fmt::format("bad repetition in '{}' (expected ROLE*N with N from 1 to {})",
                                item,
                                k_max_expanded_hosts),
                    text);
            }
            repeat = *count;
        }
        if (roles.size() + repeat > k_max_expanded_hosts) {
            throw errors::invalid_argument(subject, "too many roles", text);
        }
        roles.insert(roles.end(), repeat, role);
    }
    return roles;
}

std::vector<std::uint32_t> Plan::members(Role role) const {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> found; // (index, rank)
    for (const auto& rank : ranks) {
        if (rank.role == role) {
            found.emplace_back(rank.index, rank.rank);
        }
    }
    std::sort(found.begin(), found.end());
    std::vector<std::uint32_t> out;
    out.reserve(found.size());
    for (const auto& [index, rank] : found) {
        out.push_back(rank);
    }
    return out;
}

std::string Plan::endpoint(std::uint32_t rank) const {
    const auto& entry = ranks.at(rank);
    return host_port(entry.address, entry.port);
}

std::uint16_t derive_port_base(std::uint64_t job_id, std::uint64_t step_id, std::uint32_t stride) {
    const auto span = k_derived_port_end - k_derived_port_first;
    if (stride == 0 || stride > span) {
        throw errors::invalid_argument(
            "ports",
            fmt::format("{} ports per node do not fit in the derived range {}-{}",
                        stride,
                        k_derived_port_first,
                        k_derived_port_end - 1),
            std::to_string(stride),
            fmt::format(
                "use srun --resv-ports ({}) or {}", k_resv_ports_need, setting_ref("port_base")));
    }
    const std::uint64_t windows = span / stride;
    // A hash, not job * 16 + step: ids related arithmetically (jobs 250 apart, steps 16 apart)
    // used to collide systematically; hashed, any two (job, step) pairs share a window with
    // probability 1 / windows.
    const std::uint64_t slot = mix_job_step(job_id, step_id) % windows;
    return static_cast<std::uint16_t>(k_derived_port_first + slot * stride);
}

std::vector<std::uint16_t> control_port_candidates(const Plan& plan) {
    std::vector<std::uint16_t> candidates{plan.control_port};
    const auto taken = [&](std::uint16_t port) {
        return std::find(candidates.begin(), candidates.end(), port) != candidates.end() ||
               std::any_of(plan.ranks.begin(), plan.ranks.end(), [&](const RankPlan& rank) {
                   return rank.port == port;
               });
    };
    // A sequence of its own (a different seed than the window), the same in every launcher.
    std::uint64_t state =
        mix_job_step(plan.job_id.value_or(0), plan.step_id.value_or(0)) ^ k_control_sequence_seed;
    const std::uint64_t span = k_fallback_port_end - k_fallback_port_first;
    while (candidates.size() < k_control_candidates) {
        state = splitmix64(state);
        const auto port = static_cast<std::uint16_t>(k_fallback_port_first + state % span);
        if (!taken(port)) {
            candidates.push_back(port);
        }
    }
    return candidates;
}

bool exact_mode(const PlanOptions& options) noexcept {
    return options.address_selection.active();
}

PortRange parse_port_range(std::string_view text, std::string_view key) {
    const auto dash = text.find('-');
    const auto number = [](std::string_view digits) -> std::optional<std::uint32_t> {
        if (digits.empty() || digits.size() > 5 ||
            !std::all_of(
                digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
            return std::nullopt;
        }
        std::uint32_t value = 0;
        for (const char c : digits) {
            value = value * 10 + static_cast<std::uint32_t>(c - '0');
        }
        return value;
    };
    const auto first = dash == text.npos ? std::nullopt : number(text.substr(0, dash));
    const auto last = dash == text.npos ? std::nullopt : number(text.substr(dash + 1));
    if (!first || !last || *first < 1 || *first > *last || *last > 65535) {
        throw errors::invalid_setting(
            key, "expected a port range LOW-HIGH within 1-65535", text, "e.g. 20000-31999");
    }
    return PortRange{static_cast<std::uint16_t>(*first), static_cast<std::uint16_t>(*last)};
}

std::vector<std::uint16_t> trainer_port_candidates(const Plan& plan,
                                                   std::uint32_t rank,
                                                   const std::vector<std::uint16_t>& reserved,
                                                   PortRange range) {
    const std::uint16_t own = plan.ranks.at(rank).port;
    std::vector<std::uint16_t> pool = reserved;
    if (pool.empty()) {
        pool.resize(std::size_t{range.last} - range.first + 1);
        std::iota(pool.begin(), pool.end(), range.first);
    }
    std::sort(pool.begin(), pool.end());
    pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
    const auto control = control_port_candidates(plan);
    // From the own port up: the launchers of one node, whose planned ports are adjacent, each
    // look first where the others do not.
    std::rotate(pool.begin(), std::upper_bound(pool.begin(), pool.end(), own), pool.end());
    std::vector<std::uint16_t> candidates{own};
    candidates.reserve(pool.size() + 1);
    for (const std::uint16_t port : pool) {
        if (port != own && std::find(control.begin(), control.end(), port) == control.end()) {
            candidates.push_back(port);
        }
    }
    return candidates;
}

} // namespace tfslurm
