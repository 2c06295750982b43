// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Where Slurm runs every rank of a step (Allocation): block, cyclic, plane and arbitrary
/// layouts, checked against what the task knows of itself. Pure.

#include <tfslurm/resolve/step.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Where one rank runs.
struct TaskPlace {
    std::uint32_t node = 0;  ///< index into Allocation::hosts (= SLURM_NODEID)
    std::uint32_t local = 0; ///< rank among the node's tasks (= SLURM_LOCALID)
};

/// Every rank of a step placed on its node, as Slurm places them.
struct Allocation {
    std::vector<std::string> hosts;            ///< node names, nodelist order, never sorted
    std::vector<std::uint32_t> tasks_per_node; ///< same length as hosts
    Distribution distribution = Distribution::block;
    std::uint32_t plane_size = 0;
    std::vector<TaskPlace> places;                      ///< indexed by global rank
    std::vector<std::vector<std::uint32_t>> node_ranks; ///< per node: its ranks (= SLURM_GTIDS)

    [[nodiscard]] std::size_t ntasks() const noexcept { return places.size(); }
    [[nodiscard]] std::uint32_t max_tasks_per_node() const noexcept;
};

/// Place ranks where an arbitrary distribution put them: rank i on `rank_hosts[i]` (the
/// hostfile), local ids in rank order on each node. The hosts must be in `hosts` and the
/// per-node totals must equal `tasks_per_node`, or the hostfile is not the one the step ran.
///
/// Input: hosts {n1,n2,n3}, counts {2,2,1}, rank_hosts {n2,n1,n2,n3,n1}. Output: n1 = {1,4},
/// n2 = {0,2}, n3 = {3}.
/// \throws Error (Errc::inconsistent_allocation) naming `subject`.
[[nodiscard]] Allocation place_arbitrary(std::vector<std::string> hosts,
                                         std::vector<std::uint32_t> tasks_per_node,
                                         const std::vector<std::string>& rank_hosts,
                                         std::string_view subject);

/// Place `sum(tasks_per_node)` ranks on `hosts` like Slurm's task layout: block (node by node),
/// cyclic (round robin over nodes with room left) or plane (round robin in blocks of
/// `plane_size`).
///
/// Input: hosts {n1,n2,n3}, counts {2,1,1}, block. Output: ranks 0,1 on n1; 2 on n2; 3 on n3.
/// Input: hosts {n1,n2,n3}, counts {2,2,2}, cyclic. Output: n1 = {0,3}, n2 = {1,4}, n3 = {2,5}.
/// \throws Error (Errc::inconsistent_allocation) when sizes disagree or a node has no task,
///         (Errc::invalid_argument) for arbitrary distribution (see place_arbitrary) or a plane
///         size of 0.
[[nodiscard]] Allocation place_tasks(std::vector<std::string> hosts,
                                     std::vector<std::uint32_t> tasks_per_node,
                                     Distribution distribution,
                                     std::uint32_t plane_size = 0);

/// Place the ranks of `step` and check the result against what the task knows of itself
/// (SLURM_NODEID, SLURM_LOCALID, SLURM_GTIDS, SLURMD_NODENAME). A mismatch is an error that
/// says which value disagrees: a wrong guess would mean a hung job. A block step that Slurm may
/// have laid out in topology order (StepInfo::topology_order) is placed by the controller's
/// layout (StepInfo::layout_rank_hosts, step_layout.hpp) and refused without it: `placement:
/// Slurm lays a block distribution over several nodes out in the order of the network topology
/// (<topology>), which no task's environment shows: "block"`.
/// \throws Error (Errc::inconsistent_allocation).
[[nodiscard]] Allocation resolve_allocation(const StepInfo& step);

} // namespace tfslurm
