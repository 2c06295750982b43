// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The launcher's Asio shell around LauncherMachine (see launcher.hpp), shared by its two
/// files: launcher_shell.cpp (the run, the trainer, the machine's actions) and
/// launcher_link.cpp (the link to the coordinator: connecting through the candidate control
/// ports, the challenge and registration, framed reads and writes).

#include "detail/signal_reader.hpp"

#include <tfslurm/auth.hpp>
#include <tfslurm/coordinator_server.hpp>
#include <tfslurm/error.hpp>
#include <tfslurm/launcher.hpp>
#include <tfslurm/plan.hpp>
#include <tfslurm/protocol.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <fmt/format.h>

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::detail {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

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
          m_signals(m_io, step_reaches_trainer), m_socket(m_io), m_retry_timer(m_io),
          m_deadline_timer(m_io), m_challenge_timer(m_io), m_timers{asio::steady_timer(m_io),
                                                                    asio::steady_timer(m_io),
                                                                    asio::steady_timer(m_io),
                                                                    asio::steady_timer(m_io),
                                                                    asio::steady_timer(m_io),
                                                                    asio::steady_timer(m_io)} {}
    LauncherShell(const LauncherShell&) = delete;
    LauncherShell& operator=(const LauncherShell&) = delete;
    LauncherShell(LauncherShell&&) = delete;
    LauncherShell& operator=(LauncherShell&&) = delete;
    ~LauncherShell() {
        if (!m_progress_file.empty()) {
            ::unlink(m_progress_file.c_str());
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
    /// The candidate control endpoint being tried (after `welcome`: the coordinator's).
    [[nodiscard]] std::string control() const {
        return fmt::format("{}:{}", m_plan.control_address, m_candidates.at(m_candidate));
    }
    asio::steady_timer& timer(LauncherTimer which) {
        return m_timers.at(static_cast<std::size_t>(which));
    }

    void start_coordinator(std::uint64_t job);
    void fatal(Error error);
    void wait_signal();
    void reap();
    void connect();
    void retry_connect(const std::string& why);
    void next_candidate(const std::string& why);
    void close_attempt();
    void read();
    void on_read(const error_code& ec, std::size_t n);
    void handshake(const protocol::Message& message);
    void perform();
    void perform(const LauncherAction& action);
    void arm(LauncherTimer which, Clock::time_point at);
    void start_trainer();
    void prepare_stall_watch();
    void send(const protocol::Message& message);
    void write();
    void close_socket(asio::socket_base::shutdown_type how);
    void finish();

    const Plan& m_plan;
    std::uint32_t m_rank;
    const RankPlan& m_self;
    const std::vector<std::string>& m_argv;
    std::vector<std::string> m_env;
    const LauncherOptions& m_options;
    std::optional<protocol::Authenticator> m_auth;
    std::string m_nonce; ///< this connection's challenge to the coordinator (hex)
    LauncherMachine m_machine;
    /// Where the coordinator may listen (control_port_candidates()), tried in order; rank 0
    /// knows where its own coordinator listens: that port only.
    std::vector<std::uint16_t> m_candidates;
    std::size_t m_candidate = 0;

    asio::io_context m_io;
    detail::SignalReader m_signals;
    std::unique_ptr<CoordinatorServer> m_server;
    Tcp::socket m_socket;
    asio::steady_timer m_retry_timer;
    asio::steady_timer m_deadline_timer;
    asio::steady_timer m_challenge_timer;
    std::array<asio::steady_timer, 6> m_timers; ///< indexed by LauncherTimer
    std::string m_progress_file;                ///< TFSLURM_PROGRESS_FILE, with a stall timeout
    HeldPort m_trainer_port; ///< exact mode: the trainer's port, held until it starts
    Clock::time_point m_connect_deadline;
    Millis m_backoff{20};
    std::string m_last_connect_error = "no attempt";
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    /// Frames to write; `second`: a machine Send, acknowledged with written().
    std::deque<std::pair<std::string, bool>> m_queue;
    bool m_writing = false;

    /// The connection as the shell sees it; after `welcome` (session) the machine decides.
    enum class Link { connecting, handshake, session, closed };
    Link m_link = Link::connecting;

    pid_t m_pid = 0;
    std::optional<Error> m_fatal; ///< thrown after run(): nothing was supervised yet
};

} // namespace tfslurm::detail
