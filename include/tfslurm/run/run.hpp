// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `tfslurm run`: the small types that its components share. One launcher per Slurm task
/// (launcher.hpp) starts its trainer and reports to a coordinator (coordinator.hpp, served by
/// coordinator_server.hpp) hosted by rank 0's launcher; `--local` runs a whole job on this
/// machine (local_run.hpp). The wire protocol is in protocol.hpp and docs/protocol.md.

#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>

#include <array>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// How a command is kept from leaving processes behind (see spawn_process()).
enum class Containment {
    none,          ///< the command alone: what leaves its process group may outlive the caller
    keeper,        ///< under a keeper process, a child subreaper: the command keeps real pids
    pid_namespace, ///< under a supervisor, in a PID namespace of its own (its pid is 2 there)
};

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

/// The defaults of the `heartbeat` and `heartbeat_timeout` settings (RunSettings), written once:
/// the relay's settings (relay.hpp) start from them too.
inline constexpr Millis k_default_heartbeat{1000};
inline constexpr Millis k_default_heartbeat_timeout{10000};

/// When the work is done.
enum class Until {
    workers, ///< every worker and the chief (if any) exited 0: stop ps and evaluator
    chief    ///< the chief exited 0: stop workers, ps and evaluator (TF2 PSS)
};

[[nodiscard]] std::string_view to_string(Until until) noexcept;

/// Parse `workers` or `chief`. \throws Error (Errc::invalid_argument) naming `subject`.
[[nodiscard]] Until parse_until(std::string_view text, std::string_view subject);

/// Which failed trainers the coordinator starts again instead of aborting the step
/// (`max_restarts`, `max_total_restarts`, `restart_roles`). Only a trainer that ran and failed
/// by itself (exited non-zero or was killed by a signal) before any verdict is restarted: not one
/// that could not start (it would fail again the same way), nor a stuck one (its stack traces
/// were asked for; it may hang again, and its peers may be what hangs), nor a lost launcher (its
/// node may be gone).
struct RestartPolicy {
    std::uint32_t per_rank = 0; ///< restarts allowed for each rank; 0: never restart
    /// Restarts allowed in the whole step; nullopt: per_rank for each restartable rank.
    std::optional<std::uint32_t> total;
    /// The restartable roles; never ps (its state, the model's variables, dies with it).
    std::vector<Role> roles{Role::worker};
    /// Between a trainer's failure and its restart (`restart_delay`).
    Millis delay{1000};
};

/// Parse `stall_roles`: a comma list of roles, or `all`.
/// Input: `worker,chief`. Output: {worker, chief}. Input: `all`. Output: every role.
/// \throws Error (Errc::invalid_argument) naming `subject`, for an empty list or an unknown
///         role.
[[nodiscard]] std::vector<Role> parse_stall_roles(std::string_view text, std::string_view subject);

/// What tells that a trainer is alive (the `stall_progress` setting): the CPU time of its
/// processes, a touch of its progress file (TFSLURM_PROGRESS_FILE), its own output (bytes on
/// its stdout or stderr, as the launcher relays them).
enum class ProgressSource { cpu, file, output };

/// `cpu`, `file`, `output`.
[[nodiscard]] std::string_view to_string(ProgressSource source) noexcept;

/// Parse `stall_progress`: a comma list of cpu, file and output, each once, or `all`.
/// Input: `output,file`. Output: {output, file}. Input: `all`. Output: {cpu, file, output}.
/// \throws Error (Errc::invalid_argument) naming `subject`, for an empty list or an unknown
///         source: `--stall-progress: expected a comma list of cpu, file and output, or all:
///         "disk"`.
[[nodiscard]] std::vector<ProgressSource> parse_stall_progress(std::string_view text,
                                                               std::string_view subject);

/// Parse `restart_roles`: a comma list of worker, chief and evaluator.
/// Input: `worker,chief`. Output: {worker, chief}.
/// \throws Error (Errc::invalid_argument) naming `subject`, for an empty list, an unknown role
///         or `ps`.
[[nodiscard]] std::vector<Role> parse_restart_roles(std::string_view text,
                                                    std::string_view subject);

/// Format a duration for messages: `10 s`, `0.5 s`.
[[nodiscard]] std::string format_seconds(Millis duration);

/// One rank as the coordinator knows it.
struct Member {
    Role role = Role::worker;
    std::uint32_t index = 0;
    std::string host;
};

/// The members of a plan, indexed by rank.
[[nodiscard]] std::vector<Member> members_of(const Plan& plan);

/// The longest TFSLURM_RUN_ID taken.
inline constexpr std::size_t k_max_run_id = 128;

/// The run's identity, TFSLURM_RUN_ID in every trainer's environment and in the record: the
/// same across the requeues of one job (a trainer's logger, TensorBoard's or W&B's, continues
/// one run), new for a new job. `given`: a TFSLURM_RUN_ID already set (by the job script, or by
/// `--local` for its tasks), kept once checked; else `<cluster>-<job>-<step>`, the cluster from
/// SLURM_CLUSTER_NAME (`slurm` when unset; characters other than letters, digits, `.`, `_` and
/// `-` become `_`): a requeued job keeps its id and its steps their numbers.
/// Input: nullopt, `hpc`, 12345, 0. Output: `hpc-12345-0`. Input: `exp-7`, ... Output: `exp-7`.
/// \throws Error (Errc::invalid_argument) naming TFSLURM_RUN_ID for a given value that is
///         empty, longer than k_max_run_id, or holds other characters: `TFSLURM_RUN_ID: expected
///         1 to 128 letters, digits, '.', '_' or '-': "a b"`.
[[nodiscard]] std::string run_identity(std::optional<std::string_view> given,
                                       std::string_view cluster,
                                       std::uint64_t job,
                                       std::uint64_t step);

/// How many nodes `members` run on (their distinct hosts). Input: ranks on n1, n1, n2.
/// Output: 2.
[[nodiscard]] std::size_t node_count(const std::vector<Member>& members);

/// The tree of the control plane (docs/protocol.md): each rank's node leader, the lowest rank
/// on its host. A rank whose leader is itself and that no other rank names runs alone on its
/// node and speaks to the coordinator itself (flat); every other rank goes through its leader.
/// Input: hosts n1, n1, n2, n1. Output: {0, 0, 2, 0}.
[[nodiscard]] std::vector<std::uint32_t> node_leaders(const std::vector<Member>& ranks);

/// Refuse an `until` that these ranks cannot satisfy, before anything connects: every task has
/// the whole plan, so each one refuses at once with the same message (rather than rank 0 alone,
/// while the others wait for a coordinator that never listens).
/// Input: ranks {ps, worker, worker}, Until::chief. Output: throws `until: the plan has no chief:
/// "chief"` (the CLI says `--until chief`). \throws Error (Errc::invalid_argument) naming `until`.
void check_until(const std::vector<Member>& ranks, Until until);

/// How many ranks each leader speaks for (itself included), indexed by rank; 0 for non-leaders.
/// Input: {0, 0, 2, 0}. Output: {3, 0, 1, 0}.
[[nodiscard]] std::vector<std::uint32_t> node_sizes(const std::vector<std::uint32_t>& leaders);

/// `rank 3 (worker:2)`: how messages name a rank.
[[nodiscard]] std::string rank_label(std::uint32_t rank, const Member& member);

/// How often a heartbeat deadline is checked: a quarter of it, within [10 ms, 250 ms].
/// Input: 10 s. Output: 250 ms.
[[nodiscard]] Millis tick_interval(Millis heartbeat_timeout);

/// The one "silent too long" rule of the control plane (the coordinator for a launcher, a
/// launcher for the coordinator, a node leader's relay for a follower): a peer last heard at
/// `last_heard` is lost once more than `heartbeat_timeout` passed.
/// Input: last heard at 0 s, now 10.001 s, 10 s. Output: true (at 10 s: false).
[[nodiscard]] bool
silent_too_long(Clock::time_point last_heard, Clock::time_point now, Millis heartbeat_timeout);

/// How a lost peer's silence is worded. Input: 10 s. Output: `no heartbeat for 10 s`.
[[nodiscard]] std::string no_heartbeat(Millis heartbeat_timeout);

/// The signals a launcher (and `--local`) handles: SIGCHLD to reap, the others forwarded to
/// what it started (SIGTERM and SIGINT also stop the step).
inline constexpr std::array<int, 7> k_handled_signals{
    SIGCHLD, SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT};

/// How a launcher ended.
enum class Outcome {
    done,             ///< stop (done): the work is finished
    interrupted,      ///< stop (signal): the step was cancelled by a SIGTERM/SIGINT
    aborted,          ///< abort: some rank failed
    coordinator_lost, ///< the coordinator vanished before a verdict
    checkpointed,     ///< the step ended after the checkpoint signal (the job's end is near)
};

[[nodiscard]] std::string_view to_string(Outcome outcome) noexcept;

/// The exit statuses of `tfslurm run` that are its own; every other status of a launcher is a
/// trainer's (128 + signo when it was killed by a signal) or a setup error's (tfslurm(1)).
/// Rule: on an abort, every launcher of the step exits with the step's status (the failing
/// rank's), so that srun, which reports the highest task status (or 128 + signo when a task
/// died by a signal), reports the culprit's own status.
/// A launcher (or the coordinator) was lost: it vanished or fell silent, its status is unknown.
/// (A launcher killed by signal N makes srun itself report 128 + N.)
inline constexpr int k_status_lost = 8;
/// Ranks did not register within connect_timeout.
inline constexpr int k_status_unregistered = 124;
/// A trainer made no progress for the stall timeout (it is stuck).
inline constexpr int k_status_stalled = 9;
/// The step ended after the checkpoint signal (the job's time limit is near, or Slurm's own
/// `--signal`): the trainers saved their state, the work may not be finished, and the job was
/// not requeued.
inline constexpr int k_status_checkpointed = 10;
/// The step ended after the checkpoint signal or a preemption (slurmstepd's SIGTERM) and rank 0's
/// launcher requeued the job through Slurm: it runs again (SLURM_RESTART_COUNT one higher).
inline constexpr int k_status_requeued = 11;

/// With the `probe` setting: a launcher could not reach a peer's trainer address:port before
/// the trainers started (a network that does not carry the step's traffic).
inline constexpr int k_status_unreachable = 12;

/// With the `preflight` setting: a node failed a health check (interface, tmpdir, GPUs, the
/// site's command) before any trainer started.
inline constexpr int k_status_preflight = 13;

/// Whether launchers check, before any trainer starts, that they reach their peers' trainer
/// addresses (the `probe` setting).
enum class Probe { off, on };

/// Nodes to leave out of a requeued run (the job's ExcNodeList) and why (requeue_policy.hpp).
struct NodeExclusion {
    std::vector<std::string> nodes;
    std::string why;       ///< `rank 2 launcher lost`
    std::uint32_t run = 1; ///< the run that failed: SLURM_RESTART_COUNT + 1

    friend bool operator==(const NodeExclusion& a, const NodeExclusion& b) {
        return a.nodes == b.nodes && a.why == b.why && a.run == b.run;
    }
};

/// How far a requeued run got, as the job's comment carries it to the next run (the requeue
/// storm rule, requeue_policy.hpp): no progress, progress, or progress up to a step its
/// trainers wrote in their progress files.
struct ProgressMark {
    enum class Kind { none, made, step };
    Kind kind = Kind::made;
    std::uint64_t step = 0; ///< Kind::step

    friend bool operator==(const ProgressMark& a, const ProgressMark& b) noexcept {
        return a.kind == b.kind && a.step == b.step;
    }
};

/// What the job's comment carries from a requeued run to the next: the run, the nodes it left
/// out (if any) and how far it got.
struct RunRecord {
    std::uint32_t run = 1; ///< the run that was requeued: SLURM_RESTART_COUNT + 1
    std::optional<NodeExclusion> exclusion;
    std::optional<ProgressMark> progress; ///< nullopt: a record without it (an older tfslurm)

    friend bool operator==(const RunRecord& a, const RunRecord& b) {
        return a.run == b.run && a.exclusion == b.exclusion && a.progress == b.progress;
    }
};

/// What `requeue` needs to know about the job, read once at the launcher's start (the budget,
/// `max_requeues`, is a run setting).
struct RequeuePolicy {
    std::uint64_t job = 0;
    std::uint32_t restart_count = 0; ///< SLURM_RESTART_COUNT (0 when unset: the first run)
    /// Rank 0, in a requeued run: the record the run before left in the job's comment.
    std::optional<RunRecord> previous;
};

/// How a launcher lost its coordinator, as the takeover rule (takeover_turn(),
/// requeue_policy.hpp) judges it.
enum class CoordinatorLoss {
    closed, ///< the connection ended (EOF or reset): rank 0's launcher is gone; a fact
    silent, ///< nothing for the heartbeat timeout: rank 0's node gone, or cut off (a partition)
    other   ///< a protocol error, or before registration: nobody's node is blamed
};

/// A requeue that waits its turn (RequeueRequest::takeover): rank 0's node was lost and a
/// surviving launcher requeues the job in its stead (takeover_turn(), requeue_policy.hpp), or
/// rank 0 lost launchers by silence without a strict majority of the nodes and lets the other
/// side requeue first. The caller waits `wait`, reads the job again (takeover_refusal()) and
/// requeues it only if nobody did; else it says `fallback` and cancels the step as without
/// `--requeue`.
struct Takeover {
    std::uint32_t turn = 0; ///< 0: rank 0 itself; 1 to k_takeover_turns: a surviving leader
    Millis wait{0};
    std::string fallback; ///< the line without the requeue (LaunchResult::message's start)

    friend bool operator==(const Takeover& a, const Takeover& b) {
        return a.turn == b.turn && a.wait == b.wait && a.fallback == b.fallback;
    }
};

/// A requeue that rank 0's launcher (or, rank 0 lost, a surviving one: `takeover`) asks its
/// caller to perform (LaunchResult::requeue).
struct RequeueRequest {
    std::uint64_t job = 0;
    std::uint32_t restart = 0; ///< the run it starts: SLURM_RESTART_COUNT + 1
    /// The exit status when Slurm refuses the requeue (k_status_checkpointed after a
    /// checkpoint, the trainer's after a preemption).
    int status_if_refused = 0;
    /// With a node's failure (node_fault()): the node to leave out of the requeued run. The
    /// step is then also to be cancelled (LaunchResult::cancel) if Slurm refuses the requeue.
    std::optional<NodeExclusion> exclusion;
    /// How far this run got (written in the job's comment with the exclusion, for the storm
    /// rule of the next run); nullopt for a preemption, which the rule does not judge.
    std::optional<ProgressMark> progress;
    /// Set when the requeue waits its turn and is made only if the job is still as this run
    /// found it (Takeover).
    std::optional<Takeover> takeover;
};

struct LaunchResult {
    /// What this launcher exits with. Aborted: the step's status (step_status) whatever its own
    /// trainer did. Coordinator lost: its trainer's status if the trainer failed by itself, else
    /// k_status_lost. Done: the trainer's status, 0 for a trainer stopped because the work is
    /// done. Interrupted: the trainer's status (128 + signo if signalled, 128 + signo of the
    /// interrupt if it never started).
    int exit_status = 0;
    Outcome outcome = Outcome::done;
    /// One line for the user, without a `tfslurm: ` prefix: `aborting: rank 3 (worker:2) on n2
    /// exited with status 3` (aborted, coordinator_lost), `stopping: rank 1 (worker:0) on n1
    /// received signal 15 (Terminated)` (interrupted); empty when done.
    std::string message;
    /// Whether this launcher is the one that shows `message` to the user (every launcher of the
    /// step has the same line; one is enough): the failing rank's launcher; rank 0's (the
    /// coordinator's host) for a launcher that was lost or never registered; the launcher that
    /// received the interrupt; every launcher that lost the coordinator.
    bool announce = false;
    /// The step's status as decided by the coordinator (the failing rank's status on abort).
    int step_status = 0;
    /// The Slurm step to cancel before exiting (its `message` says so), set when a node may be
    /// gone: srun would wait for that node's tasks forever. Rank 0's launcher, once the
    /// coordinator declared a launcher lost and every other launcher left (or the linger time,
    /// grace + heartbeat_timeout + 2 s, ran out); every launcher that lost the coordinator,
    /// once its own trainer ended. Never under `--local` (no Slurm step).
    std::optional<StepRef> cancel;
    /// The job to requeue through Slurm before exiting (`message` says so; exit_status is then
    /// k_status_requeued): rank 0's launcher with `--requeue`, once the step ended after the
    /// checkpoint signal or a preemption, or was aborted by a node's failure (its `exclusion`),
    /// within `--max-requeues`.
    std::optional<RequeueRequest> requeue;
};

} // namespace tfslurm
