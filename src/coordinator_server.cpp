// SPDX-License-Identifier: MIT
// The coordinator on a TCP port: sessions, challenges, authentication and timers around the
// pure Coordinator. Single-threaded on the caller's io_context; handlers never throw.
#include "detail/fd.hpp"

#include <tfslurm/auth.hpp>
#include <tfslurm/coordinator_server.hpp>
#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <set>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace tfslurm {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

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

// --- CoordinatorServer ---------------------------------------------------------------------------
// (HandshakePool and LogBudget, its defences against unauthenticated peers, are in
// connection_limits.cpp.)

namespace {

/// Unauthenticated connections one address may hold: more than the launchers of a node.
constexpr std::size_t k_handshakes_per_peer = 256;
/// Unauthenticated connections in all, beyond one per rank.
constexpr std::size_t k_handshakes_headroom = 1024;
/// Warnings about connections without a valid hello: this many per window, then a summary.
constexpr std::size_t k_warnings_per_window = 10;
constexpr Millis k_warning_window{10000};

} // namespace
struct CoordinatorServer::Impl : std::enable_shared_from_this<CoordinatorServer::Impl> {
    class Session;

    Impl(asio::io_context& context,
         CoordinatorSettings settings,
         protocol::Authenticator authenticator,
         protocol::StepId step_id)
        : io(context), acceptor(context), retry_timer(context), tick_timer(context),
          coordinator(std::move(settings), Clock::now()), auth(std::move(authenticator)),
          step(step_id), by_rank(coordinator.size()),
          leaders(node_leaders(coordinator.settings().ranks)),
          handshakes(k_handshakes_per_peer, k_handshakes_headroom + coordinator.size()),
          noise(k_warnings_per_window, k_warning_window) {}

    /// Listen on the first of `ports` that can be bound. \throws Error (Errc::io) if none.
    void listen(const std::string& bind_address, const std::vector<std::uint16_t>& ports);
    /// Open, bind and listen; on failure the acceptor is closed again.
    [[nodiscard]] error_code try_listen(const Tcp::endpoint& endpoint);
    void accept();
    void tick();
    void flush();
    /// Send one message to its ranks: once per connection (a node's ranks in one `relay`),
    /// every connection's frame sharing the one encoded payload.
    void deliver(const std::vector<std::uint32_t>& ranks,
                 const std::shared_ptr<const std::string>& payload);
    void remove(const std::shared_ptr<Session>& session);
    void close();
    /// Warn about one unauthenticated connection, within the noise budget.
    void warn_connection(const std::string& text);

    asio::io_context& io;
    Tcp::acceptor acceptor;
    asio::steady_timer retry_timer;
    asio::steady_timer tick_timer;
    Coordinator coordinator;
    protocol::Authenticator auth;
    protocol::StepId step;
    /// The connection each rank's messages go to: its own, or its node leader's (the tree).
    std::vector<std::shared_ptr<Session>> by_rank;
    std::vector<std::uint32_t> leaders; ///< node_leaders() of the plan
    std::set<std::shared_ptr<Session>> sessions;
    HandshakePool handshakes;
    std::unordered_map<std::uint64_t, std::weak_ptr<Session>> pending; ///< by connection id
    std::uint64_t next_id = 0;
    LogBudget noise;
    std::function<void()> finished_callback;
    /// The answer to every heartbeat, encoded once.
    const std::shared_ptr<const std::string> heartbeat_payload =
        std::make_shared<const std::string>(protocol::encode_payload(protocol::Heartbeat{}));
    /// The welcome of every relayed launcher, encoded once (the leader adds its own proof).
    const std::shared_ptr<const std::string> relayed_welcome =
        std::make_shared<const std::string>(protocol::encode_payload(
            protocol::Welcome{static_cast<std::uint32_t>(coordinator.size()), {}}));
    bool finished_reported = false;
    bool closed = false;
};

/// One accepted connection: challenge, hello, then heartbeats/exit/interrupt in, stop/abort out.
class CoordinatorServer::Impl::Session : public std::enable_shared_from_this<Session> {
  public:
    Session(std::shared_ptr<Impl> server, Tcp::socket socket, std::uint64_t id)
        : m_server(std::move(server)), m_socket(std::move(socket)), m_hello_timer(m_server->io),
          m_id(id) {
        error_code ec;
        const auto remote = m_socket.remote_endpoint(ec);
        m_address = ec ? std::string("?") : remote.address().to_string();
        m_peer = ec ? std::string("?") : fmt::format("{}:{}", m_address, remote.port());
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
                self->m_server->warn_connection(fmt::format(
                    "closing connection from {}: no hello within {}",
                    self->m_peer,
                    format_seconds(self->m_server->coordinator.settings().hello_timeout)));
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
            // Only a registered launcher is sent more than a challenge, welcome or reject: it
            // accepts trusted frames (a `cluster` of a large step exceeds k_max_frame).
            send_frame({protocol::encode_frame(message, protocol::k_max_trusted_frame), {}, {}});
        } catch (const std::exception& e) {
            logger().error(
                "coordinator: cannot encode {}: {}", protocol::type_name(message), e.what());
        }
    }

    /// `payload` (an encoded message) for `ranks`, all carried by this connection: as it is
    /// to the launcher itself, in one `relay` to the others of its node. The payload is shared
    /// by every connection's frame, never copied (a `cluster` of 10,000 ranks to 1,250 nodes).
    void send_to(const std::vector<std::uint32_t>& ranks,
                 const std::shared_ptr<const std::string>& payload) {
        if (m_closed) {
            return;
        }
        std::vector<std::uint32_t> relayed;
        relayed.reserve(ranks.size());
        for (const std::uint32_t rank : ranks) {
            if (rank == m_rank) {
                send_shared({}, payload);
            } else {
                relayed.push_back(rank);
            }
        }
        if (!relayed.empty()) {
            send_shared(relayed, payload);
        }
    }

    /// A frame is a head, a payload shared with other connections (may be null) and a tail.
    struct Frame {
        std::string head;
        std::shared_ptr<const std::string> body;
        std::string tail;
    };

    void send_shared(const std::vector<std::uint32_t>& relayed,
                     const std::shared_ptr<const std::string>& payload) {
        try {
            auto parts =
                protocol::frame_parts(payload->size(), relayed, protocol::k_max_trusted_frame);
            send_frame({std::move(parts.head), payload, std::move(parts.tail)});
        } catch (const std::exception& e) {
            logger().error("coordinator: cannot send to rank {}: {}", m_rank, e.what());
        }
    }

    void send_frame(Frame frame) {
        if (m_closed) {
            return;
        }
        m_queue.push_back(std::move(frame));
        if (m_queue.size() > 4096) {
            logger().warn("coordinator: closing connection from {}: it does not read", m_peer);
            close();
            return;
        }
        if (!m_writing) {
            // Written once the handler that queued it is done: what one read produces (a
            // node's welcomes, a leader's own stop and its followers') leaves in one system call.
            m_writing = true;
            asio::post(m_socket.get_executor(), [self = shared_from_this()] {
                if (!self->m_closed) {
                    self->write();
                }
            });
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
            m_server->handshakes.remove(m_id);
            m_server->pending.erase(m_id);
        }
        m_server->remove(shared_from_this());
    }

    [[nodiscard]] bool registered() const noexcept { return m_registered; }
    [[nodiscard]] const std::string& address() const noexcept { return m_address; }
    [[nodiscard]] const std::string& peer() const noexcept { return m_peer; }
    [[nodiscard]] std::uint32_t rank() const noexcept { return m_rank; }
    /// The other ranks of its node this (leader's) connection registered.
    [[nodiscard]] const std::vector<std::uint32_t>& relayed() const noexcept { return m_relayed; }

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
                if (m_node) {
                    // A leader's envelopes are decoded with their message in one parse.
                    auto unwrapped = protocol::decode_unwrapped(*payload);
                    handle(unwrapped.message, unwrapped.inner);
                } else {
                    handle(protocol::decode_payload(*payload), std::nullopt);
                }
                if (m_closed || m_close_after_write) {
                    return;
                }
            }
        } catch (const Error& e) {
            // The error quotes what the peer sent (Error messages quote their input).
            if (m_registered) {
                logger().warn("coordinator: closing connection from {} (rank {}): {}",
                              m_peer,
                              m_rank,
                              e.what());
            } else {
                m_server->warn_connection(
                    fmt::format("closing connection from {}: {}", m_peer, e.what()));
            }
            close();
            return;
        } catch (const std::exception& e) {
            logger().error("coordinator: connection from {}: {}", m_peer, e.what());
            close();
            return;
        }
        read();
    }

    /// Check a hello (its proof, then the plan), prove ourselves and register it; else reject.
    void register_hello(const protocol::Hello& hello, Clock::time_point now) {
        Coordinator& state = m_server->coordinator;
        std::optional<protocol::Reject> reject =
            m_server->auth.verify(hello, m_nonce, m_server->step);
        if (!reject) {
            if (auto reason = state.admit(hello.rank, hello.role)) {
                reject = protocol::Reject{protocol::RejectCode::refused, std::move(*reason)};
            } else if (hello.relay && m_server->leaders[hello.rank] != hello.rank) {
                reject =
                    protocol::Reject{protocol::RejectCode::refused,
                                     fmt::format("rank {} is not its node's leader (rank {} is)",
                                                 hello.rank,
                                                 m_server->leaders[hello.rank])};
            }
        }
        if (reject) {
            // The host is the peer's own text: quoted, so that it cannot forge a log line
            // or reach the terminal as escape sequences.
            m_server->warn_connection(fmt::format("rejected rank {} from {} (pid {} on {}): {}",
                                                  hello.rank,
                                                  m_peer,
                                                  hello.pid,
                                                  quote(hello.host),
                                                  reject->reason));
            send(*reject);
            m_close_after_write = true;
            return;
        }
        std::string proof;
        try {
            proof = m_server->auth.prove_coordinator(
                hello.auth, hello.nonce, m_server->step, hello.rank);
        } catch (const Error& e) {
            logger().error("coordinator: cannot prove itself to rank {}: {}", hello.rank, e.what());
            close();
            return;
        }
        m_registered = true;
        m_rank = hello.rank;
        m_node = hello.relay;
        if (m_node) {
            m_decoder.set_limit(protocol::k_max_relay_frame);
        }
        m_hello_timer.cancel();
        m_server->handshakes.remove(m_id);
        m_server->pending.erase(m_id);
        m_server->by_rank[m_rank] = shared_from_this();
        send(protocol::Welcome{static_cast<std::uint32_t>(state.size()), std::move(proof)});
        state.registered(m_rank, now, hello.address, hello.port);
        m_server->flush();
    }

    /// `inner`: a relay's message, decoded with it (decode_unwrapped()).
    void handle(const protocol::Message& message, const std::optional<protocol::Message>& inner) {
        const auto now = Clock::now();
        if (!m_registered) {
            const auto* hello = std::get_if<protocol::Hello>(&message);
            if (hello == nullptr) {
                throw errors::make(
                    Errc::protocol,
                    "protocol",
                    fmt::format("expected hello, got {}", protocol::type_name(message)));
            }
            register_hello(*hello, now);
            return;
        }
        if (const auto* relay = std::get_if<protocol::Relay>(&message);
            relay != nullptr && m_node) {
            relayed(*relay, inner, now);
        } else {
            dispatch(m_rank, message, now);
        }
        m_server->flush();
    }

    /// A message of `rank` (this launcher's, or one relayed for its node) for the Coordinator.
    void dispatch(std::uint32_t rank, const protocol::Message& message, Clock::time_point now) {
        Coordinator& state = m_server->coordinator;
        if (std::holds_alternative<protocol::Heartbeat>(message)) {
            state.heartbeat(rank, now);
            if (rank == m_rank) {
                // A leader's heartbeat stands for its node: its relay sends none of its
                // followers' up and reports one silent for the heartbeat timeout as `closed`.
                for (const std::uint32_t follower : m_relayed) {
                    if (m_server->by_rank[follower].get() == this) {
                        state.heartbeat(follower, now);
                    }
                }
            }
            send_to({rank}, m_server->heartbeat_payload);
        } else if (const auto* exit = std::get_if<protocol::Exit>(&message)) {
            state.exited(rank, *exit, now);
        } else if (const auto* interrupt = std::get_if<protocol::Interrupt>(&message)) {
            state.interrupted(rank, interrupt->signal, now, interrupt->whole_step);
        } else if (const auto* stall = std::get_if<protocol::Stall>(&message)) {
            state.stalled(rank, Millis{static_cast<Millis::rep>(stall->silent_ms)}, now);
        } else if (const auto* probed = std::get_if<protocol::Probed>(&message)) {
            state.probed(rank, *probed, now);
        } else {
            throw errors::make(
                Errc::protocol,
                "protocol",
                fmt::format("unexpected {} from a launcher", protocol::type_name(message)));
        }
    }

    /// A node leader's envelope: a local launcher's hello (registered here, answered with a
    /// welcome or reject for the leader to prove and pass on), its connection's end, or any
    /// other message of it. The leader proved who it is; it speaks only for ranks of its node.
    void relayed(const protocol::Relay& relay,
                 const std::optional<protocol::Message>& unwrapped,
                 Clock::time_point now) {
        const std::uint32_t rank = relay.ranks.front();
        auto& members = m_server->coordinator.settings().ranks;
        if (relay.ranks.size() != 1 || rank >= members.size() || rank == m_rank ||
            m_server->leaders[rank] != m_rank) {
            throw errors::make(
                Errc::protocol,
                "protocol",
                fmt::format("relay for rank {} of another node from rank {}", rank, m_rank));
        }
        auto& route = m_server->by_rank[rank];
        if (!relay.closed.empty()) {
            if (route.get() == this) {
                route.reset();
                // The leader's reason: `connection closed`, or `no heartbeat for 10 s` (its
                // relay watches the heartbeats it no longer sends up).
                m_server->coordinator.connection_lost(rank, now, relay.closed);
            }
            return;
        }
        if (!unwrapped) {
            throw errors::make(Errc::protocol, "protocol", "relay carries no message");
        }
        const protocol::Message& inner = *unwrapped;
        if (const auto* hello = std::get_if<protocol::Hello>(&inner)) {
            register_relayed(rank, *hello, now);
        } else if (route.get() == this) {
            dispatch(rank, inner, now);
        } else {
            throw errors::make(Errc::protocol,
                               "protocol",
                               fmt::format("relayed {} of unregistered rank {}",
                                           protocol::type_name(inner),
                                           rank));
        }
    }

    void register_relayed(std::uint32_t rank, const protocol::Hello& hello, Clock::time_point now) {
        Coordinator& state = m_server->coordinator;
        auto reason = hello.rank != rank
                          ? std::optional<std::string>(fmt::format(
                                "hello of rank {} relayed as rank {}", hello.rank, rank))
                          : state.admit(rank, hello.role);
        if (reason) {
            logger().warn("coordinator: rejected rank {} relayed by rank {} from {}: {}",
                          rank,
                          m_rank,
                          m_peer,
                          *reason);
            send_to({rank},
                    std::make_shared<const std::string>(protocol::encode_payload(
                        protocol::Reject{protocol::RejectCode::refused, std::move(*reason)})));
            return;
        }
        m_server->by_rank[rank] = shared_from_this();
        m_relayed.push_back(rank);
        // The leader proves itself to its launcher: the welcome carries no credential here.
        send_to({rank}, m_server->relayed_welcome);
        state.registered(rank, now, hello.address);
    }

    /// Write the queued frames, up to k_frames_per_write in one gather write: a node's
    /// welcomes go out in one system call, not one each.
    void write() {
        constexpr std::size_t k_frames_per_write = 64;
        m_writing = true;
        m_in_flight = std::min(m_queue.size(), k_frames_per_write);
        m_buffers.clear();
        for (std::size_t i = 0; i < m_in_flight; ++i) {
            const Frame& frame = m_queue[i];
            m_buffers.push_back(asio::buffer(frame.head));
            if (frame.body) {
                m_buffers.push_back(asio::buffer(*frame.body));
            }
            if (!frame.tail.empty()) {
                m_buffers.push_back(asio::buffer(frame.tail));
            }
        }
        asio::async_write(m_socket,
                          m_buffers,
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
        m_queue.erase(m_queue.begin(), m_queue.begin() + static_cast<std::ptrdiff_t>(m_in_flight));
        if (!m_queue.empty()) {
            write();
        } else if (m_close_after_write) {
            close();
        }
    }

    std::shared_ptr<Impl> m_server;
    Tcp::socket m_socket;
    asio::steady_timer m_hello_timer;
    std::uint64_t m_id;
    std::string m_address; ///< the peer's address, without the port
    std::string m_peer;    ///< address:port
    std::string m_nonce;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    std::deque<Frame> m_queue;
    std::vector<asio::const_buffer> m_buffers; ///< of the frames being written
    std::size_t m_in_flight = 0;               ///< frames being written (the queue's first)
    bool m_writing = false;
    bool m_registered = false;
    bool m_close_after_write = false;
    bool m_closed = false;
    bool m_node = false; ///< a node leader's connection (Hello::relay)
    std::uint32_t m_rank = 0;
    std::vector<std::uint32_t> m_relayed;
};

error_code CoordinatorServer::Impl::try_listen(const Tcp::endpoint& endpoint) {
    error_code ec;
    acceptor.open(endpoint.protocol(), ec);
    if (ec) {
        return ec;
    }
    detail::set_cloexec(acceptor.native_handle());
    acceptor.set_option(Tcp::acceptor::reuse_address(true), ec);
    if (!ec) {
        acceptor.bind(endpoint, ec);
    }
    if (!ec) {
        acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        error_code ignored;
        acceptor.close(ignored);
    }
    return ec;
}

void CoordinatorServer::Impl::listen(const std::string& bind_address,
                                     const std::vector<std::uint16_t>& ports) {
    error_code ec;
    const auto address = asio::ip::make_address(bind_address, ec);
    const auto host = ec ? asio::ip::address(asio::ip::address_v4::any()) : address;
    error_code first_error;
    for (std::size_t i = 0; i < ports.size(); ++i) {
        const auto error = try_listen(Tcp::endpoint(host, ports[i]));
        if (!error) {
            if (i > 0) {
                // Every launcher tries the same candidates in order: they find this one.
                logger().warn("coordinator: cannot listen on {}:{} ({}): listening on fallback "
                              "port {} ({} of {})",
                              host.to_string(),
                              ports.front(),
                              first_error.message(),
                              acceptor.local_endpoint().port(),
                              i,
                              ports.size() - 1);
            }
            logger().debug("coordinator: listening on {}:{} for {} ranks",
                           host.to_string(),
                           acceptor.local_endpoint().port(),
                           coordinator.size());
            return;
        }
        if (i == 0) {
            first_error = error;
        }
        logger().debug("coordinator: cannot listen on {}:{} ({})",
                       host.to_string(),
                       ports[i],
                       error.message());
    }
    std::string fallbacks;
    if (ports.size() > 1) {
        fallbacks = fmt::format(" nor on its fallback ports {}",
                                fmt::join(ports.begin() + 1, ports.end(), ", "));
    }
    throw errors::make(Errc::io,
                       "coordinator",
                       fmt::format("cannot listen on {}:{} ({}){}",
                                   host.to_string(),
                                   ports.empty() ? 0 : ports.front(),
                                   first_error.message(),
                                   fallbacks),
                       "another job or a stale launcher holds the control port; choose "
                       "another " +
                           setting_ref("port_base"));
}

void CoordinatorServer::Impl::accept() {
    acceptor.async_accept([self = shared_from_this()](const error_code& ec, Tcp::socket socket) {
        if (self->closed || ec == asio::error::operation_aborted) {
            return;
        }
        detail::set_cloexec(socket.native_handle());
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
        const std::uint64_t id = self->next_id++;
        auto session = std::make_shared<Session>(self, std::move(socket), id);
        self->sessions.insert(session);
        self->pending.emplace(id, session);
        // Always admitted: the flooder's oldest idle connections make room (HandshakePool).
        for (const std::uint64_t evicted : self->handshakes.admit(id, session->address())) {
            if (const auto victim = self->pending[evicted].lock()) {
                self->warn_connection(
                    fmt::format("closing connection from {}: too many connections without a "
                                "hello from {}",
                                victim->peer(),
                                victim->address()));
                victim->close();
            }
            self->pending.erase(evicted);
        }
        session->start();
        self->accept();
    });
}

void CoordinatorServer::Impl::tick() {
    tick_timer.expires_after(tick_interval(coordinator.settings().heartbeat_timeout));
    tick_timer.async_wait([self = shared_from_this()](const error_code& ec) {
        if (ec || self->closed) {
            return;
        }
        const auto now = Clock::now();
        self->coordinator.tick(now);
        self->flush();
        if (const auto suppressed = self->noise.take_summary(now)) {
            logger().warn("coordinator: {} more warnings about connections without a valid hello "
                          "in the last {} (not shown)",
                          *suppressed,
                          format_seconds(k_warning_window));
        }
        self->tick();
    });
}

void CoordinatorServer::Impl::flush() {
    // A verdict or `cluster` is one Outgoing for every rank: encoded once, sent once per
    // connection.
    for (const auto& out : coordinator.take_outgoing()) {
        deliver(out.ranks,
                std::make_shared<const std::string>(protocol::encode_payload(out.message)));
    }
    if (coordinator.finished() && !finished_reported) {
        finished_reported = true;
        if (finished_callback) {
            // Posted: the callback may close this server, which must not happen mid-handler.
            asio::post(io, [callback = finished_callback] { callback(); });
        }
    }
}

void CoordinatorServer::Impl::deliver(const std::vector<std::uint32_t>& ranks,
                                      const std::shared_ptr<const std::string>& payload) {
    // Connections in order of first appearance, each with its ranks in order.
    std::vector<std::pair<Session*, std::vector<std::uint32_t>>> targets;
    std::unordered_map<Session*, std::size_t> index;
    for (const std::uint32_t rank : ranks) {
        if (rank >= by_rank.size() || !by_rank[rank]) {
            continue;
        }
        Session* session = by_rank[rank].get();
        const auto [it, inserted] = index.try_emplace(session, targets.size());
        if (inserted) {
            targets.emplace_back(session, std::vector<std::uint32_t>{});
        }
        targets[it->second].second.push_back(rank);
    }
    for (const auto& [session, targeted] : targets) {
        session->send_to(targeted, payload);
    }
}

void CoordinatorServer::Impl::remove(const std::shared_ptr<Session>& session) {
    sessions.erase(session);
    if (!session->registered()) {
        return;
    }
    // A leader's connection carried its node: every rank it registered is lost with it.
    std::vector<std::uint32_t> ranks = session->relayed();
    ranks.insert(ranks.begin(), session->rank());
    bool lost = false;
    for (const std::uint32_t rank : ranks) {
        if (by_rank[rank] == session) {
            by_rank[rank].reset();
            coordinator.connection_lost(rank, Clock::now());
            lost = true;
        }
    }
    if (lost) {
        flush();
    }
}

void CoordinatorServer::Impl::warn_connection(const std::string& text) {
    if (noise.allow(Clock::now())) {
        logger().warn("coordinator: {}", text);
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
                                     protocol::StepId step,
                                     const std::string& bind_address,
                                     std::uint16_t port)
    : CoordinatorServer(io,
                        std::move(settings),
                        std::move(auth),
                        step,
                        bind_address,
                        std::vector<std::uint16_t>{port}) {}

CoordinatorServer::CoordinatorServer(asio::io_context& io,
                                     CoordinatorSettings settings,
                                     protocol::Authenticator auth,
                                     protocol::StepId step,
                                     const std::string& bind_address,
                                     const std::vector<std::uint16_t>& ports) {
    // One descriptor per connection plus the listener, stdio and the unauthenticated headroom:
    // per launcher, or with the tree per node (its leader carries the node's other launchers).
    std::size_t connections = settings.ranks.size();
    if (settings.tree) {
        const auto leaders = node_leaders(settings.ranks);
        connections = 0;
        for (std::size_t rank = 0; rank < leaders.size(); ++rank) {
            connections += leaders[rank] == rank ? 1U : 0U;
        }
    }
    ensure_descriptor_limit(
        connections + 64,
        settings.tree ? fmt::format("{} launchers on {} nodes", settings.ranks.size(), connections)
                      : fmt::format("{} launchers", settings.ranks.size()));
    m_impl = std::make_shared<Impl>(io, std::move(settings), std::move(auth), step);
    m_impl->listen(bind_address, ports);
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

} // namespace tfslurm
