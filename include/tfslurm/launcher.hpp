// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// One task's launcher of `tfslurm run`: starts the coordinator when it is rank 0, registers,
/// spawns the trainer, heartbeats, and obeys the coordinator's verdict.

#include <tfslurm/auth.hpp>
#include <tfslurm/env.hpp>
#include <tfslurm/plan.hpp>
#include <tfslurm/run.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tfslurm {

/// Whether TCP `port` can be bound on this node (a bind test with SO_REUSEADDR, on every
/// address). False when another process listens on it.
[[nodiscard]] bool port_is_free(std::uint16_t port);

/// Settings of one launcher (`tfslurm run` options).
struct LauncherOptions {
    Until until = Until::workers;
    Millis heartbeat{1000};
    Millis heartbeat_timeout{10000};
    Millis connect_timeout{60000};
    Millis grace{10000};
    protocol::AuthSettings auth;
    /// Local mode: a pipe to the parent where the launcher writes one line
    /// `<rank> <outcome> <step_status>` before it returns; -1 = none.
    int status_fd = -1;
};

/// \throws Error for failures before the trainer could be supervised: no authentication
///         (Errc::auth), the control port in use or the coordinator unreachable (Errc::io), a
///         rejected registration (Errc::auth / Errc::protocol), a plan without self rank
///         (Errc::invalid_argument). Trainer failures are returned, not thrown.
[[nodiscard]] LaunchResult run_launcher(const Plan& plan,
                                        const std::vector<std::string>& argv,
                                        const Environment& trainer_env,
                                        const LauncherOptions& options);

/// The variables of task `rank` of a local job: `base` without any SLURM_* / SLURMD_* variable,

} // namespace tfslurm
