// SPDX-License-Identifier: MIT
// The node relay (detail/node_relay.hpp): a Unix-socket listener in the node leader's launcher,
// one session per local launcher. Single-threaded on the launcher's io_context; handlers never
// throw.
#include "detail/node_relay.hpp"

#include "detail/fd.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <unordered_map>
#include <utility>

namespace tfslurm::detail {

namespace asio = boost::asio;
using Unix = asio::local::stream_protocol;
using boost::system::error_code;

std::string relay_path(protocol::StepId step, std::uint32_t leader) {
    return fmt::format(
        "/tmp/tfslurm-{}/relay-{}.{}-{}.sock", ::geteuid(), step.job, step.step, leader);
}

void ensure_private_directory(const std::string& path) {
    const std::string dir = path.substr(0, path.rfind('/'));
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        throw errors::make(Errc::io,
                           "relay",
                           fmt::format("cannot create {} ({})", quote(dir), std::strerror(errno)));
    }
    struct stat info {};
    if (::lstat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode) || info.st_uid != ::geteuid() ||
        (info.st_mode & 077U) != 0) {
        // Another user could otherwise replace our socket with theirs (the proofs would still
        // fail, but the node's launchers would never register).
        throw errors::make(
            Errc::io,
            "relay",
            fmt::format("{} is not a private directory of uid {}", quote(dir), ::geteuid()),
            "remove it, or let this user create it (mode 0700)");
    }
}

struct NodeRelay::Impl : std::enable_shared_from_this<NodeRelay::Impl> {
    class Session;

    Impl(asio::io_context& context,
         const protocol::Authenticator& authenticator,
         protocol::StepId step_id,
         std::set<std::uint32_t> local,
         Millis timeout,
         std::function<void(const protocol::Relay&)> up,
         std::function<void()> on_idle)
        : io(context), acceptor(context), watch_timer(context), auth(authenticator), step(step_id),
          unseen(std::move(local)), ranks(unseen), heartbeat_timeout(timeout),
          upstream(std::move(up)), idle(std::move(on_idle)) {}

    void accept();
    /// Every tick: a registered launcher silent for heartbeat_timeout is closed (and reported
    /// upstream as `closed`): its heartbeats stop here, so the coordinator cannot see it.
    void watch();
    void ended(const std::shared_ptr<Session>& session);
    [[nodiscard]] bool busy() const noexcept {
        return !sessions.empty() || (waiting && !unseen.empty());
    }
    void check_idle() {
        if (!busy() && idle && !idle_posted) {
            idle_posted = true;
            asio::post(io, [self = shared_from_this()] {
                self->idle_posted = false;
                if (!self->busy() && self->idle) {
                    self->idle();
                }
            });
        }
    }

    asio::io_context& io;
    Unix::acceptor acceptor;
    asio::steady_timer watch_timer;
    const protocol::Authenticator& auth;
    protocol::StepId step;
    std::set<std::uint32_t> unseen; ///< local ranks that never sent a valid hello
    const std::set<std::uint32_t> ranks;
    Millis heartbeat_timeout;
    /// A local launcher's heartbeat, as every launcher encodes it: answered by pulse(), not
    /// sent up (the leader's heartbeat stands for its node).
    const std::string heartbeat = protocol::encode_payload(protocol::Heartbeat{});
    const std::shared_ptr<const std::string> heartbeat_frame =
        std::make_shared<const std::string>(protocol::encode_frame(protocol::Heartbeat{}));
    std::function<void(const protocol::Relay&)> upstream;
    std::function<void()> idle;
    std::set<std::shared_ptr<Session>> sessions;
    std::unordered_map<std::uint32_t, std::shared_ptr<Session>> by_rank;
    std::string path;
    bool waiting = true;
    bool idle_posted = false;
    bool closed = false;
};

/// One local launcher: challenge, hello (checked here, registered upstream), then frames both
/// ways unchanged.
class NodeRelay::Impl::Session : public std::enable_shared_from_this<Session> {
  public:
    Session(std::shared_ptr<Impl> relay, Unix::socket socket)
        : m_relay(std::move(relay)), m_socket(std::move(socket)) {}

    void start() {
        try {
            m_nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
            send(std::make_shared<const std::string>(
                protocol::encode_frame(protocol::Challenge{m_nonce})));
        } catch (const std::exception& e) {
            logger().error("relay: no challenge: {}", e.what());
            close("no challenge");
            return;
        }
        read();
    }

    /// A message of the coordinator for this launcher (an encoded payload).
    void deliver(const std::string& payload, const std::shared_ptr<const std::string>& frame) {
        if (m_state == State::registered) {
            send(frame);
            return;
        }
        if (m_state != State::pending) {
            return;
        }
        // The coordinator's answer to the hello: the leader proves itself to its launcher.
        try {
            const protocol::Message answer = protocol::decode_payload(payload);
            if (auto welcome = std::get_if<protocol::Welcome>(&answer)) {
                protocol::Welcome proved = *welcome;
                proved.credential = m_relay->auth.prove_coordinator(
                    m_hello.auth, m_hello.nonce, m_relay->step, m_hello.rank);
                m_state = State::registered;
                send(std::make_shared<const std::string>(protocol::encode_frame(proved)));
                return;
            }
            if (std::holds_alternative<protocol::Reject>(answer)) {
                send(frame);
                m_close_after_write = true;
                m_state = State::closing;
                return;
            }
            throw errors::make(Errc::protocol,
                               "protocol",
                               fmt::format("expected welcome or reject for rank {}, got {}",
                                           m_hello.rank,
                                           protocol::type_name(answer)));
        } catch (const std::exception& e) {
            logger().error("relay: rank {}: {}", m_hello.rank, e.what());
            close(e.what());
        }
    }

    void close(const std::string& why) {
        if (m_state == State::closed) {
            return;
        }
        const bool announced = m_state == State::pending || m_state == State::registered ||
                               (m_state == State::closing && m_forwarded);
        m_state = State::closed;
        error_code ignored;
        m_socket.shutdown(Unix::socket::shutdown_both, ignored);
        m_socket.close(ignored);
        if (announced && !m_relay->closed) {
            m_relay->upstream(protocol::Relay{{m_hello.rank}, {}, why});
        }
        m_relay->ended(shared_from_this());
    }

    [[nodiscard]] std::uint32_t rank() const noexcept { return m_hello.rank; }
    [[nodiscard]] bool has_rank() const noexcept { return m_forwarded; }
    [[nodiscard]] bool registered() const noexcept { return m_state == State::registered; }
    [[nodiscard]] Clock::time_point last_heard() const noexcept { return m_last_heard; }
    /// The coordinator answered the leader's heartbeat: it is alive for this launcher too.
    void pulse() {
        if (m_state == State::registered) {
            send(m_relay->heartbeat_frame);
        }
    }

  private:
    enum class State { handshake, pending, registered, closing, closed };

    void read() {
        m_socket.async_read_some(asio::buffer(m_buffer),
                                 [self = shared_from_this()](const error_code& ec, std::size_t n) {
                                     self->on_read(ec, n);
                                 });
    }

    void on_read(const error_code& ec, std::size_t n) {
        if (m_state == State::closed) {
            return;
        }
        if (ec) {
            close(ec == asio::error::eof ? "connection closed" : ec.message());
            return;
        }
        m_last_heard = Clock::now();
        try {
            m_decoder.feed(std::string_view(m_buffer.data(), n));
            while (auto payload = m_decoder.next()) {
                if (m_state == State::handshake) {
                    hello(*payload);
                } else if (m_state == State::registered && *payload == m_relay->heartbeat) {
                    continue; // heard (above); the leader's own heartbeat speaks for the node
                } else if (m_state == State::registered) {
                    // Anything else passes through: only its form is checked, so that one bad
                    // frame costs this launcher its connection, not the node its leader's.
                    protocol::check_relayable(*payload);
                    m_relay->upstream(protocol::Relay{{m_hello.rank}, std::move(*payload), {}});
                } else if (m_state == State::pending) {
                    throw errors::make(Errc::protocol, "protocol", "a message before the welcome");
                }
                if (m_state == State::closed) {
                    return;
                }
            }
        } catch (const std::exception& e) {
            logger().warn("relay: closing a local connection{}: {}",
                          m_forwarded ? fmt::format(" (rank {})", m_hello.rank) : std::string(),
                          e.what());
            close("protocol error");
            return;
        }
        read();
    }

    /// Check a local launcher's hello: its proof, that its rank is this node's and not taken.
    void hello(const std::string& payload) {
        const protocol::Message message = protocol::decode_payload(payload);
        const auto* hello = std::get_if<protocol::Hello>(&message);
        if (hello == nullptr) {
            throw errors::make(Errc::protocol,
                               "protocol",
                               fmt::format("expected hello, got {}", protocol::type_name(message)));
        }
        std::optional<protocol::Reject> reject =
            m_relay->auth.verify(*hello, m_nonce, m_relay->step);
        if (!reject && (m_relay->ranks.count(hello->rank) == 0 || hello->relay)) {
            reject = protocol::Reject{
                protocol::RejectCode::refused,
                fmt::format("rank {} does not run on this node's relay", hello->rank)};
        }
        if (!reject && m_relay->by_rank.count(hello->rank) != 0) {
            reject = protocol::Reject{protocol::RejectCode::refused,
                                      fmt::format("rank {} is already registered", hello->rank)};
        }
        if (reject) {
            logger().warn(
                "relay: rejected rank {} (pid {}): {}", hello->rank, hello->pid, reject->reason);
            send(std::make_shared<const std::string>(protocol::encode_frame(*reject)));
            m_close_after_write = true;
            m_state = State::closing;
            return;
        }
        m_hello = *hello;
        m_forwarded = true;
        m_state = State::pending;
        m_relay->by_rank[hello->rank] = shared_from_this();
        m_relay->unseen.erase(hello->rank);
        m_relay->upstream(protocol::Relay{{hello->rank}, payload, {}});
    }

    void send(std::shared_ptr<const std::string> frame) {
        if (m_state == State::closed) {
            return;
        }
        m_queue.push_back(std::move(frame));
        if (!m_writing) {
            write();
        }
    }

    void write() {
        m_writing = true;
        asio::async_write(m_socket,
                          asio::buffer(*m_queue.front()),
                          [self = shared_from_this()](const error_code& ec, std::size_t /*n*/) {
                              self->m_writing = false;
                              if (self->m_state == State::closed) {
                                  return;
                              }
                              if (ec) {
                                  self->close(ec.message());
                                  return;
                              }
                              self->m_queue.pop_front();
                              if (!self->m_queue.empty()) {
                                  self->write();
                              } else if (self->m_close_after_write) {
                                  self->close("rejected");
                              }
                          });
    }

    std::shared_ptr<Impl> m_relay;
    Unix::socket m_socket;
    std::string m_nonce;
    protocol::Hello m_hello;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    std::deque<std::shared_ptr<const std::string>> m_queue;
    State m_state = State::handshake;
    Clock::time_point m_last_heard = Clock::now();
    bool m_forwarded = false; ///< its hello went upstream: its end must too
    bool m_writing = false;
    bool m_close_after_write = false;
};

void NodeRelay::Impl::accept() {
    acceptor.async_accept([self = shared_from_this()](const error_code& ec, Unix::socket socket) {
        if (self->closed || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec) {
            logger().warn("relay: accept: {}", ec.message());
        } else {
            detail::set_cloexec(socket.native_handle());
            auto session = std::make_shared<Session>(self, std::move(socket));
            self->sessions.insert(session);
            session->start();
        }
        self->accept();
    });
}

void NodeRelay::Impl::watch() {
    watch_timer.expires_after(tick_interval(heartbeat_timeout));
    watch_timer.async_wait([self = shared_from_this()](const error_code& ec) {
        if (ec || self->closed) {
            return;
        }
        const auto now = Clock::now();
        const auto all = self->sessions;
        for (const auto& session : all) {
            if (session->registered() &&
                silent_too_long(session->last_heard(), now, self->heartbeat_timeout)) {
                const std::string why = no_heartbeat(self->heartbeat_timeout);
                logger().warn("relay: rank {}: {}", session->rank(), why);
                session->close(why);
            }
        }
        self->watch();
    });
}

void NodeRelay::Impl::ended(const std::shared_ptr<Session>& session) {
    sessions.erase(session);
    if (session->has_rank()) {
        const auto it = by_rank.find(session->rank());
        if (it != by_rank.end() && it->second == session) {
            by_rank.erase(it);
        }
    }
    check_idle();
}

NodeRelay::NodeRelay(asio::io_context& io,
                     const protocol::Authenticator& auth,
                     protocol::StepId step,
                     std::set<std::uint32_t> ranks,
                     Millis heartbeat_timeout,
                     std::function<void(const protocol::Relay&)> upstream,
                     std::function<void()> idle)
    : m_impl(std::make_shared<Impl>(io,
                                    auth,
                                    step,
                                    std::move(ranks),
                                    heartbeat_timeout,
                                    std::move(upstream),
                                    std::move(idle))) {}

NodeRelay::~NodeRelay() {
    try {
        close();
    } catch (...) {
        // Closing sockets does not fail in practice; a destructor must not throw anyway.
    }
}

void NodeRelay::listen(const std::string& path) {
    ensure_private_directory(path);
    ::unlink(path.c_str()); // a stale socket of an earlier run of this step
    error_code ec;
    m_impl->acceptor.open(Unix(), ec);
    if (!ec) {
        detail::set_cloexec(m_impl->acceptor.native_handle());
        m_impl->acceptor.bind(Unix::endpoint(path), ec);
    }
    if (!ec) {
        m_impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        throw errors::make(
            Errc::io, "relay", fmt::format("cannot listen on {} ({})", quote(path), ec.message()));
    }
    m_impl->path = path;
    m_impl->accept();
    m_impl->watch();
}

void NodeRelay::pulse() {
    for (const auto& session : m_impl->sessions) {
        session->pulse();
    }
}

void NodeRelay::downstream(const protocol::Relay& relay) {
    const auto frame = std::make_shared<const std::string>(
        protocol::frame_payload(relay.message, protocol::k_max_trusted_frame));
    for (const std::uint32_t rank : relay.ranks) {
        const auto it = m_impl->by_rank.find(rank);
        if (it != m_impl->by_rank.end()) {
            it->second->deliver(relay.message, frame);
        }
    }
}

void NodeRelay::upstream_lost() {
    m_impl->waiting = false;
    close();
}

void NodeRelay::stop_waiting() {
    m_impl->waiting = false;
    m_impl->check_idle();
}

bool NodeRelay::busy() const noexcept {
    return m_impl->busy();
}

void NodeRelay::close() {
    if (m_impl->closed) {
        return;
    }
    m_impl->closed = true;
    m_impl->waiting = false;
    error_code ignored;
    m_impl->acceptor.close(ignored);
    m_impl->watch_timer.cancel();
    if (!m_impl->path.empty()) {
        ::unlink(m_impl->path.c_str());
    }
    const auto all = m_impl->sessions;
    for (const auto& session : all) {
        session->close("relay closed");
    }
    m_impl->check_idle();
}

} // namespace tfslurm::detail
