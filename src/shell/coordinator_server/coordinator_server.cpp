// SPDX-License-Identifier: MIT
// The coordinator on a TCP port: the listener, the ticks and the broadcasts around the pure
// Coordinator; each connection is a Session (coordinator_session.cpp). Single-threaded on the
// caller's io_context; handlers never throw.
#include "os/detail/fd.hpp"
#include "shell/coordinator_server/coordinator_server_impl.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/snapshot.hpp>

#include <boost/asio/post.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <system_error>
#include <unordered_map>
#include <utility>

namespace tfslurm {

namespace {

/// Connections taken in one turn of the event loop before the other handlers get theirs.
constexpr std::size_t k_accepts_per_turn = 64;
/// How long accept() waits after an error such as EMFILE before it tries again.
constexpr Millis k_accept_retry{50};

} // namespace

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
// Its Impl and Session are declared in coordinator_server/coordinator_server_impl.hpp; one
// connection's work is in coordinator_session.cpp. (HandshakePool and LogBudget, its defences
// against unauthenticated peers, are in connection_limits.cpp.)

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
    if (!ec) {
        // accept_ready() takes connections until EAGAIN.
        acceptor.non_blocking(true, ec);
    }
    if (!ec) {
        const auto local = acceptor.local_endpoint(ec);
        listening_protocol = local.protocol();
        listening_port = local.port();
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
                              listening_port,
                              i,
                              ports.size() - 1);
            }
            logger().debug("coordinator: listening on {}:{} for {} ranks",
                           host.to_string(),
                           listening_port,
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
    acceptor.async_wait(Tcp::acceptor::wait_read,
                        [self = shared_from_this()](const error_code& ec) {
                            if (self->closed || ec == asio::error::operation_aborted) {
                                return;
                            }
                            if (ec) {
                                self->accept_later(ec.message());
                                return;
                            }
                            self->accept_ready();
                        });
}

// Not async_accept(): it takes one connection a handler, and each then needs fcntl() twice for
// close-on-exec, getpeername() and getsockname(); accept4() does it all in one call (issue #33:
// 12,500 node leaders connect at once at 100,000 ranks).
void CoordinatorServer::Impl::accept_ready() {
    for (std::size_t taken = 0; taken < k_accepts_per_turn; ++taken) {
        Tcp::endpoint peer;
        auto length = static_cast<socklen_t>(peer.capacity());
        const int fd =
            ::accept4(acceptor.native_handle(), peer.data(), &length, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            const int error = errno;
            if (error == EINTR || error == ECONNABORTED) {
                continue; // a connection reset in the backlog: the next one
            }
            if (error == EAGAIN || error == EWOULDBLOCK) {
                accept(); // none left: wait for the next
                return;
            }
            accept_later(std::system_category().message(error));
            return;
        }
        peer.resize(length);
        Tcp::socket socket(io);
        error_code ec;
        socket.assign(listening_protocol, fd, ec);
        if (ec) {
            ::close(fd);
            continue;
        }
        admit(std::move(socket), peer);
    }
    // More may wait: the other handlers have their turn first.
    asio::post(io, [self = shared_from_this()] {
        if (!self->closed) {
            self->accept_ready();
        }
    });
}

void CoordinatorServer::Impl::accept_later(const std::string& why) {
    // EMFILE and friends: back off instead of spinning; the peer will retry.
    logger().warn("coordinator: accept: {}", why);
    retry_timer.expires_after(k_accept_retry);
    retry_timer.async_wait([self = shared_from_this()](const error_code& wait_error) {
        if (!wait_error && !self->closed) {
            self->accept();
        }
    });
}

void CoordinatorServer::Impl::admit(Tcp::socket socket, const Tcp::endpoint& peer) {
    const std::uint64_t id = next_id++;
    auto session = std::make_shared<Session>(shared_from_this(), std::move(socket), peer, id);
    sessions.insert(session);
    pending.emplace(id, session);
    // Always admitted: the flooder's oldest idle connections make room (HandshakePool).
    for (const std::uint64_t evicted : handshakes.admit(id, session->address())) {
        if (const auto victim = pending[evicted].lock()) {
            warn_connection(fmt::format("closing connection from {}: too many connections "
                                        "without a hello from {}",
                                        victim->peer(),
                                        victim->address()));
            victim->close();
        }
        pending.erase(evicted);
    }
    session->start();
}

void CoordinatorServer::Impl::tick() {
    tick_timer.expires_after(tick_interval(coordinator.settings().run.heartbeat_timeout));
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
                          format_seconds(detail::k_warning_window));
        }
        self->tick();
    });
}

void CoordinatorServer::Impl::flush() {
    // A verdict or `cluster` is one Outgoing for every rank: encoded once, sent once per
    // connection.
    for (const auto& out : coordinator.take_outgoing()) {
        deliver(out.ranks, shared_payload(out.message));
    }
    // After the messages: the record never delays a verdict.
    auto events = coordinator.take_events();
    if (!events.empty() && event_callback) {
        const auto now = WallClock::now();
        for (auto& event : events) {
            event.time = now;
            event_callback(event);
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

void CoordinatorServer::Impl::deliver(
    const std::vector<std::uint32_t>& ranks,
    const std::shared_ptr<const protocol::SharedPayload>& payload) {
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
    if (session->watcher()) {
        watchers.erase(session);
        return;
    }
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

void CoordinatorServer::Impl::add_watcher(const std::shared_ptr<Session>& session) {
    watchers.insert(session);
    // The first snapshot at once (`tfslurm top --once` waits for nothing else), after the
    // welcome in the same write.
    session->send_shared(
        {}, shared_payload_of(encode_snapshot(take_snapshot(coordinator, Clock::now(), step))));
    if (!watch_timer_armed) {
        watch_tick();
    }
}

void CoordinatorServer::Impl::send_snapshots() {
    std::shared_ptr<const protocol::SharedPayload> payload;
    for (const auto& watcher : watchers) {
        if (!watcher->idle()) {
            continue; // the last one is still on its way: this one is dropped for it
        }
        if (!payload) {
            payload =
                shared_payload_of(encode_snapshot(take_snapshot(coordinator, Clock::now(), step)));
        }
        watcher->send_shared({}, payload);
    }
}

void CoordinatorServer::Impl::watch_tick() {
    watch_timer_armed = true;
    watch_timer.expires_after(detail::k_snapshot_interval);
    watch_timer.async_wait([self = shared_from_this()](const error_code& ec) {
        self->watch_timer_armed = false;
        if (ec || self->closed || self->watchers.empty()) {
            return;
        }
        self->send_snapshots();
        self->watch_tick();
    });
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
    // A proof under way finishes (libmunge's own timeouts bound it); one not begun is dropped.
    if (proofs) {
        proofs->stop();
    }
    error_code ignored;
    acceptor.close(ignored);
    retry_timer.cancel();
    tick_timer.cancel();
    watch_timer.cancel();
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

void CoordinatorServer::on_event(std::function<void(const StepEvent&)> callback) {
    m_impl->event_callback = std::move(callback);
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
