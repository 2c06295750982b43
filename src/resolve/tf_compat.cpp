// SPDX-License-Identifier: MIT
#include "resolve/plan/plan_shared.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/tf_compat.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm {
namespace {

constexpr std::uint16_t k_tf_compat_port_base = 8888;

/// TensorFlow's resolver knows role counts only: a role list or roles by component is refused.
void require_counts_only(const PlanOptions& options) {
    const auto refuse = [](std::string_view key, const std::vector<Role>& roles) {
        throw errors::invalid_setting(
            key,
            fmt::format("the tf-compat layout takes role counts only ({}, {}, {})",
                        setting_ref("ps"),
                        setting_ref("chief"),
                        setting_ref("evaluator")),
            detail::join_roles(roles));
    };
    if (!options.role_list.empty()) {
        refuse("roles", options.role_list);
    }
    if (!options.component_roles.empty()) {
        refuse("roles_by_component", options.component_roles);
    }
}

/// The hosts as TensorFlow sees them: sorted by name, duplicates collapsed like a dict's keys,
/// each with its task count; and the largest count.
struct TfHosts {
    std::map<std::string, std::uint32_t> tasks; ///< by host name
    std::uint32_t total = 0;
    std::uint32_t max_per_host = 0;
};

TfHosts tf_hosts(const Allocation& allocation) {
    TfHosts hosts;
    for (std::size_t node = 0; node < allocation.hosts.size(); ++node) {
        hosts.tasks[allocation.hosts[node]] = allocation.tasks_per_node[node];
    }
    for (const auto& [host, count] : hosts.tasks) {
        hosts.total += count;
        hosts.max_per_host = std::max(hosts.max_per_host, count);
    }
    return hosts;
}

/// GPUs per task: given, or the node's GPUs shared by its largest task count. TensorFlow counts
/// CUDA_VISIBLE_DEVICES entries, an empty value as 1. \throws Error when they do not fit.
std::uint32_t
tf_gpus_per_task(const StepInfo& step, const PlanOptions& options, std::uint32_t max_per_host) {
    std::uint32_t gpus_per_node = 0;
    if (options.tf_gpus_per_node) {
        gpus_per_node = *options.tf_gpus_per_node;
    } else if (step.gpus.visible) {
        gpus_per_node =
            std::max<std::uint32_t>(1, static_cast<std::uint32_t>(step.gpus.visible->size()));
    }
    const std::uint32_t gpus_per_task = options.gpus_per_task
                                            ? *options.gpus_per_task
                                            : (max_per_host ? gpus_per_node / max_per_host : 0);
    if (std::uint64_t{max_per_host} * gpus_per_task > gpus_per_node) {
        throw errors::invalid_argument(setting_ref("layout", "tf-compat"),
                                       "Requested more GPUs per node than available.",
                                       fmt::format("{} GPUs per task x {} tasks per node, {} GPUs",
                                                   gpus_per_task,
                                                   max_per_host,
                                                   gpus_per_node));
    }
    return gpus_per_task;
}

/// TensorFlow's jobs in its order: chief, evaluator, ps, then the workers.
std::vector<Role> tf_jobs(const PlanOptions& options, std::uint32_t ntasks, std::uint32_t workers) {
    std::vector<Role> jobs;
    jobs.reserve(ntasks);
    jobs.insert(jobs.end(), options.counts.chief ? 1U : 0U, Role::chief);
    jobs.insert(jobs.end(), options.counts.evaluator ? 1U : 0U, Role::evaluator);
    jobs.insert(jobs.end(), options.counts.ps, Role::ps);
    jobs.insert(jobs.end(), workers, Role::worker);
    return jobs;
}

/// TensorFlow advertises rank r at the r-th (host, local) pair, whatever Slurm's placement:
/// said once, at the first rank where they differ.
void warn_if_misplaced(const Plan& plan, const Allocation& allocation) {
    for (const auto& rank : plan.ranks) {
        const auto& place = allocation.places[rank.rank];
        if (allocation.hosts[place.node] != rank.host || place.local != rank.local) {
            logger().warn("tf-compat layout: rank {} is advertised as {}:{} but Slurm runs it on "
                          "{} (local task {}); this is TensorFlow's behaviour, not tfslurm's",
                          rank.rank,
                          rank.host,
                          rank.port,
                          allocation.hosts[place.node],
                          place.local);
            return;
        }
    }
}

} // namespace

/// TensorFlow's SlurmClusterResolver, reproduced on purpose
/// (tensorflow/python/distribute/cluster_resolver/slurm_cluster_resolver.py): hosts sorted by name
/// (duplicates collapse), jobs in alphabetical order over the flat list of (host, local index),
/// ports 8888 + local index, node-relative GPU numbers.
Plan make_tf_compat_plan(const StepInfo& step,
                         const Allocation& allocation,
                         const PlanOptions& options,
                         const AddressResolver& resolve) {
    require_counts_only(options);
    const TfHosts hosts = tf_hosts(allocation);
    const auto ntasks = static_cast<std::uint32_t>(allocation.ntasks());
    const std::uint32_t special =
        options.counts.ps + (options.counts.chief ? 1U : 0U) + (options.counts.evaluator ? 1U : 0U);
    const std::uint32_t workers = ntasks > special ? ntasks - special : 0;
    const std::uint32_t requested = special + workers;
    if (requested != hosts.total) {
        throw errors::invalid_argument(
            setting_ref("layout", "tf-compat"),
            fmt::format("Requested {} tasks but only {} were assigned.", requested, hosts.total),
            step.nodelist,
            "the nodelist has duplicate hosts, which TensorFlow collapses");
    }
    const std::uint32_t gpus_per_task = tf_gpus_per_task(step, options, hosts.max_per_host);
    const auto base = options.port_base.value_or(k_tf_compat_port_base);
    if (std::uint32_t{base} + hosts.max_per_host > 65535U) {
        throw errors::invalid_setting(
            "port_base", "the ports do not fit below 65536", std::to_string(base));
    }

    Plan plan;
    plan.layout = Layout::tf_compat;
    plan.job_id = step.job_id;
    plan.step_id = step.step_id;
    plan.rpc_layer = options.rpc_layer;
    plan.port_source = PortSource::explicit_base;
    plan.control_port_source = PortSource::explicit_base;
    plan.gpus_exact = false;
    if (step.self) {
        plan.self_rank = step.self->rank;
    }
    for (const auto& [host, count] : hosts.tasks) {
        plan.hosts.push_back(host);
    }
    const auto addresses = detail::resolve_addresses(plan.hosts, options, resolve);

    // The flat (host, local) list; rank r takes position r, whatever Slurm's placement.
    const std::vector<Role> jobs = tf_jobs(options, ntasks, workers);
    plan.ranks.reserve(ntasks);
    std::uint32_t position = 0;
    for (std::uint32_t node = 0; node < plan.hosts.size(); ++node) {
        const auto count = hosts.tasks.at(plan.hosts[node]);
        for (std::uint32_t local = 0; local < count; ++local, ++position) {
            RankPlan rank;
            rank.rank = position;
            rank.role = jobs[position];
            rank.node = node;
            rank.local = local;
            rank.host = plan.hosts[node];
            rank.address = addresses[node];
            rank.port = static_cast<std::uint16_t>(base + local);
            for (std::uint32_t gpu = 0; gpu < gpus_per_task; ++gpu) {
                rank.gpus.push_back(std::to_string(local * gpus_per_task + gpu));
            }
            plan.ranks.push_back(std::move(rank));
        }
    }
    detail::number_roles(plan);
    // The launchers reach the coordinator before any address is exchanged: by name.
    plan.control_address =
        options.address_selection.active() ? plan.ranks.front().host : plan.ranks.front().address;
    plan.control_port = static_cast<std::uint16_t>(base + hosts.max_per_host);
    warn_if_misplaced(plan, allocation);
    return plan;
}

} // namespace tfslurm
