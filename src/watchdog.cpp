// SPDX-License-Identifier: MIT
// `tfslurm run`: the coordinator state machine, the coordinator server, one task's launcher and
// the local mode. Everything that waits does so on one single-threaded io_context per process:
// sockets, timers and signals (SIGCHLD included) are all Asio handlers, and handlers never throw
// (fatal errors are recorded and re-thrown once io_context::run() has returned).
#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/watchdog.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>
#include <set>
#include <utility>

namespace tfslurm {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

// --- small helpers -----------------------------------------------------------------------------

std::string_view to_string(Until until) noexcept {
    return until == Until::chief ? "chief" : "workers";
}

Until parse_until(std::string_view text, std::string_view subject) {
    if (text == "workers") {
        return Until::workers;
    }
    if (text == "chief") {
        return Until::chief;
    }
    throw errors::invalid_argument(subject,
                                   "expected workers or chief",
                                   text,
                                   "workers: stop ps/evaluator when every worker (and the chief) "
                                   "exited 0; chief: stop everyone when the chief exited 0");
}

std::string_view to_string(Verdict verdict) noexcept {
    switch (verdict) {
    case Verdict::none:
        return "none";
    case Verdict::done:
        return "done";
    case Verdict::interrupted:
        return "interrupted";
    case Verdict::aborted:
        return "aborted";
    }
    return "none";
}

std::string_view to_string(Outcome outcome) noexcept {
    switch (outcome) {
    case Outcome::done:
        return "done";
    case Outcome::interrupted:
        return "interrupted";
    case Outcome::aborted:
        return "aborted";
    case Outcome::coordinator_lost:
        return "coordinator_lost";
    }
    return "done";
}

std::string format_seconds(Millis duration) {
    const auto ms = duration.count();
    if (ms % 1000 == 0) {
        return fmt::format("{} s", ms / 1000);
    }
    return fmt::format("{:g} s", static_cast<double>(ms) / 1000.0);
}

std::vector<Member> members_of(const Plan& plan) {
    std::vector<Member> members;
    members.reserve(plan.ranks.size());
    for (const auto& rank : plan.ranks) {
        members.push_back({rank.role, rank.index, rank.host});
    }
    return members;
}

namespace {

std::string rank_label(std::uint32_t rank, const Member& member) {
    return fmt::format(
        "rank {} ({}:{}) on {}", rank, to_string(member.role), member.index, member.host);
}

} // namespace

// --- Coordinator (pure) ------------------------------------------------------------------------

Coordinator::Coordinator(CoordinatorSettings settings, Clock::time_point start)
    : m_settings(std::move(settings)), m_start(start), m_ranks(m_settings.ranks.size()) {
    if (m_ranks.empty()) {
        throw errors::invalid_argument("coordinator", "the step has no rank", "0");
    }
    for (const auto& member : m_settings.ranks) {
        m_has_chief = m_has_chief || member.role == Role::chief;
        if (is_training(member.role)) {
            ++m_training_total;
        }
    }
    if (m_settings.until == Until::chief && !m_has_chief) {
        throw errors::invalid_argument(
            "--until", "the plan has no chief", "chief", "add --chief, or use --until workers");
    }
}

bool Coordinator::is_training(Role role) const noexcept {
    if (m_settings.until == Until::chief) {
        return role == Role::chief;
    }
    return role == Role::worker || role == Role::chief;
}

std::optional<std::string> Coordinator::admit(std::uint32_t rank, Role role) const {
    if (rank >= m_ranks.size()) {
        return fmt::format("rank {} is out of range (the step has {} ranks)", rank, m_ranks.size());
    }
    const Member& member = m_settings.ranks[rank];
    if (member.role != role) {
        return fmt::format(
            "rank {} is {} in the plan, not {}", rank, to_string(member.role), to_string(role));
    }
    if (m_ranks[rank].registered) {
        return fmt::format("rank {} is already registered", rank);
    }
    return std::nullopt;
}

void Coordinator::registered(std::uint32_t rank, Clock::time_point now) {
    RankState& state = m_ranks.at(rank);
    if (state.registered) {
        return;
    }
    state.registered = true;
    state.connected = true;
    state.last_seen = now;
    ++m_registered;
    ++m_connected;
    logger().debug("coordinator: {} registered ({} of {})",
                   rank_label(rank, m_settings.ranks[rank]),
                   m_registered,
                   m_ranks.size());
    if (auto message = verdict_message()) {
        // A latecomer learns the verdict at once.
        m_outgoing.push_back({rank, std::move(*message)});
    }
}

void Coordinator::heartbeat(std::uint32_t rank, Clock::time_point now) {
    if (rank < m_ranks.size() && m_ranks[rank].registered) {
        m_ranks[rank].last_seen = now;
    }
}

void Coordinator::exited(std::uint32_t rank, const protocol::Exit& exit, Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered) {
        return;
    }
    RankState& state = m_ranks[rank];
    const Member& member = m_settings.ranks[rank];
    if (state.reported) {
        logger().warn("coordinator: {} reported its exit twice; ignoring the second report ({})",
                      rank_label(rank, member),
                      describe(exit.status));
        return;
    }
    state.reported = true;
    state.status = exit.status;
    state.last_seen = now;
    if (m_verdict != Verdict::none) {
        logger().debug("coordinator: {} {} after the verdict",
                       rank_label(rank, member),
                       describe(exit.status));
        update_finished(now);
        return;
    }
    if (!exit.error.empty() || !exit.status.success()) {
        protocol::Failure failure = failure_of(rank);
        failure.cause =
            exit.error.empty() ? protocol::FailureCause::trainer : protocol::FailureCause::start;
        failure.status = exit.status;
        failure.detail = exit.error;
        failure.step_status = exit.status.shell_status() != 0 ? exit.status.shell_status() : 1;
        fail(std::move(failure), now);
        return;
    }
    ++m_succeeded;
    if (is_training(member.role)) {
        ++m_training_done;
    }
    logger().debug("coordinator: {} exited 0 ({} of {} training ranks done)",
                   rank_label(rank, member),
                   m_training_done,
                   m_training_total);
    const bool work_done =
        m_training_total > 0 ? m_training_done == m_training_total : m_succeeded == m_ranks.size();
    if (work_done) {
        m_step_status = 0;
        decide(Verdict::done, now);
    }
}

void Coordinator::interrupted(std::uint32_t rank, int signo, Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered || m_verdict != Verdict::none) {
        return;
    }
    logger().info("coordinator: {} received signal {} ({}): stopping the step",
                  rank_label(rank, m_settings.ranks[rank]),
                  signo,
                  signal_description(signo));
    m_stop = protocol::Stop{protocol::StopReason::signal, rank, signo};
    m_step_status = 128 + signo;
    decide(Verdict::interrupted, now);
}

void Coordinator::connection_lost(std::uint32_t rank, Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].connected) {
        return;
    }
    RankState& state = m_ranks[rank];
    state.connected = false;
    --m_connected;
    if (m_verdict == Verdict::none && !state.reported) {
        protocol::Failure failure = failure_of(rank);
        failure.cause = protocol::FailureCause::lost;
        failure.detail = "connection closed";
        failure.step_status = exit_status(Errc::aborted);
        fail(std::move(failure), now);
        return;
    }
    update_finished(now);
}

void Coordinator::tick(Clock::time_point now) {
    if (m_verdict == Verdict::none) {
        if (m_registered < m_ranks.size() && now - m_start >= m_settings.connect_timeout) {
            const auto first = static_cast<std::uint32_t>(
                std::find_if(m_ranks.begin(),
                             m_ranks.end(),
                             [](const RankState& state) { return !state.registered; }) -
                m_ranks.begin());
            protocol::Failure failure = failure_of(first);
            failure.cause = protocol::FailureCause::unregistered;
            failure.detail = format_seconds(m_settings.connect_timeout);
            failure.missing = static_cast<std::uint32_t>(m_ranks.size() - m_registered);
            failure.step_status = exit_status(Errc::timeout);
            fail(std::move(failure), now);
            return;
        }
        for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
            const RankState& state = m_ranks[rank];
            if (state.connected && !state.reported &&
                now - state.last_seen > m_settings.heartbeat_timeout) {
                protocol::Failure failure = failure_of(rank);
                failure.cause = protocol::FailureCause::lost;
                failure.detail = fmt::format("no heartbeat for {}",
                                             format_seconds(m_settings.heartbeat_timeout));
                failure.step_status = exit_status(Errc::aborted);
                fail(std::move(failure), now);
                return;
            }
        }
    }
    update_finished(now);
}

std::vector<Outgoing> Coordinator::take_outgoing() {
    std::vector<Outgoing> out;
    out.swap(m_outgoing);
    return out;
}

protocol::Failure Coordinator::failure_of(std::uint32_t rank) const {
    const Member& member = m_settings.ranks.at(rank);
    protocol::Failure failure;
    failure.rank = rank;
    failure.role = member.role;
    failure.index = member.index;
    failure.host = member.host;
    return failure;
}

std::optional<protocol::Message> Coordinator::verdict_message() const {
    switch (m_verdict) {
    case Verdict::none:
        return std::nullopt;
    case Verdict::done:
        return protocol::Stop{protocol::StopReason::done, 0, 0};
    case Verdict::interrupted:
        return *m_stop;
    case Verdict::aborted:
        return protocol::Abort{*m_failure};
    }
    return std::nullopt;
}

void Coordinator::fail(protocol::Failure failure, Clock::time_point now) {
    logger().debug("coordinator: aborting: {}", protocol::describe(failure));
    m_step_status = failure.step_status;
    m_failure = std::move(failure);
    decide(Verdict::aborted, now);
}

void Coordinator::decide(Verdict verdict, Clock::time_point now) {
    m_verdict = verdict;
    m_verdict_time = now;
    if (verdict == Verdict::done) {
        const std::size_t remaining = m_ranks.size() - m_succeeded;
        logger().info("coordinator: the work is done ({} exited 0): stopping {} remaining rank{}",
                      m_settings.until == Until::chief ? "the chief"
                      : m_training_total == 0          ? "every rank"
                      : m_has_chief                    ? "every worker and the chief"
                                                       : "every worker",
                      remaining,
                      remaining == 1 ? "" : "s");
    }
    const auto message = verdict_message();
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        if (m_ranks[rank].connected) {
            m_outgoing.push_back({rank, *message});
        }
    }
    update_finished(now);
}

void Coordinator::update_finished(Clock::time_point now) {
    // Ranks that have not registered yet may still come (rank 0 often fails before the others
    // connected): they must learn the verdict, so wait for them too, within the linger time.
    // After a registration timeout they are not expected any more.
    const bool everyone_came =
        m_registered == m_ranks.size() ||
        (m_failure && m_failure->cause == protocol::FailureCause::unregistered);
    if (m_verdict != Verdict::none && !m_finished &&
        ((everyone_came && m_connected == 0) || now - m_verdict_time >= m_settings.linger)) {
        m_finished = true;
        logger().debug("coordinator: finished ({} launchers still connected)", m_connected);
    }
}

// --- OS helpers ----------------------------------------------------------------------------------

void ensure_descriptor_limit(std::size_t needed, std::string_view what) {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        throw std::system_error(errno, std::generic_category(), "getrlimit(RLIMIT_NOFILE)");
    }
    if (limit.rlim_cur != RLIM_INFINITY && limit.rlim_cur >= needed) {
        return;
    }
    if (limit.rlim_cur == RLIM_INFINITY) {
        return;
    }
    if (limit.rlim_max != RLIM_INFINITY && limit.rlim_max < needed) {
        throw errors::make(Errc::io,
                           "RLIMIT_NOFILE",
                           fmt::format("hard limit {} is below the {} descriptors needed for {}",
                                       limit.rlim_max,
                                       needed,
                                       what),
                           "raise the hard limit of open files (ulimit -Hn; LimitNOFILE= or "
                           "limits.conf), or run fewer tasks per step");
    }
    const rlim_t old = limit.rlim_cur;
    limit.rlim_cur = limit.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(needed) : limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
        throw errors::make(Errc::io,
                           "RLIMIT_NOFILE",
                           fmt::format("cannot raise the soft limit from {} to {} ({})",
                                       old,
                                       limit.rlim_cur,
                                       std::strerror(errno)));
    }
    logger().debug(
        "RLIMIT_NOFILE: soft limit raised from {} to {} for {}", old, limit.rlim_cur, what);
}

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

namespace {

/// Loopback addresses are bound as such (local mode stays on loopback); anything else binds every
/// address, since a node name may resolve to 127.0.1.1 on the node itself (Debian's /etc/hosts).
std::string bind_address_for(const std::string& control_address) {
    if (control_address == "localhost") {
        return "127.0.0.1";
    }
    error_code ec;
    const auto address = asio::ip::make_address(control_address, ec);
    if (!ec && address.is_loopback()) {
        return control_address;
    }
    return "0.0.0.0";
}

/// Asio does not create sockets with SOCK_CLOEXEC: without this, a trainer (and its children)
/// would inherit the control connection, keep it open after the launcher died, and could talk
/// to the coordinator in our name.
void set_cloexec(int fd) noexcept {
    if (fd >= 0) {
        ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
    }
}

void write_all(int fd, std::string_view data) noexcept {
    while (!data.empty()) {
        const ssize_t written = ::write(fd, data.data(), data.size());
        if (written < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        data.remove_prefix(static_cast<std::size_t>(written));
    }
}

Millis tick_interval(Millis heartbeat_timeout) {
    return std::clamp(heartbeat_timeout / 4, Millis{10}, Millis{250});
}

} // namespace

// --- CoordinatorServer ---------------------------------------------------------------------------

struct CoordinatorServer::Impl : std::enable_shared_from_this<CoordinatorServer::Impl> {
    class Session;

    Impl(asio::io_context& context,
         CoordinatorSettings settings,
         protocol::Authenticator authenticator,
         std::uint64_t job_id)
        : io(context), acceptor(context), retry_timer(context), tick_timer(context),
          coordinator(std::move(settings), Clock::now()), auth(std::move(authenticator)),
          job(job_id), by_rank(coordinator.size()) {}

    void listen(const std::string& bind_address, std::uint16_t port);
    void accept();
    void tick();
    void flush();
    void remove(const std::shared_ptr<Session>& session);
    void close();

    asio::io_context& io;
    Tcp::acceptor acceptor;
    asio::steady_timer retry_timer;
    asio::steady_timer tick_timer;
    Coordinator coordinator;
    protocol::Authenticator auth;
    std::uint64_t job;
    std::vector<std::shared_ptr<Session>> by_rank;
    std::set<std::shared_ptr<Session>> sessions;
    std::size_t unauthenticated = 0;
    std::function<void()> finished_callback;
    bool finished_reported = false;
    bool closed = false;
};

/// One accepted connection: challenge, hello, then heartbeats/exit/interrupt in, stop/abort out.
class CoordinatorServer::Impl::Session : public std::enable_shared_from_this<Session> {
  public:
    Session(std::shared_ptr<Impl> server, Tcp::socket socket)
        : m_server(std::move(server)), m_socket(std::move(socket)), m_hello_timer(m_server->io) {
        error_code ec;
        const auto remote = m_socket.remote_endpoint(ec);
        m_peer = ec ? std::string("?")
                    : fmt::format("{}:{}", remote.address().to_string(), remote.port());
        m_socket.set_option(Tcp::no_delay(true), ec);
    }

    void start() {
        try {
            m_nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
        } catch (const std::exception& e) {
            logger().error("coordinator: no randomness for a challenge: {}", e.what());
            close();
            return;
        }
        send(protocol::Challenge{m_nonce});
        m_hello_timer.expires_after(m_server->coordinator.settings().hello_timeout);
        m_hello_timer.async_wait([self = shared_from_this()](const error_code& ec) {
            if (!ec && !self->m_registered && !self->m_closed) {
                logger().warn("coordinator: closing connection from {}: no hello within {}",
                              self->m_peer,
                              format_seconds(self->m_server->coordinator.settings().hello_timeout));
                self->close();
            }
        });
        read();
    }

    void send(const protocol::Message& message) {
        if (m_closed) {
            return;
        }
        try {
            m_queue.push_back(protocol::encode_frame(message));
        } catch (const std::exception& e) {
            logger().error(
                "coordinator: cannot encode {}: {}", protocol::type_name(message), e.what());
            return;
        }
        if (m_queue.size() > 4096) {
            logger().warn("coordinator: closing connection from {}: it does not read", m_peer);
            close();
            return;
        }
        if (!m_writing) {
            write();
        }
    }

    void close() {
        if (m_closed) {
            return;
        }
        m_closed = true;
        error_code ignored;
        m_hello_timer.cancel();
        m_socket.shutdown(Tcp::socket::shutdown_both, ignored);
        m_socket.close(ignored);
        if (!m_registered) {
            --m_server->unauthenticated;
        }
        m_server->remove(shared_from_this());
    }

    [[nodiscard]] bool registered() const noexcept { return m_registered; }
    [[nodiscard]] std::uint32_t rank() const noexcept { return m_rank; }

  private:
    void read() {
        m_socket.async_read_some(asio::buffer(m_buffer),
                                 [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                     self->on_read(ec, n);
                                 });
    }

    void on_read(const error_code& ec, std::size_t n) {
        if (m_closed) {
            return;
        }
        if (ec) {
            if (ec != asio::error::eof && ec != asio::error::operation_aborted) {
                logger().debug("coordinator: connection from {}: {}", m_peer, ec.message());
            }
            close();
            return;
        }
        try {
            m_decoder.feed(std::string_view(m_buffer.data(), n));
            while (auto payload = m_decoder.next()) {
                handle(protocol::decode_payload(*payload));
                if (m_closed || m_close_after_write) {
                    return;
                }
            }
        } catch (const Error& e) {
            logger().warn("coordinator: closing connection from {}{}: {}",
                          m_peer,
                          m_registered ? fmt::format(" (rank {})", m_rank) : std::string(),
                          e.what());
            close();
            return;
        } catch (const std::exception& e) {
            logger().error("coordinator: connection from {}: {}", m_peer, e.what());
            close();
            return;
        }
        read();
    }

    void handle(const protocol::Message& message) {
        const auto now = Clock::now();
        Coordinator& state = m_server->coordinator;
        if (!m_registered) {
            const auto* hello = std::get_if<protocol::Hello>(&message);
            if (hello == nullptr) {
                throw errors::make(
                    Errc::protocol,
                    "protocol",
                    fmt::format("expected hello, got {}", protocol::type_name(message)));
            }
            std::optional<std::string> reason =
                m_server->auth.verify(*hello, m_nonce, m_server->job);
            if (!reason) {
                reason = state.admit(hello->rank, hello->role);
            }
            if (reason) {
                logger().warn("coordinator: rejected rank {} from {} (pid {} on {}): {}",
                              hello->rank,
                              m_peer,
                              hello->pid,
                              hello->host,
                              *reason);
                send(protocol::Reject{*reason});
                m_close_after_write = true;
                return;
            }
            m_registered = true;
            m_rank = hello->rank;
            m_hello_timer.cancel();
            --m_server->unauthenticated;
            m_server->by_rank[m_rank] = shared_from_this();
            send(protocol::Welcome{static_cast<std::uint32_t>(state.size())});
            state.registered(m_rank, now);
            m_server->flush();
            return;
        }
        if (std::holds_alternative<protocol::Heartbeat>(message)) {
            state.heartbeat(m_rank, now);
            send(protocol::Heartbeat{});
        } else if (const auto* exit = std::get_if<protocol::Exit>(&message)) {
            state.exited(m_rank, *exit, now);
        } else if (const auto* interrupt = std::get_if<protocol::Interrupt>(&message)) {
            state.interrupted(m_rank, interrupt->signal, now);
        } else {
            throw errors::make(
                Errc::protocol,
                "protocol",
                fmt::format("unexpected {} from a launcher", protocol::type_name(message)));
        }
        m_server->flush();
    }

    void write() {
        m_writing = true;
        asio::async_write(m_socket,
                          asio::buffer(m_queue.front()),
                          [self = shared_from_this()](const error_code& ec, std::size_t /*n*/) {
                              self->on_written(ec);
                          });
    }

    void on_written(const error_code& ec) {
        m_writing = false;
        if (m_closed) {
            return;
        }
        if (ec) {
            close();
            return;
        }
        m_queue.pop_front();
        if (!m_queue.empty()) {
            write();
        } else if (m_close_after_write) {
            close();
        }
    }

    std::shared_ptr<Impl> m_server;
    Tcp::socket m_socket;
    asio::steady_timer m_hello_timer;
    std::string m_peer;
    std::string m_nonce;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    std::deque<std::string> m_queue;
    bool m_writing = false;
    bool m_registered = false;
    bool m_close_after_write = false;
    bool m_closed = false;
    std::uint32_t m_rank = 0;
};

void CoordinatorServer::Impl::listen(const std::string& bind_address, std::uint16_t port) {
    error_code ec;
    const auto address = asio::ip::make_address(bind_address, ec);
    const Tcp::endpoint endpoint(ec ? asio::ip::address(asio::ip::address_v4::any()) : address,
                                 port);
    const auto fail = [&](const error_code& error) {
        return errors::make(Errc::io,
                            "coordinator",
                            fmt::format("cannot listen on {}:{} ({})",
                                        endpoint.address().to_string(),
                                        port,
                                        error.message()),
                            "another job or a stale launcher holds the control port; choose "
                            "another --port-base");
    };
    acceptor.open(endpoint.protocol(), ec);
    set_cloexec(acceptor.native_handle());
    if (!ec) {
        acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
    }
    if (!ec) {
        acceptor.bind(endpoint, ec);
    }
    if (!ec) {
        acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        throw fail(ec);
    }
    logger().debug("coordinator: listening on {}:{} for {} ranks",
                   endpoint.address().to_string(),
                   acceptor.local_endpoint().port(),
                   coordinator.size());
}

void CoordinatorServer::Impl::accept() {
    acceptor.async_accept([self = shared_from_this()](const error_code& ec, Tcp::socket socket) {
        if (self->closed || ec == asio::error::operation_aborted) {
            return;
        }
        set_cloexec(socket.native_handle());
        if (ec) {
            // EMFILE and friends: back off instead of spinning; the peer will retry.
            logger().warn("coordinator: accept: {}", ec.message());
            self->retry_timer.expires_after(Millis{50});
            self->retry_timer.async_wait([self](const error_code& wait_error) {
                if (!wait_error && !self->closed) {
                    self->accept();
                }
            });
            return;
        }
        // Bound the unauthenticated connections so a flood cannot starve the launchers.
        if (self->unauthenticated >= 1024 + self->coordinator.size()) {
            error_code ignored;
            socket.close(ignored);
        } else {
            ++self->unauthenticated;
            auto session = std::make_shared<Session>(self, std::move(socket));
            self->sessions.insert(session);
            session->start();
        }
        self->accept();
    });
}

void CoordinatorServer::Impl::tick() {
    tick_timer.expires_after(tick_interval(coordinator.settings().heartbeat_timeout));
    tick_timer.async_wait([self = shared_from_this()](const error_code& ec) {
        if (ec || self->closed) {
            return;
        }
        self->coordinator.tick(Clock::now());
        self->flush();
        self->tick();
    });
}

void CoordinatorServer::Impl::flush() {
    for (auto& outgoing : coordinator.take_outgoing()) {
        if (outgoing.rank < by_rank.size() && by_rank[outgoing.rank]) {
            by_rank[outgoing.rank]->send(outgoing.message);
        }
    }
    if (coordinator.finished() && !finished_reported) {
        finished_reported = true;
        if (finished_callback) {
            // Posted: the callback may close this server, which must not happen mid-handler.
            asio::post(io, [callback = finished_callback] { callback(); });
        }
    }
}

void CoordinatorServer::Impl::remove(const std::shared_ptr<Session>& session) {
    sessions.erase(session);
    if (session->registered() && by_rank[session->rank()] == session) {
        by_rank[session->rank()].reset();
        coordinator.connection_lost(session->rank(), Clock::now());
        flush();
    }
}

void CoordinatorServer::Impl::close() {
    if (closed) {
        return;
    }
    closed = true;
    error_code ignored;
    acceptor.close(ignored);
    retry_timer.cancel();
    tick_timer.cancel();
    auto all = sessions;
    for (const auto& session : all) {
        session->close();
    }
    sessions.clear();
    std::fill(by_rank.begin(), by_rank.end(), nullptr);
}

CoordinatorServer::CoordinatorServer(asio::io_context& io,
                                     CoordinatorSettings settings,
                                     protocol::Authenticator auth,
                                     std::uint64_t job,
                                     const std::string& bind_address,
                                     std::uint16_t port) {
    // One descriptor per launcher plus the listener, stdio and the unauthenticated headroom.
    ensure_descriptor_limit(settings.ranks.size() + 64,
                            fmt::format("{} launchers", settings.ranks.size()));
    m_impl = std::make_shared<Impl>(io, std::move(settings), std::move(auth), job);
    m_impl->listen(bind_address, port);
    m_impl->accept();
    m_impl->tick();
}

CoordinatorServer::~CoordinatorServer() {
    try {
        if (m_impl) {
            m_impl->close();
        }
    } catch (...) {
        // Closing sockets does not fail in practice; a destructor must not throw anyway.
    }
}

std::uint16_t CoordinatorServer::port() const noexcept {
    try {
        error_code ec;
        const auto endpoint = m_impl->acceptor.local_endpoint(ec);
        return ec ? 0 : endpoint.port();
    } catch (...) {
        return 0;
    }
}

const Coordinator& CoordinatorServer::state() const noexcept {
    return m_impl->coordinator;
}

void CoordinatorServer::on_finished(std::function<void()> callback) {
    m_impl->finished_callback = std::move(callback);
    if (m_impl->finished_reported && m_impl->finished_callback) {
        asio::post(m_impl->io, m_impl->finished_callback);
    }
}

void CoordinatorServer::close() {
    m_impl->close();
}

// --- Launcher ------------------------------------------------------------------------------------

namespace {

constexpr std::array<int, 7> k_launcher_signals{
    SIGCHLD, SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT};

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
        for (const int signo : k_launcher_signals) {
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
        write_all(
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
    set_cloexec(m_socket.native_handle());
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

/// Ignore SIGPIPE for the whole run (restored to the default in spawned children by spawn).
void ignore_sigpipe() {
    ::signal(SIGPIPE, SIG_IGN);
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
    ignore_sigpipe();
    try {
        become_subreaper();
    } catch (const std::system_error& e) {
        logger().warn("cannot become a child subreaper: {}", e.what());
    }
    Launcher launcher(plan, argv, trainer_env, options);
    return launcher.run();
}

// --- local mode ----------------------------------------------------------------------------------

Environment local_task_environment(const Environment& base,
                                   std::uint32_t ntasks,
                                   std::uint32_t rank,
                                   std::uint64_t job_id) {
    Environment::Map vars;
    for (const auto& [name, value] : base.vars()) {
        if (name.rfind("SLURM_", 0) == 0 || name.rfind("SLURMD_", 0) == 0 ||
            name == "TFSLURM_LOCAL_STATUS_FD" || name == "TFSLURM_HOST_PATTERN") {
            continue;
        }
        vars.emplace(name, value);
    }
    Environment env(std::move(vars));
    std::string gtids;
    for (std::uint32_t i = 0; i < ntasks; ++i) {
        gtids += (i == 0 ? "" : ",") + std::to_string(i);
    }
    const std::string n = std::to_string(ntasks);
    const std::string job = std::to_string(job_id);
    env.set("SLURM_JOB_ID", job);
    env.set("SLURM_JOBID", job);
    env.set("SLURM_STEP_ID", "0");
    env.set("SLURM_STEPID", "0");
    env.set("SLURM_JOB_NODELIST", "localhost");
    env.set("SLURM_NODELIST", "localhost");
    env.set("SLURM_JOB_NUM_NODES", "1");
    env.set("SLURM_NNODES", "1");
    env.set("SLURM_NTASKS", n);
    env.set("SLURM_NPROCS", n);
    env.set("SLURM_TASKS_PER_NODE", n);
    env.set("SLURM_STEP_NODELIST", "localhost");
    env.set("SLURM_STEP_NUM_NODES", "1");
    env.set("SLURM_STEP_NUM_TASKS", n);
    env.set("SLURM_STEP_TASKS_PER_NODE", n);
    env.set("SLURM_PROCID", std::to_string(rank));
    env.set("SLURM_LOCALID", std::to_string(rank));
    env.set("SLURM_NODEID", "0");
    env.set("SLURM_GTIDS", gtids);
    env.set("SLURMD_NODENAME", "localhost");
    if (!env.contains("TFSLURM_ADDRESS")) {
        // Peers connect to 127.0.0.1: nothing leaves loopback.
        env.set("TFSLURM_ADDRESS", "ip");
    }
    return env;
}

std::vector<std::string> local_launcher_argv(const std::vector<std::string>& argv,
                                             const std::string& self_exe) {
    std::vector<std::string> out{self_exe};
    bool options = true;
    for (std::size_t i = 1; i < argv.size(); ++i) {
        const std::string& arg = argv[i];
        if (options && arg == "--") {
            options = false;
        } else if (options && (arg == "--local" || arg == "--job-id")) {
            ++i; // and its value
            continue;
        } else if (options && (arg.rfind("--local=", 0) == 0 || arg.rfind("--job-id=", 0) == 0)) {
            continue;
        }
        out.push_back(arg);
    }
    return out;
}

namespace {

class LocalRun {
  public:
    explicit LocalRun(const LocalOptions& options)
        : m_options(options), m_signals(m_io), m_reports(m_io) {
        for (const int signo : k_launcher_signals) {
            m_signals.add(signo);
        }
    }

    int run();

  private:
    void wait_signal();
    void read_reports();
    void parse_reports();
    void reap();

    const LocalOptions& m_options;
    asio::io_context m_io;
    asio::signal_set m_signals;
    asio::posix::stream_descriptor m_reports;
    std::array<char, 1024> m_buffer{};
    std::string m_text;
    std::vector<pid_t> m_pids;
    std::vector<std::optional<ExitStatus>> m_statuses;
    std::size_t m_running = 0;
    std::optional<int> m_abort_status;
};

int LocalRun::run() {
    int pipe_fds[2] = {-1, -1};
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    m_reports.assign(pipe_fds[0]);
    const int report_fd = pipe_fds[1];
    wait_signal();
    m_pids.assign(m_options.ntasks, 0);
    m_statuses.assign(m_options.ntasks, std::nullopt);
    try {
        for (std::uint32_t rank = 0; rank < m_options.ntasks; ++rank) {
            Environment env =
                local_task_environment(m_options.env, m_options.ntasks, rank, m_options.job_id);
            env.set("TFSLURM_LOCAL_STATUS_FD", std::to_string(report_fd));
            SpawnRequest request;
            request.argv = m_options.launcher_argv;
            request.env = env.to_strings();
            request.group = ProcessGroup::new_group;
            // If this parent dies, the launchers stop the step cleanly.
            request.death_signal = SIGTERM;
            request.inherit_fds = {report_fd};
            request.before_fork = [this] {
                m_io.notify_fork(asio::execution_context::fork_prepare);
            };
            request.after_fork = [this] { m_io.notify_fork(asio::execution_context::fork_parent); };
            m_pids[rank] = spawn_process(request);
            ++m_running;
        }
    } catch (...) {
        ::close(report_fd);
        for (const pid_t pid : m_pids) {
            if (pid > 0) {
                ::kill(pid, SIGTERM);
            }
        }
        kill_all_children();
        throw;
    }
    ::close(report_fd);
    logger().debug("local: {} launchers started (job {})", m_options.ntasks, m_options.job_id);
    read_reports();
    reap();
    if (m_running > 0) {
        try {
            m_io.run();
        } catch (const std::exception& e) {
            // Never leave launchers behind (they stop their trainers on SIGTERM).
            for (std::size_t i = 0; i < m_pids.size(); ++i) {
                if (!m_statuses[i]) {
                    ::kill(m_pids[i], SIGTERM);
                }
            }
            kill_all_children();
            throw errors::make(Errc::io, "local", fmt::format("internal error: {}", e.what()));
        }
    }
    // Launchers are gone; read what they reported, then make sure nothing else survives.
    error_code ec;
    m_reports.non_blocking(true, ec);
    for (;;) {
        const std::size_t n = m_reports.read_some(asio::buffer(m_buffer), ec);
        if (ec || n == 0) {
            break;
        }
        m_text.append(m_buffer.data(), n);
    }
    parse_reports();
    kill_all_children();
    if (m_abort_status) {
        return *m_abort_status;
    }
    int highest = 0;
    for (const auto& status : m_statuses) {
        highest = std::max(highest, status ? status->shell_status() : exit_status(Errc::aborted));
    }
    return highest;
}

void LocalRun::wait_signal() {
    m_signals.async_wait([this](const error_code& ec, int signo) {
        if (ec) {
            return;
        }
        if (signo == SIGCHLD) {
            reap();
        } else {
            logger().debug("local: forwarding signal {} to the launchers", signo);
            for (std::size_t i = 0; i < m_pids.size(); ++i) {
                if (m_pids[i] > 0 && !m_statuses[i]) {
                    ::kill(m_pids[i], signo);
                }
            }
        }
        if (m_running > 0) {
            wait_signal();
        }
    });
}

void LocalRun::read_reports() {
    m_reports.async_read_some(asio::buffer(m_buffer), [this](const error_code& ec, std::size_t n) {
        if (ec) {
            return;
        }
        m_text.append(m_buffer.data(), n);
        parse_reports();
        read_reports();
    });
}

void LocalRun::parse_reports() {
    std::size_t end = 0;
    while ((end = m_text.find('\n')) != std::string::npos) {
        const std::string line = m_text.substr(0, end);
        m_text.erase(0, end + 1);
        unsigned rank = 0;
        std::array<char, 32> outcome{};
        int status = 0;
        if (std::sscanf(line.c_str(), "%u %31s %d", &rank, outcome.data(), &status) == 3 &&
            std::string_view(outcome.data()) == "aborted" && !m_abort_status) {
            m_abort_status = status;
        }
    }
}

void LocalRun::reap() {
    int wait_status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &wait_status, WNOHANG)) > 0) {
        const auto it = std::find(m_pids.begin(), m_pids.end(), pid);
        if (it == m_pids.end()) {
            continue; // an orphan re-parented to us
        }
        const auto index = static_cast<std::size_t>(it - m_pids.begin());
        m_statuses[index] = ExitStatus::from_wait_status(wait_status);
        --m_running;
        logger().debug("local: launcher of rank {} {}", index, describe(*m_statuses[index]));
    }
    if (m_running == 0) {
        error_code ignored;
        m_signals.cancel(ignored);
        m_reports.cancel(ignored);
        m_io.stop();
    }
}

} // namespace

int run_local(const LocalOptions& options) {
    if (options.ntasks == 0) {
        throw errors::invalid_argument("--local", "needs at least one task", "0");
    }
    if (options.launcher_argv.empty()) {
        throw errors::invalid_argument("--local", "no launcher command", "");
    }
    ignore_sigpipe();
    try {
        become_subreaper();
    } catch (const std::system_error& e) {
        logger().warn("cannot become a child subreaper: {}", e.what());
    }
    LocalRun local(options);
    return local.run();
}

} // namespace tfslurm
