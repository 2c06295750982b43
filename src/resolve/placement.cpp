// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"
#include "resolve/detail/step.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/placement.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <unordered_map>
#include <utility>

namespace tfslurm {

namespace {

std::string describe_layout(const Allocation& allocation, const StepInfo& step) {
    if (!step.components.empty()) {
        return fmt::format("heterogeneous ({} components, ranks component after component)",
                           step.components.size());
    }
    if (!step.layout_rank_hosts.empty()) {
        return "block in topology order (the controller's layout)";
    }
    std::string text{to_string(allocation.distribution)};
    if (allocation.distribution == Distribution::plane) {
        text += fmt::format("={}", allocation.plane_size);
    } else if (allocation.distribution == Distribution::arbitrary) {
        text += fmt::format(" (hostfile {})", step.hostfile);
    }
    return text;
}

/// The checks shared by every layout: one positive count per host.
void check_layout_input(const std::vector<std::string>& hosts,
                        const std::vector<std::uint32_t>& tasks_per_node) {
    if (hosts.empty()) {
        throw errors::inconsistent_allocation("allocation", "no nodes", "");
    }
    if (hosts.size() != tasks_per_node.size()) {
        throw errors::inconsistent_allocation(
            "tasks per node",
            fmt::format("{} counts for {} nodes", tasks_per_node.size(), hosts.size()),
            compress_counts(tasks_per_node));
    }
    for (std::size_t node = 0; node < hosts.size(); ++node) {
        if (tasks_per_node[node] == 0) {
            throw errors::inconsistent_allocation(
                "tasks per node",
                fmt::format("node {} ({}) has no task", node, hosts[node]),
                compress_counts(tasks_per_node));
        }
    }
}

/// Append `rank` to its node in `allocation`, with the next local id there.
void assign_rank(Allocation& allocation, std::uint32_t rank, std::uint32_t node) {
    auto& ranks = allocation.node_ranks[node];
    allocation.places[rank] = TaskPlace{node, static_cast<std::uint32_t>(ranks.size())};
    ranks.push_back(rank);
}

std::string join_ids(const std::vector<std::uint32_t>& ids) {
    std::vector<std::string> text;
    text.reserve(ids.size());
    for (const auto id : ids) {
        text.push_back(std::to_string(id));
    }
    return detail::join(text, ",");
}

/// SLURM_GTIDS must list the ranks the computed placement puts on this node (in any order).
void check_gtids(const std::vector<std::uint32_t>& gtids,
                 std::vector<std::uint32_t> expected,
                 const std::string& where,
                 std::string_view hint) {
    auto actual = gtids;
    std::sort(expected.begin(), expected.end());
    std::sort(actual.begin(), actual.end());
    if (expected != actual) {
        throw errors::inconsistent_allocation(
            "SLURM_GTIDS",
            fmt::format("lists other ranks than the computed placement ({}): {}",
                        join_ids(expected),
                        where),
            join_ids(gtids),
            std::string{hint});
    }
}

/// The SLURM_NODEID that Slurm gives the tasks on `node` (an index into the step nodelist).
/// In a heterogeneous step Slurm numbers the nodes component after component, not in nodelist
/// order: in `srun -w n2 : -w n1,n3` n2 is node 0 and n1 node 1, although the nodelist (and
/// the order of SLURM_STEP_TASKS_PER_NODE) is n[1-3].
std::size_t slurm_node_id(const StepInfo& step, const Allocation& allocation, std::size_t node) {
    if (step.components.empty()) {
        return node;
    }
    std::size_t id = 0;
    for (const auto& component : step.components) {
        for (const auto& host : component.hosts) {
            if (host == allocation.hosts[node]) {
                return id;
            }
            ++id;
        }
    }
    return node; // read_step makes every node part of one component
}

void check_identity(const StepInfo& step, const Allocation& allocation) {
    const auto& self = *step.self;
    if (self.rank >= allocation.ntasks()) {
        throw errors::inconsistent_allocation(
            "SLURM_PROCID",
            fmt::format("rank is outside the step's {} tasks ({}={})",
                        allocation.ntasks(),
                        step.tasks_variable,
                        compress_counts(step.tasks_per_node)),
            std::to_string(self.rank));
    }
    const auto& place = allocation.places[self.rank];
    const auto node_id = slurm_node_id(step, allocation, place.node);
    const std::string_view hint =
        "the nodelist, tasks-per-node and distribution variables (with -m arbitrary: the file "
        "SLURM_HOSTFILE names, which must not change while the step runs) do not describe "
        "where Slurm runs this task";
    const auto where = [&] {
        return fmt::format("{} distribution of {}={} over {}={} puts rank {} on node {} ({}) "
                           "as local task {}",
                           describe_layout(allocation, step),
                           step.tasks_variable,
                           compress_counts(step.tasks_per_node),
                           step.nodelist_variable,
                           step.nodelist,
                           self.rank,
                           node_id,
                           allocation.hosts[place.node],
                           place.local);
    };
    if (self.node_id && *self.node_id != node_id) {
        throw errors::inconsistent_allocation(
            "SLURM_NODEID",
            fmt::format("disagrees with the computed placement: {}", where()),
            std::to_string(*self.node_id),
            std::string{hint});
    }
    if (self.local_id && *self.local_id != place.local) {
        throw errors::inconsistent_allocation(
            "SLURM_LOCALID",
            fmt::format("disagrees with the computed placement: {}", where()),
            std::to_string(*self.local_id),
            std::string{hint});
    }
    if (self.node_name && *self.node_name != allocation.hosts[place.node]) {
        throw errors::inconsistent_allocation(
            "SLURMD_NODENAME",
            fmt::format("disagrees with the computed placement: {}", where()),
            *self.node_name,
            std::string{hint});
    }
    // The batch script (job scope) reports only itself in SLURM_GTIDS; steps list the node.
    if (step.scope == Scope::step && self.gtids) {
        check_gtids(*self.gtids, allocation.node_ranks[place.node], where(), hint);
    }
}

} // namespace

std::uint32_t Allocation::max_tasks_per_node() const noexcept {
    std::uint32_t most = 0;
    for (const auto count : tasks_per_node) {
        most = std::max(most, count);
    }
    return most;
}

Allocation place_tasks(std::vector<std::string> hosts,
                       std::vector<std::uint32_t> tasks_per_node,
                       Distribution distribution,
                       std::uint32_t plane_size) {
    check_layout_input(hosts, tasks_per_node);
    if (distribution == Distribution::arbitrary) {
        throw errors::invalid_argument(
            "distribution",
            "an arbitrary distribution needs the host of every rank (a hostfile)",
            "arbitrary",
            "place_arbitrary() takes the hostfile's hosts");
    }
    if (distribution == Distribution::plane && plane_size == 0) {
        throw errors::invalid_argument("distribution",
                                       "plane distribution needs a size >= 1",
                                       "plane",
                                       "set SLURM_DIST_PLANESIZE or use plane=N");
    }
    const auto total = detail::checked_total(tasks_per_node, "tasks per node");

    Allocation allocation;
    allocation.distribution = distribution;
    allocation.plane_size = distribution == Distribution::plane ? plane_size : 0;
    allocation.places.resize(total);
    allocation.node_ranks.resize(hosts.size());
    for (std::size_t node = 0; node < hosts.size(); ++node) {
        allocation.node_ranks[node].reserve(tasks_per_node[node]);
    }

    if (distribution == Distribution::block) {
        // Block: ranks fill node after node, in nodelist order.
        std::uint32_t rank = 0;
        for (std::uint32_t node = 0; node < hosts.size(); ++node) {
            for (std::uint32_t i = 0; i < tasks_per_node[node]; ++i) {
                assign_rank(allocation, rank++, node);
            }
        }
    } else {
        // Cyclic (block of 1) and plane (block of plane_size): deal blocks round robin over
        // the nodes that still have room. With the final per-node counts as caps this gives
        // the same ranks as Slurm's layout loops, including uneven counts.
        const std::uint32_t block = distribution == Distribution::cyclic ? 1 : plane_size;
        std::vector<std::uint32_t> active(hosts.size());
        std::iota(active.begin(), active.end(), 0U);
        std::vector<std::uint32_t> left = tasks_per_node;
        std::uint32_t rank = 0;
        while (!active.empty()) {
            std::size_t kept = 0;
            for (const auto node : active) {
                const auto take = std::min(block, left[node]);
                for (std::uint32_t i = 0; i < take; ++i) {
                    assign_rank(allocation, rank++, node);
                }
                left[node] -= take;
                if (left[node] > 0) {
                    active[kept++] = node;
                }
            }
            active.resize(kept);
        }
    }
    allocation.hosts = std::move(hosts);
    allocation.tasks_per_node = std::move(tasks_per_node);
    return allocation;
}

Allocation place_arbitrary(std::vector<std::string> hosts,
                           std::vector<std::uint32_t> tasks_per_node,
                           const std::vector<std::string>& rank_hosts,
                           std::string_view subject) {
    check_layout_input(hosts, tasks_per_node);
    const auto total = detail::checked_total(tasks_per_node, "tasks per node");
    if (rank_hosts.size() != total) {
        throw errors::inconsistent_allocation(
            subject,
            fmt::format("names {} hosts for the step's {} tasks", rank_hosts.size(), total),
            compress_counts(tasks_per_node));
    }
    const auto node_of = detail::node_index(hosts);
    Allocation allocation;
    allocation.distribution = Distribution::arbitrary;
    allocation.places.resize(total);
    allocation.node_ranks.resize(hosts.size());
    for (std::uint32_t rank = 0; rank < total; ++rank) {
        const auto found = node_of.find(rank_hosts[rank]);
        if (found == node_of.end()) {
            throw errors::inconsistent_allocation(
                subject,
                fmt::format("puts rank {} on a host that is not one of the step's {} nodes",
                            rank,
                            hosts.size()),
                rank_hosts[rank]);
        }
        assign_rank(allocation, rank, found->second);
    }
    for (std::uint32_t node = 0; node < hosts.size(); ++node) {
        if (allocation.node_ranks[node].size() != tasks_per_node[node]) {
            throw errors::inconsistent_allocation(
                subject,
                fmt::format("puts {} ranks on {} where the step has {} tasks (per node: {})",
                            allocation.node_ranks[node].size(),
                            hosts[node],
                            tasks_per_node[node],
                            compress_counts(tasks_per_node)),
                hosts[node]);
        }
    }
    allocation.hosts = std::move(hosts);
    allocation.tasks_per_node = std::move(tasks_per_node);
    return allocation;
}

namespace {

/// A heterogeneous step's own component with more than one node and more than one task on one
/// of them: only there does the order inside the component matter.
bool ordered_within(const StepInfo& step, const HetComponent& component) {
    if (component.hosts.size() < 2) {
        return false;
    }
    const auto node_of = detail::node_index(step.hosts);
    return std::any_of(component.hosts.begin(), component.hosts.end(), [&](const auto& host) {
        return step.tasks_per_node[node_of.at(host)] > 1;
    });
}

/// Each rank's host in a heterogeneous step: component after component (Slurm's rank offsets),
/// block inside a component. A task knows only its own component's distribution
/// (SLURM_DISTRIBUTION differs between components), so any other order inside a component
/// that has it matter is refused rather than guessed.
std::vector<std::string> het_rank_hosts(const StepInfo& step) {
    const auto node_of = detail::node_index(step.hosts);
    std::vector<std::string> rank_hosts;
    rank_hosts.reserve(step.ntasks);
    for (const auto& component : step.components) {
        const bool own = step.self && step.self->rank >= component.first_rank &&
                         step.self->rank - component.first_rank < component.ntasks;
        if (own && step.distribution.kind != Distribution::block &&
            ordered_within(step, component)) {
            throw errors::invalid_argument(
                "SLURM_DISTRIBUTION",
                "inside a component of a heterogeneous step only block is supported",
                to_string(step.distribution.kind),
                "give the component -m block (the other components cannot see its distribution)");
        }
        for (const auto& host : component.hosts) {
            rank_hosts.insert(rank_hosts.end(), step.tasks_per_node[node_of.at(host)], host);
        }
    }
    return rank_hosts;
}

} // namespace

Allocation resolve_allocation(const StepInfo& step) {
    if (!step.components.empty()) {
        auto allocation = place_arbitrary(
            step.hosts, step.tasks_per_node, het_rank_hosts(step), "SLURM_HET_SIZE");
        if (step.self) {
            check_identity(step, allocation);
        }
        return allocation;
    }
    if (!step.topology_order.empty() && step.distribution.kind == Distribution::block &&
        step.hosts.size() > 1) {
        // Slurm 26.05 puts ranks 0,1 on n3 and 2,3 on n1 of `srun -N3 -n6` when n3 comes first
        // in the topology, while every variable still lists n[1-3] in name order: the block
        // rule would place the ranks of every other node wrongly, even where this task's own
        // identity happens to agree. Only the controller's layout places them.
        if (!step.layout_rank_hosts.empty()) {
            auto allocation = place_arbitrary(
                step.hosts, step.tasks_per_node, step.layout_rank_hosts, "sattach --layout");
            if (step.self) {
                check_identity(step, allocation);
            }
            return allocation;
        }
        std::string hint = "run the step with srun -m cyclic, or -m arbitrary with "
                           "SLURM_HOSTFILE, or have the site set "
                           "SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK";
        if (!step.layout_error.empty()) {
            hint = fmt::format(
                "the controller's layout could not be read ({}); {}", step.layout_error, hint);
        }
        throw errors::inconsistent_allocation(
            "placement",
            fmt::format("Slurm lays a block distribution over several nodes out in the order of "
                        "the network topology ({}), which no task's environment shows",
                        step.topology_order),
            "block",
            std::move(hint));
    }
    auto allocation = step.distribution.kind == Distribution::arbitrary
                          ? place_arbitrary(step.hosts,
                                            step.tasks_per_node,
                                            step.rank_hosts,
                                            hostfile_subject(step.scope == Scope::preview
                                                                 ? setting_ref("hostfile")
                                                                 : "SLURM_HOSTFILE",
                                                             step.hostfile))
                          : place_tasks(step.hosts,
                                        step.tasks_per_node,
                                        step.distribution.kind,
                                        step.distribution.plane_size);
    if (step.self) {
        check_identity(step, allocation);
    }
    return allocation;
}

} // namespace tfslurm
