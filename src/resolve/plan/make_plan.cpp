// SPDX-License-Identifier: MIT
// make_plan() (include/tfslurm/resolve/plan.hpp): the layout's plan, native (plan.cpp) or
// TensorFlow's (tf_compat.cpp), with the ports the launchers bound in exact mode. Above both
// layouts, so that neither includes the other.
#include "resolve/plan/plan_shared.hpp"

#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/tf_compat.hpp>

#include <utility>

namespace tfslurm {
namespace {

/// Exact mode: the ports the launchers bound replace the plan's.
Plan with_bound_ports(Plan plan, const std::vector<std::uint16_t>& rank_ports) {
    for (std::size_t r = 0; r < rank_ports.size() && r < plan.ranks.size(); ++r) {
        if (rank_ports[r] != 0) {
            plan.ranks[r].port = rank_ports[r];
        }
    }
    return plan;
}

} // namespace

Plan make_plan(const StepInfo& step,
               const Allocation& allocation,
               const PlanOptions& options,
               const AddressResolver& resolve,
               GpuDetail detail) {
    Plan plan = options.layout == Layout::tf_compat
                    ? make_tf_compat_plan(step, allocation, options, resolve)
                    : detail::make_native_plan(step, allocation, options, resolve, detail);
    return with_bound_ports(std::move(plan), options.rank_ports);
}

} // namespace tfslurm
