// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// One task's launcher of `tfslurm run`, its Asio shell: starts the coordinator when it is rank
/// 0, registers, spawns the trainer, heartbeats, and performs what the state machine
/// (launcher.hpp) decides, until it obeys the coordinator's verdict
/// (src/shell/launcher/launcher_shell.cpp, src/shell/launcher/launcher_link.cpp).

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tfslurm {

/// What one launcher is given: the run settings, and what its task found out before it starts.
struct LauncherOptions {
    RunSettings run; ///< the settings of `tfslurm run` (run_settings.hpp)
    /// The job's end (its time limit), read once before the start: SLURM_JOB_END_TIME, else
    /// libslurm; nullopt when unknown or without a time limit (no checkpoint signal then).
    std::optional<std::chrono::system_clock::time_point> job_end;
    /// `requeue` with a Slurm job: rank 0's launcher requeues it (LaunchResult::requeue).
    std::optional<RequeuePolicy> requeue;
    /// How launchers prove themselves; its method is the `auth` setting (RunSettings::auth).
    protocol::AuthSettings auth;
    /// The run's identity (run_identity()): TFSLURM_RUN_ID in the trainer's environment, and
    /// the record's `step` event.
    std::string run_id;
    /// The Slurm step this launcher belongs to, to cancel when a node is lost
    /// (LaunchResult::cancel); nullopt under `--local`, which has no Slurm step.
    std::optional<StepRef> slurm_step;
    /// `iface`/`network`: the address this node chose, sent in the hello.
    std::string address;
    /// Exact mode: the trainer ports to try to hold, in order (trainer_port_candidates()). The
    /// launcher holds the first free one from before its hello (which reports it) until just
    /// before its trainer starts. Empty: the plan's port, only checked before the trainer starts.
    std::vector<std::uint16_t> port_candidates;
    /// Where port_candidates come from, for the message when none is free (`reserved ports
    /// 23000-23003 (SLURM_STEP_RESV_PORTS)`).
    std::string port_pool;
    /// Set with `address`: the trainer's environment once the coordinator sent every node's
    /// address and the ports that moved (`cluster`); it replaces `trainer_env`. May throw Error
    /// (the trainer then fails to start with its message).
    std::function<Environment(const protocol::Cluster& cluster)> trainer_environment;
};

/// Run the launcher of `plan.self_rank`: start the coordinator when it is rank 0, connect and
/// register (retrying until connect_timeout), with an address exchange wait for every node's
/// address, check the trainer's port, spawn `argv` with `trainer_env` (or the environment
/// `options.trainer_environment` builds) in its own process group, heartbeat, report its exit, obey
/// stop/abort (SIGTERM to the trainer's group, SIGKILL after `grace`), forward SIGTERM, SIGINT,
/// SIGUSR1, SIGUSR2, SIGHUP and SIGQUIT to the group unless slurmstepd sent them (to the whole
/// step: SIGTERM/SIGINT also stop the step), and before returning kill and reap every remaining
/// descendant. The handled signals stay blocked while it runs (read from a signalfd).
/// Input: rank 2 of a plan, {"python", "train.py"}. Output: {exit_status 0, Outcome::done}.
/// \throws Error for failures before the trainer could be supervised: no authentication
///         (Errc::auth), every control port candidate in use (rank 0) or no coordinator
///         reachable on any of them (Errc::io), a rejected registration (Errc::auth /
///         Errc::protocol), a plan without self rank (Errc::missing_env), no command
///         (Errc::invalid_argument). Trainer failures are returned, not thrown.
[[nodiscard]] LaunchResult run_launcher(const Plan& plan,
                                        const std::vector<std::string>& argv,
                                        const Environment& trainer_env,
                                        const LauncherOptions& options);

} // namespace tfslurm
