// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// One command's plan, from a step and its resolved settings: the allocation, the exchange the
/// command uses, the plan, and this node's chosen address. The one path from settings to a
/// Plan that `tfslurm plan`, `env` and `run` (and `run --local`'s check) share; each face reads
/// the step (read_step() or preview_step()) and layers the settings (resolve_settings()) first.

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/exchange.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <optional>

namespace tfslurm {

/// Everything resolved for one invocation.
struct ResolvedPlan {
    StepInfo step;
    Allocation allocation;
    SettingValues settings; ///< settings.plan built `plan`
    Plan plan;
    /// choose_exchange() of the `exchange` setting for this command.
    Exchange exchange = Exchange::env;
    /// Exchange::pmi2 or coordinator (with `iface`/`network`): this node's choice, while `plan`
    /// uses node names until the exchange brings the other nodes' addresses.
    std::optional<SelectedAddress> own_address;
    /// Exchange::pmi2 only: why this node could not choose its address. Kept rather than
    /// thrown, so that the task still takes part in the exchange (the others would wait for it
    /// in the fence) before it fails.
    std::optional<Error> own_address_error;
};

/// Place the ranks of `step`, choose the exchange of `user` (choose_exchange(), logged at debug
/// level), build the plan (with `detail`, see make_plan()). With `iface`/`network` and the env
/// exchange the plan holds this node's chosen address (only a single-node step can be
/// planned); with pmi2 or coordinator it uses node names and own_address is set.
/// Input: a step of 2 tasks on n1, settings ps=1. Output: plan {ps:0, worker:0}, Exchange::env.
/// \throws Error from resolve_allocation(), choose_exchange(), make_plan() and the address
///         choice (except pmi2's, kept in own_address_error).
[[nodiscard]] ResolvedPlan resolve_plan(StepInfo step,
                                        SettingValues settings,
                                        const Environment& env,
                                        ExchangeUser user = ExchangeUser::plan,
                                        GpuDetail detail = GpuDetail::every_rank);

} // namespace tfslurm
