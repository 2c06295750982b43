// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/slurm_config.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/shell/local_run.hpp>
#include <tfslurm/task/run_task.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <string>
#include <utility>

namespace tfslurm {

TrainerEnvironment::~TrainerEnvironment() {
    if (!remove_tf_config_file(m_file)) {
        logger().warn("{}: could not remove every part of the TF_CONFIG file", m_file.path);
    }
}

Environment TrainerEnvironment::operator()(const Plan& built) {
    const auto rank = *built.self_rank;
    Environment trainer = m_env;
    if (m_settings.tf_config_file.empty()) {
        for (auto& [name, value] : task_environment(built, rank, m_settings.outputs)) {
            trainer.set(std::move(name), std::move(value));
        }
    } else {
        auto with_file = file_task_environment(
            built, rank, m_settings.outputs, m_settings.tf_config_file, m_env);
        for (auto& [name, value] : with_file.vars) {
            trainer.set(std::move(name), std::move(value));
        }
        if (!with_file.file.path.empty()) {
            trainer.unset("TF_CONFIG"); // an inherited one would contradict the file
            write_tf_config_file(with_file.file, with_file.tf_config);
            m_file = std::move(with_file.file);
        }
    }
    for (auto& [name, value] : socket_interface_variables(built, m_env)) {
        trainer.set(std::move(name), std::move(value));
    }
    for (auto& [name, value] : thread_variables(built, rank, m_settings.outputs, m_env)) {
        trainer.set(std::move(name), std::move(value));
    }
    // Launcher-only variables: the trainer needs none of them (the secret least of all).
    trainer.unset(k_secret_variable);
    trainer.unset(std::string(k_local_status_variable));
    return trainer;
}

namespace {

/// How the launcher authenticates: the `auth` setting, TFSLURM_SECRET, and where munged
/// listens (TFSLURM_MUNGE_SOCKET, else Slurm's own AuthInfo in slurm.conf).
protocol::AuthSettings auth_settings(const RunSettings& run, const Environment& env) {
    protocol::AuthSettings auth;
    auth.method = run.auth;
    if (const auto secret = env.get("TFSLURM_SECRET")) {
        auth.secret_hex = std::string(*secret);
    }
    auto socket = find_munge_socket(env);
    logger().debug("munge socket: {} ({})",
                   socket.path.empty() ? "libmunge's default" : socket.path,
                   socket.origin);
    auth.munge_socket = std::move(socket.path);
    auth.munge_socket_origin = std::move(socket.origin);
    return auth;
}

/// Exact mode: where the launcher looks for its trainer port (this node's reserved ports, else
/// `range`), and how a message names that pool.
void exact_ports(LauncherOptions& options,
                 const Plan& plan,
                 const std::vector<std::uint16_t>& reserved,
                 PortRange range) {
    options.port_candidates = trainer_port_candidates(plan, *plan.self_rank, reserved, range);
    options.port_pool =
        reserved.empty()
            ? fmt::format("{}-{} ({})", range.first, range.last, setting_ref("port_range"))
            : fmt::format("the reserved ports {} (SLURM_STEP_RESV_PORTS)",
                          fmt::join(reserved, ","));
}

} // namespace

TaskLaunch plan_launch(const ResolvedPlan& resolved,
                       const RunSettings& run,
                       TrainerEnvironment& trainer_env,
                       const Environment& env,
                       TaskOrigin origin) {
    const Plan& plan = resolved.plan;
    TaskLaunch launch;
    launch.options.run = run;
    launch.options.auth = auth_settings(run, env);
    if (!exact_mode(resolved.settings.plan) || !resolved.own_address) {
        launch.trainer = trainer_env(plan);
    } else {
        // Exact mode: the coordinator exchanges every node's address and the ports the
        // launchers bound; the trainer's variables (and its TF_CONFIG file) are built from the
        // plan rebuilt with them, before it starts. Until then the launcher knows only the names.
        launch.options.address = resolved.own_address->address;
        exact_ports(launch.options, plan, resolved.step.resv_ports, run.port_range);
        launch.options.trainer_environment = [&resolved,
                                              &trainer_env](const protocol::Cluster& cluster) {
            auto exact = resolved.settings.plan;
            exact.node_addresses = cluster.addresses;
            exact.rank_ports = cluster.ports;
            auto built = make_plan(resolved.step, resolved.allocation, exact);
            built.socket_interface = resolved.own_address->interface;
            return trainer_env(built);
        };
    }
    launch.options.run_id = run_identity(env.get("TFSLURM_RUN_ID"),
                                         env.get("SLURM_CLUSTER_NAME").value_or(""),
                                         plan.job_id.value_or(0),
                                         plan.step_id.value_or(0));
    if (origin == TaskOrigin::slurm && plan.job_id && plan.step_id) {
        launch.options.slurm_step = StepRef{*plan.job_id, *plan.step_id};
    }
    if (run.requeue && (origin == TaskOrigin::local || !plan.job_id)) {
        logger().debug("no Slurm job to requeue: {} ignored", setting_ref("requeue"));
    } else if (run.requeue) {
        RequeuePolicy policy;
        policy.job = *plan.job_id;
        if (const auto count = env.get("SLURM_RESTART_COUNT"); count && !count->empty()) {
            const auto parsed = detail::parse_decimal(*count);
            if (!parsed || *parsed > UINT32_MAX) {
                throw errors::invalid_argument(
                    "SLURM_RESTART_COUNT", "expected an integer from 0 to 4294967295", *count);
            }
            policy.restart_count = static_cast<std::uint32_t>(*parsed);
        }
        launch.options.requeue = policy;
    }
    return launch;
}

} // namespace tfslurm
