// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `tfslurm run`: one launcher per Slurm task starts its trainer and reports to a coordinator
/// hosted by rank 0's launcher, which stops the parameter servers when the work is done and
/// aborts every rank on the first failure.
///
/// - Coordinator: the pure state machine (events in, messages out; no I/O, unit-testable).
/// - CoordinatorServer: the coordinator on a TCP port (Boost.Asio, single-threaded).
/// - run_launcher(): one task's launcher (spawn, signals, heartbeats, stop/abort).
/// - run_local(): `tfslurm run --local N`, the whole job on this machine.
///
/// The wire protocol is in protocol.hpp and docs/protocol.md.

#include <tfslurm/cluster.hpp>
#include <tfslurm/env.hpp>
#include <tfslurm/protocol.hpp>
#include <tfslurm/spawn.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace boost::asio {
class io_context;
} // namespace boost::asio

namespace tfslurm {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

/// When the work is done.
enum class Until {
    workers, ///< every worker and the chief (if any) exited 0: stop ps and evaluator
    chief    ///< the chief exited 0: stop workers, ps and evaluator (TF2 PSS)
};

[[nodiscard]] std::string_view to_string(Until until) noexcept;

/// Parse `workers` or `chief`. \throws Error (Errc::invalid_argument) naming `subject`.
[[nodiscard]] Until parse_until(std::string_view text, std::string_view subject);

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

struct CoordinatorSettings {
    std::vector<Member> ranks; ///< indexed by rank
    Until until = Until::workers;
    Millis heartbeat_timeout{10000}; ///< a launcher silent this long is lost
    Millis connect_timeout{60000};   ///< every rank must register within this (from start)
    /// After the verdict, how long to wait for launchers to report and leave before the
    /// coordinator is finished anyway (their grace period plus a margin).
    Millis linger{15000};
    /// An unauthenticated connection must complete its hello within this.
    Millis hello_timeout{10000};
};

/// Outcome of a step, as decided by the coordinator.
enum class Verdict {
    none,        ///< still running
    done,        ///< the work is finished: everyone was told to stop
    interrupted, ///< a launcher received SIGTERM/SIGINT: everyone was told to stop
    aborted      ///< a failure: everyone was told to abort
};

[[nodiscard]] std::string_view to_string(Verdict verdict) noexcept;

/// A message the coordinator wants sent to one rank.
struct Outgoing {
    std::uint32_t rank = 0;
    protocol::Message message;
};

/// The coordinator's state machine. Pure: the caller feeds events with the current time and
/// sends what take_outgoing() returns. Rules:
///
/// - Success: `Until::workers` when every worker and the chief (if any) exited 0 (with neither
///   in the plan: when every rank exited 0); `Until::chief` when the chief exited 0. Then every
///   connected launcher gets `stop (done)`. A ps or evaluator exiting 0 earlier is fine (it may
///   be done); so is a worker exiting 0 early under `Until::chief`.
/// - Failure (first one wins): a trainer exiting non-zero or killed by a signal, a trainer that
///   could not start, a launcher connection closed before it reported its exit, no heartbeat for
///   heartbeat_timeout, ranks unregistered at connect_timeout. Then every connected launcher
///   gets `abort` with the Failure. Exits after a verdict are never failures (those trainers
///   were stopped by us).
/// - Interrupt: a launcher received SIGTERM/SIGINT: every connected launcher gets
///   `stop (signal)`.
/// - A rank registering after the verdict gets the verdict at once. A second registration of a
///   rank, a rank out of range or a role that differs from the plan is rejected (admit()); a
///   second exit report is ignored (and logged).
/// - finished() once the verdict is reached, every rank registered (ranks still missing must
///   learn the verdict; not after a registration timeout) and no launcher is connected any more;
///   or `linger` after the verdict.
class Coordinator {
  public:
    /// \throws Error (Errc::invalid_argument) for an empty step or `Until::chief` without a
    ///         chief in the plan.
    Coordinator(CoordinatorSettings settings, Clock::time_point start);

    /// nullopt if `rank` may register with `role`, else why not (sent in the reject).
    [[nodiscard]] std::optional<std::string> admit(std::uint32_t rank, Role role) const;

    /// Events. `rank` must have been admitted and registered (except for registered()).
    void registered(std::uint32_t rank, Clock::time_point now);
    void heartbeat(std::uint32_t rank, Clock::time_point now);
    void exited(std::uint32_t rank, const protocol::Exit& exit, Clock::time_point now);
    void interrupted(std::uint32_t rank, int signo, Clock::time_point now);
    void connection_lost(std::uint32_t rank, Clock::time_point now);
    void tick(Clock::time_point now);

    /// Messages to send, in order; clears the queue.
    [[nodiscard]] std::vector<Outgoing> take_outgoing();

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

  private:
    struct RankState {
        bool registered = false;
        bool connected = false;
        bool reported = false; ///< its exit was reported
        ExitStatus status;
        Clock::time_point last_seen;
    };

    [[nodiscard]] bool is_training(Role role) const noexcept;
    void decide(Verdict verdict, Clock::time_point now);
    void fail(protocol::Failure failure, Clock::time_point now);
    [[nodiscard]] protocol::Failure failure_of(std::uint32_t rank) const;
    [[nodiscard]] std::optional<protocol::Message> verdict_message() const;
    void update_finished(Clock::time_point now);

    CoordinatorSettings m_settings;
    Clock::time_point m_start;
    std::vector<RankState> m_ranks;
    std::size_t m_registered = 0;
    std::size_t m_connected = 0;
    bool m_has_chief = false;
    std::size_t m_training_total = 0;
    std::size_t m_training_done = 0;
    std::size_t m_succeeded = 0; ///< ranks whose trainer exited 0
    Verdict m_verdict = Verdict::none;
    Clock::time_point m_verdict_time;
    std::optional<protocol::Failure> m_failure;
    std::optional<protocol::Stop> m_stop;
    int m_step_status = 0;
    bool m_finished = false;
    std::vector<Outgoing> m_outgoing;
};

/// The coordinator on a TCP port: accepts launchers, sends each a challenge, authenticates
/// and registers its hello, feeds the Coordinator and sends its messages. A connection that
/// sends garbage, an oversize frame, a bad proof or nothing at all (hello_timeout) is closed
/// and logged; it never affects the step. Single-threaded: runs on the caller's io_context.
class CoordinatorServer {
  public:
    /// Listen on `bind_address:port` (port 0 = any free port). Raises RLIMIT_NOFILE's soft
    /// limit to the hard limit when the step needs more descriptors.
    /// \throws Error (Errc::io) when the port cannot be bound (`coordinator: cannot listen on
    ///         <address>:<port> (<strerror>)`) or the descriptor limit is too low;
    ///         (Errc::invalid_argument) from Coordinator.
    CoordinatorServer(boost::asio::io_context& io,
                      CoordinatorSettings settings,
                      protocol::Authenticator auth,
                      std::uint64_t job,
                      const std::string& bind_address,
                      std::uint16_t port);
    ~CoordinatorServer();
    CoordinatorServer(const CoordinatorServer&) = delete;
    CoordinatorServer& operator=(const CoordinatorServer&) = delete;

    /// The bound port.
    [[nodiscard]] std::uint16_t port() const noexcept;
    [[nodiscard]] const Coordinator& state() const noexcept;
    /// Called once, when the coordinator is finished (all launchers gone after the verdict).
    void on_finished(std::function<void()> callback);
    /// Stop accepting and close every connection.
    void close();

  private:
    struct Impl;
    std::shared_ptr<Impl> m_impl;
};

/// Raise RLIMIT_NOFILE's soft limit to the hard limit if `needed` descriptors exceed it.
/// \throws Error (Errc::io) `RLIMIT_NOFILE: hard limit <n> is below the <needed> descriptors
///         needed ...` when the hard limit is too low.
void ensure_descriptor_limit(std::size_t needed, std::string_view what);

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

/// How a launcher ended.
enum class Outcome {
    done,             ///< stop (done): the work is finished
    interrupted,      ///< stop (signal): the step was cancelled by a SIGTERM/SIGINT
    aborted,          ///< abort: some rank failed
    coordinator_lost, ///< the coordinator vanished before a verdict
};

[[nodiscard]] std::string_view to_string(Outcome outcome) noexcept;

struct LaunchResult {
    /// The trainer's status (128 + signo if signalled); 0 for a trainer stopped because the work
    /// is done; exit_status(Errc::aborted) when the step aborted although this trainer
    /// succeeded; the Error's status when the trainer could not be started.
    int exit_status = 0;
    Outcome outcome = Outcome::done;
    /// One line for the user, without a `tfslurm: ` prefix: `aborting: rank 3 (worker:2) on n2
    /// exited with status 3` (aborted, coordinator_lost), `stopping: rank 1 (worker:0) on n1
    /// received signal 15 (Terminated)` (interrupted); empty when done.
    std::string message;
    /// The step's status as decided by the coordinator (the failing rank's status on abort).
    int step_status = 0;
};

/// Run the launcher of `plan.self_rank`: start the coordinator when it is rank 0, connect and
/// register (retrying until connect_timeout), check the trainer's port, spawn `argv` with
/// `trainer_env` in its own process group, heartbeat, report its exit, obey stop/abort
/// (SIGTERM to the trainer's group, SIGKILL after `grace`), forward SIGTERM, SIGINT, SIGUSR1,
/// SIGUSR2, SIGHUP and SIGQUIT to the group (SIGTERM/SIGINT also stop the step), and before
/// returning kill and reap every remaining descendant.
/// \throws Error for failures before the trainer could be supervised: no authentication
///         (Errc::auth), the control port in use or the coordinator unreachable (Errc::io), a
///         rejected registration (Errc::auth / Errc::protocol), a plan without self rank
///         (Errc::invalid_argument). Trainer failures are returned, not thrown.
[[nodiscard]] LaunchResult run_launcher(const Plan& plan,
                                        const std::vector<std::string>& argv,
                                        const Environment& trainer_env,
                                        const LauncherOptions& options);

/// The variables of task `rank` of a local job: `base` without any SLURM_* / SLURMD_* variable,
/// plus a Slurm-like single-node step on `localhost` (SLURM_STEP_NODELIST=localhost,
/// SLURM_STEP_TASKS_PER_NODE=N, SLURM_PROCID=rank, SLURM_GTIDS=0,...,N-1, SLURM_JOB_ID=job,
/// SLURM_STEP_ID=0, ...) and TFSLURM_ADDRESS=ip (so that every address is 127.0.0.1).
[[nodiscard]] Environment local_task_environment(const Environment& base,
                                                 std::uint32_t ntasks,
                                                 std::uint32_t rank,
                                                 std::uint64_t job_id);

struct LocalOptions {
    std::uint32_t ntasks = 1;
    std::uint64_t job_id = 0;
    /// The launcher command (`/proc/self/exe run [options] -- CMD ...`), run once per task.
    std::vector<std::string> launcher_argv;
    /// The parent's environment, the base of every task's.
    Environment env;
};

/// The launcher command line for `--local`: `argv` (the parent's own, as in /proc/self/cmdline)
/// with argv[0] replaced by `self_exe` and `--local N` / `--job-id ID` (or their `=` forms)
/// removed before the first `--`.
/// Input: {"tfslurm", "-v", "run", "--local", "4", "--ps=1", "--", "cmd", "--local", "2"}.
/// Output: {self_exe, "-v", "run", "--ps=1", "--", "cmd", "--local", "2"}.
[[nodiscard]] std::vector<std::string> local_launcher_argv(const std::vector<std::string>& argv,
                                                           const std::string& self_exe);

/// `tfslurm run --local N`: start N launchers with local_task_environment(), forward signals to
/// them, wait for all, kill any leftover descendant. Returns the step's status: on an abort the
/// failing rank's status (as reported by the launchers), otherwise the highest launcher exit
/// status (like srun). \throws Error (Errc::spawn_failed) when a launcher cannot be started.
[[nodiscard]] int run_local(const LocalOptions& options);

} // namespace tfslurm
