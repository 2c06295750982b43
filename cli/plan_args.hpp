// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Options shared by `tfslurm plan`, `env` and `run`: how to describe the allocation (from the
/// environment, or a preview from options) and every plan setting.

#include <tfslurm/env.hpp>
#include <tfslurm/placement.hpp>
#include <tfslurm/plan.hpp>
#include <tfslurm/step.hpp>

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

namespace tfslurm::cli {

/// Raw option values, converted by resolve_plan().
struct PlanArgs {
    StepOverrides preview; ///< used when --nodelist is given
    std::string ps;
    std::string chief;     ///< "1" (--chief), "0" (--no-chief) or "" (not given)
    std::string evaluator; ///< likewise
    std::string roles;
    std::string ps_placement;
    std::string layout;
    std::string port_base;
    std::string address;
    std::string host_pattern;
    std::string gpus_per_task;
    std::string gpus_per_node;
    std::string rpc_layer;
};

/// Add the allocation-preview and plan options to a subcommand. Every plan option also reads
/// its `TFSLURM_<NAME>` environment variable (option > variable > default).
void add_plan_options(CLI::App& sub, PlanArgs& args);

/// Everything resolved for one invocation.
struct ResolvedPlan {
    StepInfo step;
    Allocation allocation;
    Plan plan;
};

/// Read the step (from `env`, or a preview when --nodelist was given), place the ranks, apply
/// the settings, build the plan. \throws Error.
[[nodiscard]] ResolvedPlan resolve_plan(const PlanArgs& args, const Environment& env);

} // namespace tfslurm::cli
