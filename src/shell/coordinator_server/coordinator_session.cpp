// SPDX-License-Identifier: MIT
// One connection of the coordinator (coordinator_server/coordinator_server_impl.hpp): the
// challenge, the hello and its proofs, a node leader's `relay` envelopes, the messages handed to
// the pure Coordinator, and the gathered writes.
#include "shell/coordinator_server/coordinator_server_impl.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace tfslurm {

CoordinatorServer::Impl::Session::Session(std::shared_ptr<Impl> server,
                                          Tcp::socket socket,
                                          const Tcp::endpoint& peer,
                                          std::uint64_t id)
    : m_server(std::move(server)), m_socket(std::move(socket)), m_hello_timer(m_server->io),
      m_id(id) {
    m_address = peer.address().to_string();
    m_peer = fmt::format("{}:{}", m_address, peer.port());
    // The port this connection came in on (the listener's): what the launcher dialled, if
    // nobody forwarded it.
    m_endpoint = protocol::tcp_endpoint(m_server->listening_port);
    error_code ec;
    m_socket.set_option(Tcp::no_delay(true), ec);
}

void CoordinatorServer::Impl::Session::start() {
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
            self->m_server->warn_connection(
                fmt::format("closing connection from {}: no hello within {}",
                            self->m_peer,
                            format_seconds(self->m_server->coordinator.settings().hello_timeout)));
            self->close();
        }
    });
    read();
}

void CoordinatorServer::Impl::Session::send(const protocol::Message& message) {
    if (m_closed) {
        return;
    }
    // A welcome goes before anything else for its rank (a verdict, `cluster`), and is sealed
    // before it: tags follow the order of the queue.
    send_welcomes();
    try {
        // Only a registered launcher is sent more than a challenge, welcome or reject: it
        // accepts trusted frames (a `cluster` of a large step exceeds k_max_frame), sealed.
        send_frame({m_channel ? m_channel->seal(protocol::encode_payload(message),
                                                protocol::k_max_trusted_frame)
                              : protocol::encode_frame(message, protocol::k_max_trusted_frame),
                    {},
                    {}});
    } catch (const std::exception& e) {
        logger().error("coordinator: cannot encode {}: {}", protocol::type_name(message), e.what());
    }
}

void CoordinatorServer::Impl::Session::send_to(
    const std::vector<std::uint32_t>& ranks,
    const std::shared_ptr<const protocol::SharedPayload>& payload) {
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

void CoordinatorServer::Impl::Session::send_shared(
    const std::vector<std::uint32_t>& relayed,
    const std::shared_ptr<const protocol::SharedPayload>& payload) {
    send_welcomes(); // as in send() (from send_welcomes() itself: none left)
    try {
        auto parts = protocol::frame_parts(payload->bytes.size(),
                                           relayed,
                                           protocol::k_max_trusted_frame,
                                           m_channel ? protocol::k_tag_size : 0);
        if (m_channel) {
            // The payload was hashed once for every connection; this one hashes its own tail.
            protocol::PayloadHash hash = relayed.empty() ? payload->bare : payload->enveloped;
            const protocol::Tag tag = m_channel->next_tag(hash.update(parts.tail).digest());
            parts.tail.append(tag.data(), tag.size());
        }
        send_frame({std::move(parts.head), payload, std::move(parts.tail)});
    } catch (const std::exception& e) {
        logger().error("coordinator: cannot send to rank {}: {}", m_rank, e.what());
    }
}

void CoordinatorServer::Impl::Session::send_welcomes() {
    if (!m_welcomed.empty()) {
        send_shared(std::exchange(m_welcomed, {}), m_server->relayed_welcome);
    }
}

void CoordinatorServer::Impl::Session::send_frame(Frame frame) {
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

void CoordinatorServer::Impl::Session::close() {
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

void CoordinatorServer::Impl::Session::read() {
    m_socket.async_read_some(
        asio::buffer(m_buffer),
        [self = shared_from_this()](const error_code& ec, std::size_t n) { self->on_read(ec, n); });
}

void CoordinatorServer::Impl::Session::on_read(const error_code& ec, std::size_t n) {
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
    if (drain(std::string_view(m_buffer.data(), n))) {
        read();
    }
}

bool CoordinatorServer::Impl::Session::drain(std::string_view fresh) {
    try {
        m_decoder.feed(fresh); // may refuse a frame from its header alone
        while (!m_proving) {
            auto payload = m_decoder.next();
            if (!payload) {
                send_welcomes(); // the relayed hellos of this read, answered in one envelope
                return true;
            }
            if (m_channel) {
                // Sealed: one message, or a batch of them (what queued up at the launcher while
                // its last write was in flight), each handled as if it came alone.
                for (auto& one : protocol::decode_batch(m_channel->open(std::move(*payload)))) {
                    handle(one.message, one.inner);
                    if (m_closed || m_close_after_write) {
                        return false;
                    }
                }
                continue;
            }
            if (m_node) {
                // A leader's envelopes are decoded with their message in one parse.
                auto unwrapped = protocol::decode_unwrapped(*payload);
                handle(unwrapped.message, unwrapped.inner);
            } else {
                handle(protocol::decode_payload(*payload), std::nullopt);
            }
            if (m_closed || m_close_after_write) {
                return false;
            }
        }
        return false; // a hello's proof is on its way: proved() drains the rest and reads on
    } catch (const Error& e) {
        // The error quotes what the peer sent (Error messages quote their input).
        if (m_registered) {
            logger().warn(
                "coordinator: closing connection from {} (rank {}): {}", m_peer, m_rank, e.what());
        } else {
            m_server->warn_connection(
                fmt::format("closing connection from {}: {}", m_peer, e.what()));
        }
    } catch (const std::exception& e) {
        logger().error("coordinator: connection from {}: {}", m_peer, e.what());
    }
    close();
    return false;
}

void CoordinatorServer::Impl::Session::register_hello(const protocol::Hello& hello) {
    // The cheap checks first (the step, the rank, its role, its route), the proof last: a peer
    // that cannot pass them costs no MUNGE round trip.
    std::optional<protocol::Reject> reject = protocol::check_step(hello, m_server->step);
    if (!reject && hello.watch) {
        if (m_server->watchers.size() >= detail::k_max_watchers) {
            reject = protocol::Reject{
                protocol::RejectCode::refused,
                fmt::format("too many watchers ({} at once)", detail::k_max_watchers)};
        }
    } else if (!reject) {
        if (auto reason = admit_direct(hello)) {
            reject = protocol::Reject{protocol::RejectCode::refused, std::move(*reason)};
        }
    }
    if (reject || hello.auth != protocol::AuthMethod::munge) {
        // HMAC with the secret costs microseconds: checked and answered here.
        Proof proof;
        proof.reject = std::move(reject);
        if (!proof.reject) {
            proof = prove(m_server->auth, hello, m_nonce, m_server->step, m_endpoint);
        }
        finish_hello(hello, std::move(proof));
        return;
    }
    // MUNGE is a round trip to munged (a slow or stopped munged, or a flood of MUNGE hellos,
    // would stall every heartbeat here): a thread of the proofs pool decodes the credential and
    // encodes ours, and this connection reads nothing more until the answer is back.
    m_proving = true;
    ++m_server->proofs_pending;
    if (!m_server->proofs) {
        m_server->proofs.emplace(protocol::k_munge_threads);
    }
    logger().debug("coordinator: rank {} from {}: MUNGE proof ({} pending)",
                   hello.rank,
                   m_peer,
                   m_server->proofs_pending);
    m_server->proofs->post([self = shared_from_this(),
                            hello = hello, // a copy of its own, moved on below
                            nonce = m_nonce,
                            endpoint = m_endpoint,
                            step = m_server->step,
                            auth = &m_server->auth]() mutable {
        Proof proof = prove(*auth, hello, nonce, step, endpoint);
        // `self` goes back to the io thread whole: the last reference to a session
        // (and its server) never ends on this thread.
        auto& context = self->m_server->io;
        asio::post(context,
                   [self = std::move(self),
                    hello = std::move(hello),
                    proof = std::move(proof)]() mutable { self->proved(hello, std::move(proof)); });
    });
}

CoordinatorServer::Impl::Session::Proof
CoordinatorServer::Impl::Session::prove(const protocol::Authenticator& auth,
                                        const protocol::Hello& hello,
                                        const std::string& nonce,
                                        protocol::StepId step,
                                        const std::string& endpoint) {
    Proof proof;
    try {
        std::string launcher_key;
        proof.reject = auth.verify(hello, nonce, step, endpoint, &launcher_key);
        if (!proof.reject) {
            const std::string key = hello.auth == protocol::AuthMethod::munge
                                        ? protocol::random_bytes(protocol::k_key_material_size)
                                        : std::string();
            proof.credential =
                auth.prove_coordinator(hello.auth, hello.nonce, step, hello.rank, endpoint, key);
            proof.keys = auth.session_keys(
                hello.auth, launcher_key, key, nonce, hello.nonce, step, hello.rank, endpoint);
        }
    } catch (const std::exception& e) {
        proof.error = e.what();
    }
    return proof;
}

void CoordinatorServer::Impl::Session::proved(const protocol::Hello& hello, Proof proof) {
    --m_server->proofs_pending;
    m_proving = false;
    if (m_closed) {
        return;
    }
    if (!proof.reject && proof.error.empty() && !hello.watch) {
        // Another connection may have registered this rank while munged answered.
        if (auto reason = admit_direct(hello)) {
            proof.reject = protocol::Reject{protocol::RejectCode::refused, std::move(*reason)};
        }
    }
    finish_hello(hello, std::move(proof));
    if (!m_closed && !m_close_after_write && drain()) {
        read();
    }
}

void CoordinatorServer::Impl::Session::finish_hello(const protocol::Hello& hello, Proof proof) {
    if (proof.reject) {
        // The host is the peer's own text: quoted, so that it cannot forge a log line
        // or reach the terminal as escape sequences.
        m_server->warn_connection(fmt::format("rejected rank {} from {} (pid {} on {}): {}",
                                              hello.rank,
                                              m_peer,
                                              hello.pid,
                                              quote(hello.host),
                                              proof.reject->reason));
        send(*proof.reject);
        m_close_after_write = true;
        return;
    }
    if (!proof.error.empty()) {
        logger().error("coordinator: cannot prove itself to rank {}: {}", hello.rank, proof.error);
        close();
        return;
    }
    if (hello.watch) {
        finish_watcher(hello, std::move(proof));
        return;
    }
    Coordinator& state = m_server->coordinator;
    m_registered = true;
    m_rank = hello.rank;
    m_node = hello.relay;
    // A leader's envelopes carry a relayed launcher's largest frame; every frame has its tag.
    m_decoder.set_limit((m_node ? protocol::k_max_relay_frame : protocol::k_max_frame) +
                        protocol::k_tag_size);
    m_hello_timer.cancel();
    m_server->handshakes.remove(m_id);
    m_server->pending.erase(m_id);
    m_server->by_rank[m_rank] = shared_from_this();
    send(protocol::Welcome{static_cast<std::uint32_t>(state.size()), std::move(proof.credential)});
    // Everything after the welcome is sealed, both ways.
    m_channel.emplace(proof.keys, protocol::End::coordinator);
    state.registered(m_rank, Clock::now(), hello.address, hello.port);
    m_server->flush();
}

void CoordinatorServer::Impl::Session::finish_watcher(const protocol::Hello& hello, Proof proof) {
    if (m_server->watchers.size() >= detail::k_max_watchers) {
        // Others proved themselves while munged answered this one.
        send(protocol::Reject{
            protocol::RejectCode::refused,
            fmt::format("too many watchers ({} at once)", detail::k_max_watchers)});
        m_close_after_write = true;
        return;
    }
    m_registered = true;
    m_watcher = true;
    // A watcher sends nothing but heartbeats: small frames only.
    m_decoder.set_limit(protocol::k_max_frame + protocol::k_tag_size);
    m_hello_timer.cancel();
    m_server->handshakes.remove(m_id);
    m_server->pending.erase(m_id);
    send(protocol::Welcome{static_cast<std::uint32_t>(m_server->coordinator.size()),
                           std::move(proof.credential)});
    m_channel.emplace(proof.keys, protocol::End::coordinator);
    logger().debug(
        "coordinator: watcher from {} (pid {} on {})", m_peer, hello.pid, quote(hello.host));
    m_server->add_watcher(shared_from_this());
}

std::optional<std::string>
CoordinatorServer::Impl::Session::admit_direct(const protocol::Hello& hello) const {
    if (auto reason = m_server->coordinator.admit(hello.rank, hello.role)) {
        return reason;
    }
    const std::uint32_t leader = m_server->leaders[hello.rank];
    if (hello.relay && leader != hello.rank) {
        return fmt::format("rank {} is not its node's leader (rank {} is)", hello.rank, leader);
    }
    if (!hello.relay && leader != hello.rank && m_server->coordinator.settings().tree) {
        // The plan routes this rank through its node leader's relay, where SO_PEERCRED and the
        // proofs guard it: a direct hello is someone else's, or a launcher that went astray.
        return fmt::format(
            "rank {} registers through its node leader's relay (rank {}), not directly",
            hello.rank,
            leader);
    }
    return std::nullopt;
}

void CoordinatorServer::Impl::Session::handle(const protocol::Message& message,
                                              const std::optional<protocol::Message>& inner) {
    const auto now = Clock::now();
    if (!m_registered) {
        const auto* hello = std::get_if<protocol::Hello>(&message);
        if (hello == nullptr) {
            throw errors::make(Errc::protocol,
                               "protocol",
                               fmt::format("expected hello, got {}", protocol::type_name(message)));
        }
        register_hello(*hello);
        return;
    }
    if (m_watcher) {
        // Read-only: a watcher's heartbeat is taken, anything else ends its connection and
        // never reaches the Coordinator.
        if (!std::holds_alternative<protocol::Heartbeat>(message)) {
            throw errors::make(
                Errc::protocol,
                "protocol",
                fmt::format("unexpected {} from a watcher", protocol::type_name(message)));
        }
        return;
    }
    if (const auto* relay = std::get_if<protocol::Relay>(&message); relay != nullptr && m_node) {
        relayed(*relay, inner, now);
    } else {
        dispatch(m_rank, message, now);
    }
    m_server->flush();
}

void CoordinatorServer::Impl::Session::dispatch(std::uint32_t rank,
                                                const protocol::Message& message,
                                                Clock::time_point now) {
    Coordinator& state = m_server->coordinator;
    if (const auto* beat = std::get_if<protocol::Heartbeat>(&message)) {
        state.heartbeat(rank, now);
        if (beat->usage) {
            state.usage_reported(rank, *beat->usage, now);
        }
        if (!beat->startup.empty()) {
            state.startup_reported(rank, beat->startup);
        }
        // A leader's followers' usages and phases: only for ranks its connection carries.
        const auto carried = [this, rank](std::uint32_t follower) {
            return rank == m_rank && follower < m_server->by_rank.size() &&
                   m_server->by_rank[follower].get() == this && follower != m_rank;
        };
        for (const protocol::RankUsage& follower : beat->followers) {
            if (carried(follower.rank)) {
                state.usage_reported(follower.rank, follower.usage, now);
            }
        }
        for (const protocol::RankStartup& follower : beat->startups) {
            if (carried(follower.rank)) {
                state.startup_reported(follower.rank, follower.startup);
            }
        }
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
    } else if (const auto* progress = std::get_if<protocol::Progress>(&message)) {
        state.progressed(rank, Millis{static_cast<Millis::rep>(progress->idle_ms)}, now);
    } else if (const auto* checked = std::get_if<protocol::Checked>(&message)) {
        state.node_checked(rank, *checked, now);
    } else {
        throw errors::make(
            Errc::protocol,
            "protocol",
            fmt::format("unexpected {} from a launcher", protocol::type_name(message)));
    }
}

void CoordinatorServer::Impl::Session::relayed(const protocol::Relay& relay,
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
        throw errors::make(
            Errc::protocol,
            "protocol",
            fmt::format("relayed {} of unregistered rank {}", protocol::type_name(inner), rank));
    }
}

void CoordinatorServer::Impl::Session::register_relayed(std::uint32_t rank,
                                                        const protocol::Hello& hello,
                                                        Clock::time_point now) {
    Coordinator& state = m_server->coordinator;
    auto reason = hello.rank != rank ? std::optional<std::string>(fmt::format(
                                           "hello of rank {} relayed as rank {}", hello.rank, rank))
                                     : state.admit(rank, hello.role);
    if (reason) {
        logger().warn("coordinator: rejected rank {} relayed by rank {} from {}: {}",
                      rank,
                      m_rank,
                      m_peer,
                      *reason);
        send_to(
            {rank},
            shared_payload(protocol::Reject{protocol::RejectCode::refused, std::move(*reason)}));
        return;
    }
    m_server->by_rank[rank] = shared_from_this();
    m_relayed.push_back(rank);
    // The leader proves itself to its launcher: the welcome carries no credential here. One
    // envelope answers every relayed hello of this read (send_welcomes()): one frame, one MAC
    // per node instead of one per rank.
    m_welcomed.push_back(rank);
    state.registered(rank, now, hello.address, hello.port);
}

void CoordinatorServer::Impl::Session::write() {
    m_writing = true;
    m_in_flight = std::min(m_queue.size(), protocol::k_frames_per_write);
    m_buffers.clear();
    for (std::size_t i = 0; i < m_in_flight; ++i) {
        const Frame& frame = m_queue[i];
        m_buffers.push_back(asio::buffer(frame.head));
        if (frame.body) {
            m_buffers.push_back(asio::buffer(frame.body->bytes));
        }
        if (!frame.tail.empty()) {
            m_buffers.push_back(asio::buffer(frame.tail));
        }
    }
    asio::async_write(
        m_socket, m_buffers, [self = shared_from_this()](const error_code& ec, std::size_t /*n*/) {
            self->on_written(ec);
        });
}

void CoordinatorServer::Impl::Session::on_written(const error_code& ec) {
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

} // namespace tfslurm
