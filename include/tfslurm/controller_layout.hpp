// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The controller's layout of a step that no task's environment can place (step_layout.hpp):
/// `sattach --layout <job>.<step>` from PATH, bounded, its output parsed into the step.

#include <tfslurm/step.hpp>

namespace tfslurm::cli {

/// With needs_step_layout(step): run step_layout_command() (30 s at most) and set
/// step.layout_rank_hosts from its output; when the command cannot be run, fails or does not
/// answer, set step.layout_error instead (`sattach --layout 12.0: sattach not found in PATH`),
/// which the placement's refusal names. Does nothing for any other step.
/// \throws Error (Errc::inconsistent_allocation) from parse_step_layout() for an answer that
///         contradicts the step.
void add_controller_layout(StepInfo& step);

} // namespace tfslurm::cli
