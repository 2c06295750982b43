// SPDX-License-Identifier: MIT
#include "detail/plan_shared.hpp"
#include "detail/text.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/plan.hpp>

#include <fmt/format.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

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
/// srun --resv-ports fails without a port range for slurmctld to reserve from: every hint that
/// recommends it says so.
constexpr std::string_view k_resv_ports_need =
    "it needs MpiParams=ports=LOW-HIGH in slurm.conf; Slurm then sets SLURM_STEP_RESV_PORTS in "
    "every task";

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

/// Ports as Slurm writes SLURM_STEP_RESV_PORTS: `12000-12003,12005`.
std::string format_ports(const std::vector<std::uint16_t>& ports) {
    std::string out;
    for (std::size_t i = 0; i < ports.size();) {
        std::size_t j = i;
        while (j + 1 < ports.size() && ports[j + 1] == ports[j] + 1) {
            ++j;
        }
        if (!out.empty()) {
            out += ',';
        }
        out += j == i ? fmt::format("{}", ports[i]) : fmt::format("{}-{}", ports[i], ports[j]);
        i = j + 1;
    }
    return out;
}

/// Roles per rank from counts: ps first (or spread one per node), then chief, workers,
/// evaluator last.
std::vector<Role>
roles_from_counts(const RoleCounts& counts, PsPlacement placement, const Allocation& allocation) {
    const auto ntasks = allocation.ntasks();
    const std::uint64_t special =
        std::uint64_t{counts.ps} + (counts.chief ? 1U : 0U) + (counts.evaluator ? 1U : 0U);
    if (special > ntasks || (special == ntasks && !counts.chief)) {
        throw errors::invalid_argument(
            "roles",
            fmt::format("{} ps{}{} leave no rank for a worker in a step of {} tasks",
                        counts.ps,
                        counts.chief ? " + chief" : "",
                        counts.evaluator ? " + evaluator" : "",
                        ntasks),
            fmt::format("ps={},chief={},evaluator={}",
                        counts.ps,
                        counts.chief ? 1 : 0,
                        counts.evaluator ? 1 : 0),
            "use fewer parameter servers or more tasks (srun -n)");
    }
    std::vector<Role> roles(ntasks, Role::worker);
    std::vector<bool> taken(ntasks, false);
    if (placement == PsPlacement::first) {
        for (std::uint32_t rank = 0; rank < counts.ps; ++rank) {
            roles[rank] = Role::ps;
            taken[rank] = true;
        }
    } else {
        // One ps per node: the first task of each node, then the second, ...
        std::uint32_t placed = 0;
        for (std::uint32_t round = 0; placed < counts.ps; ++round) {
            for (const auto& ranks : allocation.node_ranks) {
                if (placed == counts.ps) {
                    break;
                }
                if (round < ranks.size()) {
                    roles[ranks[round]] = Role::ps;
                    taken[ranks[round]] = true;
                    ++placed;
                }
            }
        }
    }
    std::vector<std::uint32_t> rest;
    rest.reserve(ntasks);
    for (std::uint32_t rank = 0; rank < ntasks; ++rank) {
        if (!taken[rank]) {
            rest.push_back(rank);
        }
    }
    if (counts.chief) {
        roles[rest.front()] = Role::chief;
    }
    if (counts.evaluator) {
        roles[rest.back()] = Role::evaluator;
    }
    return roles;
}

struct PortLayout {
    std::vector<std::uint16_t> by_local; ///< port of local task i
    std::uint16_t control = 0;
    PortSource source = PortSource::derived;
};

PortLayout
layout_ports(const StepInfo& step, const Allocation& allocation, const PlanOptions& options) {
    const auto per_node = allocation.max_tasks_per_node();
    PortLayout ports;
    ports.by_local.resize(per_node);
    if (options.port_base) {
        const auto base = std::uint32_t{*options.port_base};
        if (base + per_node > 65535U) {
            throw errors::invalid_setting(
                "port_base",
                fmt::format("{} tasks per node and a control port do not fit below 65536",
                            per_node),
                std::to_string(base));
        }
        std::iota(ports.by_local.begin(), ports.by_local.end(), static_cast<std::uint16_t>(base));
        ports.control = static_cast<std::uint16_t>(base + per_node);
        ports.source = PortSource::explicit_base;
        return ports;
    }
    const auto derived =
        derive_port_base(step.job_id.value_or(0), step.step_id.value_or(0), per_node + 1);
    if (!step.resv_ports.empty()) {
        if (step.resv_ports.size() < per_node) {
            throw errors::invalid_argument(
                "SLURM_STEP_RESV_PORTS",
                fmt::format(
                    "reserves {} ports but a node runs {} tasks", step.resv_ports.size(), per_node),
                format_ports(step.resv_ports),
                fmt::format("use srun --resv-ports={} (one per task on a node, plus one for "
                            "the launcher; {})",
                            per_node + 1,
                            k_resv_ports_need));
        }
        std::copy_n(step.resv_ports.begin(), per_node, ports.by_local.begin());
        if (step.resv_ports.size() > per_node) {
            ports.control = step.resv_ports[per_node];
        } else {
            ports.control = static_cast<std::uint16_t>(derived + per_node);
            logger().debug("SLURM_STEP_RESV_PORTS has no spare port for the launcher: control "
                           "port {} is derived from the job id",
                           ports.control);
        }
        ports.source = PortSource::reserved;
        return ports;
    }
    std::iota(ports.by_local.begin(), ports.by_local.end(), derived);
    ports.control = static_cast<std::uint16_t>(derived + per_node);
    ports.source = PortSource::derived;
    return ports;
}

/// Split the GPUs visible to this task among a node's `local_tasks` tasks.
std::vector<std::string> gpus_for(const std::vector<std::string>& visible,
                                  std::uint32_t local,
                                  std::uint32_t local_tasks,
                                  std::optional<std::uint32_t> per_task) {
    if (visible.empty()) {
        return {};
    }
    const auto count = static_cast<std::uint32_t>(visible.size());
    std::uint32_t share = 0;
    if (per_task) {
        share = *per_task;
    } else if (count >= local_tasks) {
        share = count / local_tasks;
    } else {
        // Fewer GPUs than tasks: tasks share them round robin (as Slurm does with gres=gpu:1).
        return {visible[local % count]};
    }
    if (share == 0) {
        return {};
    }
    const auto first = std::size_t{local} * share;
    return {visible.begin() + static_cast<std::ptrdiff_t>(first),
            visible.begin() + static_cast<std::ptrdiff_t>(first + share)};
}

/// The ranks whose GPU lists are filled in: all, or the calling task's only.
std::vector<RankPlan*> gpu_ranks(Plan& plan, GpuDetail detail) {
    std::vector<RankPlan*> ranks;
    if (detail == GpuDetail::self_only) {
        if (plan.self_rank && *plan.self_rank < plan.ranks.size()) {
            ranks.push_back(&plan.ranks[*plan.self_rank]);
        }
        return ranks;
    }
    ranks.reserve(plan.ranks.size());
    for (auto& rank : plan.ranks) {
        ranks.push_back(&rank);
    }
    return ranks;
}

void assign_gpus(Plan& plan,
                 const StepInfo& step,
                 const Allocation& allocation,
                 const PlanOptions& options,
                 GpuDetail detail) {
    if (!step.gpus.visible || step.gpus.visible->empty()) {
        if (options.gpus_per_task && *options.gpus_per_task > 0) {
            throw errors::invalid_setting(
                "gpus_per_task",
                "no GPU is visible to this task (CUDA_VISIBLE_DEVICES is unset or empty)",
                std::to_string(*options.gpus_per_task),
                "request GPUs from Slurm (srun --gpus-per-node, --gres=gpu:N) or drop " +
                    setting_ref("gpus_per_task"));
        }
        return;
    }
    const auto& visible = *step.gpus.visible;
    // Slurm already bound GPUs per task (--gpus-per-task, --gpu-bind): the task sees fewer
    // devices than the step has on the node. Then the visible list is this task's own.
    const bool bound_per_task = step.gpus.gpus_on_node && visible.size() < *step.gpus.gpus_on_node;
    plan.gpus_exact = step.scope == Scope::preview || allocation.hosts.size() == 1;
    if (bound_per_task) {
        plan.gpus_exact = false;
        if (plan.self_rank) {
            plan.ranks[*plan.self_rank].gpus = visible;
        }
        logger().debug("GPUs already bound per task by Slurm (CUDA_VISIBLE_DEVICES={}, "
                       "SLURM_GPUS_ON_NODE={}): kept as they are",
                       detail::join(visible, ","),
                       *step.gpus.gpus_on_node);
        return;
    }
    if (options.gpu_bind == GpuBind::node) {
        // torch's habit: every process of a node sees the node's GPUs and picks
        // cuda:LOCAL_RANK. A split per task would contradict that, so the two do not mix.
        if (options.gpus_per_task) {
            throw errors::invalid_setting(
                "gpu_bind",
                "every task sees the node's GPUs, so there is no per-task share to size",
                "node",
                "drop " + setting_ref("gpus_per_task") + " or use " +
                    setting_ref("gpu_bind", "task"));
        }
        for (auto* rank : gpu_ranks(plan, detail)) {
            rank->gpus = visible;
        }
        return;
    }
    if (options.gpus_per_task) {
        for (std::uint32_t node = 0; node < allocation.hosts.size(); ++node) {
            const auto need =
                std::uint64_t{*options.gpus_per_task} * allocation.tasks_per_node[node];
            if (need > visible.size()) {
                throw errors::invalid_setting(
                    "gpus_per_task",
                    fmt::format("{} tasks on node {} need {} GPUs but {} are visible ({})",
                                allocation.tasks_per_node[node],
                                allocation.hosts[node],
                                need,
                                visible.size(),
                                detail::join(visible, ",")),
                    std::to_string(*options.gpus_per_task));
            }
        }
    }
    for (auto* rank : gpu_ranks(plan, detail)) {
        rank->gpus = gpus_for(
            visible, rank->local, allocation.tasks_per_node[rank->node], options.gpus_per_task);
    }
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

namespace {

/// At most one chief and one evaluator in an explicit role list.
void check_unique_roles(const std::vector<Role>& roles,
                        std::string_view key,
                        std::string_view input) {
    const auto chiefs = std::count(roles.begin(), roles.end(), Role::chief);
    const auto evaluators = std::count(roles.begin(), roles.end(), Role::evaluator);
    if (chiefs > 1 || evaluators > 1) {
        throw errors::invalid_setting(key, "at most one chief and one evaluator", input);
    }
}

/// The role settings given besides `roles_by_component`, rendered for a message.
std::vector<std::string> other_role_settings(const PlanOptions& options) {
    std::vector<std::string> given;
    if (options.counts.ps != 0) {
        given.push_back(setting_ref("ps", std::to_string(options.counts.ps)));
    }
    if (options.counts.chief) {
        given.push_back(setting_ref("chief"));
    }
    if (options.counts.evaluator) {
        given.push_back(setting_ref("evaluator"));
    }
    if (!options.role_list.empty()) {
        given.push_back(setting_ref("roles", detail::join_roles(options.role_list)));
    }
    return given;
}

/// `roles_by_component`: every rank of component i gets role i. Refused outside a
/// heterogeneous step, with a role per component missing or extra, and next to the other role
/// settings (which describe ranks, not components: neither can win without surprising).
std::vector<Role> roles_by_component(const StepInfo& step, const PlanOptions& options) {
    const auto& given = options.component_roles;
    const auto text = detail::join_roles(given);
    if (const auto others = other_role_settings(options); !others.empty()) {
        throw errors::invalid_setting("roles_by_component",
                                      "cannot be combined with " + detail::join(others, " or "),
                                      text,
                                      "give the roles either per component or per rank, not both");
    }
    if (step.components.empty()) {
        throw errors::invalid_setting("roles_by_component",
                                      "needs a heterogeneous step, and this step has one component "
                                      "(SLURM_HET_SIZE is not set)",
                                      text,
                                      "start the components with srun A : B, or give the roles per "
                                      "rank with " +
                                          setting_ref("roles"));
    }
    if (given.size() != step.components.size()) {
        throw errors::invalid_setting(
            "roles_by_component",
            fmt::format("gives {} roles for a heterogeneous step of {} components",
                        given.size(),
                        step.components.size()),
            text,
            "give exactly one role per component, in the order of srun's ':'-separated parts");
    }
    std::vector<Role> roles;
    roles.reserve(step.ntasks);
    for (std::size_t i = 0; i < given.size(); ++i) {
        roles.insert(roles.end(), step.components[i].ntasks, given[i]);
    }
    check_unique_roles(roles, "roles_by_component", text);
    return roles;
}

} // namespace

// The native layout, rule after rule (~70 lines): roles, ports, addresses, GPUs, the control
// endpoint; each needs the ones before it.
Plan detail::make_native_plan(const StepInfo& step,
                              const Allocation& allocation,
                              const PlanOptions& options,
                              const AddressResolver& resolve,
                              GpuDetail detail) {
    if (options.tf_gpus_per_node) {
        throw errors::invalid_setting(
            "gpus_per_node",
            "applies to " + setting_ref("layout", "tf-compat") + " only",
            std::to_string(*options.tf_gpus_per_node),
            "the native layout splits the GPUs Slurm makes visible (CUDA_VISIBLE_DEVICES)");
    }
    const auto ntasks = allocation.ntasks();
    std::vector<Role> roles;
    if (!options.component_roles.empty()) {
        roles = roles_by_component(step, options);
    } else if (!options.role_list.empty()) {
        if (options.role_list.size() != ntasks) {
            throw errors::invalid_setting("roles",
                                          fmt::format("gives {} roles for a step of {} tasks",
                                                      options.role_list.size(),
                                                      ntasks),
                                          detail::join_roles(options.role_list),
                                          "give exactly one role per task (ROLE*N repeats)");
        }
        check_unique_roles(options.role_list, "roles", detail::join_roles(options.role_list));
        roles = options.role_list;
    } else {
        roles = roles_from_counts(options.counts, options.ps_placement, allocation);
    }

    Plan plan;
    plan.layout = Layout::native;
    plan.hosts = allocation.hosts;
    plan.job_id = step.job_id;
    plan.step_id = step.step_id;
    plan.rpc_layer = options.rpc_layer;
    if (step.self) {
        plan.self_rank = step.self->rank;
    }
    const auto ports = layout_ports(step, allocation, options);
    plan.port_source = ports.source;
    const auto addresses = detail::resolve_addresses(allocation.hosts, options, resolve);

    plan.ranks.resize(ntasks);
    for (std::uint32_t r = 0; r < ntasks; ++r) {
        const auto& place = allocation.places[r];
        auto& rank = plan.ranks[r];
        rank.rank = r;
        rank.role = roles[r];
        rank.node = place.node;
        rank.local = place.local;
        rank.host = allocation.hosts[place.node];
        rank.address = addresses[place.node];
        rank.port = ports.by_local[place.local];
    }
    detail::number_roles(plan);
    assign_gpus(plan, step, allocation, options, detail);
    // The launchers reach the coordinator before any address is exchanged: by name.
    plan.control_address =
        options.address_selection.active() ? plan.ranks.front().host : plan.ranks.front().address;
    plan.control_port = ports.control;
    logger().debug("plan: {} tasks on {} nodes, ports {} (control {}:{})",
                   ntasks,
                   allocation.hosts.size(),
                   to_string(plan.port_source),
                   plan.control_address,
                   plan.control_port);
    return plan;
}

} // namespace tfslurm
