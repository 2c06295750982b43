// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Job control's pure rules (`--requeue`, `--checkpoint-before`): which failures are a node's
/// fault, the node left out of the requeued run and why, whether the requeue budget allows
/// another run, the job's merged ExcNodeList, the record of the exclusion that the job's
/// comment carries to the next run and the line that run prints, and the job's end from
/// SLURM_JOB_END_TIME. job_control.hpp performs them through Slurm; nothing here touches the OS.

#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/run_settings.hpp>
#include <tfslurm/run/startup.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Whether a step that failed for `cause` failed because of a node, so that a requeued run
/// without that node may succeed: `lost` (the launcher vanished or fell silent: its node died
/// or was cut off) and `preflight` (the node failed its health checks, `--preflight`). Not the
/// trainer's own failures (`trainer`, `start`, `stalled`: they would
/// fail again anywhere), nor `unregistered` as such (often a slow start or a blocked control
/// port, not one node: node_exclusion() judges it by how many nodes it touched) nor
/// `unreachable` (a pair of nodes that cannot talk: which of the two is at fault,
/// or whether the network setting is, no rank can tell).
/// Input: FailureCause::lost. Output: true.
[[nodiscard]] bool node_fault(protocol::FailureCause cause) noexcept;

/// For a node's fault (node_fault()), what happened to the rank, as the requeued run's line
/// says it; nullopt for any other cause. Input: FailureCause::lost. Output: `launcher lost`.
[[nodiscard]] std::optional<std::string_view>
node_fault_reason(protocol::FailureCause cause) noexcept;

/// The nodes to leave out of the requeued run, with why, in the run that failed
/// (`restart_count` + 1): the failed rank's node when `failure` is a node's fault
/// (node_fault()); for ranks that did not register (`unregistered`), exactly the nodes of the
/// missing ranks when they are fewer than half of the step's `step_nodes` nodes (one hung node
/// among 2,048 leaves out that node, not the step; most nodes missing is a slow start or a
/// blocked control port, which no exclusion mends, and neither half of a two-node step can be
/// blamed); nullopt otherwise, or when the failure names no host (or hosts that are no
/// hostlist).
/// Input: {rank 2, host n3, lost}, 0, 4. Output: {{"n3"}, "rank 2 launcher lost", 1}.
/// Input: {ranks 3-5, hosts n[2-3], unregistered}, 0, 8. Output: {{"n2", "n3"}, "ranks 3-5 did
/// not register", 1}; with 4 nodes: nullopt.
/// With `on_failure_check` (`check`: the failed rank's node check, failure_checked()): a
/// `trainer` or `stalled` failure whose node failed its check leaves that node out too.
/// Input: {rank 1, host n2, trainer}, 0, 3, {failure {command, ...}}. Output: {{"n2"}, "rank 1
/// node check failed", 1}; with a check that passed: nullopt.
[[nodiscard]] std::optional<NodeExclusion>
node_exclusion(const protocol::Failure& failure,
               std::uint32_t restart_count,
               std::size_t step_nodes,
               const std::optional<protocol::Checked>& check = std::nullopt);

/// What the failed rank's node check (`on_failure_check`) found, for rank 0's line: `check`
/// nullopt when none came (its launcher left, or went silent, before its check ended).
/// Input: {host n2}, {failure {command, "\"x\" exited with status 1"}}. Output: `node check
/// failed on n2: command: "x" exited with status 1`. Input: {host n2}, {}. Output: `node check
/// passed on n2`. Input: {host n2}, nullopt. Output: `no node check result from n2 (its
/// launcher left without one)`.
[[nodiscard]] std::string node_check_text(const protocol::Failure& failure,
                                          const std::optional<protocol::Checked>& check);

/// Whether a job that was requeued `restart_count` times (SLURM_RESTART_COUNT) may be requeued
/// once more within `max_requeues`. Input: 1, 1. Output: false.
[[nodiscard]] bool requeue_allowed(std::uint32_t restart_count,
                                   std::uint32_t max_requeues) noexcept;

/// The job's ExcNodeList with `nodes` added: `existing` (a hostlist; empty or `(null)` for
/// none, as squeue and scontrol print it) keeps its order, nodes already in it are not added
/// twice, and the result is compressed.
/// Input: `n[1-2]`, {"n3"}. Output: `n[1-3]`. Input: `(null)`, {"n3"}. Output: `n3`.
/// \throws Error (Errc::invalid_hostlist) naming `ExcNodeList` for a list that is not one.
[[nodiscard]] std::string merged_exclusion(std::string_view existing,
                                           const std::vector<std::string>& nodes);

/// The exclusion as the job's comment carries it to the next run (Slurm keeps a job's
/// comment across a requeue, and every release lets its owner change it while it runs).
/// Input: {{"n3"}, "rank 2 launcher lost", 1}. Output: `tfslurm run 1: n3 left out (rank 2
/// launcher lost)`.
[[nodiscard]] std::string exclusion_record(const NodeExclusion& exclusion);

/// The record of a requeued run as the job's comment carries it: the exclusion_record()'s
/// text when it left a node out, then how far it got (`no progress`, `progress`, `progress at
/// step 1200`), after `; ` when both are there.
/// Input: {1, {{"n3"}, "rank 2 launcher lost", 1}, none}. Output: `tfslurm run 1: n3 left out
/// (rank 2 launcher lost); no progress`. Input: {2, nullopt, step 1200}. Output: `tfslurm run
/// 2: progress at step 1200`.
[[nodiscard]] std::string run_record_text(const RunRecord& record);

/// The record in a job's comment that run_record_text() (or exclusion_record()) wrote, if
/// there is one. Input: `nightly; tfslurm run 1: no progress`. Output: {1, nullopt, none}.
[[nodiscard]] std::optional<RunRecord> run_record_in_comment(std::string_view comment);

/// How far a run got (the storm rule's judgement, written in its record): no progress when no
/// trainer started, or when none reported progress (touched $TFSLURM_PROGRESS_FILE) and the run
/// ended within `min_run` (`requeue_min_run`: a run that lasted longer without reporting is
/// presumed to have progressed); else its trainers' highest step, or progress.
/// Input: {started, not reported}, 40 s, 600 s. Output: none. Input: {started, reported, 1200},
/// 40 s, 600 s. Output: step 1200.
[[nodiscard]] ProgressMark progress_mark(const RunProgress& progress, Millis ran, Millis min_run);

/// The storm rule: why requeueing the job again would likely waste another allocation, or
/// nullopt. It stops when this run (restart_count + 1) and the one before it (`previous`, its
/// record: run == restart_count) both made no progress, or both ended at the same step.
/// Input: {1, nullopt, none}, none, 1. Output: `runs 1 and 2 both ended before any trainer's
/// first progress`. Input: {1, nullopt, step 40}, step 40, 1. Output: `runs 1 and 2 both ended
/// at step 40`. Input: a record of run 1, anything, 2 (not the run before): nullopt.
[[nodiscard]] std::optional<std::string> requeue_storm(const std::optional<RunRecord>& previous,
                                                       const ProgressMark& now,
                                                       std::uint32_t restart_count);

/// The job's comment with `record` (exclusion_record()) in place of an earlier record of
/// tfslurm's: the user's own comment is kept, before it, separated by `; `.
/// Input: `nightly`, `tfslurm run 1: n3 left out (rank 2 launcher lost)`.
/// Output: `nightly; tfslurm run 1: n3 left out (rank 2 launcher lost)`.
[[nodiscard]] std::string comment_with_record(std::string_view comment, std::string_view record);

/// The comment without tfslurm's record (the user's own part). Input: `nightly; tfslurm run
/// 1: n3 left out (x)`. Output: `nightly`.
[[nodiscard]] std::string comment_without_record(std::string_view comment);

/// The record in a job's comment, if there is one that exclusion_record() wrote.
/// Input: `nightly; tfslurm run 1: n3 left out (rank 2 launcher lost)`.
/// Output: {{"n3"}, "rank 2 launcher lost", 1}.
[[nodiscard]] std::optional<NodeExclusion> record_in_comment(std::string_view comment);

/// The line the requeued run's rank 0 prints about the exclusion `record`, in the run after
/// the one that failed (restart_count == record.run), else nullopt (an older record: this run
/// was requeued for another reason). `job_nodes` are the run's own nodes (SLURM_JOB_NODELIST):
/// a left-out node among them means that the exclusion did not reach Slurm in time.
/// Input: {{"n3"}, "rank 2 launcher lost", 1}, 1, 2, {"n1", "n2", "n4"}.
/// Output: `requeued run 2 of 3: n3 left out (rank 2 launcher lost in run 1)`.
[[nodiscard]] std::optional<std::string>
requeued_run_line(const NodeExclusion& record,
                  std::uint32_t restart_count,
                  std::uint32_t max_requeues,
                  const std::vector<std::string>& job_nodes);

// --- rank 0's node lost: who requeues (the takeover rule, docs/protocol.md "Rank 0 lost") ----

/// How many surviving node leaders may requeue the job for a lost rank 0, in turn, and the
/// time between two turns: a turn re-reads the job first, so a later one acts only when the
/// ones before it could not (their node lost too, or slurmctld out of their reach).
inline constexpr std::uint32_t k_takeover_turns = 3;
inline constexpr Millis k_takeover_stagger{5000};

/// How long rank 0's launcher waits after an abort for the surviving launchers to leave
/// (CoordinatorSettings::linger): grace + heartbeat_timeout + 2 s, and with `on_failure_check`
/// the check's timeout + 5 s more. Input: grace 10 s, heartbeat timeout 10 s. Output: 22 s.
[[nodiscard]] Millis coordinator_linger(const RunSettings& run);

/// A surviving launcher that lost the coordinator by silence waits this long before it reads
/// the job and requeues it: rank 0's side, when it holds a strict majority of the nodes, has
/// requeued by then (its abort comes after the same silence, then its linger, then the
/// requeue), so the minority side finds the job requeued and does nothing.
/// coordinator_linger() + 10 s. Input: grace 10 s, heartbeat timeout 10 s. Output: 32 s.
[[nodiscard]] Millis takeover_silence_wait(const RunSettings& run);

/// Rank 0's wait when it lost launchers by silence without a strict majority of the nodes
/// (a tie goes to the side without rank 0): past the last surviving turn's, so that rank 0
/// requeues only when nobody on the other side did. 2 × takeover_silence_wait() +
/// k_takeover_turns × k_takeover_stagger. Input: grace 10 s, heartbeat timeout 10 s. Output:
/// 79 s.
[[nodiscard]] Millis takeover_rank0_wait(const RunSettings& run);

/// Whether `answering` nodes of the step's `nodes` are a strict majority.
/// Input: 2, 3. Output: true. Input: 1, 2. Output: false (a tie).
[[nodiscard]] bool strict_majority(std::uint32_t answering, std::size_t nodes) noexcept;

/// A launcher's turn to requeue the job after losing the coordinator (`--requeue`), or
/// nullopt: only the node leaders (node_leaders()) of the first k_takeover_turns nodes after
/// rank 0's (in rank order) take turns, and only for a loss that may be a node's
/// (CoordinatorLoss::closed, ::silent). Turn t waits (t - 1) × k_takeover_stagger, and
/// takeover_silence_wait() more after a silence. The returned `fallback` is empty.
/// Input: hosts n1 n1 n2 n3, rank 2, closed. Output: {1, 0 s}. Input: the same, rank 3,
/// silent, grace 10 s, heartbeat timeout 10 s. Output: {2, 37 s}. Input: rank 1: nullopt.
[[nodiscard]] std::optional<Takeover> takeover_turn(const std::vector<Member>& ranks,
                                                    std::uint32_t rank,
                                                    CoordinatorLoss loss,
                                                    const RunSettings& run);

/// Why a takeover must not requeue the job now (nullopt: it may), from its record read again
/// (`scontrol -o show job`, one line) after the turn's wait: the job must still be RUNNING
/// and not requeued since this run began (Restarts == `restart_count`). Another launcher's
/// requeue, the user's scancel and the time limit all show there.
/// Input: `JobId=12 JobState=RUNNING Restarts=0 ...`, 0. Output: nullopt.
/// Input: `JobId=12 JobState=PENDING Restarts=1 ...`, 0. Output: `job 12 was requeued
/// already (Restarts=1)`. Input: `... JobState=CANCELLED Restarts=0 ...`, 0. Output: `job 12
/// is "CANCELLED"`. A record without JobState or Restarts: `scontrol's record of job 12 has no
/// JobState`.
[[nodiscard]] std::optional<std::string>
takeover_refusal(std::string_view record, std::uint64_t job, std::uint32_t restart_count);

/// A job's ExcNodeList and comment, from squeue's `%x|%k` (one line; the comment may hold
/// `|`). Input: `n2|nightly`. Output: {"n2", "nightly"}.
struct JobRecord {
    std::string excluded; ///< empty for none (squeue's `(null)` too)
    std::string comment;  ///< empty for none (squeue's `(null)` too)
};

/// Parse squeue's `%x|%k` line (its trailing newline and spaces dropped).
/// \throws Error (Errc::io) quoting the text when it has no `|`.
[[nodiscard]] JobRecord parse_job_record(std::string_view text);

/// The job's end from SLURM_JOB_END_TIME (seconds since the epoch, set by Slurm 23.02 and
/// later), `now` being the time; nullopt for a job without a time limit (0, or more than 300
/// days ahead: Slurm puts the end of such a job a year after its start).
/// Input: `1827235650`, a `now` an hour before. Output: that time.
/// \throws Error (Errc::invalid_argument) naming SLURM_JOB_END_TIME for a value that is not a
///         number: `SLURM_JOB_END_TIME: expected an integer from 0 to 9223372036854775807:
///         "soon"`.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point>
job_end_from_variable(std::string_view text, std::chrono::system_clock::time_point now);

} // namespace tfslurm
