// SPDX-License-Identifier: MIT
// The node relay's shell (detail/node_relay.hpp): a Unix-socket listener in the node leader's
// launcher, one socket per local launcher, performing what RelayMachine (relay.cpp) decides.
// Single-threaded on the launcher's io_context, but for the MUNGE proofs (a round trip to munged
// each), made on a small pool whose answers come back to the io thread; handlers never throw.
#include "shell/detail/node_relay.hpp"

#include "os/detail/fd.hpp"
#include "shell/detail/proof_workers.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace tfslurm::detail {

namespace asio = boost::asio;
using Unix = asio::local::stream_protocol;
using boost::system::error_code;

std::string relay_path(protocol::StepId step, std::uint32_t leader) {
    return fmt::format("@tfslurm-{}/relay-{}.{}-{}", ::geteuid(), step.job, step.step, leader);
}

Unix::endpoint relay_endpoint(const std::string& path) {
    if (!path.empty() && path.front() == '@') {
        std::string name = path;
        name.front() = '\0';
        return {name};
    }
    return {path};
}

std::optional<PeerCredentials> peer_credentials(int fd) noexcept {
    struct ucred credentials {};
    socklen_t size = sizeof credentials;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0 ||
        size != sizeof credentials) {
        return std::nullopt;
    }
    return PeerCredentials{credentials.uid, credentials.pid};
}

namespace {

/// Who holds `path` when binding it failed: the process that answers a connection there, by
/// its SO_PEERCRED (empty when nobody answers: a socket that is bound but not listening).
std::string holder_of(asio::io_context& io, const std::string& path) {
    Unix::socket probe(io);
    error_code ec;
    probe.connect(relay_endpoint(path), ec);
    if (ec) {
        return {};
    }
    const auto peer = peer_credentials(probe.native_handle());
    return peer ? fmt::format("uid {} (pid {})", peer->uid, peer->pid) : std::string();
}

} // namespace

struct NodeRelay::Impl : std::enable_shared_from_this<NodeRelay::Impl> {
    class Session;

    Impl(asio::io_context& context,
         const protocol::Authenticator& authenticator,
         RelaySettings settings,
         std::function<void(const protocol::Message&)> up,
         std::function<void()> on_idle)
        : io(context), acceptor(context), watch_timer(context), heartbeat_timer(context),
          wait_timer(context), auth(authenticator), step(settings.step),
          machine(std::move(settings)), upstream(std::move(up)), idle(std::move(on_idle)) {}

    void accept();
    /// Accept, now, every connection waiting in the backlog (the followers that came before the
    /// leader registered): their challenges leave before the leader goes on to spawn its
    /// trainer, which blocks this thread for a few milliseconds.
    void accept_waiting();
    /// Challenge an accepted local connection, if admit() lets it in.
    void accepted(Unix::socket socket);
    /// Whether an accepted local connection is this user's (SO_PEERCRED): another user on the
    /// node can connect to an abstract name, and is closed before its first byte; warned about
    /// once per uid.
    bool admit(Unix::socket& socket);
    /// Perform the machine's actions until it is quiet (Verify feeds it again).
    void perform();
    void perform(const RelayAction& action);
    void arm(RelayTimer which, Clock::time_point at);
    /// Close `id`'s socket and tell the machine why (a read or write error, a failed proof).
    void end(SessionId id, const std::string& why);
    /// A MUNGE hello's Verify, off the io thread: on `proofs`, its credential is decoded and, if
    /// it proves itself, the relay's own proof of the follower's nonce made for the welcome to
    /// come; both come back to the io thread together (the machine's verified()).
    void verify_off_thread(const relay_action::Verify& verify);
    /// The relay's proof of `hello`'s nonce: its credential and the key material it carries.
    struct Proof {
        std::string credential;
        std::string key;
        std::string error; ///< why it could not be made (munged's error)
    };
    [[nodiscard]] Proof prove(const protocol::Hello& hello) const;
    /// A hello's check (Authenticator::verify(), its reject and the launcher's MUNGE key
    /// material) and, `with_proof`, the relay's proof for the welcome to come; `error` when
    /// the credential could not be checked at all. Thread-safe (reads only what listen() set).
    struct Check {
        std::optional<protocol::Reject> reject;
        std::string key;
        std::string error;
        std::optional<Proof> proof;
    };
    [[nodiscard]] Check check(const relay_action::Verify& verify, bool with_proof) const;
    /// The machine's answer to Verify, on the io thread: the session closed if the check
    /// failed, else what it learnt kept for the welcome, then verified().
    void apply(const relay_action::Verify& verify, Check checked);
    /// Send `welcome` to `session` with `proof`, and seal the session from then on.
    void send_welcome(SessionId session,
                      const protocol::Hello& hello,
                      const protocol::Welcome& welcome,
                      const Proof& proof);

    asio::io_context& io;
    Unix::acceptor acceptor;
    asio::steady_timer watch_timer;
    asio::steady_timer heartbeat_timer;
    asio::steady_timer wait_timer;
    const protocol::Authenticator& auth;
    protocol::StepId step;
    RelayMachine machine;
    std::function<void(const protocol::Message&)> upstream;
    std::function<void()> idle;
    std::map<SessionId, std::shared_ptr<Session>> sessions;
    SessionId next_id = 1;
    std::string path;
    bool idle_posted = false;
    std::set<std::uint32_t> refused_uids; ///< foreign uids already warned about
    /// Where MUNGE hellos are checked and the relay's proofs made, up to k_munge_threads side
    /// by side (a thread started for each hello that finds the others busy; created at the first;
    /// stopped and joined by ~NodeRelay, before the io_context and the Authenticator go). A node of
    /// 8 followers proves them in parallel instead of one after the other on the io thread (issue
    /// #33).
    std::optional<detail::ProofWorkers> proofs;
};

/// One local launcher's socket: frames in (each payload to the machine), frames out (one write
/// in flight), closed when the machine says so.
class NodeRelay::Impl::Session : public std::enable_shared_from_this<Session> {
  public:
    Session(std::shared_ptr<Impl> relay, SessionId id, Unix::socket socket)
        : m_relay(std::move(relay)), m_id(id), m_socket(std::move(socket)) {}

    void start() { read(); }

    /// Frame `payload` (sealed once the welcome was written) and queue it.
    void send(std::shared_ptr<const protocol::SharedPayload> payload) {
        if (m_closed) {
            return;
        }
        Frame frame;
        frame.head = protocol::frame_parts(payload->bytes.size(),
                                           {},
                                           protocol::k_max_trusted_frame,
                                           m_channel ? protocol::k_tag_size : 0)
                         .head;
        if (m_channel) {
            // The payload was hashed once for all the sessions it goes to.
            frame.tag = m_channel->next_tag(payload->bare.digest());
            frame.sealed = true;
        }
        frame.body = std::move(payload);
        m_queue.push_back(std::move(frame));
        if (!m_writing) {
            write();
        }
    }

    /// What Verify learnt: the challenge this session was sent and the launcher's MUNGE key
    /// material, for the session keys once the welcome is written.
    void verified(std::string challenge, std::string launcher_key) {
        m_challenge = std::move(challenge);
        m_launcher_key = std::move(launcher_key);
    }
    [[nodiscard]] const std::string& challenge() const noexcept { return m_challenge; }
    [[nodiscard]] const std::string& launcher_key() const noexcept { return m_launcher_key; }

    /// The relay's own proof of the hello, made on the proofs pool with its check (MUNGE).
    void proved(Impl::Proof proof) { m_proof = std::move(proof); }
    std::optional<Impl::Proof> take_proof() { return std::exchange(m_proof, std::nullopt); }

    /// Every frame from now on is sealed and checked (after the welcome).
    void seal(const protocol::SessionKeys& keys) {
        m_channel.emplace(keys, protocol::End::coordinator);
        m_decoder.set_limit(protocol::k_max_frame + protocol::k_tag_size);
        m_launcher_key.clear();
    }

    /// Close once what is queued is written, then report `rejected`.
    void close_after_writes() {
        m_close_after_write = true;
        if (!m_writing && m_queue.empty()) {
            m_relay->end(m_id, "rejected");
        }
    }

    void close() {
        if (m_closed) {
            return;
        }
        m_closed = true;
        error_code ignored;
        m_socket.shutdown(Unix::socket::shutdown_both, ignored);
        m_socket.close(ignored);
    }

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
            m_relay->end(m_id, ec == asio::error::eof ? "connection closed" : ec.message());
            return;
        }
        try {
            m_decoder.feed(std::string_view(m_buffer.data(), n));
            while (auto payload = m_decoder.next()) {
                if (m_channel) {
                    payload = m_channel->open(std::move(*payload));
                }
                m_relay->machine.received(m_id, *payload, Clock::now());
                m_relay->perform();
                if (m_closed) {
                    return;
                }
            }
        } catch (const std::exception& e) {
            m_relay->machine.unreadable(m_id, e.what(), Clock::now());
            m_relay->perform();
            return;
        }
        read();
    }

    void write() {
        m_writing = true;
        const Frame& frame = m_queue.front();
        m_buffers = {asio::buffer(frame.head),
                     asio::buffer(frame.body->bytes),
                     asio::buffer(frame.tag.data(), frame.sealed ? frame.tag.size() : 0)};
        asio::async_write(m_socket,
                          m_buffers,
                          [self = shared_from_this()](const error_code& ec, std::size_t /*n*/) {
                              self->m_writing = false;
                              if (self->m_closed) {
                                  return;
                              }
                              if (ec) {
                                  self->m_relay->end(self->m_id, ec.message());
                                  return;
                              }
                              self->m_queue.pop_front();
                              if (!self->m_queue.empty()) {
                                  self->write();
                              } else if (self->m_close_after_write) {
                                  self->m_relay->end(self->m_id, "rejected");
                              }
                          });
    }

    std::shared_ptr<Impl> m_relay;
    SessionId m_id;
    Unix::socket m_socket;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    /// A frame: its header, the payload it shares with other sessions, its tag (once sealed).
    struct Frame {
        std::string head;
        std::shared_ptr<const protocol::SharedPayload> body;
        protocol::Tag tag{};
        bool sealed = false;
    };
    std::deque<Frame> m_queue;
    std::array<asio::const_buffer, 3> m_buffers; ///< of the frame being written
    std::string m_challenge;
    std::string m_launcher_key;
    std::optional<Impl::Proof> m_proof;
    std::optional<protocol::Channel> m_channel;
    bool m_closed = false;
    bool m_writing = false;
    bool m_close_after_write = false;
};

void NodeRelay::Impl::accept() {
    acceptor.async_accept([self = shared_from_this()](const error_code& ec, Unix::socket socket) {
        if (self->machine.is_closed() || ec == asio::error::operation_aborted) {
            return;
        }
        if (ec) {
            logger().warn("relay: accept: {}", ec.message());
        } else {
            self->accepted(std::move(socket));
        }
        self->accept();
    });
}

void NodeRelay::Impl::accept_waiting() {
    error_code ec;
    acceptor.non_blocking(true, ec);
    while (!ec && !machine.is_closed()) {
        Unix::socket socket(io);
        acceptor.accept(socket, ec);
        if (!ec) {
            accepted(std::move(socket));
        }
    }
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) {
        logger().warn("relay: accept: {}", ec.message());
    }
}

void NodeRelay::Impl::accepted(Unix::socket socket) {
    if (!admit(socket)) {
        error_code ignored;
        socket.close(ignored);
        return;
    }
    detail::set_cloexec(socket.native_handle());
    std::string nonce;
    try {
        nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
    } catch (const std::exception& e) {
        logger().error("relay: no challenge: {}", e.what());
        error_code ignored;
        socket.close(ignored);
        return;
    }
    const SessionId id = next_id++;
    auto session = std::make_shared<Session>(shared_from_this(), id, std::move(socket));
    sessions.emplace(id, session);
    machine.accepted(id, nonce, Clock::now());
    perform();
    session->start();
}

bool NodeRelay::Impl::admit(Unix::socket& socket) {
    const auto peer = peer_credentials(socket.native_handle());
    if (peer && peer->uid == ::geteuid()) {
        return true;
    }
    const std::uint32_t uid = peer ? peer->uid : std::numeric_limits<std::uint32_t>::max();
    if (refused_uids.insert(uid).second) {
        logger().warn("relay: refused a connection to {} from {}: not this job's user (uid {})",
                      path,
                      peer ? fmt::format("uid {} (pid {})", peer->uid, peer->pid)
                           : std::string("a process of unknown uid"),
                      ::geteuid());
    }
    return false;
}

void NodeRelay::Impl::end(SessionId id, const std::string& why) {
    if (const auto it = sessions.find(id); it != sessions.end()) {
        it->second->close();
        sessions.erase(it);
    }
    machine.closed(id, why, Clock::now());
    perform();
}

void NodeRelay::Impl::perform() {
    for (auto actions = machine.take_actions(); !actions.empty();
         actions = machine.take_actions()) {
        for (const auto& action : actions) {
            perform(action);
        }
    }
}

/// Carry out one of the relay machine's actions on the sockets: one branch per action type, each
/// a few lines of plumbing; the decisions were the machine's (relay.cpp).
void NodeRelay::Impl::perform(const RelayAction& action) {
    namespace act = relay_action;
    const auto session = [this](SessionId id) -> Session* {
        const auto it = sessions.find(id);
        return it == sessions.end() ? nullptr : it->second.get();
    };
    if (const auto* to = std::get_if<act::ToLocal>(&action)) {
        if (auto* s = session(to->session)) {
            s->send(to->payload);
        }
    } else if (const auto* verify = std::get_if<act::Verify>(&action)) {
        if (verify->hello.auth == protocol::AuthMethod::munge) {
            verify_off_thread(*verify);
            return;
        }
        // A secret's HMAC: microseconds, here; the welcome's proof is made when it comes.
        apply(*verify, check(*verify, false));
    } else if (const auto* welcome = std::get_if<act::Welcome>(&action)) {
        auto* s = session(welcome->session);
        if (s == nullptr) {
            return;
        }
        auto proof = s->take_proof(); // made with the MUNGE check, else now (a secret's HMAC)
        send_welcome(welcome->session,
                     welcome->hello,
                     welcome->welcome,
                     proof ? *proof : prove(welcome->hello));
    } else if (const auto* close = std::get_if<act::CloseLocal>(&action)) {
        if (close->when == act::CloseWhen::after_writes) {
            if (auto* s = session(close->session)) {
                s->close_after_writes();
            }
        } else if (const auto it = sessions.find(close->session); it != sessions.end()) {
            it->second->close();
            sessions.erase(it);
        }
    } else if (const auto* up = std::get_if<act::Upstream>(&action)) {
        if (upstream) {
            upstream(up->message);
        }
    } else if (const auto* arm_action = std::get_if<act::ArmTimer>(&action)) {
        arm(arm_action->timer, arm_action->at);
    } else if (std::holds_alternative<act::StopListening>(action)) {
        error_code ignored;
        acceptor.close(ignored);
        watch_timer.cancel();
        heartbeat_timer.cancel();
        wait_timer.cancel();
    } else if (std::holds_alternative<act::Idle>(action)) {
        if (idle && !idle_posted) {
            idle_posted = true;
            asio::post(io, [self = shared_from_this()] {
                self->idle_posted = false;
                if (!self->machine.busy() && self->idle) {
                    self->idle();
                }
            });
        }
    }
}

NodeRelay::Impl::Check NodeRelay::Impl::check(const relay_action::Verify& verify,
                                              bool with_proof) const {
    Check out;
    try {
        out.reject =
            auth.verify(verify.hello, verify.nonce, step, protocol::unix_endpoint(path), &out.key);
        if (with_proof && !out.reject) {
            out.proof = prove(verify.hello);
        }
    } catch (const std::exception& e) {
        out.error = e.what();
    }
    return out;
}

void NodeRelay::Impl::apply(const relay_action::Verify& verify, Check checked) {
    if (!checked.error.empty()) {
        logger().warn("relay: closing a local connection: {}", checked.error);
        end(verify.session, "protocol error");
        return;
    }
    if (const auto it = sessions.find(verify.session); it != sessions.end()) {
        it->second->verified(verify.nonce, std::move(checked.key));
        if (checked.proof) {
            it->second->proved(std::move(*checked.proof));
        }
    }
    machine.verified(verify.session, checked.reject, Clock::now());
}

void NodeRelay::Impl::verify_off_thread(const relay_action::Verify& verify) {
    if (!proofs) {
        proofs.emplace(protocol::k_munge_threads);
    }
    logger().debug("relay: rank {} (pid {}): MUNGE proof", verify.hello.rank, verify.hello.pid);
    proofs->post([self = shared_from_this(), verify]() mutable {
        Check checked = self->check(verify, true);
        // `self` goes back to the io thread whole: the last reference to the relay never ends
        // on a pool thread.
        auto& context = self->io;
        asio::post(context,
                   [self = std::move(self), verify, checked = std::move(checked)]() mutable {
                       self->apply(verify, std::move(checked));
                       self->perform();
                   });
    });
}

NodeRelay::Impl::Proof NodeRelay::Impl::prove(const protocol::Hello& hello) const {
    Proof proof;
    try {
        proof.key = hello.auth == protocol::AuthMethod::munge
                        ? protocol::random_bytes(protocol::k_key_material_size)
                        : std::string();
        proof.credential = auth.prove_coordinator(
            hello.auth, hello.nonce, step, hello.rank, protocol::unix_endpoint(path), proof.key);
    } catch (const std::exception& e) {
        proof.error = e.what();
    }
    return proof;
}

void NodeRelay::Impl::send_welcome(SessionId id,
                                   const protocol::Hello& hello,
                                   const protocol::Welcome& welcome,
                                   const Proof& proof) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) {
        return;
    }
    Session& s = *it->second;
    try {
        if (!proof.error.empty()) {
            throw std::runtime_error(proof.error);
        }
        protocol::Welcome proved = welcome;
        proved.credential = proof.credential;
        s.send(std::make_shared<const protocol::SharedPayload>(protocol::encode_payload(proved)));
        s.seal(auth.session_keys(hello.auth,
                                 s.launcher_key(),
                                 proof.key,
                                 s.challenge(),
                                 hello.nonce,
                                 step,
                                 hello.rank,
                                 protocol::unix_endpoint(path)));
    } catch (const std::exception& e) {
        logger().error("relay: rank {}: {}", hello.rank, e.what());
        end(id, e.what());
    }
}

void NodeRelay::Impl::arm(RelayTimer which, Clock::time_point at) {
    auto& timer = which == RelayTimer::watch            ? watch_timer
                  : which == RelayTimer::node_heartbeat ? heartbeat_timer
                                                        : wait_timer;
    timer.expires_at(at);
    timer.async_wait([self = shared_from_this(), which](const error_code& ec) {
        if (!ec) {
            self->machine.timer_fired(which, Clock::now());
            self->perform();
        }
    });
}

NodeRelay::NodeRelay(asio::io_context& io,
                     const protocol::Authenticator& auth,
                     RelaySettings settings,
                     std::function<void(const protocol::Message&)> upstream,
                     std::function<void()> idle)
    : m_impl(std::make_shared<Impl>(
          io, auth, std::move(settings), std::move(upstream), std::move(idle))) {}

NodeRelay::~NodeRelay() {
    try {
        close();
    } catch (...) {
        // Closing sockets does not fail in practice; a destructor must not throw anyway.
    }
    if (m_impl->proofs) {
        // A proof in flight ends within munged's own timeout; its answer, posted to the io
        // context, finds the relay closed.
        m_impl->proofs->stop();
    }
}

void NodeRelay::listen(const std::string& path) {
    error_code ec;
    m_impl->acceptor.open(Unix(), ec);
    if (!ec) {
        detail::set_cloexec(m_impl->acceptor.native_handle());
        m_impl->acceptor.bind(relay_endpoint(path), ec);
    }
    if (ec == asio::error::address_in_use) {
        // An abstract name cannot be stale (it goes with its socket): someone else holds it,
        // another user who knows the job's id, or a launcher of this step that should not be
        // there. Our followers would find it first, so the node cannot run: fail at once.
        const std::string holder = holder_of(m_impl->io, path);
        throw errors::make(
            Errc::auth,
            "relay",
            holder.empty() ? fmt::format("{} is held by another process", quote(path))
                           : fmt::format("{} is held by {}, not by this job's user (uid {})",
                                         quote(path),
                                         holder,
                                         ::geteuid()),
            "another process on this node took the relay's name; `ss -xlp | grep tfslurm` "
            "shows it");
    }
    if (!ec) {
        m_impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
    }
    if (ec) {
        throw errors::make(
            Errc::io, "relay", fmt::format("cannot listen on {} ({})", quote(path), ec.message()));
    }
    m_impl->path = path;
}

void NodeRelay::serve() {
    m_impl->machine.listening(Clock::now());
    m_impl->perform();
    m_impl->accept_waiting();
    m_impl->accept();
}

void NodeRelay::upstream_open() {
    m_impl->machine.upstream_open(Clock::now());
    m_impl->perform();
}

std::vector<protocol::RankUsage> NodeRelay::follower_usages() const {
    return m_impl->machine.follower_usages();
}

std::vector<protocol::RankStartup> NodeRelay::take_follower_startups() {
    return m_impl->machine.take_follower_startups();
}

void NodeRelay::pulse() {
    m_impl->machine.pulse(Clock::now());
    m_impl->perform();
}

void NodeRelay::downstream(const protocol::Relay& relay) {
    m_impl->machine.downstream(relay, Clock::now());
    m_impl->perform();
}

void NodeRelay::upstream_lost() {
    close();
}

void NodeRelay::stop_waiting() {
    m_impl->machine.stop_waiting(Clock::now());
    m_impl->perform();
}

bool NodeRelay::busy() const noexcept {
    return m_impl->machine.busy();
}

bool NodeRelay::hold() {
    const bool held = m_impl->machine.hold(Clock::now());
    m_impl->perform();
    return held;
}

void NodeRelay::close() {
    m_impl->machine.close(Clock::now());
    m_impl->perform();
}

} // namespace tfslurm::detail
