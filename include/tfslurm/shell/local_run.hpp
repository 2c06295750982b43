// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `tfslurm run --local N`: the whole job on this machine, one launcher per task.

#include <tfslurm/common/env.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// The variables of task `rank` of a local job: `base` without any SLURM_* / SLURMD_* variable
/// (but SLURM_CONF, which says where Slurm's configuration is),
/// TFSLURM_HOST_PATTERN or k_local_status_variable, plus a one-node step on `localhost`
/// (SLURM_STEP_NODELIST=localhost,
/// SLURM_STEP_TASKS_PER_NODE=N, SLURM_PROCID=rank, SLURM_GTIDS=0,...,N-1, SLURM_JOB_ID=job,
/// SLURM_STEP_ID=0, ...) and TFSLURM_ADDRESS=ip (so that every address is 127.0.0.1).
/// Input: base {PATH=/bin, SLURM_JOB_ID=7}, 3 tasks, rank 2, job 4242. Output: PATH=/bin,
/// SLURM_JOB_ID=4242, SLURM_PROCID=2, SLURM_GTIDS=0,1,2, TFSLURM_ADDRESS=ip, ...
[[nodiscard]] Environment local_task_environment(const Environment& base,
                                                 std::uint32_t ntasks,
                                                 std::uint32_t rank,
                                                 std::uint64_t job_id);

struct LocalOptions {
    std::uint32_t ntasks = 1;
    std::uint64_t job_id = 0;
    /// The launcher command (`/proc/self/exe run [options] -- CMD ...`), run once per task
    /// with local_task_environment(); the caller builds it (without `--local`).
    std::vector<std::string> launcher_argv;
    /// The parent's environment, the base of every task's.
    Environment env;
};

/// What a launcher of `--local` tells its parent once it is done: one line
/// `<rank> <outcome> <step_status>[ <message>]`, e.g. `3 aborted 3 aborting: rank 3 ...`.
struct LocalReport {
    std::uint32_t rank = 0;
    Outcome outcome = Outcome::done;
    int step_status = 0; ///< LaunchResult::step_status
    std::string message; ///< LaunchResult::message (newlines become spaces), may be empty
};

/// What run_local() ends with.
struct LocalResult {
    /// What srun would report for the same launchers: 128 + signo if a launcher was killed by a
    /// signal, else the highest launcher exit status (on an abort every launcher exits with the
    /// failing rank's status, see LaunchResult); k_status_lost for a launcher that left no status.
    int exit_status = 0;
    /// The launchers' messages (LocalReport::message), each distinct line once, in the order
    /// they arrived: the launchers of `--local` print nothing, the caller shows these.
    std::vector<LocalReport> messages;
};

/// `tfslurm run --local N`: start N launchers with local_task_environment(), forward signals to
/// them, wait for all, kill any leftover descendant, and return the step's status and messages.
/// Input: 4 tasks whose rank 2 exits 3. Output: {3, {{2, aborted, 3, "aborting: rank 2 ..."}}}.
/// \throws Error (Errc::spawn_failed) when a launcher cannot be started, (Errc::invalid_argument)
///         for 0 tasks or an empty launcher command.
[[nodiscard]] LocalResult run_local(const LocalOptions& options);

/// How the launchers of `--local` authenticate, given the `auth` setting: `env` as it is when it
/// holds TFSLURM_SECRET or MUNGE will do (`auth` munge, or auto with munged answering at the
/// socket find_munge_socket() names); else a fresh secret of 32 random bytes (and, for auto,
/// TFSLURM_AUTH=secret) that the launchers inherit and nobody else learns. Touches the OS
/// (munged, getrandom). Input: auto, munged not answering, no secret. Output: `env` with
/// TFSLURM_SECRET=<64 hex digits> and TFSLURM_AUTH=secret.
void add_local_secret(Environment& env, protocol::AuthMethod auth);

// --- the status channel: launchers -> run_local --------------------------------------------------

/// The variable naming the descriptor on which a launcher of run_local() reports.
inline constexpr std::string_view k_local_status_variable = "TFSLURM_LOCAL_STATUS_FD";

/// The line, with its newline. Input: {3, Outcome::aborted, 3, "aborting: x"}.
/// Output: `3 aborted 3 aborting: x\n`.
[[nodiscard]] std::string format_local_report(const LocalReport& report);

/// Parse one line (without its newline): a decimal rank, one space, an outcome as to_string()
/// writes it, one space, a decimal status in [0, 255], optionally one space and a non-empty
/// message.
/// Input: `3 aborted 3`. Output: {3, Outcome::aborted, 3}.
/// \throws Error (Errc::protocol), e.g. `local report: unknown outcome "finished": "3 finished
///         3"`.
[[nodiscard]] LocalReport parse_local_report(std::string_view line);

/// The status channel given to this launcher by run_local(): the descriptor named by
/// k_local_status_variable in `env` if it is a number >= 3 and open, made close-on-exec (the
/// trainer must not inherit it); nullopt when there is none (not under `--local`).
/// Input: {TFSLURM_LOCAL_STATUS_FD=5} with fd 5 open. Output: 5.
[[nodiscard]] std::optional<int> local_status_channel(const Environment& env);

/// Write the report on `fd`. Errors are ignored: without a report the parent falls back on
/// the launcher's exit status.
void write_local_report(int fd, const LocalReport& report) noexcept;

} // namespace tfslurm
