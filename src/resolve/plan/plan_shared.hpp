// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Plan-building helpers shared by the native layout (native_plan.cpp), tf-compat
/// (tf_compat.cpp) and make_plan() (make_plan.cpp).

#include <tfslurm/resolve/plan.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::detail {

/// `ps,worker,worker`: a role list as text for messages.
[[nodiscard]] std::string join_roles(const std::vector<Role>& roles);

/// Number every rank within its role, in rank order (RankPlan::index).
void number_roles(Plan& plan);

/// The address peers use for each host: the host pattern applied, resolved with `resolve`
/// (default: the system resolver) for AddressMode::ip. \throws Error (Errc::io).
[[nodiscard]] std::vector<std::string> resolve_addresses(const std::vector<std::string>& hosts,
                                                         const PlanOptions& options,
                                                         const AddressResolver& resolve);

/// The native layout's plan (make_plan() for Layout::native, before the bound ports).
/// \throws Error as make_plan().
[[nodiscard]] Plan make_native_plan(const StepInfo& step,
                                    const Allocation& allocation,
                                    const PlanOptions& options,
                                    const AddressResolver& resolve,
                                    GpuDetail detail);

} // namespace tfslurm::detail
