// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The controller's layout of a step that no task's environment can place (step_layout.hpp):
/// `sattach --layout <job>.<step>`, found in the task's PATH and run with the task's
/// environment, bounded (30 s, 64 MiB), its output parsed into the step. With spawn, the only
/// part of libtfslurm that starts a process; the CLI (`env`, `plan`, `run`) and the SPANK
/// plugin (in each task, before its program starts) both call it.

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/step.hpp>

namespace tfslurm {

/// With needs_step_layout(step): run step_layout_command() (30 s at most), found in `env`'s
/// PATH and with `env` as its environment, and set step.layout_rank_hosts from its output;
/// when the command cannot be run, fails or does not answer, set step.layout_error instead
/// (`sattach --layout 12.0: sattach not found in PATH`), which the placement's refusal names.
/// Does nothing for any other step.
/// \throws Error (Errc::inconsistent_allocation) from parse_step_layout() for an answer that
///         contradicts the step.
void add_controller_layout(StepInfo& step, const Environment& env);

} // namespace tfslurm
