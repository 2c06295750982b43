// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The launcher's Asio shell around LauncherMachine (see launcher.hpp): launcher_shell.cpp runs
/// the task (the coordinator on rank 0, signals, the machine's actions, the node leader's relay)
/// and launcher_trainer.cpp starts and watches the trainer; the link to the coordinator is a
/// LauncherLink (launcher_link.hpp) of its own.

#include "os/detail/signal_reader.hpp"
#include "os/preflight/node_check.hpp"
#include "shell/detail/labeled_stream.hpp"
#include "shell/detail/node_relay.hpp"
#include "shell/detail/reachability_probe.hpp"
#include "shell/launcher/launcher_link.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/events_file.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/connector.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/shell/coordinator_server.hpp>
#include <tfslurm/shell/held_port.hpp>
#include <tfslurm/shell/launcher_shell.hpp>
#include <tfslurm/shell/metrics_server.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::detail {

namespace asio = boost::asio;
using boost::system::error_code;

/// How long a launcher on its way out waits for the rest of its trainer's labelled output
/// (`label`): every writer is dead by then, so the pipe's end comes at once.
inline constexpr Millis k_label_drain{1000};

/// The machine's settings for this task of `plan`.
[[nodiscard]] LauncherSettings machine_settings(const Plan& plan, const LauncherOptions& options);

class LauncherShell {
  public:
    LauncherShell(const Plan& plan,
                  const std::vector<std::string>& argv,
                  const Environment& trainer_env,
                  const LauncherOptions& options,
                  bool step_reaches_trainer)
        : m_plan(plan), m_rank(plan.self_rank.value_or(0)), m_self(plan.ranks.at(m_rank)),
          m_argv(argv), m_env(trainer_env.to_strings()), m_options(options),
          m_machine(machine_settings(plan, options)), m_candidates(control_port_candidates(plan)),
          m_signals(m_io, step_reaches_trainer),
          m_timers(make_timers(m_io, std::make_index_sequence<k_launcher_timer_count>{})) {}
    LauncherShell(const LauncherShell&) = delete;
    LauncherShell& operator=(const LauncherShell&) = delete;
    LauncherShell(LauncherShell&&) = delete;
    LauncherShell& operator=(LauncherShell&&) = delete;
    ~LauncherShell() {
        if (!m_progress_file.empty()) {
            ::unlink(m_progress_file.c_str());
        }
        for (const int fd : {m_output_fd, m_error_fd}) {
            if (fd >= 0) {
                ::close(fd);
            }
        }
    }

    LaunchResult run();

  private:
    [[nodiscard]] std::string label() const {
        return fmt::format("rank {} ({}:{})", m_rank, to_string(m_self.role), m_self.index);
    }
    /// This launcher's step, as its hello and both proofs name it.
    [[nodiscard]] protocol::StepId step_id() const {
        return {m_plan.job_id.value_or(0), m_plan.step_id.value_or(0)};
    }
    /// Whether this launcher leads a node of several ranks (and relays for them).
    [[nodiscard]] bool leads_node() const noexcept { return !m_place.followers.empty(); }
    /// Its place in the tree (node_place()), and where a follower connects.
    void plan_tree();
    /// Plan the tree and start the link at `now` (the connect timeout's start).
    void start_connecting(Clock::time_point now);
    /// The link's events: the session opened, a message, the session lost, a frame written.
    void on_opened(const std::string& control);
    void on_message(const protocol::Message& message);
    void on_lost(const std::string& reason, CoordinatorLoss loss);
    /// A leader, as it starts: its relay bound, listening and serving (m_listening_relay), its
    /// followers' handshakes running while it registers and their hellos held, or why not
    /// (m_relay_error, said once it registered, as before).
    void listen_relay();
    /// A leader, once registered: its relay's held hellos go upstream and it carries its node
    /// (m_relay), or the step fails with the reason listen_relay() kept.
    void start_relay();
    /// Whether `action` must wait until the relay has no local launcher left.
    [[nodiscard]] bool defer(const LauncherAction& action);
    asio::steady_timer& timer(LauncherTimer which) {
        return m_timers.at(static_cast<std::size_t>(which));
    }

    void start_coordinator(std::uint64_t job);
    void fatal(Error error);
    void wait_signal();
    void reap();
    void perform();
    void perform(const LauncherAction& action);
    void arm(LauncherTimer which, Clock::time_point at);
    void start_trainer(std::uint32_t restart);
    /// spawn_process(), with `label` or the output counted as progress (counts_output(), not on
    /// a terminal): through pipes read by m_stdout and m_stderr.
    pid_t spawn_trainer(SpawnRequest& request);
    void start_probe(const std::vector<ProbeTarget>& targets);
    /// CheckNode: this node's checks, in a child process (NodeCheck).
    void check_node(launcher_action::NodeCheckTime when);
    /// What the checks look at on this node (preflight.hpp).
    [[nodiscard]] PreflightSettings preflight_settings(launcher_action::NodeCheckTime when) const;
    /// The trainer's progress file (TFSLURM_PROGRESS_FILE, made once, untouched), and with a
    /// stall timeout PYTHONFAULTHANDLER=1.
    void prepare_progress_watch();
    /// Set `name=value` in the trainer's environment, replacing an earlier value.
    void set_trainer_variable(std::string_view name, const std::string& value);
    /// `own`: sent by the shell itself (a relay envelope, the node's heartbeat), not the machine.
    void send(const protocol::Message& message, bool own = false);
    /// HalfClose (`both` false) or Disconnect: the link, and the timers that watch it.
    void close_link(bool both);
    void finish();
    /// The machine's heartbeat (with its start-up phases when some were reached since the last
    /// one) with the trainer's usage (its process tree from /proc, read at most every
    /// k_usage_interval: a walk of /proc per heartbeat per rank would cost a node of 8 ranks 8
    /// walks a second) and, on a node leader, its followers' last usages and their new start-up
    /// phases (the relay's).
    [[nodiscard]] protocol::Heartbeat heartbeat_with_usage(protocol::Heartbeat beat);
    /// Rank 0 with `metrics`: serve the coordinator's snapshot (a warning when it cannot).
    void start_metrics(const MetricsEndpoint& endpoint);

    const Plan& m_plan;
    std::uint32_t m_rank;
    const RankPlan& m_self;
    const std::vector<std::string>& m_argv;
    std::vector<std::string> m_env;
    const LauncherOptions& m_options;
    std::optional<protocol::Authenticator> m_auth;
    LauncherMachine m_machine;
    /// Where the coordinator may listen (control_port_candidates()), tried in order; rank 0
    /// knows where its own coordinator listens: that port only.
    std::vector<std::uint16_t> m_candidates;

    asio::io_context m_io;
    /// The link to the coordinator (made in run(), once the held port and the candidates are
    /// known). After m_io: its socket and timers are Asio objects of m_io's services, which
    /// must outlive them (members are destroyed in the reverse order).
    std::optional<LauncherLink> m_link;
    detail::SignalReader m_signals;
    /// Rank 0 with `events`: the step's record (before m_server, which writes to it).
    std::unique_ptr<EventWriter> m_events;
    std::unique_ptr<CoordinatorServer> m_server;
    std::unique_ptr<MetricsServer> m_metrics; ///< rank 0 with `metrics`
    /// Rank 0 under Slurm: the file that tells `tfslurm top` where the coordinator listens,
    /// removed when the coordinator finishes or the launcher ends.
    struct PublishedEndpoint {
        std::string path;
        PublishedEndpoint() = default;
        PublishedEndpoint(const PublishedEndpoint&) = delete;
        PublishedEndpoint& operator=(const PublishedEndpoint&) = delete;
        ~PublishedEndpoint() { withdraw(); }
        void withdraw() noexcept;
    } m_published;
    /// Publish the coordinator's endpoint (watch_endpoint.hpp); a failure is said at debug level.
    void publish_endpoint();
    std::optional<protocol::Usage> m_usage; ///< the trainer's, last read (heartbeat_with_usage())
    std::optional<Clock::time_point> m_usage_at; ///< when it was read
    /// The tree: this node's leader and the ranks a leader relays for, the relay socket a
    /// follower connects to (empty: the coordinator's control port), a leader's relay.
    NodePlace m_place;
    std::string m_relay_path;
    std::unique_ptr<NodeRelay> m_relay;
    std::unique_ptr<NodeRelay> m_listening_relay; ///< listen_relay()'s, until start_relay()
    std::optional<Error> m_relay_error;           ///< why listen_relay() could not listen
    std::vector<LauncherAction> m_deferred; ///< closing actions waiting for the relay (hold())
    std::array<asio::steady_timer, k_launcher_timer_count> m_timers; ///< indexed by LauncherTimer
    std::string m_progress_file;                                     ///< TFSLURM_PROGRESS_FILE
    HeldPort m_trainer_port;         ///< exact mode: the trainer's port, held until it starts
    ReachabilityProbe m_probe{m_io}; ///< `probe`: its listener and attempts
    NodeCheck m_node_check{m_io};    ///< `preflight`: the node's checks
    Clock::time_point m_connect_deadline;

    pid_t m_pid = 0;
    /// `label`: the trainer's stdout and stderr, labelled with the rank (made at its first start).
    std::unique_ptr<LabeledStream> m_stdout;
    std::unique_ptr<LabeledStream> m_stderr;
    /// `output`/`error`: the trainer's files, opened at its first start and kept for its
    /// restarts (which append); the same descriptor for both without `error`.
    int m_output_fd = -1;
    int m_error_fd = -1;
    /// Open the `output`/`error` files once; their descriptors, or -1 (inherited).
    /// \throws Error (Errc::io) naming the setting and the file.
    void open_output_files();
    std::optional<Error> m_fatal; ///< thrown after run(): nothing was supervised yet
};

} // namespace tfslurm::detail
