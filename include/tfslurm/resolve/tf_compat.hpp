// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `--layout tf-compat`: TensorFlow's SlurmClusterResolver reproduced on purpose (sorted hosts,
/// jobs in alphabetical order, ports 8888 + local index, node-relative GPU numbers), for jobs
/// that must match what TensorFlow itself would compute.

#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>

namespace tfslurm {

/// The plan TensorFlow's SlurmClusterResolver would build for this step (make_plan() calls it
/// for Layout::tf_compat). Logs a warning when a rank is advertised where Slurm does not run it.
/// Input: hosts {n2,n1}, 1 task each, ps=1. Output: ps:0 on n1:8888, worker:0 on n2:8888.
/// \throws Error (Errc::invalid_argument) for a role list, duplicate hosts, more GPUs than
///         visible or ports past 65535; (Errc::io) when a name does not resolve.
[[nodiscard]] Plan make_tf_compat_plan(const StepInfo& step,
                                       const Allocation& allocation,
                                       const PlanOptions& options,
                                       const AddressResolver& resolve);

} // namespace tfslurm
