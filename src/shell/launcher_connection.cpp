// SPDX-License-Identifier: MIT
// The launcher's link to its coordinator (detail/launcher_shell.hpp), socket plumbing only: until
// `welcome` it performs what the Connector (connector.cpp) decides (which endpoint to try, the
// proofs, the timers, the failure), then it carries framed messages both ways; a node leader's
// relay (node_relay.cpp) shares the connection. Every rule is in a machine.
#include "os/detail/fd.hpp"
#include "shell/detail/launcher_shell.hpp"

#include <tfslurm/common/log.hpp>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace tfslurm::detail {

namespace connect_action = connector_action;

void LauncherShell::plan_tree() {
    // `--local`: N launchers of one machine for development and tests stay flat, so that the
    // control port's defences (impostors, fallback ports) stay exercised there.
    m_place =
        node_place(members_of(m_plan), m_rank, m_options.slurm_step ? Tree::per_node : Tree::flat);
    if (m_place.leader != m_rank) {
        m_relay_path = relay_path(step_id(), m_place.leader);
        m_candidates = {m_plan.control_port};
    }
}

void LauncherShell::start_connecting(Clock::time_point now) {
    plan_tree();
    ConnectorSettings settings;
    settings.rank = m_rank;
    settings.self = Member{m_self.role, m_self.index, m_self.host};
    settings.step = step_id();
    settings.pid = ::getpid();
    settings.auth = m_auth->method();
    settings.address = m_options.address;
    settings.trainer_port = m_trainer_port.port();
    settings.leads_node = leads_node();
    settings.control_address = m_plan.control_address;
    settings.control_port = m_plan.control_port;
    settings.candidates = m_candidates;
    settings.leader = m_place.leader;
    settings.relay_path = m_relay_path;
    settings.connect_timeout = m_options.run.connect_timeout;
    m_connector.emplace(std::move(settings));
    m_connector->start(now);
    perform_connector();
}

void LauncherShell::perform_connector() {
    for (auto actions = m_connector->take_actions(); !actions.empty();
         actions = m_connector->take_actions()) {
        for (const auto& action : actions) {
            perform_connector(action);
        }
    }
}

// One branch per action (~60 lines): the proofs are made and checked here (MUNGE is a socket),
// and Registered hands the connection over to the launcher's machine.
void LauncherShell::perform_connector(const ConnectorAction& action) {
    if (const auto* target = std::get_if<connect_action::Connect>(&action)) {
        m_link = Link::connecting;
        asio::post(m_io, [this, target = *target] { connect(target); });
    } else if (const auto* prove = std::get_if<connect_action::Prove>(&action)) {
        std::string credential;
        Handshake handshake{prove->challenge, {}, prove->endpoint, {}, {}};
        try {
            if (m_auth->method() == protocol::AuthMethod::munge) {
                handshake.own_key = protocol::random_bytes(protocol::k_key_material_size);
            }
            credential = m_auth->prove(
                prove->challenge, step_id(), m_rank, prove->endpoint, handshake.own_key);
            handshake.nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
        } catch (const std::exception& e) {
            m_connector->proof_failed(e.what(), Clock::now());
            return;
        }
        m_handshake = handshake;
        m_connector->proved(credential, handshake.nonce, Clock::now());
    } else if (const auto* send_action = std::get_if<connect_action::Send>(&action)) {
        send(send_action->message);
    } else if (const auto* verify = std::get_if<connect_action::Verify>(&action)) {
        m_connector->verified(m_auth->verify_coordinator(verify->credential,
                                                         verify->nonce,
                                                         step_id(),
                                                         m_rank,
                                                         verify->endpoint,
                                                         &m_handshake.peer_key),
                              Clock::now());
    } else if (std::holds_alternative<connect_action::CloseAttempt>(action)) {
        close_attempt();
    } else if (const auto* arm_action = std::get_if<connect_action::ArmTimer>(&action)) {
        const ConnectorTimer which = arm_action->timer;
        connect_timer(which).expires_at(arm_action->at);
        connect_timer(which).async_wait([this, which](const error_code& ec) {
            if (!ec) {
                m_connector->timer_fired(which, Clock::now());
                perform_connector();
            }
        });
    } else if (const auto* cancel = std::get_if<connect_action::CancelTimer>(&action)) {
        connect_timer(cancel->timer).cancel();
    } else if (const auto* registered = std::get_if<connect_action::Registered>(&action)) {
        try {
            m_channel.emplace(m_auth->session_keys(m_auth->method(),
                                                   m_handshake.own_key,
                                                   m_handshake.peer_key,
                                                   m_handshake.challenge,
                                                   m_handshake.nonce,
                                                   step_id(),
                                                   m_rank,
                                                   m_handshake.endpoint),
                              protocol::End::launcher);
        } catch (const Error& e) {
            fatal(e);
            return;
        }
        m_handshake = {};
        m_link = Link::session;
        // A proven coordinator (or relay) may send more than k_max_frame: a large `cluster`;
        // every frame from now on is sealed, both ways.
        m_decoder.set_limit(protocol::k_max_trusted_frame + protocol::k_tag_size);
        m_machine.registered(registered->control, Clock::now());
        if (leads_node()) {
            start_relay();
        }
        perform();
    } else if (const auto* failure = std::get_if<connect_action::Fail>(&action)) {
        fatal(failure->error);
    }
}

void LauncherShell::connect(const connector_action::Connect& target) {
    if (m_link != Link::connecting) {
        return;
    }
    error_code ec;
    Stream::endpoint endpoint;
    if (!target.path.empty()) {
        // A follower registers through its node leader's relay (the tree).
        endpoint = relay_endpoint(target.path);
    } else {
        Tcp::resolver resolver(m_io);
        // Synchronous on purpose: Asio's async resolver would add a thread.
        const auto endpoints = resolver.resolve(target.address, std::to_string(target.port), ec);
        if (ec) {
            m_connector->unreachable(
                fmt::format("cannot resolve {}: {}", target.address, ec.message()), Clock::now());
            perform_connector();
            return;
        }
        // The first IPv4 endpoint (the coordinator listens on IPv4), else the first one.
        auto tcp = endpoints.begin()->endpoint();
        for (const auto& entry : endpoints) {
            if (entry.endpoint().address().is_v4()) {
                tcp = entry.endpoint();
                break;
            }
        }
        endpoint = tcp;
    }
    m_socket = Stream::socket(m_io);
    m_socket.open(endpoint.protocol(), ec);
    if (ec) {
        m_connector->unreachable(ec.message(), Clock::now());
        perform_connector();
        return;
    }
    detail::set_cloexec(m_socket.native_handle());
    const bool tcp = target.path.empty();
    m_socket.async_connect(endpoint, [this, tcp](const error_code& error) {
        if (m_link != Link::connecting) {
            return;
        }
        if (error) {
            m_connector->connect_failed(error.message(), Clock::now());
            perform_connector();
            return;
        }
        error_code ignored;
        if (tcp) {
            m_socket.set_option(Tcp::no_delay(true), ignored);
        } else if (const auto peer = peer_credentials(m_socket.native_handle());
                   !peer || peer->uid != ::geteuid()) {
            // Anyone on the node can bind an abstract name: only this user's process may be
            // the relay (the kernel's word, before any byte is read).
            m_connector->foreign_peer(
                peer ? peer->uid : k_unknown_uid, peer ? peer->pid : 0, ::geteuid(), Clock::now());
            perform_connector();
            return;
        }
        m_link = Link::handshake;
        m_decoder = protocol::FrameDecoder{};
        m_channel.reset();
        m_connector->connected(Clock::now());
        perform_connector();
        read();
    });
}

void LauncherShell::close_attempt() {
    m_link = Link::connecting;
    error_code ignored;
    m_socket.close(ignored);
    m_queue.clear();
}

void LauncherShell::read() {
    m_socket.async_read_some(asio::buffer(m_buffer),
                             [this](const error_code& ec, std::size_t n) { on_read(ec, n); });
}

void LauncherShell::on_read(const error_code& ec, std::size_t n) {
    if (m_link == Link::connecting || m_link == Link::closed ||
        ec == asio::error::operation_aborted) {
        return;
    }
    if (ec) {
        if (m_link == Link::handshake) {
            m_connector->disconnected(ec.message(), Clock::now());
            perform_connector();
        } else {
            if (m_relay) {
                m_relay->upstream_lost();
            }
            m_machine.connection_lost(ec == asio::error::eof ? "connection closed" : ec.message(),
                                      Clock::now());
            perform();
        }
        return;
    }
    try {
        m_decoder.feed(std::string_view(m_buffer.data(), n));
        while (auto payload = m_decoder.next()) {
            if (m_link == Link::session) {
                payload = m_channel->open(std::move(*payload));
            }
            const protocol::Message message = protocol::decode_payload(*payload);
            if (m_link == Link::handshake) {
                m_connector->received(message, Clock::now());
                perform_connector();
            } else if (const auto* relay = std::get_if<protocol::Relay>(&message);
                       relay != nullptr && m_relay) {
                m_relay->downstream(*relay);
            } else {
                if (m_relay && std::holds_alternative<protocol::Heartbeat>(message)) {
                    m_relay->pulse(); // the coordinator is alive for the followers too
                }
                m_machine.received(message, Clock::now());
                perform();
            }
            if (m_link == Link::connecting || m_link == Link::closed || m_fatal) {
                return;
            }
        }
    } catch (const Error& e) {
        if (m_link == Link::handshake) {
            m_connector->garbled(e.what(), Clock::now());
            perform_connector();
        } else {
            if (m_relay) {
                m_relay->upstream_lost();
            }
            m_machine.connection_lost(e.what(), Clock::now());
            perform();
        }
        return;
    }
    read();
}

void LauncherShell::send(const protocol::Message& message, bool own) {
    if (m_link != Link::handshake && m_link != Link::session) {
        return;
    }
    // A relayed message (at most k_max_frame) in its envelope may be slightly larger; it is
    // not the machine's (no written() for it).
    const bool relayed = own || std::holds_alternative<protocol::Relay>(message);
    m_queue.emplace_back(
        m_link == Link::session
            ? m_channel->seal(protocol::encode_payload(message), protocol::k_max_relay_frame)
            : protocol::encode_frame(message, protocol::k_max_relay_frame),
        m_link == Link::session && !relayed);
    if (!m_writing) {
        write();
    }
}

/// Write the queued frames, up to protocol::k_frames_per_write in one gather write: what queued up
/// while the last write was in flight (a node leader's followers' hellos or exits) goes out in one
/// system call, and reaches the coordinator in one read.
void LauncherShell::write() {
    m_writing = true;
    m_in_flight = std::min(m_queue.size(), protocol::k_frames_per_write);
    m_buffers.clear();
    for (std::size_t i = 0; i < m_in_flight; ++i) {
        m_buffers.emplace_back(asio::buffer(m_queue[i].first));
    }
    asio::async_write(m_socket, m_buffers, [this](const error_code& ec, std::size_t) {
        m_writing = false;
        if (ec) {
            m_queue.clear();
            if (m_link == Link::session) {
                if (m_relay) {
                    m_relay->upstream_lost();
                }
                m_machine.connection_lost(ec.message(), Clock::now());
                perform();
            } else if (m_link == Link::handshake && ec != asio::error::operation_aborted) {
                m_connector->connect_failed(ec.message(), Clock::now());
                perform_connector();
            }
            return;
        }
        const auto written = static_cast<std::ptrdiff_t>(std::min(m_in_flight, m_queue.size()));
        const auto machine_frames = std::count_if(m_queue.begin(),
                                                  m_queue.begin() + written,
                                                  [](const auto& frame) { return frame.second; });
        m_queue.erase(m_queue.begin(), m_queue.begin() + written);
        for (std::ptrdiff_t i = 0; i < machine_frames; ++i) {
            m_machine.written(Clock::now());
        }
        if (!m_queue.empty()) {
            write();
        }
        perform();
    });
}

void LauncherShell::start_relay() {
    RelaySettings settings;
    settings.step = step_id();
    settings.ranks = m_place.followers;
    settings.heartbeat = m_options.run.heartbeat;
    settings.heartbeat_timeout = m_options.run.heartbeat_timeout;
    settings.wait_until = m_connect_deadline;
    m_relay = std::make_unique<NodeRelay>(
        m_io,
        *m_auth,
        std::move(settings),
        [this](const protocol::Message& message) { send(message, true); },
        [this] {
            // Every local launcher finished: what the machine decided can happen now.
            auto deferred = std::move(m_deferred);
            m_deferred.clear();
            for (const auto& action : deferred) {
                perform(action);
            }
            perform();
        });
    try {
        m_relay->listen(relay_path(step_id(), m_rank));
    } catch (const Error& e) {
        // Never a relay that someone else can reach, and never a node whose ranks wait for the
        // connect timeout: the step fails at once, with this line (docs/protocol.md, "Threat
        // model").
        fatal(e);
        return;
    }
    logger().debug("{}: relaying for ranks {}", label(), fmt::join(m_place.followers, ","));
}

bool LauncherShell::defer(const LauncherAction& action) {
    const bool closing = std::holds_alternative<launcher_action::HalfClose>(action) ||
                         std::holds_alternative<launcher_action::Disconnect>(action) ||
                         std::holds_alternative<launcher_action::Finish>(action);
    if (!closing || !m_relay || !m_relay->hold()) {
        return false;
    }
    // The leader's connection carries its node: it stays until every local launcher is done.
    m_deferred.push_back(action);
    return true;
}

void LauncherShell::close_socket(asio::socket_base::shutdown_type how) {
    error_code ignored;
    timer(LauncherTimer::heartbeat).cancel();
    timer(LauncherTimer::watch).cancel();
    if (how == Tcp::socket::shutdown_send) {
        m_socket.shutdown(how, ignored);
        return;
    }
    m_link = Link::closed;
    timer(LauncherTimer::close).cancel();
    m_socket.shutdown(how, ignored);
    m_socket.close(ignored);
    m_queue.clear();
}

} // namespace tfslurm::detail
