// SPDX-License-Identifier: MIT
#include <tfslurm/common/log.hpp>
#include <tfslurm/task/resolve_plan.hpp>

#include <utility>

namespace tfslurm {

ResolvedPlan resolve_plan(StepInfo step,
                          SettingValues settings,
                          const Environment& env,
                          ExchangeUser user,
                          GpuDetail detail) {
    ResolvedPlan resolved;
    resolved.step = std::move(step);
    resolved.settings = std::move(settings);
    resolved.allocation = resolve_allocation(resolved.step);
    const auto& selection = resolved.settings.plan.address_selection;
    resolved.exchange = choose_exchange(resolved.settings.plan.exchange, user, selection, env);
    logger().debug("exchange: {} (asked for {}; iface/network {}; PMI2 server {})",
                   to_string(resolved.exchange),
                   to_string(resolved.settings.plan.exchange),
                   selection.active() ? "set" : "not set",
                   has_pmi2_server(env) ? "present" : "absent");
    if (!selection.active()) {
        resolved.plan =
            make_plan(resolved.step, resolved.allocation, resolved.settings.plan, {}, detail);
    } else if (resolved.exchange == Exchange::env) {
        resolved.plan = plan_with_own_address(
            resolved.step, resolved.allocation, resolved.settings.plan, read_interfaces(), detail);
    } else {
        auto by_name = resolved.settings.plan;
        by_name.address_selection = {};
        resolved.plan = make_plan(resolved.step, resolved.allocation, by_name, {}, detail);
        try {
            resolved.own_address = select_own_address(resolved.plan, selection, read_interfaces());
        } catch (const Error& e) {
            if (resolved.exchange != Exchange::pmi2 || !resolved.plan.self_rank) {
                throw;
            }
            resolved.own_address_error = e;
        }
    }
    if (!resolved.plan.control_port_note.empty() && resolved.plan.self_rank == 0U) {
        // Once for the step (rank 0), not once per task; `tfslurm plan` says it in its header.
        logger().warn("launcher control port {}: {}",
                      resolved.plan.control_port,
                      resolved.plan.control_port_note);
    }
    return resolved;
}

} // namespace tfslurm
