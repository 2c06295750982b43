// SPDX-License-Identifier: MIT
// The native layout (make_plan() for Layout::native, through make_plan.cpp): roles from counts,
// lists or components, ports (reserved, derived, explicit), addresses and the GPU split.
#include "common/detail/text.hpp"
#include "resolve/plan/plan_shared.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <utility>

namespace tfslurm {
namespace {

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
    PortSource control_source = PortSource::derived;
    std::string control_note; ///< Plan::control_port_note
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
        ports.control_source = PortSource::explicit_base;
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
            ports.control_source = PortSource::reserved;
        } else {
            // Still a port no other step of the job uses (its window), but outside what Slurm
            // reserved: another job's task on rank 0's node may hold it.
            ports.control = static_cast<std::uint16_t>(derived + per_node);
            ports.control_note = fmt::format(
                "derived, outside SLURM_STEP_RESV_PORTS \"{}\": it reserves {} ports for {} tasks "
                "on a node and none for the launcher; srun --resv-ports={} reserves one",
                format_ports(step.resv_ports),
                step.resv_ports.size(),
                per_node,
                per_node + 1);
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
    plan.control_port_source = ports.control_source;
    plan.control_port_note = ports.control_note;
    logger().debug("plan: {} tasks on {} nodes, ports {} (control {}:{})",
                   ntasks,
                   allocation.hosts.size(),
                   to_string(plan.port_source),
                   plan.control_address,
                   plan.control_port);
    return plan;
}

} // namespace tfslurm
