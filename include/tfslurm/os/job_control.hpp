// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// What one task of `tfslurm run` asks of Slurm about its job, performed: the job's end
/// (`--checkpoint-before`), requeueing the job (`--requeue`, with a failed node left out),
/// cancelling a step whose node may be gone, and the line of a requeued run that says which
/// node was left out. The decisions are requeue_policy.hpp's and the launcher's (LaunchResult);
/// this is the one place that carries them out: through libslurm (slurm_api.hpp) and the
/// `scancel`, `scontrol` and `squeue` of PATH, started without a shell. The lines for the user go
/// through a JobReport: the face prints them its way.
///
/// Leaving a node out (the job's ExcNodeList) is done with `scontrol update`, never with
/// libslurm: the job-update structure changes with every release, scontrol's words do not.
/// Slurm 22.05, 24.11 and 26.05 alike refuse an ExcNodeList for a running job ("Job is no
/// longer pending execution") and take one for a requeued job, pending again while it is still
/// completing; and a job cannot start again while it is completing, which this launcher, a
/// process of it, keeps it until it exits. So rank 0's launcher, which requeues, first writes
/// the record of the exclusion into the job's comment (taken while the job runs), then requeues
/// the job, then sets ExcNodeList at once (Slurm's SIGTERM to the step is ignored meanwhile; its
/// SIGKILL comes a few hundred milliseconds later, when the batch script ended). srun never
/// hangs: the requeue ends every step of the job, and a refused requeue falls back to
/// cancelling the step.

#include <tfslurm/common/env.hpp>
#include <tfslurm/os/slurm_api.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/run.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Where a line of job control goes: the face prints `message` (which may name settings with
/// setting_ref()) as a warning for Outcome::interrupted and Outcome::checkpointed, else as an
/// error, the way it prints a launcher's result.
using JobReport = std::function<void(Outcome, const std::string&)>;

/// The node's libslurm: TFSLURM_LIBSLURM when set, else default_libslurm_names().
/// \throws Error as SlurmLibrary::load().
[[nodiscard]] SlurmLibrary load_libslurm(const Environment& env);

/// Whether the task runs in a Slurm job whose id is Slurm's (not `--local`'s).
enum class SlurmJob { no, yes };

/// The job's end for `--checkpoint-before`: SLURM_JOB_END_TIME (job_end_from_variable()), else
/// slurmctld's answer through libslurm. Nullopt for a job without a time limit (said at debug
/// level). An end time that cannot be read is a warning through `report` (from rank 0's
/// launcher, once; the others log it at debug level), not an error: the step runs, without
/// the checkpoint signal.
/// \throws Error (Errc::invalid_argument) for a SLURM_JOB_END_TIME that is not a number.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point>
job_end_time(const Plan& plan, const Environment& env, SlurmJob job, const JobReport& report);

/// Requeue the job through libslurm (LaunchResult::requeue), after reporting the result's line
/// (Slurm then ends the step and the batch script: little can be done after the call). The
/// run's record (run_record_text(): the node left out, how far the run got) goes into the job's
/// comment first; with an exclusion (a node's failure), the node goes into its ExcNodeList
/// (merged with the one it has) right after the requeue, with `scontrol` (see the file
/// comment). With `events`, a `requeue` event is appended to the step's record.
/// A takeover (RequeueRequest::takeover: rank 0's node lost, or rank 0 without a majority)
/// first waits its turn and reads the job again (`scontrol -o show job`): when another launcher
/// requeued it meanwhile, or it is no longer RUNNING (takeover_refusal()), or it cannot be
/// read, the line is the takeover's `fallback` with why not, and nothing is asked of Slurm.
/// Rank 0's turn (0) says first that it waits, and how long.
/// Returns k_status_requeued, or RequeueRequest::status_if_refused when Slurm (or its library)
/// refuses or a takeover is not made, with a warning that gives the reason (the caller then
/// cancels the step if the result says to).
int requeue_job(const LaunchResult& result,
                const Environment& env,
                const std::string& events,
                const JobReport& report);

/// End `step` through Slurm when a node may be gone (srun would wait for its tasks forever),
/// reporting `message` (empty: only the cancel is said) with the way taken: libslurm, or
/// `scancel` when libslurm cannot be called (missing, or a release whose calls this tfslurm
/// does not know). Then waits for the cancel's SIGKILL (await_cancel_kill()). Only when both
/// fail does the step end as before (when the lost node's tasks end, or with scancel), said.
void cancel_step(const StepRef& step,
                 Outcome outcome,
                 const std::string& message,
                 const Environment& env,
                 const JobReport& report);

/// `scancel <job>.<step>` from PATH, bounded by 30 s. Returns an empty string on success (a
/// scancel killed by SIGKILL counts: it is a process of the step Slurm is ending), else why it
/// failed, e.g. `scancel exited with status 1`.
[[nodiscard]] std::string scancel_step(const StepRef& step);

/// After this launcher cancelled its step: Slurm's cancel SIGKILLs every task of the step,
/// this launcher's as well, and srun reports a task killed by a signal (128 + 9) over every
/// exit status. A launcher that exited at once would race that SIGKILL, and srun's status
/// would be 8 or 137 by chance; so it waits for the kill (SIGTERM ignored meanwhile), at most
/// k_cancel_kill_wait: a step that tfslurm cancelled ends with 137 from srun.
void await_cancel_kill(const StepRef& step);

/// How long await_cancel_kill() waits.
inline constexpr std::chrono::seconds k_cancel_kill_wait{10};

/// How long a launcher waits after printing the reason for an abort, so that srun forwards
/// the line before Slurm learns that the task exited (or ends the step).
inline constexpr std::chrono::milliseconds k_abort_linger{200};

/// In a requeued run (`policy.restart_count` > 0), rank 0's line about the node the previous
/// run left out, from the record in the job's comment (read with `squeue`), e.g. `requeued run
/// 2 of 3: n3 left out (rank 2 launcher lost in run 1)`, as a warning through `report`. Nothing
/// when the job was requeued for another reason; a job that cannot be read is said at debug
/// level (the run goes on). Returns the record (RequeuePolicy::previous, for the storm rule),
/// nullopt when there is none or it cannot be read.
std::optional<RunRecord> announce_requeued_run(const RequeuePolicy& policy,
                                               std::uint32_t max_requeues,
                                               const Environment& env,
                                               const JobReport& report);

/// For `tfslurm top`: a job's one-line record, `scontrol -o show job <job>`.
/// \throws Error (Errc::invalid_argument) `top: job 12 not found: <scontrol's words>`;
/// (Errc::io) when scontrol cannot run.
[[nodiscard]] std::string read_job_line(std::uint64_t job);

/// For `tfslurm top`: the ids of a job's running steps, `squeue -h -s -j <job> -o %i` (`12.0`,
/// `12.batch`, ...). \throws Error (Errc::io) when squeue fails.
[[nodiscard]] std::vector<std::string> running_steps(std::uint64_t job);

/// For `tfslurm top`: the address Slurm reaches node `node` at (its NodeAddr, `scontrol -o show
/// node`), which a login node may know when it cannot resolve the node's name; `node` itself
/// when scontrol cannot say.
[[nodiscard]] std::string node_address(const std::string& node);

/// For `tfslurm top`: this user's running jobs, `squeue -h --me -t RUNNING -o %i`.
/// \throws Error (Errc::io) when squeue fails.
[[nodiscard]] std::vector<std::string> running_jobs();

} // namespace tfslurm
