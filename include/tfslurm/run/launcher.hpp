// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// One task's launcher of `tfslurm run`, its decisions: a pure state machine (LauncherMachine:
/// events and the time in, actions out), from registration to the launcher's result. The Asio
/// shell that performs the actions is run_launcher() (launcher_shell.hpp).

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tfslurm {

/// Whether the trainer waits for the coordinator's `cluster` (every node's chosen address).
enum class AddressExchange { none, coordinator };

/// Whether this launcher hosts the coordinator (rank 0): then it exits only once the
/// coordinator server has finished.
enum class CoordinatorHost { elsewhere, here };

/// A steady time and the wall-clock time it was: the launcher's phases (StartupTimes) are the
/// wall-clock times of the machine's steady `now`s.
struct WallAnchor {
    Clock::time_point steady;
    WallClock::time_point wall;
};

/// How often a launcher looks whether its trainer first reported progress (its progress file
/// touched) until it did: the time itself is the file's, only its discovery waits. No inotify
/// watch tells it sooner: closing an inotify instance waits for the kernel's fsnotify reaper
/// (an SRCU grace period, 8 to 20 ms on Linux 6.18), which every launcher's end would pay
/// (issue #33).
inline constexpr Millis k_first_progress_poll{1000};

struct LauncherSettings {
    /// The run settings the machine reads: heartbeat, heartbeat_timeout, grace, stall_*,
    /// restarts.delay, checkpoint_*, max_requeues, probe.
    RunSettings run;
    std::uint32_t rank = 0;
    std::vector<Member> ranks; ///< the plan's members, indexed by rank (names a stop's sender)
    /// `<address>:<port>` of the first candidate control port, for messages until registered()
    /// names the candidate where the coordinator really answered.
    std::string control;
    CoordinatorHost host = CoordinatorHost::elsewhere;
    std::optional<StepRef> slurm_step; ///< see LauncherOptions::slurm_step
    AddressExchange exchange = AddressExchange::none;
    std::optional<Clock::time_point> job_end; ///< see LauncherOptions::job_end
    std::optional<RequeuePolicy> requeue;     ///< see LauncherOptions::requeue
    /// The plan's trainer port of each rank (indexed by rank): the probe's targets, unless
    /// `cluster` says a port moved.
    std::vector<std::uint16_t> ports;
    /// When Slurm started this task (the launcher's process began); nullopt: unknown.
    std::optional<WallClock::time_point> task_start;
    /// When the launcher was up (it began to connect). Set: the machine takes its start-up
    /// phases (StartupTimes), watches for its trainer's first progress and sends both with its
    /// `exit`; nullopt (a machine tested alone): none of that.
    std::optional<WallAnchor> up;
};

/// What tells that a trainer is alive, read by the shell: the CPU time of every process of
/// the trainer's tree (its PID namespace), the modification time of its progress file and the
/// bytes of its output the launcher relayed. A change between two samples of a source that
/// `stall_progress` names is progress (progressed()).
struct ProgressSample {
    std::uint64_t cpu_ticks = 0;    ///< user + system time, children's included, in clock ticks
    std::int64_t file_mtime_ns = 0; ///< the progress file's mtime; 0 when there is none
    /// The trainer's stdout and stderr bytes relayed so far (only counted when the machine
    /// counts_output()); it only grows, across restarts too.
    std::uint64_t output_bytes = 0;

    friend bool operator==(const ProgressSample& a, const ProgressSample& b) noexcept {
        return a.cpu_ticks == b.cpu_ticks && a.file_mtime_ns == b.file_mtime_ns &&
               a.output_bytes == b.output_bytes;
    }
    friend bool operator!=(const ProgressSample& a, const ProgressSample& b) noexcept {
        return !(a == b);
    }
};

/// How often a trainer's progress is sampled: a tenth of the stall timeout, within
/// [100 ms, 10 s]. Input: 60 s. Output: 6 s.
[[nodiscard]] Millis stall_sample_interval(Millis stall_timeout);

/// Whether `after` is progress since `before`: a source of `sources` changed. Other sources
/// are ignored (a trainer spinning on a lock uses CPU time; with `output,file` that is no
/// progress). Input: {cpu 5, file 0, output 10} -> {cpu 5, file 0, output 12}, {output}.
/// Output: true; with {cpu, file}: false.
[[nodiscard]] bool progressed(const ProgressSample& before,
                              const ProgressSample& after,
                              const std::vector<ProgressSource>& sources) noexcept;

/// How often a launcher whose trainer is judged reports its progress to the coordinator
/// (protocol::Progress, for the straggler rule): a tenth of the stall timeout within [1 s,
/// 60 s], and never more often than every `ranks` milliseconds, so that the coordinator gets at
/// most about 1,000 reports a second however many ranks the step has. Input: 60 s, 64 ranks.
/// Output: 6 s. Input: 60 s, 10,000 ranks. Output: 10 s.
[[nodiscard]] Millis straggler_report_interval(Millis stall_timeout, std::size_t ranks);

/// Who a signal was meant for, told by its sender.
enum class SignalOrigin {
    launcher, ///< sent to this launcher alone (a user's kill): forwarded to the trainer
    step      ///< slurmstepd's, delivered to every process of the step: the trainer has it too
};

/// One peer the reachability probe tries: its rank and the trainer address:port its peers use.
struct ProbeTarget {
    std::uint32_t rank = 0;
    std::string address; ///< an IP literal (exchanged) or the node name
    std::uint16_t port = 0;

    friend bool operator==(const ProbeTarget& a, const ProbeTarget& b) noexcept {
        return a.rank == b.rank && a.address == b.address && a.port == b.port;
    }
};

/// `address:port`, IPv6 literals in brackets. Input: {2, "fd78::13", 23000}.
/// Output: `[fd78::13]:23000`.
[[nodiscard]] std::string endpoint(const ProbeTarget& target);

/// Up to this many ranks, a launcher probes every other rank.
inline constexpr std::size_t k_probe_all_up_to = 64;
/// Beyond k_probe_all_up_to: how many ranks besides every ps and the chief each one probes.
inline constexpr std::size_t k_probe_sample = 16;

/// The peers rank `self` probes, by rank: every other rank up to k_probe_all_up_to ranks;
/// beyond, every ps and the chief (each worker of TF's parameter-server training talks to
/// them) plus k_probe_sample others at fixed strides of size/(k_probe_sample + 1) from
/// `self`, so that each rank is probed by about k_probe_sample peers and the cost stays
/// constant per rank. Addresses: the node's exchanged one (`cluster.addresses`), else the node
/// name; ports: a moved one (`cluster.ports`), else `ports` (the plan's).
/// Input: self 1, ranks {ps:0 on n1, worker:0 on n2, worker:1 on n3}, cluster {n1: 10.0.0.1},
/// ports {23000, 23001, 23002}. Output: {{0, 10.0.0.1, 23000}, {2, n3, 23002}}.
[[nodiscard]] std::vector<ProbeTarget> probe_targets(std::uint32_t self,
                                                     const std::vector<Member>& ranks,
                                                     const std::vector<std::uint16_t>& ports,
                                                     const protocol::Cluster& cluster);

/// The timers the shell keeps for the machine; each firing is fed back with timer_fired().
enum class LauncherTimer {
    heartbeat,     ///< send the next heartbeat
    watch,         ///< check the coordinator's silence (every tick_interval(heartbeat_timeout))
    grace,         ///< SIGKILL a stopped trainer that is still running
    close,         ///< stop waiting for the coordinator's EOF after our half-close
    settle,        ///< report a trainer killed by SIGTERM/SIGINT that no signal of ours explains
    stall,         ///< sample the trainer's progress; once stuck: report it (stall grace over)
    restart,       ///< start the trainer again (`restart`), after the back-off
    checkpoint,    ///< the job's end is `checkpoint_before` away: send the checkpoint signal
    report,        ///< send the trainer's progress age (`progress`), for the straggler rule
    first_progress ///< look whether the trainer touched its progress file yet
};

/// How many LauncherTimer values there are (the last one + 1): the shell keeps one timer each.
inline constexpr std::size_t k_launcher_timer_count =
    static_cast<std::size_t>(LauncherTimer::first_progress) + 1;

/// How long a launcher holds the exit report of a trainer killed by SIGTERM or SIGINT, waiting
/// for that signal to reach the launcher too: Slurm signals every process of a step at once, and
/// a trainer may die of it before its launcher handled its own copy.
inline constexpr Millis k_settle_window{1000};

[[nodiscard]] std::string_view to_string(LauncherTimer timer) noexcept;

/// What the machine asks its shell to do.
namespace launcher_action {
/// Write a frame on the control connection; acknowledge it with LauncherMachine::written().
struct Send {
    protocol::Message message;
};
/// Send `signo` to the trainer's process group; `no_core`: first set the core file size limit
/// of its processes to 0 (the stall signal: a stack dump is wanted, not a core file).
struct SignalTrainer {
    int signo = 0;
    bool no_core = false;
};
/// (Re)arm `timer` to fire at `at`, replacing any pending expiry.
struct ArmTimer {
    LauncherTimer timer = LauncherTimer::heartbeat;
    Clock::time_point at;
};
struct CancelTimer {
    LauncherTimer timer = LauncherTimer::heartbeat;
};
/// Call start_due() once the messages already received are handled (a verdict that came in the
/// same read as the welcome must be seen first).
struct ScheduleStart {};
/// Check the trainer's port and spawn it; report trainer_started() or trainer_failed().
/// `restart`: how many times it was started before (TFSLURM_RESTART_COUNT).
struct StartTrainer {
    std::uint32_t restart = 0;
};
/// The reachability probe (`probe`): listen on the trainer's port, try to connect to each
/// target until the probe timeout, report probe_finished(); keep listening until StartTrainer
/// (or the end).
struct ProbePeers {
    std::vector<ProbeTarget> targets;
};
/// Read the trainer's progress and report it with progress_sampled().
struct SampleProgress {};
/// Read the trainer's progress file (its modification time, and the step written in it) and
/// report it with progress_file_sampled().
struct SampleProgressFile {};
/// When a node's health checks run.
enum class NodeCheckTime {
    before_start, ///< `preflight`: report preflight_finished()
    after_failure ///< `on_failure_check`: report node_checked()
};
/// The health checks: check this node without blocking the event loop. Before the start
/// (`preflight`, this launcher is its node's lowest rank): the built-in checks and
/// `preflight_command`; after the abort named this rank (`on_failure_check`): the built-in
/// checks and `on_failure_check`, within `on_failure_check_timeout`.
struct CheckNode {
    NodeCheckTime when = NodeCheckTime::before_start;
};
/// Shut down our sending side and wait for the coordinator's EOF (connection_lost()).
struct HalfClose {};
/// Close the control connection, drop unsent frames, stop the heartbeat, watch and close timers.
struct Disconnect {};
/// Stop everything and return `result`.
struct Finish {
    LaunchResult result;
};
} // namespace launcher_action

using LauncherAction = std::variant<launcher_action::Send,
                                    launcher_action::SignalTrainer,
                                    launcher_action::ArmTimer,
                                    launcher_action::CancelTimer,
                                    launcher_action::ScheduleStart,
                                    launcher_action::StartTrainer,
                                    launcher_action::ProbePeers,
                                    launcher_action::SampleProgress,
                                    launcher_action::HalfClose,
                                    launcher_action::Disconnect,
                                    launcher_action::Finish,
                                    launcher_action::CheckNode,
                                    launcher_action::SampleProgressFile>;

/// One line per action, for logs and tests; times are milliseconds since `epoch`.
/// Input: Send{Interrupt{15}}. Output: `send {"signal":15,"type":"interrupt","v":2}`.
/// Others: `signal 15`, `arm grace 10000`, `probe 10.0.0.1:23000 n3:23002`, `check node`
/// (`check node after failure`),
/// `cancel grace`,
/// `schedule start`, `start trainer`
/// (`start trainer (restart 1)`),
/// `sample progress`, `sample progress file`, `half-close`, `disconnect`, `finish <outcome> <exit
/// status> <step status>[ announce|quiet <message>][ + cancel <job>.<step>][ + requeue <job>
/// (<status> if refused)[ turn <t> after <ms> ms]]`, e.g. `finish interrupted 143 143 announce
/// stopping: ...`.
[[nodiscard]] std::string describe(const LauncherAction& action, Clock::time_point epoch);

/// The launcher's decisions, from registration to its result. Pure: the caller feeds events
/// with the current time and performs what take_actions() returns, in order. Rules:
///
/// - Each signal reaches the trainer once: a signal from slurmstepd (SignalOrigin::step) already
///   reached every process of the step and is not forwarded; a trainer that received SIGTERM
///   (forwarded or from slurmstepd) gets no second SIGTERM from a verdict, nor does any trainer
///   when the verdict is a `stop` for a slurmstepd signal (`whole_step`: they all have it).
/// - After `welcome`: heartbeat every `heartbeat`, watch the coordinator's silence, and start
///   the trainer (unless a verdict or a loss came first: then it is never started); with
///   AddressExchange::coordinator only once `cluster` came (cluster() holds it).
/// - The trainer's exit (or failure to start) is reported with `exit`. A trainer killed by
///   SIGTERM or SIGINT before any verdict or signal of ours is reported k_settle_window later
///   (or as soon as the launcher receives SIGTERM/SIGINT, after its `interrupt`, or a verdict
///   comes): a cancelled step is then always reported as interrupted, whichever process the
///   cancel's signal reached first.
/// - A verdict (`stop`/`abort`) or the coordinator's loss (connection closed, a protocol error,
///   no message for `heartbeat_timeout` before a verdict): SIGTERM to the trainer, SIGKILL
///   `grace` later. SIGTERM/SIGINT: forwarded, `interrupt` sent (before a verdict), grace
///   counted; received before registration: nothing is started, the launcher finishes at once.
///   Other signals are only forwarded.
/// - Once the trainer ended and the step is over: wait for the writes, half-close, wait for the
///   coordinator's EOF (at most 2 s), and, on rank 0, for the coordinator server; then Finish.
/// - Who ends the Slurm step when a node may be gone (LaunchResult::cancel, with a Slurm step
///   only): rank 0's launcher when the verdict is an abort for a lost launcher, or for ranks
///   that did not register (a node that hangs before its task starts: it finishes after every
///   surviving launcher left, so their trainers had their grace); any launcher
///   that lost the coordinator (rank 0's node may be the lost one). Nobody else: a failure
///   that Slurm sees (a task that exited) ends the step by itself.
/// - Stuck trainer (with a stall_timeout): its progress is sampled every
///   stall_sample_interval() while it runs and no verdict, loss or signal of ours came; a
///   sample that differs from the previous one is progress. No progress for stall_timeout:
///   `stall_signal` to the trainer's group (a Python trainer prints its stack traces), then,
///   when the trainer ends or `stall_grace` later, whichever comes first, `stall` (the stall
///   timeout it went past: the measured silence depends on sampling and load) is sent before any
///   exit report: the coordinator aborts the step naming this rank.
/// - Progress sources (`stall_progress`): a sample is progress when a source it names changed
///   (progressed()); the trainer's output is counted by the shell only when counts_output().
/// - Progress reports (with a stall_timeout, a judged role): while the progress is watched,
///   every straggler_report_interval() from the trainer's start, `progress` tells the
///   coordinator how long ago the trainer last made progress (to a sampling interval).
/// - Probe (`probe`): where the trainer would be started first (after `welcome`, or `cluster`
///   with the address exchange), ProbePeers is asked instead, with probe_targets(); its result
///   (probe_finished()) is sent as `probed`, and the trainer starts once `go` comes. A verdict
///   or a loss meanwhile: it never starts. Restarts are not probed again.
/// - Preflight (`preflight`, or a `preflight_command`): the node's lowest rank (node_leaders())
///   asks CheckNode first, where the trainer (or the probe) would start; the node's other ranks
///   check nothing (the checks are the node's, and a site command run once per rank would load
///   a node of 8 GPUs eightfold). Its result (preflight_finished()) goes in the same `probed`
///   as the probe's (after the probe, with `probe`), and the trainer starts on `go`: one
///   barrier. A verdict or a loss meanwhile: it never starts.
/// - Node check after a failure (`on_failure_check`, failure_checked()): the launcher whose
///   rank the abort names checks its node once its trainer ended (CheckNode after_failure),
///   sends the result as `checked`, then leaves as any other; it keeps heartbeating meanwhile.
///   The coordinator's loss during the check: it leaves without a result. SIGTERM/SIGINT do
///   not cut the check, which its own timeout bounds: from Slurm 26.05 slurmstepd signals every
///   task of a step once one exited non-zero (the other launchers, with the culprit's status),
///   and SIGKILL after KillWait is the hard bound.
///   Rank 0's launcher gets the result with server_finished(): its line tells it
///   (node_check_text()), and a failed check leaves that node out of a requeue.
/// - Restart: `restart` after this rank's failed exit report (and before any verdict, loss or
///   signal): the trainer is started again, with the same environment plus its restart count,
///   `restart_backoff` later. A verdict, a loss or SIGTERM/SIGINT during the back-off: it is
///   never started again (as a trainer that never started).
/// - Checkpoint (with job_end and checkpoint_before): once the trainer started, the checkpoint
///   timer is armed for job_end - checkpoint_before (at once when that is past); when it fires
///   while the trainer runs and no verdict, loss, interrupt or stop came, `checkpoint_signal`
///   goes to the trainer. The same signal from slurmstepd (Slurm's own `--signal`) reached the
///   trainer already: with checkpoint_before or requeue set it counts as the checkpoint and the
///   timer is cancelled, so the trainer gets it once. A launcher whose trainer got the checkpoint
///   signal and whose step then ends `done` finishes `checkpointed` with k_status_checkpointed (the
///   work may not be finished).
/// - Requeue (with `requeue`, rank 0's launcher only): a step that ended checkpointed, or
///   interrupted by slurmstepd's SIGTERM (a preemption, the whole step got it) or after the
///   checkpoint signal, is requeued (LaunchResult::requeue, k_status_requeued) while
///   restart_count < max_requeues; past that the line says why not. An abort for a node's
///   failure (node_fault(): a lost launcher) is requeued the same way, with that node to leave
///   out (RequeueRequest::exclusion; `cancel` stays set, for a requeue that Slurm refuses).
///   Any other abort (the trainer's own failure) or a lost coordinator is never requeued.
class LauncherMachine {
  public:
    explicit LauncherMachine(LauncherSettings settings);

    /// Events. received() and connection_lost() only after registered().
    /// `control`: `<address>:<port>` where the coordinator answered (a fallback candidate
    /// perhaps), named by every later message; empty keeps LauncherSettings::control.
    void registered(const std::string& control, Clock::time_point now);
    void received(const protocol::Message& message, Clock::time_point now);
    /// The connection ended (`connection closed`, an error or a protocol error's text); `loss`
    /// says which kind (a closed connection, a silent peer, or anything else).
    void connection_lost(const std::string& reason,
                         Clock::time_point now,
                         CoordinatorLoss loss = CoordinatorLoss::closed);
    /// One Send was written.
    void written(Clock::time_point now);
    void start_due(Clock::time_point now);
    void trainer_started(Clock::time_point now);
    /// The trainer could not be started: `status` is the error's exit status.
    void trainer_failed(ExitStatus status, const std::string& error, Clock::time_point now);
    /// The trainer's status, once its process and every other process of its group ended.
    void trainer_exited(ExitStatus status, Clock::time_point now);
    /// Any handled signal but SIGCHLD, with who it was meant for.
    void
    signal_received(int signo, Clock::time_point now, SignalOrigin origin = SignalOrigin::launcher);
    void timer_fired(LauncherTimer timer, Clock::time_point now);
    /// The answer to ProbePeers: the peers not reached (empty: all were), at most
    /// protocol::k_max_probe_failures of them, by rank.
    void probe_finished(std::vector<protocol::ProbeFailure> failures, Clock::time_point now);
    /// The answer to CheckNode: the node's first failed check, nullopt when every check passed
    /// (or was skipped).
    void preflight_finished(std::optional<protocol::PreflightFailure> failure,
                            Clock::time_point now);
    /// The answer to SampleProgress.
    void progress_sampled(const ProgressSample& sample, Clock::time_point now);
    /// The answer to SampleProgressFile (also told by the shell, unasked, when the trainer
    /// ended, before trainer_exited()): when the trainer last touched its progress file
    /// (nullopt: never; the launcher creates it with a modification time of 0) and the step
    /// written in it (progress_step()). The first touch is the `progress` phase.
    void progress_file_sampled(std::optional<WallClock::time_point> touched,
                               std::optional<std::uint64_t> step,
                               Clock::time_point now);
    /// The answer to CheckNode after_failure: the node's first failed check, nullopt when every
    /// check passed.
    void node_checked(std::optional<protocol::PreflightFailure> failure, Clock::time_point now);
    /// Rank 0: its coordinator finished; `progress`: how far the step's trainers got (the
    /// requeue storm rule); `check`: the failed rank's node check (`on_failure_check`), if one
    /// came.
    void server_finished(Clock::time_point now,
                         const RunProgress& progress = {},
                         const std::optional<protocol::Checked>& check = std::nullopt);

    /// Actions to perform, in order; clears the queue.
    [[nodiscard]] std::vector<LauncherAction> take_actions();

    /// Whether the shell must count the trainer's output as progress (stall_timeout set, this
    /// rank's role judged, `output` in stall_progress).
    [[nodiscard]] bool counts_output() const noexcept;

    [[nodiscard]] bool trainer_running() const noexcept {
        return m_trainer == TrainerState::running;
    }
    /// How many times the trainer was restarted (the last `restart`'s count).
    [[nodiscard]] std::uint32_t restarts() const noexcept { return m_restarts; }
    /// The coordinator's `cluster`: each node's chosen address and the ports that moved (empty
    /// before it came).
    [[nodiscard]] const protocol::Cluster& cluster() const noexcept { return m_cluster; }
    /// Set once Finish was emitted.
    [[nodiscard]] const std::optional<LaunchResult>& result() const noexcept { return m_result; }

  private:
    /// The link to the coordinator.
    enum class Phase { unregistered, registered, closing, closed };
    /// The trainer's life, one state at a time: what its start waits for, running, or how it
    /// ended. A restart goes from `ended` through `restart_backoff` to `starting` again.
    enum class TrainerState {
        starting,           ///< not started, and its start waits on nobody (ScheduleStart is out)
        awaiting_addresses, ///< registered: the start waits for `cluster` (every node's address)
        checking_node,      ///< the start barrier: the node's checks run (then the probe, `go`)
        awaiting_go,        ///< the start barrier: the probe runs or `probed` went; waits for `go`
        restart_backoff,    ///< `restart` came: the back-off runs, then `starting`
        running,
        exit_held,     ///< killed by SIGTERM/SIGINT not ours: the report waits for k_settle_window
        ended,         ///< exited, failed to start, or interrupted before it started
        never_started, ///< the step ended (a verdict, a loss) before it started
        abandoned,     ///< interrupted before this launcher registered: nobody to tell
    };
    /// Whether this launcher stops the trainer: its grace period runs, or ran out (SIGKILL).
    enum class Stopping { no, grace, killed };
    /// Whether the trainer received SIGTERM (ours or slurmstepd's): its handler must run once.
    enum class TermSignal { not_delivered, delivered };
    /// A trainer judged stuck (its stack traces asked for), then reported to the coordinator.
    enum class Stall { none, stuck, reported };
    /// The node check after a failure (`on_failure_check`): not begun, running, sent.
    enum class AfterCheck { none, running, over };
    /// The coordinator's server, which rank 0's launcher hosts and waits for before finishing.
    enum class Server { elsewhere, serving, finished };
    /// The first SIGTERM or SIGINT, and who it was meant for.
    struct Interrupt {
        int signo = 0;
        SignalOrigin origin = SignalOrigin::launcher;
    };

    /// Before the trainer's first start (or its restart): starting, or waiting to.
    [[nodiscard]] bool not_started() const noexcept;

    [[nodiscard]] std::string label() const;
    [[nodiscard]] bool done_verdict() const noexcept;
    void send(protocol::Message message);
    void release_exit();
    void on_verdict(const protocol::Message& verdict, Clock::time_point now);
    void coordinator_lost(const std::string& reason, Clock::time_point now, CoordinatorLoss loss);
    void stop_trainer(int signo, Clock::time_point now);
    /// A signal that reached the trainer: SIGTERM is remembered (TermSignal).
    void note_delivered(int signo) noexcept;
    [[nodiscard]] bool watching_progress() const noexcept;
    /// Whether this rank's role is one `stall_roles` judges.
    [[nodiscard]] bool judged_for_stalls() const noexcept;
    /// straggler_report_interval() of this step.
    [[nodiscard]] Millis report_interval() const;
    /// The checkpoint timer, when the trainer starts: none (a warning) once it is too late.
    void arm_checkpoint(Clock::time_point now);
    /// Whether `signo` from `origin` is Slurm's own checkpoint signal (`--signal`, `scancel
    /// --signal`) in a step that checkpoints (checkpoint_before or requeue).
    [[nodiscard]] bool slurms_checkpoint_signal(int signo, SignalOrigin origin) const noexcept;
    /// A signal other than SIGTERM/SIGINT before the trainer runs: not passed on, and said
    /// (Slurm's checkpoint signal as a warning of rank 0).
    void signal_before_start(int signo, SignalOrigin origin);

  public:
    /// Whether this launcher sent its trainer the checkpoint signal (or Slurm did).
    [[nodiscard]] bool checkpoint_signalled() const noexcept { return m_checkpoint.has_value(); }

  private:
    void send_checkpoint(Clock::time_point now);
    /// Until the job's end (job_end set), at least 0.
    [[nodiscard]] Millis time_left(Clock::time_point now) const;
    /// `--checkpoint-before 50` in the face's spelling.
    [[nodiscard]] std::string checkpoint_before_ref() const;
    /// Whether a requeue is judged by the storm rule (a preemption is not: no fault of the
    /// job's).
    enum class Judged { no, yes };
    void add_requeue(LaunchResult& out, Judged judged = Judged::yes) const;
    /// The storm rule (requeue_storm()) for this run, through `out`'s line: true when it
    /// stops the requeue. `without`: the nodes the requeue would leave out (`" without n3"`).
    bool storm_stops(LaunchResult& out, const std::string& without) const;
    /// How far this run got (progress_mark()).
    [[nodiscard]] ProgressMark run_mark() const;
    /// Rank 0 with `requeue`, after an abort for a node's failure: requeue the job without it.
    void add_node_requeue(LaunchResult& out, const NodeExclusion& exclusion) const;
    /// A launcher that lost the coordinator, with `requeue`: requeue the job without rank 0's
    /// node in rank 0's stead when it is one of the turns (takeover_turn()); the others then
    /// leave the step to those turns rather than cancel it (a cancel would kill a turn while
    /// it waits).
    void add_takeover(LaunchResult& out) const;
    void report_stall();
    /// The `exit` for `status`, with this launcher's start-up phases and reported step.
    void report_exit(ExitStatus status, std::string error = {});
    /// The wall-clock time of `now` (needs LauncherSettings::up).
    [[nodiscard]] WallClock::time_point wall(Clock::time_point now) const;
    /// Record `phase` at `now` once (with LauncherSettings::up).
    void reach(StartupPhase phase, Clock::time_point now);
    void disconnect(Clock::time_point now);
    void maybe_finish(Clock::time_point now);
    void release_start();
    void begin_start();
    /// After the node's checks (or without them): probe, or report `probed` at once.
    void after_checks();
    /// Whether this launcher checks its node (`preflight` on, and it is the node's lowest rank).
    [[nodiscard]] bool checks_node() const;
    /// Whether the verdict is an abort naming this rank whose node is to be checked
    /// (`on_failure_check`).
    [[nodiscard]] bool checks_after_failure() const;
    void on_restart(const protocol::Restart& restart, Clock::time_point now);
    void cancel_restart(Clock::time_point now);
    void finish(Clock::time_point now);
    [[nodiscard]] LaunchResult compute_result() const;

    LauncherSettings m_settings;
    Member m_self;
    Phase m_phase = Phase::unregistered;
    TrainerState m_trainer = TrainerState::starting;
    std::optional<ExitStatus> m_status; ///< the trainer's (or a synthetic) status
    std::optional<protocol::Message> m_verdict;
    std::optional<std::string> m_lost;               ///< the coordinator vanished before a verdict
    CoordinatorLoss m_loss = CoordinatorLoss::other; ///< how, with m_lost
    Clock::time_point m_last_heard;
    std::optional<Clock::time_point> m_grace_deadline;
    std::size_t m_unwritten = 0; ///< Sends not yet acknowledged by written()
    std::optional<Interrupt> m_interrupt;
    Stopping m_stopping = Stopping::no;
    TermSignal m_term = TermSignal::not_delivered;
    Server m_server = Server::elsewhere;
    std::optional<protocol::PreflightFailure> m_preflight; ///< the node's failed check
    protocol::Cluster m_cluster;                           ///< as received
    std::optional<ProgressSample> m_sample;                ///< the last progress sample
    Clock::time_point m_last_progress;
    Stall m_stall = Stall::none;
    std::uint32_t m_restarts = 0; ///< the last `restart`'s count
    /// The trainer got the checkpoint signal: how (`signal 10 (...) 50 s before the job's end`).
    std::optional<std::string> m_checkpoint;
    std::optional<LaunchResult> m_result;
    std::vector<LauncherAction> m_actions;
    RunProgress m_run_progress; ///< rank 0: how far the step's trainers got (server_finished())
    AfterCheck m_after_check = AfterCheck::none;
    std::optional<protocol::Checked> m_node_check; ///< rank 0: the failed rank's, if it came
    Millis m_ran{0};             ///< rank 0: from the launcher's start to its coordinator's end
    StartupTimes m_startup;      ///< the phases reached (with `up`)
    StartupTimes m_startup_sent; ///< the phases the last heartbeat that carried some carried
    std::optional<std::uint64_t> m_progress_step; ///< the step last read in the progress file
};

} // namespace tfslurm
