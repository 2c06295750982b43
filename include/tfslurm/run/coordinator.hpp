// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The coordinator of `tfslurm run`: a pure state machine (events and the time in, messages
/// out; no I/O) that decides when a step is done, interrupted or aborted.

#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/run/events.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

struct CoordinatorSettings {
    /// The run settings the coordinator reads: until, heartbeat_timeout (a launcher silent this
    /// long is lost), connect_timeout (every rank must register within this, from the start),
    /// restarts (which failed trainers are started again; default: none).
    RunSettings run;
    std::vector<Member> ranks; ///< indexed by rank
    /// TFSLURM_RUN_ID, for what watchers see (`tfslurm top`); the state machine ignores it.
    std::string run_id;
    /// The plan's trainer port of each rank (indexed by rank; may be empty): `cluster` lists only
    /// the bound ports that differ from these.
    std::vector<std::uint16_t> ports;
    /// After the verdict, how long to wait for launchers to report and leave before the
    /// coordinator is finished anyway (their grace period plus a margin).
    Millis linger{15000};
    /// An unauthenticated connection must complete its hello within this.
    Millis hello_timeout{10000};
    /// Launchers of a node share their leader's connection (the tree, docs/protocol.md): the
    /// server needs a descriptor per node, not per rank. The state machine ignores it.
    bool tree = false;
};

/// Outcome of a step, as decided by the coordinator.
enum class Verdict {
    none,        ///< still running
    done,        ///< the work is finished: everyone was told to stop
    interrupted, ///< a launcher received SIGTERM/SIGINT: everyone was told to stop
    aborted      ///< a failure: everyone was told to abort
};

[[nodiscard]] std::string_view to_string(Verdict verdict) noexcept;

/// A message the coordinator wants sent to some ranks: one (a latecomer's verdict, a restart)
/// or every connected one (a verdict, `cluster`). A broadcast is one Outgoing, made once:
/// at 10,000 ranks one copy of `cluster` per rank took 1.4 GiB.
/// Example: `{{0, 1, 2}, Stop{done}}`.
struct Outgoing {
    std::vector<std::uint32_t> ranks; ///< ascending, never empty
    protocol::Message message;
};

/// What a rank is doing, as the coordinator sees it (the metrics).
enum class RankActivity {
    waiting,    ///< not registered yet
    running,    ///< registered, its trainer not ended (or started again)
    straggling, ///< running, and warned of as a straggler since its last progress
    stuck,      ///< its launcher reported it stuck (no progress for the stall timeout)
    restarting, ///< its trainer failed and is being started again (the restart's back-off)
    exited,     ///< its trainer exited 0
    failed,     ///< its trainer failed (or could not start)
    lost        ///< its launcher was lost before it reported its trainer's end
};
inline constexpr std::size_t k_rank_activities = 8;

/// `waiting`, `running`, `straggling`, `stuck`, `restarting`, `exited`, `failed`, `lost`.
[[nodiscard]] std::string_view to_string(RankActivity activity) noexcept;

/// One rank, as a scrape shows it.
struct RankView {
    RankActivity activity = RankActivity::waiting;
    std::uint32_t restarts = 0;
    /// Since its last progress (with a stall timeout, from its launcher's reports, while it
    /// runs); nullopt otherwise.
    std::optional<Millis> progress_age;
    /// Its trainer's last usage its launcher reported (heartbeats); nullopt before any.
    std::optional<protocol::Usage> usage;
    /// Bytes per second its trainer wrote (stdout and stderr) between its last two usage
    /// reports; nullopt before two reports carried output counts.
    std::optional<std::uint64_t> output_rate;
    /// Its trainer's CPU use between its last two usage reports, in percent of one core (400:
    /// four cores busy); nullopt before two reports.
    std::optional<std::uint64_t> cpu_percent;
};

/// A rank's CPU use and output rate fall to 0 when its usage has not changed for this long
/// (launchers sample it every 5 s).
inline constexpr Millis k_usage_idle{12000};

/// The straggler window of a stall timeout: half of it. A judged rank straggles when it made
/// no progress for the window while most judged ranks did (Coordinator, Stragglers). Input:
/// 60 s. Output: 30 s.
[[nodiscard]] Millis straggler_window(Millis stall_timeout);

/// The coordinator's state machine. Pure: the caller feeds events with the current time and
/// sends what take_outgoing() returns. Rules:
///
/// Output: take_outgoing(); a message for several ranks (a verdict, `cluster`) is one Outgoing
/// listing them, never one copy per rank.
///
/// - Success: `Until::workers` when every worker and the chief (if any) exited 0 (with neither
///   in the plan: when every rank exited 0); `Until::chief` when the chief exited 0. Then every
///   connected launcher gets `stop (done)`. A ps or evaluator exiting 0 earlier is fine (it may
///   be done); so is a worker exiting 0 early under `Until::chief`.
/// - Failure (first one wins): a trainer exiting non-zero or killed by a signal, a trainer that
///   could not start, a launcher connection closed before it reported its exit, no heartbeat for
///   heartbeat_timeout, ranks unregistered at connect_timeout (the failure names every missing
///   rank, as ranges, and their hosts, as a hostlist), a launcher reporting its trainer stuck
///   (stalled(): no progress for the stall timeout). Then every connected launcher
///   gets `abort` with the Failure. Exits after a verdict are never failures (those trainers
///   were stopped by us).
/// - Restart: a trainer of a restartable role (RestartPolicy::roles) that exited non-zero or was
///   killed by a signal before the verdict, while its rank has restarts left (per_rank) and the
///   step too (total), is not a failure: its rank gets `restart` (count n of per_rank), the
///   exit is not counted (the rank is training again) and a warning line names it. Past either
///   budget the failure's detail says which budget is spent. Never restarted: a trainer that
///   could not start, a stuck one, a lost launcher, anything after the verdict.
/// - Interrupt: a launcher received SIGTERM/SIGINT: every connected launcher gets
///   `stop (signal)`.
/// - The address exchange: when hellos carry addresses (`iface`/`network`), every connected
///   launcher gets `cluster` (each node's address, by node name, and the ports the launchers
///   bound where they differ from settings.ports, by rank) once every rank registered and no
///   verdict was reached; launchers start their trainers only after it.
/// - The reachability probe (`probe`): launchers report `probed` once they tried their peers;
///   when every rank reported (and no verdict was reached), every connected launcher gets `go`
///   if nobody failed, else the step aborts (FailureCause::unreachable, k_status_unreachable)
///   naming one pair: the peer that the most ranks could not reach (the lowest rank on a tie),
///   as seen by the lowest rank that failed to reach it. Waiting for every report makes the
///   line the same whichever report comes first, and names the likely culprit (a node cut off
///   fails everyone's probes towards it) rather than whoever timed out first.
/// - Stragglers (with a stall timeout): launchers of judged ranks report how long ago their
///   trainer last made progress (progressed(), every straggler_report_interval()); a rank's last
///   progress is then the report's time minus that age. At each tick before the verdict, among
///   the judged ranks whose trainer runs and reported (its exit ends its reports; a restart
///   starts them again), those whose last progress is within straggler_window() progressed;
///   a rank that did not straggles when the ranks that progressed are more than half of them
///   (the straggler counted: 2 of 3, 3 of 5; never with 2 ranks). One warning per episode,
///   naming the rank, its host and how long it made no progress, plus a `straggling` event; the
///   episode ends when a report shows progress within the window again (a later straggle warns
///   again). A warning only: the stall timeout still decides the abort, later (the window is
///   half of it).
/// - The health checks (`preflight`) share that barrier: each `probed` may carry its node's
///   failed check. Once every rank reported, a failed check aborts the step
///   (FailureCause::preflight, k_status_preflight) naming the lowest rank that reported one,
///   its node and the check, before any unreachable pair (a sick node explains its peers'
///   failed probes); no trainer has started. With `preflight` and without `probe`, `probed`
///   carries no probe failures and `go` follows the same rule.
/// - The failed rank's node check (`on_failure_check`, failure_checked() of the abort's
///   cause): the abort goes out at once; that rank's launcher then checks its node and sends
///   `checked` before it leaves, and the coordinator waits for it as for any connected launcher
///   (its linger time covers the check's timeout). Only the first `checked` of the failed rank
///   counts (node_check(), a `checked` event); any other is ignored and logged.
/// - A rank registering after the verdict gets the verdict at once. A second registration of a
///   rank, a rank out of range or a role that differs from the plan is rejected (admit()); a
///   second exit report is ignored (and logged).
/// - finished() once the verdict is reached, every rank registered (ranks still missing must
///   learn the verdict; not after a registration timeout) and no launcher is connected any more
///   (a launcher silent for heartbeat_timeout after the verdict, such as the lost one, counts as
///   gone: its connection may stay open forever); or `linger` after the verdict.
class Coordinator {
  public:
    /// \throws Error (Errc::invalid_argument) for an empty step or `Until::chief` without a
    ///         chief in the plan.
    Coordinator(CoordinatorSettings settings, Clock::time_point start);

    /// nullopt if `rank` may register with `role`, else why not (sent in the reject).
    [[nodiscard]] std::optional<std::string> admit(std::uint32_t rank, Role role) const;

    /// Events. `rank` must have been admitted and registered (except for registered()).
    /// `address`: the one the launcher's node chose (Hello::address), empty when none; `port`:
    /// the trainer port its launcher bound (Hello::port), 0 when none.
    void registered(std::uint32_t rank,
                    Clock::time_point now,
                    const std::string& address = {},
                    std::uint16_t port = 0);
    void heartbeat(std::uint32_t rank, Clock::time_point now);
    /// `rank`'s trainer's usage, from its heartbeat or its node leader's (the metrics, `tfslurm
    /// top`); with output counts in two reports, its output rate between them.
    void usage_reported(std::uint32_t rank, const protocol::Usage& usage, Clock::time_point now);
    /// `rank`'s start-up phases, from its heartbeat or its node leader's: the ones it reached
    /// are kept (startup(), startup_summary()); nothing else changes.
    void startup_reported(std::uint32_t rank, const StartupTimes& startup);
    void exited(std::uint32_t rank, const protocol::Exit& exit, Clock::time_point now);
    /// `whole_step`: slurmstepd sent the signal to every process of the step (carried by the
    /// `stop`, so that no launcher signals its trainer again).
    void interrupted(std::uint32_t rank, int signo, Clock::time_point now, bool whole_step = false);
    /// `why`: the failure's detail if it is one (a node relay says why a local launcher's
    /// connection ended, such as `no heartbeat for 10 s`).
    void connection_lost(std::uint32_t rank,
                         Clock::time_point now,
                         std::string_view why = "connection closed");
    /// `rank`'s trainer made no progress for `silent` (protocol::Stall).
    void stalled(std::uint32_t rank, Millis silent, Clock::time_point now);
    /// `rank`'s trainer last made progress `idle` ago (protocol::Progress), for the straggler
    /// rule (tick() applies it).
    void progressed(std::uint32_t rank, Millis idle, Clock::time_point now);
    /// `rank` is ready to start (protocol::Probed): its reachability probe is over (failures
    /// empty: it reached all) and its node's checks are done (preflight set: one failed).
    void probed(std::uint32_t rank, const protocol::Probed& probed, Clock::time_point now);
    /// `rank`'s node checks after the abort named it (protocol::Checked, `on_failure_check`).
    void node_checked(std::uint32_t rank, const protocol::Checked& checked, Clock::time_point now);
    void tick(Clock::time_point now);

    /// Messages to send, in order, each once with its recipients (a broadcast is one Outgoing
    /// listing every connected rank); clears the queue.
    [[nodiscard]] std::vector<Outgoing> take_outgoing();

    /// The step's events since the last call, in order (only when `run.events` names a
    /// record; empty otherwise): registered, started (when its trainer was released: at its
    /// registration, or at `cluster` or `go` when the step waits for them), exited, restarted,
    /// lost, stalled, the verdict, and each rank's `startup` (its launcher's phases, with its
    /// first exit report). Their `time` is left for the caller to stamp (this
    /// machine knows only the steady clock); clears the queue.
    [[nodiscard]] std::vector<StepEvent> take_events();

    [[nodiscard]] Verdict verdict() const noexcept { return m_verdict; }
    [[nodiscard]] const std::optional<protocol::Failure>& failure() const noexcept {
        return m_failure;
    }
    /// 0 when done; the failing rank's status when aborted; 128 + signo when interrupted.
    [[nodiscard]] int step_status() const noexcept { return m_step_status; }
    [[nodiscard]] bool finished() const noexcept { return m_finished; }
    [[nodiscard]] std::size_t size() const noexcept { return m_ranks.size(); }
    [[nodiscard]] std::size_t registered_count() const noexcept { return m_registered; }
    [[nodiscard]] const CoordinatorSettings& settings() const noexcept { return m_settings; }
    /// Restarts granted so far, in the whole step.
    [[nodiscard]] std::uint32_t restarts() const noexcept { return m_restarts; }
    /// When the coordinator started (its constructor's `start`).
    [[nodiscard]] Clock::time_point started() const noexcept { return m_start; }

    /// How far the trainers got so far, from their `exit`s: whether any started, whether any
    /// touched its progress file, and the highest step any wrote (the requeue storm rule).
    [[nodiscard]] const RunProgress& run_progress() const noexcept { return m_progress; }
    /// `rank` at `now` (the metrics). \throws std::out_of_range for a rank out of range.
    [[nodiscard]] RankView rank_view(std::uint32_t rank, Clock::time_point now) const;
    /// `rank`'s start-up phases so far, from its heartbeats and its exit reports.
    [[nodiscard]] const StartupTimes& startup(std::uint32_t rank) const {
        return m_ranks.at(rank).startup;
    }
    /// Where the step's start-up time went so far (summarize_startup() of every rank's phases;
    /// worked out again only after a phase came).
    [[nodiscard]] const StartupSummary& startup_summary() const;
    /// The failed rank's node check (`on_failure_check`), once it came; nullopt before, and
    /// when none is due.
    [[nodiscard]] const std::optional<protocol::Checked>& node_check() const noexcept {
        return m_node_check;
    }

  private:
    struct RankState {
        bool registered = false;
        bool connected = false;
        bool reported = false;  ///< its exit was reported
        std::string address;    ///< Hello::address
        std::uint16_t port = 0; ///< Hello::port
        ExitStatus status;
        Clock::time_point last_seen;
        std::uint32_t restarts = 0;                          ///< restarts granted to this rank
        bool probed = false;                                 ///< its `probed` came
        std::vector<protocol::ProbeFailure> unreached;       ///< what its probe could not reach
        std::optional<protocol::PreflightFailure> preflight; ///< its node's failed check
        /// Its trainer's last progress, from its last `progress`; nullopt: no report since
        /// its start (or it exited).
        std::optional<Clock::time_point> progress_at;
        bool straggling = false;              ///< warned of, and no progress since
        bool startup_recorded = false;        ///< its `startup` event was recorded (its first exit)
        bool lost = false;                    ///< its launcher was lost before its exit report
        std::optional<protocol::Usage> usage; ///< its trainer's last reported usage
        Clock::time_point usage_at;           ///< when `usage` last changed
        std::optional<std::uint64_t> output_rate;      ///< RankView::output_rate
        std::optional<std::uint64_t> cpu_percent;      ///< RankView::cpu_percent
        bool stuck = false;                            ///< its launcher sent `stall`
        std::optional<Clock::time_point> restarted_at; ///< its last restart, granted then
        StartupTimes startup;                          ///< its phases so far
    };

    [[nodiscard]] bool is_training(Role role) const noexcept;
    void decide(Verdict verdict, Clock::time_point now);
    void fail(protocol::Failure failure, Clock::time_point now);
    [[nodiscard]] protocol::Failure failure_of(std::uint32_t rank) const;
    [[nodiscard]] std::optional<protocol::Message> verdict_message() const;
    void forget_silent(Clock::time_point now);
    /// How many of the step's nodes it still hears from (protocol::Failure::answering): rank
    /// 0's own, and each node with a connected rank heard from within half the heartbeat
    /// timeout (a node cut off with the lost rank was silent about as long as it).
    [[nodiscard]] std::uint32_t answering_nodes(Clock::time_point now) const;
    /// The straggler rule, at a tick.
    void find_stragglers(Clock::time_point now);
    void update_finished(Clock::time_point now);
    void send_cluster();
    void end_probe(Clock::time_point now);
    /// Queue `message` once for every connected rank (nothing when none is).
    void broadcast(protocol::Message message);
    /// Record an event about `rank` (a no-op without a record); returns it to add fields.
    StepEvent* record(EventKind kind, std::uint32_t rank);
    /// Record `started` for every rank whose trainer is released now.
    void record_started();
    /// An exit's start-up phases (recorded once per rank) and reported progress.
    void note_startup(std::uint32_t rank, const protocol::Exit& exit);
    /// Restart `rank`'s failed trainer if the policy allows it (true), else say in `detail`
    /// why not when a budget is spent.
    [[nodiscard]] bool try_restart(std::uint32_t rank,
                                   const protocol::Exit& exit,
                                   std::string& detail,
                                   Clock::time_point now);

    CoordinatorSettings m_settings;
    Clock::time_point m_start;
    Millis m_connect_timeout{}; ///< connect_timeout_for() this step's nodes
    std::vector<RankState> m_ranks;
    std::size_t m_registered = 0;
    std::size_t m_connected = 0;
    bool m_has_chief = false;
    bool m_exchange = false; ///< some hello carried an address: `cluster` is due
    std::size_t m_training_total = 0;
    std::size_t m_training_done = 0;
    std::size_t m_succeeded = 0;        ///< ranks whose trainer exited 0
    std::uint32_t m_restarts = 0;       ///< restarts granted in the step
    std::uint32_t m_restart_budget = 0; ///< RestartPolicy::total, resolved
    std::size_t m_probed = 0;           ///< ranks whose `probed` came
    Verdict m_verdict = Verdict::none;
    Clock::time_point m_verdict_time;
    std::optional<protocol::Failure> m_failure;
    std::optional<protocol::Stop> m_stop;
    int m_step_status = 0;
    bool m_finished = false;
    std::vector<Outgoing> m_outgoing;
    std::vector<StepEvent> m_events; ///< take_events()
    bool m_recording = false;        ///< run.events names a record
    RunProgress m_progress;          ///< run_progress()
    /// startup_summary(), worked out on demand; nullopt once a phase came since.
    mutable std::optional<StartupSummary> m_startup_summary;
    std::optional<protocol::Checked> m_node_check; ///< node_check()
};

} // namespace tfslurm
