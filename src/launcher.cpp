// SPDX-License-Identifier: MIT
// One task's launcher: everything that waits does so on one single-threaded io_context:
// sockets, timers and signals (SIGCHLD included) are Asio handlers, and handlers never throw
// (fatal errors are recorded and re-thrown once io_context::run() has returned).
#include "detail/fd.hpp"

#include <tfslurm/coordinator_server.hpp>
#include <tfslurm/error.hpp>
#include <tfslurm/exit_status.hpp>
#include <tfslurm/launcher.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/protocol.hpp>
#include <tfslurm/spawn.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <deque>
#include <memory>
#include <utility>

namespace tfslurm {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

bool port_is_free(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return true; // cannot tell; the trainer will report it
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    const bool free =
        ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 ||
        errno != EADDRINUSE;
    ::close(fd);
    return free;
}

// --- Launcher ------------------------------------------------------------------------------------

namespace {

class Launcher {
  public:
    Launcher(const Plan& plan,
             const std::vector<std::string>& argv,
             const Environment& trainer_env,
             const LauncherOptions& options)
        : m_plan(plan), m_rank(plan.self_rank.value_or(0)), m_self(plan.ranks.at(m_rank)),
          m_argv(argv), m_env(trainer_env.to_strings()), m_options(options), m_signals(m_io),
          m_socket(m_io), m_retry_timer(m_io), m_deadline_timer(m_io), m_heartbeat_timer(m_io),
          m_watch_timer(m_io), m_grace_timer(m_io), m_close_timer(m_io) {
        for (const int signo : k_handled_signals) {
            m_signals.add(signo);
        }
    }

    LaunchResult run();

  private:
    [[nodiscard]] std::string label() const {
        return fmt::format("rank {} ({}:{})", m_rank, to_string(m_self.role), m_self.index);
    }
    [[nodiscard]] std::string control() const {
        return fmt::format("{}:{}", m_plan.control_address, m_plan.control_port);
    }

    void fatal(Error error);
    void wait_signal();
    void on_signal(int signo);
    void reap();
    void connect();
    void retry_connect(const std::string& why);
    void read();
    void on_read(const error_code& ec, std::size_t n);
    void handle(const protocol::Message& message);
    void on_registered();
    void start_trainer();
    void report_exit(const protocol::Exit& exit);
    void send(const protocol::Message& message);
    void write();
    void heartbeat();
    void watch();
    void on_verdict(protocol::Message verdict);
    void coordinator_lost(const std::string& reason);
    void stop_trainer(int signo);
    [[nodiscard]] bool trainer_running() const noexcept { return m_pid > 0 && !m_status; }
    [[nodiscard]] bool done_verdict() const noexcept {
        const auto* stop = m_verdict ? std::get_if<protocol::Stop>(&*m_verdict) : nullptr;
        return stop != nullptr && stop->reason == protocol::StopReason::done;
    }
    void maybe_finish();
    void disconnect();
    [[nodiscard]] LaunchResult result() const;

    const Plan& m_plan;
    std::uint32_t m_rank;
    const RankPlan& m_self;
    const std::vector<std::string>& m_argv;
    std::vector<std::string> m_env;
    const LauncherOptions& m_options;
    std::optional<protocol::Authenticator> m_auth;

    asio::io_context m_io;
    asio::signal_set m_signals;
    std::unique_ptr<CoordinatorServer> m_server;
    bool m_server_finished = false;
    Tcp::socket m_socket;
    asio::steady_timer m_retry_timer;
    asio::steady_timer m_deadline_timer;
    asio::steady_timer m_heartbeat_timer;
    asio::steady_timer m_watch_timer;
    asio::steady_timer m_grace_timer;
    asio::steady_timer m_close_timer;
    Clock::time_point m_connect_deadline;
    Millis m_backoff{20};
    std::string m_last_connect_error = "no attempt";
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    std::deque<std::string> m_queue;
    bool m_writing = false;

    enum class Phase { connecting, handshake, registered, closing, closed };
    Phase m_phase = Phase::connecting;
    Clock::time_point m_last_heard;

    pid_t m_pid = 0;
    std::optional<ExitStatus> m_status; ///< the trainer's (or a synthetic) status
    std::optional<Error> m_fatal;       ///< thrown after run(): nothing was supervised yet
    std::optional<protocol::Message> m_verdict;
    std::optional<std::string> m_lost; ///< the coordinator vanished before a verdict
    int m_interrupt = 0;               ///< first SIGTERM/SIGINT received
    bool m_stopped_by_us = false;      ///< we sent SIGTERM/SIGKILL to the trainer
    bool m_killed = false;             ///< the grace period ran out
    bool m_finished = false;
    bool m_abandoned = false;     ///< interrupted before registration: nothing was started
    bool m_never_started = false; ///< the verdict came before the trainer was started
};

void Launcher::fatal(Error error) {
    if (!m_fatal) {
        m_fatal = std::move(error);
    }
    m_io.stop();
}

LaunchResult Launcher::run() {
    const std::uint64_t job = m_plan.job_id.value_or(0);
    m_auth = protocol::Authenticator::create(m_options.auth);
    logger().debug("{}: authentication: {}", label(), protocol::to_string(m_auth->method()));
    if (m_rank == 0) {
        CoordinatorSettings settings;
        settings.ranks = members_of(m_plan);
        settings.until = m_options.until;
        settings.heartbeat_timeout = m_options.heartbeat_timeout;
        settings.connect_timeout = m_options.connect_timeout;
        settings.linger = m_options.grace + m_options.heartbeat_timeout + Millis{2000};
        settings.hello_timeout = std::min(m_options.connect_timeout, Millis{10000});
        m_server = std::make_unique<CoordinatorServer>(m_io,
                                                       std::move(settings),
                                                       *m_auth,
                                                       job,
                                                       bind_address_for(m_plan.control_address),
                                                       m_plan.control_port);
        m_server->on_finished([this] {
            m_server_finished = true;
            maybe_finish();
        });
    }
    wait_signal();
    m_connect_deadline = Clock::now() + m_options.connect_timeout;
    m_deadline_timer.expires_at(m_connect_deadline);
    m_deadline_timer.async_wait([this](const error_code& ec) {
        if (!ec && (m_phase == Phase::connecting || m_phase == Phase::handshake)) {
            fatal(errors::make(Errc::io,
                               "coordinator",
                               fmt::format("cannot register with {} within {}: {}",
                                           control(),
                                           format_seconds(m_options.connect_timeout),
                                           m_last_connect_error),
                               "is rank 0's launcher running? all tasks must run 'tfslurm run' "
                               "with the same plan options"));
        }
    });
    connect();
    // Handlers do not throw; should one ever do (bad_alloc), the trainer must still not outlive
    // us: clean up first, then report.
    std::optional<std::string> internal_error;
    try {
        m_io.run();
    } catch (const std::exception& e) {
        internal_error = e.what();
    }

    // Whatever happened, nothing we started survives us.
    if (trainer_running()) {
        signal_group(m_pid, SIGKILL);
    }
    const std::size_t killed = kill_all_children();
    if (killed > 0) {
        logger().debug("{}: killed {} leftover processes", label(), killed);
    }
    if (internal_error) {
        throw errors::make(
            Errc::io, "launcher", fmt::format("internal error: {}", *internal_error));
    }
    if (m_fatal && !m_status) {
        throw Error(*m_fatal);
    }
    LaunchResult outcome = result();
    if (m_options.status_fd >= 0) {
        detail::write_all(
            m_options.status_fd,
            fmt::format("{} {} {}\n", m_rank, to_string(outcome.outcome), outcome.step_status));
    }
    return outcome;
}

void Launcher::wait_signal() {
    m_signals.async_wait([this](const error_code& ec, int signo) {
        if (ec) {
            return;
        }
        on_signal(signo);
        wait_signal();
    });
}

void Launcher::on_signal(int signo) {
    if (signo == SIGCHLD) {
        reap();
        return;
    }
    if (trainer_running()) {
        logger().debug("{}: forwarding signal {} to the trainer", label(), signo);
        signal_group(m_pid, signo);
    }
    if (signo != SIGTERM && signo != SIGINT) {
        return;
    }
    if (m_interrupt == 0) {
        m_interrupt = signo;
        logger().info("{}: received signal {} ({}): stopping the step",
                      label(),
                      signo,
                      signal_description(signo));
        if (m_phase == Phase::registered && !m_verdict) {
            send(protocol::Interrupt{signo});
        }
    }
    if (trainer_running()) {
        stop_trainer(0); // already forwarded: only start counting the grace period
    } else if (m_pid == 0 && !m_status) {
        // Not started yet: never start it.
        m_status = ExitStatus::signaled(signo);
        if (m_phase == Phase::registered) {
            report_exit(protocol::Exit{*m_status, {}});
        } else {
            m_abandoned = true;
            m_io.stop();
            return;
        }
    }
    maybe_finish();
}

void Launcher::reap() {
    if (trainer_running()) {
        // Exited but not yet reaped (WNOWAIT): while it is a zombie its pid, hence its process
        // group id, cannot be reused, so the rest of its group can be killed safely first.
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == m_pid) {
            signal_group(m_pid, SIGKILL);
            int wait_status = 0;
            while (::waitpid(m_pid, &wait_status, 0) < 0 && errno == EINTR) {
            }
            m_status = ExitStatus::from_wait_status(wait_status);
            m_grace_timer.cancel();
            if (m_stopped_by_us && done_verdict()) {
                logger().info("{}: trainer stopped ({})", label(), describe(*m_status));
            } else if (m_stopped_by_us) {
                logger().debug("{}: trainer stopped ({})", label(), describe(*m_status));
            } else {
                logger().debug("{}: trainer {}", label(), describe(*m_status));
            }
            report_exit(protocol::Exit{*m_status, {}});
        }
    }
    // Orphans re-parented to us (we are a child subreaper).
    int wait_status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &wait_status, WNOHANG)) > 0) {
        logger().debug("{}: reaped orphan {}", label(), pid);
    }
    maybe_finish();
}

void Launcher::connect() {
    if (m_phase != Phase::connecting) {
        return;
    }
    error_code ec;
    Tcp::resolver resolver(m_io);
    // Synchronous on purpose: Asio's async resolver would add a thread.
    const auto endpoints =
        resolver.resolve(m_plan.control_address, std::to_string(m_plan.control_port), ec);
    if (ec) {
        retry_connect(fmt::format("cannot resolve {}: {}", m_plan.control_address, ec.message()));
        return;
    }
    // The first IPv4 endpoint (the coordinator listens on IPv4), else the first one.
    auto endpoint = endpoints.begin()->endpoint();
    for (const auto& entry : endpoints) {
        if (entry.endpoint().address().is_v4()) {
            endpoint = entry.endpoint();
            break;
        }
    }
    m_socket = Tcp::socket(m_io);
    m_socket.open(endpoint.protocol(), ec);
    if (ec) {
        retry_connect(ec.message());
        return;
    }
    detail::set_cloexec(m_socket.native_handle());
    m_socket.async_connect(endpoint, [this](const error_code& error) {
        if (m_phase != Phase::connecting) {
            return;
        }
        if (error) {
            retry_connect(error.message());
            return;
        }
        error_code ignored;
        m_socket.set_option(Tcp::no_delay(true), ignored);
        m_phase = Phase::handshake;
        m_decoder = protocol::FrameDecoder{};
        read();
    });
}

void Launcher::retry_connect(const std::string& why) {
    m_last_connect_error = why;
    m_phase = Phase::connecting;
    error_code ignored;
    m_socket.close(ignored);
    m_queue.clear();
    if (Clock::now() + m_backoff >= m_connect_deadline) {
        return; // the deadline timer reports it
    }
    m_retry_timer.expires_after(m_backoff);
    m_backoff = std::min(m_backoff * 2, Millis{1000});
    m_retry_timer.async_wait([this](const error_code& ec) {
        if (!ec) {
            connect();
        }
    });
}

void Launcher::read() {
    m_socket.async_read_some(asio::buffer(m_buffer),
                             [this](const error_code& ec, std::size_t n) { on_read(ec, n); });
}

void Launcher::on_read(const error_code& ec, std::size_t n) {
    if (m_phase == Phase::connecting || m_phase == Phase::closed ||
        ec == asio::error::operation_aborted) {
        return;
    }
    if (ec) {
        if (m_phase == Phase::handshake) {
            retry_connect(fmt::format("connection closed during registration ({})", ec.message()));
        } else if (m_phase == Phase::closing) {
            disconnect();
        } else {
            coordinator_lost(ec == asio::error::eof ? "connection closed" : ec.message());
        }
        return;
    }
    try {
        m_decoder.feed(std::string_view(m_buffer.data(), n));
        while (auto payload = m_decoder.next()) {
            handle(protocol::decode_payload(*payload));
            if (m_phase == Phase::connecting || m_phase == Phase::closed || m_fatal) {
                return;
            }
        }
    } catch (const Error& e) {
        if (m_phase == Phase::handshake) {
            fatal(e);
        } else {
            coordinator_lost(e.what());
        }
        return;
    }
    read();
}

void Launcher::handle(const protocol::Message& message) {
    m_last_heard = Clock::now();
    if (m_phase == Phase::handshake) {
        if (const auto* challenge = std::get_if<protocol::Challenge>(&message)) {
            protocol::Hello hello;
            hello.job = m_plan.job_id.value_or(0);
            hello.rank = m_rank;
            hello.role = m_self.role;
            hello.host = m_self.host;
            hello.pid = ::getpid();
            hello.auth = m_auth->method();
            try {
                hello.credential = m_auth->prove(challenge->nonce, hello.job, m_rank);
            } catch (const Error& e) {
                fatal(e);
                return;
            }
            send(hello);
        } else if (std::holds_alternative<protocol::Welcome>(message)) {
            on_registered();
        } else if (const auto* reject = std::get_if<protocol::Reject>(&message)) {
            fatal(
                errors::make(Errc::auth,
                             "coordinator",
                             fmt::format("{} rejected {}: {}", control(), label(), reject->reason),
                             "every task must run 'tfslurm run' with the same options, the same "
                             "TFSLURM_SECRET and as the same user"));
        } else {
            fatal(errors::make(Errc::protocol,
                               "protocol",
                               fmt::format("unexpected {} from {} during registration",
                                           protocol::type_name(message),
                                           control())));
        }
        return;
    }
    if (std::holds_alternative<protocol::Heartbeat>(message)) {
        return;
    }
    if (std::holds_alternative<protocol::Stop>(message) ||
        std::holds_alternative<protocol::Abort>(message)) {
        on_verdict(message);
        return;
    }
    coordinator_lost(fmt::format("unexpected {} message", protocol::type_name(message)));
}

void Launcher::on_registered() {
    m_phase = Phase::registered;
    m_deadline_timer.cancel();
    m_retry_timer.cancel();
    logger().debug("{}: registered with {}", label(), control());
    heartbeat();
    watch();
    if (m_status) {
        // Interrupted while connecting: tell the coordinator, start nothing.
        send(protocol::Interrupt{m_interrupt});
        report_exit(protocol::Exit{*m_status, {}});
        return;
    }
    // Posted: a verdict that came in the same read as the welcome (a latecomer) is handled
    // first, and then the trainer is not started at all.
    asio::post(m_io, [this] { start_trainer(); });
}

void Launcher::start_trainer() {
    if (m_status || m_fatal) {
        return;
    }
    if (m_verdict || m_lost) {
        logger().debug("{}: the step ended before the trainer started: not starting it", label());
        m_never_started = true;
        m_status = ExitStatus::exited(0);
        maybe_finish();
        return;
    }
    try {
        if (!port_is_free(m_self.port)) {
            throw errors::make(Errc::io,
                               "trainer",
                               fmt::format("port {} is already in use", m_self.port),
                               "another job or a stale process holds it: stop it, or choose "
                               "another --port-base");
        }
        SpawnRequest request;
        request.argv = m_argv;
        request.env = m_env;
        request.group = ProcessGroup::new_group;
        request.death_signal = SIGKILL;
        request.before_fork = [this] { m_io.notify_fork(asio::execution_context::fork_prepare); };
        request.after_fork = [this] { m_io.notify_fork(asio::execution_context::fork_parent); };
        m_pid = spawn_process(request);
        logger().debug("{}: trainer started (pid {})", label(), m_pid);
        if (m_verdict || m_lost) {
            stop_trainer(0);
        }
    } catch (const Error& e) {
        m_status = ExitStatus::exited(exit_status(e.code()));
        report_exit(protocol::Exit{*m_status, e.what()});
    } catch (const std::exception& e) {
        m_status = ExitStatus::exited(exit_status(Errc::spawn_failed));
        report_exit(protocol::Exit{*m_status, e.what()});
    }
    maybe_finish();
}

void Launcher::report_exit(const protocol::Exit& exit) {
    if (m_phase == Phase::registered) {
        send(exit);
    }
}

void Launcher::send(const protocol::Message& message) {
    if (m_phase != Phase::handshake && m_phase != Phase::registered) {
        return;
    }
    m_queue.push_back(protocol::encode_frame(message));
    if (!m_writing) {
        write();
    }
}

void Launcher::write() {
    m_writing = true;
    asio::async_write(
        m_socket, asio::buffer(m_queue.front()), [this](const error_code& ec, std::size_t) {
            m_writing = false;
            if (ec) {
                m_queue.clear();
                if (m_phase == Phase::registered) {
                    coordinator_lost(ec.message());
                } else if (m_phase == Phase::handshake) {
                    retry_connect(ec.message());
                }
                return;
            }
            if (!m_queue.empty()) {
                m_queue.pop_front();
            }
            if (!m_queue.empty()) {
                write();
            } else {
                maybe_finish();
            }
        });
}

void Launcher::heartbeat() {
    m_heartbeat_timer.expires_after(m_options.heartbeat);
    m_heartbeat_timer.async_wait([this](const error_code& ec) {
        if (ec || m_phase != Phase::registered) {
            return;
        }
        send(protocol::Heartbeat{});
        heartbeat();
    });
}

void Launcher::watch() {
    m_watch_timer.expires_after(tick_interval(m_options.heartbeat_timeout));
    m_watch_timer.async_wait([this](const error_code& ec) {
        if (ec || m_phase != Phase::registered) {
            return;
        }
        if (!m_verdict && Clock::now() - m_last_heard > m_options.heartbeat_timeout) {
            coordinator_lost(
                fmt::format("no heartbeat for {}", format_seconds(m_options.heartbeat_timeout)));
            return;
        }
        watch();
    });
}

void Launcher::on_verdict(protocol::Message verdict) {
    if (m_verdict) {
        return;
    }
    m_verdict = std::move(verdict);
    if (trainer_running()) {
        if (const auto* stop = std::get_if<protocol::Stop>(&*m_verdict);
            stop != nullptr && stop->reason == protocol::StopReason::done) {
            logger().info("{}: the work is done: stopping the trainer", label());
        }
        stop_trainer(SIGTERM);
    }
    maybe_finish();
}

void Launcher::coordinator_lost(const std::string& reason) {
    if (m_verdict || m_lost) {
        disconnect();
        return;
    }
    m_lost = reason;
    logger().debug("{}: coordinator {} lost: {}", label(), control(), reason);
    disconnect();
    if (trainer_running()) {
        stop_trainer(SIGTERM);
    }
    maybe_finish();
}

void Launcher::stop_trainer(int signo) {
    if (!trainer_running()) {
        return;
    }
    m_stopped_by_us = true;
    if (signo != 0) {
        signal_group(m_pid, signo);
    }
    if (m_grace_timer.expiry() > Clock::now()) {
        return; // already counting
    }
    m_grace_timer.expires_after(m_options.grace);
    m_grace_timer.async_wait([this](const error_code& ec) {
        if (ec || !trainer_running()) {
            return;
        }
        logger().warn("{}: the trainer did not stop within {}: killing it (SIGKILL)",
                      label(),
                      format_seconds(m_options.grace));
        m_killed = true;
        signal_group(m_pid, SIGKILL);
    });
}

void Launcher::disconnect() {
    if (m_phase == Phase::closed) {
        return;
    }
    m_phase = Phase::closed;
    error_code ignored;
    m_heartbeat_timer.cancel();
    m_watch_timer.cancel();
    m_close_timer.cancel();
    m_socket.shutdown(Tcp::socket::shutdown_both, ignored);
    m_socket.close(ignored);
    m_queue.clear();
    maybe_finish();
}

void Launcher::maybe_finish() {
    if (m_finished || m_fatal) {
        return;
    }
    if (!m_status || (!m_verdict && !m_lost)) {
        return;
    }
    if (m_phase == Phase::registered) {
        if (m_writing || !m_queue.empty()) {
            return; // the exit report is on its way
        }
        // Half-close and wait for the coordinator's EOF, so that nothing we sent is lost to a
        // reset; bounded in case the coordinator is gone.
        m_phase = Phase::closing;
        m_heartbeat_timer.cancel();
        m_watch_timer.cancel();
        error_code ignored;
        m_socket.shutdown(Tcp::socket::shutdown_send, ignored);
        m_close_timer.expires_after(Millis{2000});
        m_close_timer.async_wait([this](const error_code& ec) {
            if (!ec) {
                disconnect();
            }
        });
        return;
    }
    if (m_phase == Phase::closing || m_phase == Phase::handshake || m_phase == Phase::connecting) {
        if (m_phase != Phase::closing) {
            disconnect();
        }
        return;
    }
    if (m_server && !m_server_finished) {
        return;
    }
    m_finished = true;
    m_deadline_timer.cancel();
    m_retry_timer.cancel();
    m_grace_timer.cancel();
    error_code ignored;
    m_signals.cancel(ignored);
    if (m_server) {
        m_server->close();
    }
    m_io.stop();
}

LaunchResult Launcher::result() const {
    LaunchResult out;
    if (m_abandoned) {
        out.outcome = Outcome::interrupted;
        out.exit_status = 128 + m_interrupt;
        out.step_status = out.exit_status;
        out.message = fmt::format("stopping: {} received signal {} ({}) before its trainer started",
                                  label(),
                                  m_interrupt,
                                  signal_description(m_interrupt));
        return out;
    }
    const ExitStatus status = m_status.value_or(ExitStatus::exited(exit_status(Errc::aborted)));
    const int trainer_status = status.shell_status();
    if (m_verdict) {
        if (const auto* stop = std::get_if<protocol::Stop>(&*m_verdict)) {
            if (stop->reason == protocol::StopReason::done) {
                out.outcome = Outcome::done;
                // A trainer stopped because the work is done succeeded, whatever its status.
                out.exit_status = m_stopped_by_us ? 0 : trainer_status;
                out.step_status = 0;
                if (m_killed) {
                    logger().warn("{}: stopped with SIGKILL after the grace period", label());
                }
                return out;
            }
            out.outcome = Outcome::interrupted;
            out.exit_status = m_never_started ? 128 + stop->signal : trainer_status;
            out.step_status = trainer_status;
            const Member who = stop->rank < m_plan.ranks.size()
                                   ? Member{m_plan.ranks[stop->rank].role,
                                            m_plan.ranks[stop->rank].index,
                                            m_plan.ranks[stop->rank].host}
                                   : Member{};
            out.message = fmt::format("stopping: {} received signal {} ({})",
                                      rank_label(stop->rank, who),
                                      stop->signal,
                                      signal_description(stop->signal));
            return out;
        }
        const auto& abort = std::get<protocol::Abort>(*m_verdict);
        out.outcome = Outcome::aborted;
        out.exit_status = status.success() ? exit_status(Errc::aborted) : trainer_status;
        out.step_status = abort.failure.step_status;
        out.message = "aborting: " + protocol::describe(abort.failure);
        return out;
    }
    out.outcome = Outcome::coordinator_lost;
    out.exit_status = status.success() ? exit_status(Errc::aborted) : trainer_status;
    out.step_status = out.exit_status;
    out.message =
        fmt::format("aborting: coordinator at {} lost ({})", control(), m_lost.value_or("?"));
    return out;
}

} // namespace

LaunchResult run_launcher(const Plan& plan,
                          const std::vector<std::string>& argv,
                          const Environment& trainer_env,
                          const LauncherOptions& options) {
    if (!plan.self_rank || *plan.self_rank >= plan.ranks.size()) {
        throw errors::missing_env("SLURM_PROCID",
                                  "tfslurm run starts one task's trainer: run it with srun, or "
                                  "use --local N");
    }
    if (argv.empty()) {
        throw errors::invalid_argument(
            "tfslurm run", "no trainer command", "", "give the command after '--'");
    }
    if (options.status_fd >= 0) {
        ::fcntl(options.status_fd, F_SETFD, FD_CLOEXEC);
    }
    detail::ignore_sigpipe();
    try {
        become_subreaper();
    } catch (const std::system_error& e) {
        logger().warn("cannot become a child subreaper: {}", e.what());
    }
    Launcher launcher(plan, argv, trainer_env, options);
    return launcher.run();
}

} // namespace tfslurm
