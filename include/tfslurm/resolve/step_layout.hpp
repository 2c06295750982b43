// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Where the controller put every rank of a step that no task's environment can place: from
/// Slurm 25.11 on, a block step of a partition with a network topology is laid out in the
/// topology's order (StepInfo::topology_order), while SLURM_STEP_NODELIST, SLURM_NODEID and
/// SLURM_STEP_TASKS_PER_NODE stay in name order and SLURM_GTIDS lists only the task's own
/// node. slurmctld keeps the real layout; `sattach --layout <job>.<step>` (every Slurm client
/// has it) prints it. The faces that run inside a task (`tfslurm env`, `plan`, `run`) run that
/// command (bounded) and hand its output to parse_step_layout(); the placement then follows it
/// (resolve_allocation()), and without it the step is refused. Pure: nothing here starts a
/// process.

#include <tfslurm/resolve/step.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Whether `step` is one whose ranks only the controller can place: a task's view (not a
/// preview, not a batch script) of an ordinary block step over several nodes that Slurm may
/// have laid out in topology order (a non-empty `topology_order`).
/// Input: a task of `srun -p topo -N3 -n6` on 26.05. Output: true. Input: the same with
/// `-m cyclic`, or on 24.11. Output: false.
[[nodiscard]] bool needs_step_layout(const StepInfo& step) noexcept;

/// The command that prints the step's layout as the controller holds it.
/// Input: a step with job 12 and step 0. Output: {"sattach", "--layout", "12.0"}.
/// \throws Error (Errc::missing_env) naming SLURM_JOB_ID or SLURM_STEP_ID when the step has no
///         id (no step to ask about).
[[nodiscard]] std::vector<std::string> step_layout_command(const StepInfo& step);

/// Each rank's host from the output of step_layout_command(), checked against the step: every
/// `Node <i> (<name>), <count> task(s): <ranks>` line names a node of the step once, with the
/// step's task count for it, and the lines together hold every rank exactly once.
/// Input: "Job step layout:\n\t6 tasks, 3 nodes (n[1-3])\n\n\tNode 0 (n1), 2 task(s): 2 3 \n
/// \tNode 1 (n2), 2 task(s): 4 5 \n\tNode 2 (n3), 2 task(s): 0 1 \n" for n[1-3] with 2(x3).
/// Output: {n3, n3, n1, n1, n2, n2}.
/// \throws Error (Errc::inconsistent_allocation), subject `sattach --layout`, naming the line
///         (e.g. `sattach --layout: n1 has 3 tasks, SLURM_STEP_TASKS_PER_NODE=2(x3) gives it
///         2: "Node 0 (n1), 3 task(s): 0 1 2"`), for a malformed line, a node not in the step,
///         a count or rank that contradicts the step, a rank twice, or a rank missing.
[[nodiscard]] std::vector<std::string> parse_step_layout(std::string_view text,
                                                         const StepInfo& step);

} // namespace tfslurm
