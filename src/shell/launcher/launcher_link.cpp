// SPDX-License-Identifier: MIT
// The launcher's link to its coordinator (launcher/launcher_link.hpp), socket plumbing only: until
// `welcome` it performs what the Connector (connector.cpp) decides (which endpoint to try, the
// proofs, the timers, the failure), then it carries framed messages both ways. What a message
// means is the launcher's (launcher_shell.cpp); every rule is in a machine.
#include "shell/launcher/launcher_link.hpp"

#include "os/detail/fd.hpp"
#include "shell/detail/node_relay.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <utility>

namespace tfslurm::detail {

namespace asio = boost::asio;
namespace connect_action = connector_action;

namespace {

/// `name`'s address by the system's resolver (the first IPv4 one: the coordinator listens on
/// IPv4; else the first one), or nullopt and why not. Synchronous on purpose: Asio's
/// asynchronous resolver would add a thread.
std::optional<asio::ip::address>
resolve_host(asio::io_context& io, const std::string& name, std::string& error) {
    boost::system::error_code ec;
    asio::ip::tcp::resolver resolver(io);
    const auto endpoints = resolver.resolve(name, "", ec);
    if (ec) {
        error = ec.message();
        return std::nullopt;
    }
    for (const auto& entry : endpoints) {
        if (entry.endpoint().address().is_v4()) {
            return entry.endpoint().address();
        }
    }
    return endpoints.begin()->endpoint().address();
}

} // namespace

LauncherLink::LauncherLink(asio::io_context& io,
                           const protocol::Authenticator& auth,
                           protocol::StepId step,
                           std::uint32_t rank,
                           LinkEvents events)
    : m_io(io), m_auth(auth), m_step(step), m_rank(rank), m_events(std::move(events)), m_socket(io),
      m_timers(make_timers(io, std::make_index_sequence<k_connector_timer_count>{})),
      m_host([&io](const std::string& name, std::string& error) {
          return resolve_host(io, name, error);
      }) {}

void LauncherLink::start(ConnectorSettings settings, Clock::time_point now) {
    m_connector.emplace(std::move(settings));
    m_connector->start(now);
    perform();
}

void LauncherLink::perform() {
    for (auto actions = m_connector->take_actions(); !actions.empty();
         actions = m_connector->take_actions()) {
        for (const auto& action : actions) {
            perform(action);
        }
    }
}

// One branch per action (~50 lines): the proofs are made and checked here (MUNGE is a socket),
// and Registered opens the session that the launcher's machine then drives.
void LauncherLink::perform(const ConnectorAction& action) {
    if (const auto* target = std::get_if<connect_action::Connect>(&action)) {
        m_state = State::connecting;
        asio::post(m_io, [this, target = *target] { connect(target); });
    } else if (const auto* prove = std::get_if<connect_action::Prove>(&action)) {
        std::string credential;
        Handshake handshake{prove->challenge, {}, prove->endpoint, {}, {}};
        try {
            if (m_auth.method_for(m_rank) == protocol::AuthMethod::munge) {
                handshake.own_key = protocol::random_bytes(protocol::k_key_material_size);
            }
            credential =
                m_auth.prove(prove->challenge, m_step, m_rank, prove->endpoint, handshake.own_key);
            handshake.nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
        } catch (const std::exception& e) {
            m_connector->proof_failed(e.what(), Clock::now());
            return;
        }
        m_handshake = handshake;
        m_connector->proved(credential, handshake.nonce, Clock::now());
    } else if (const auto* send_action = std::get_if<connect_action::Send>(&action)) {
        send(send_action->message, false);
    } else if (const auto* verify = std::get_if<connect_action::Verify>(&action)) {
        m_connector->verified(m_auth.verify_coordinator(verify->credential,
                                                        verify->nonce,
                                                        m_step,
                                                        m_rank,
                                                        verify->endpoint,
                                                        &m_handshake.peer_key),
                              Clock::now());
    } else if (std::holds_alternative<connect_action::CloseAttempt>(action)) {
        close_attempt();
    } else if (const auto* arm_action = std::get_if<connect_action::ArmTimer>(&action)) {
        const ConnectorTimer which = arm_action->timer;
        timer(which).expires_at(arm_action->at);
        timer(which).async_wait([this, which](const ErrorCode& ec) {
            if (!ec) {
                m_connector->timer_fired(which, Clock::now());
                perform();
            }
        });
    } else if (const auto* cancel = std::get_if<connect_action::CancelTimer>(&action)) {
        timer(cancel->timer).cancel();
    } else if (const auto* registered = std::get_if<connect_action::Registered>(&action)) {
        open_session(registered->control);
    } else if (const auto* failure = std::get_if<connect_action::Fail>(&action)) {
        m_events.failed(failure->error);
    }
}

void LauncherLink::open_session(const std::string& control) {
    try {
        m_channel.emplace(m_auth.session_keys(m_auth.method_for(m_rank),
                                              m_handshake.own_key,
                                              m_handshake.peer_key,
                                              m_handshake.challenge,
                                              m_handshake.nonce,
                                              m_step,
                                              m_rank,
                                              m_handshake.endpoint),
                          protocol::End::launcher);
    } catch (const Error& e) {
        m_events.failed(e);
        return;
    }
    m_handshake = {};
    m_state = State::session;
    // A proven coordinator (or relay) may send more than k_max_frame: a large `cluster`;
    // every frame from now on is sealed, both ways.
    m_decoder.set_limit(protocol::k_max_trusted_frame + protocol::k_tag_size);
    m_events.opened(control);
}

void LauncherLink::connect(const connector_action::Connect& target) {
    if (m_state != State::connecting) {
        return;
    }
    ErrorCode ec;
    Stream::endpoint endpoint;
    if (!target.path.empty()) {
        // A follower registers through its node leader's relay (the tree).
        endpoint = relay_endpoint(target.path);
    } else {
        std::string why;
        const auto address = m_host.address(target.address, why);
        if (!address) {
            m_connector->unreachable(fmt::format("cannot resolve {}: {}", target.address, why),
                                     Clock::now());
            perform();
            return;
        }
        endpoint = asio::ip::tcp::endpoint(*address, target.port);
    }
    m_socket = Stream::socket(m_io);
    m_socket.open(endpoint.protocol(), ec);
    if (ec) {
        m_connector->unreachable(ec.message(), Clock::now());
        perform();
        return;
    }
    detail::set_cloexec(m_socket.native_handle());
    const bool tcp = target.path.empty();
    m_socket.async_connect(endpoint, [this, tcp](const ErrorCode& error) {
        if (m_state != State::connecting) {
            return;
        }
        if (error) {
            m_connector->connect_failed(error.message(), Clock::now());
            perform();
            return;
        }
        ErrorCode ignored;
        if (tcp) {
            m_socket.set_option(asio::ip::tcp::no_delay(true), ignored);
        } else if (const auto peer = peer_credentials(m_socket.native_handle());
                   !peer || peer->uid != ::geteuid()) {
            // Anyone on the node can bind an abstract name: only this user's process may be
            // the relay (the kernel's word, before any byte is read).
            m_connector->foreign_peer(
                peer ? peer->uid : k_unknown_uid, peer ? peer->pid : 0, ::geteuid(), Clock::now());
            perform();
            return;
        }
        m_state = State::handshake;
        m_decoder = protocol::FrameDecoder{};
        m_channel.reset();
        m_outbox.clear();
        m_half_close_pending = false;
        m_batches = tcp;
        m_connector->connected(Clock::now());
        perform();
        read();
    });
}

void LauncherLink::close_attempt() {
    m_state = State::connecting;
    ErrorCode ignored;
    m_socket.close(ignored);
    m_queue.clear();
    m_outbox.clear();
}

void LauncherLink::read() {
    m_socket.async_read_some(asio::buffer(m_buffer),
                             [this](const ErrorCode& ec, std::size_t n) { on_read(ec, n); });
}

namespace {

/// How the session's socket error tells the coordinator's end: EOF or a reset is its process
/// gone (a fact); a timeout or an unreachable host is its node gone or cut off (silence).
CoordinatorLoss loss_of(const boost::system::error_code& ec) {
    if (ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::broken_pipe || ec == asio::error::connection_aborted) {
        return CoordinatorLoss::closed;
    }
    if (ec == asio::error::timed_out || ec == asio::error::host_unreachable ||
        ec == asio::error::network_unreachable) {
        return CoordinatorLoss::silent;
    }
    return CoordinatorLoss::other;
}

} // namespace

void LauncherLink::end(const std::string& reason, bool connect_error, CoordinatorLoss loss) {
    if (m_state == State::handshake) {
        if (connect_error) {
            m_connector->connect_failed(reason, Clock::now());
        } else {
            m_connector->disconnected(reason, Clock::now());
        }
        perform();
    } else if (m_state == State::session) {
        m_events.lost(reason, loss);
    }
}

void LauncherLink::on_read(const ErrorCode& ec, std::size_t n) {
    if (m_state == State::connecting || m_state == State::closed ||
        ec == asio::error::operation_aborted) {
        return;
    }
    if (ec) {
        end(ec == asio::error::eof && m_state == State::session ? "connection closed"
                                                                : ec.message(),
            false,
            loss_of(ec));
        return;
    }
    try {
        m_decoder.feed(std::string_view(m_buffer.data(), n));
        while (auto payload = m_decoder.next()) {
            if (m_state == State::session) {
                payload = m_channel->open(std::move(*payload));
            }
            const protocol::Message message = protocol::decode_payload(*payload);
            if (m_state == State::handshake) {
                m_connector->received(message, Clock::now());
                perform();
            } else {
                m_events.received(message);
            }
            if (m_state == State::connecting || m_state == State::closed) {
                return;
            }
        }
    } catch (const Error& e) {
        if (m_state == State::handshake) {
            m_connector->garbled(e.what(), Clock::now());
            perform();
        } else {
            m_events.lost(e.what(), CoordinatorLoss::other);
        }
        return;
    }
    read();
}

void LauncherLink::send(const protocol::Message& message, bool machine) {
    if (m_state != State::handshake && m_state != State::session) {
        return;
    }
    // A relayed message (at most k_max_frame) in its envelope may be slightly larger.
    if (m_state == State::session && m_batches) {
        m_outbox.push(protocol::encode_payload(message), machine, protocol::k_max_relay_frame);
    } else {
        m_queue.emplace_back(
            m_state == State::session
                ? m_channel->seal(protocol::encode_payload(message), protocol::k_max_relay_frame)
                : protocol::encode_frame(message, protocol::k_max_relay_frame),
            m_state == State::session && machine);
    }
    // Written once the handlers ready now have run: what they send (a node leader's followers'
    // exits, read from their sockets in one turn) goes in the same write, in one batch.
    if (!m_in_flight && !m_write_posted) {
        m_write_posted = true;
        asio::post(m_io, [this] {
            m_write_posted = false;
            if (m_in_flight || (m_state != State::handshake && m_state != State::session)) {
                return;
            }
            if (!m_queue.empty() || !m_outbox.empty()) {
                write();
            } else if (m_half_close_pending) {
                shutdown_send();
            }
        });
    }
}

/// Write what is queued, up to protocol::k_frames_per_write frames in one gather write: what
/// queued up while the last write was in flight (a node leader's followers' hellos or exits) goes
/// out in one system call, sealed as batches (Outbox), and reaches the coordinator in one read.
void LauncherLink::write() {
    m_writing.clear();
    m_acknowledged = 0;
    while (m_writing.size() < protocol::k_frames_per_write && !m_queue.empty()) {
        m_writing.push_back(std::move(m_queue.front().first));
        m_acknowledged += m_queue.front().second ? 1U : 0U;
        m_queue.pop_front();
    }
    while (m_writing.size() < protocol::k_frames_per_write && !m_outbox.empty()) {
        protocol::Outbox::Frame frame = m_outbox.take(*m_channel);
        m_writing.push_back(std::move(frame.bytes));
        m_acknowledged += frame.acknowledged;
    }
    m_buffers.clear();
    for (const std::string& frame : m_writing) {
        m_buffers.emplace_back(asio::buffer(frame));
    }
    m_in_flight = true;
    asio::async_write(m_socket, m_buffers, [this](const ErrorCode& ec, std::size_t) {
        m_in_flight = false;
        if (ec) {
            m_queue.clear();
            m_outbox.clear();
            if (ec != asio::error::operation_aborted || m_state == State::session) {
                end(ec.message(), true, loss_of(ec));
            }
            return;
        }
        const std::size_t acknowledged = std::exchange(m_acknowledged, 0);
        if (!m_queue.empty() || !m_outbox.empty()) {
            write();
        } else if (m_half_close_pending) {
            shutdown_send();
        }
        for (std::size_t i = 0; i < acknowledged; ++i) {
            m_events.written();
        }
    });
}

void LauncherLink::half_close() {
    // What is queued goes first (a leader's last relayed exits, whose write is posted or
    // behind the one in flight): the EOF follows the last of it.
    if (m_in_flight || m_write_posted || !m_queue.empty() || !m_outbox.empty()) {
        m_half_close_pending = true;
        return;
    }
    shutdown_send();
}

void LauncherLink::shutdown_send() {
    m_half_close_pending = false;
    ErrorCode ignored;
    m_socket.shutdown(Stream::socket::shutdown_send, ignored);
}

void LauncherLink::close() {
    m_state = State::closed;
    ErrorCode ignored;
    m_socket.shutdown(Stream::socket::shutdown_both, ignored);
    m_socket.close(ignored);
    m_queue.clear();
}

void LauncherLink::cancel_timers() {
    for (auto& connect_timer : m_timers) {
        connect_timer.cancel();
    }
}

} // namespace tfslurm::detail
