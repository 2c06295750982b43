// SPDX-License-Identifier: MIT
// The launcher's link to its coordinator (detail/launcher_shell.hpp): it connects through the
// candidate control ports in order, expects the coordinator's challenge, proves itself, checks
// the coordinator's proof and registers; then it carries framed messages both ways. Retries and
// registration failures are setup errors (fatal()); after `welcome` the machine decides.
#include "detail/fd.hpp"
#include "detail/launcher_shell.hpp"

#include <tfslurm/log.hpp>

#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <cerrno>

namespace tfslurm::detail {
namespace {

/// How long a connected candidate control port may stay silent before the launcher tries the
/// next: a coordinator sends its challenge as soon as it accepts, so a silent peer is some other
/// program (a listener that never accepts) holding the port.
constexpr Millis k_challenge_timeout{2000};

} // namespace

void LauncherShell::connect() {
    if (m_link != Link::connecting) {
        return;
    }
    error_code ec;
    Stream::endpoint endpoint;
    if (!m_relay_path.empty()) {
        // A follower registers through its node leader's relay (the tree).
        endpoint = asio::local::stream_protocol::endpoint(m_relay_path);
    } else {
        Tcp::resolver resolver(m_io);
        // Synchronous on purpose: Asio's async resolver would add a thread.
        const auto endpoints = resolver.resolve(
            m_plan.control_address, std::to_string(m_candidates.at(m_candidate)), ec);
        if (ec) {
            retry_connect(
                fmt::format("cannot resolve {}: {}", m_plan.control_address, ec.message()));
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
        retry_connect(ec.message());
        return;
    }
    detail::set_cloexec(m_socket.native_handle());
    m_socket.async_connect(endpoint, [this](const error_code& error) {
        if (m_link != Link::connecting) {
            return;
        }
        if (error) {
            next_candidate(error.message());
            return;
        }
        error_code ignored;
        if (m_relay_path.empty()) {
            m_socket.set_option(Tcp::no_delay(true), ignored);
        }
        m_link = Link::handshake;
        m_decoder = protocol::FrameDecoder{};
        m_challenge_timer.expires_after(k_challenge_timeout);
        m_challenge_timer.async_wait([this](const error_code& wait_error) {
            if (!wait_error && m_link == Link::handshake && m_nonce.empty()) {
                next_candidate(
                    fmt::format("no challenge within {}", format_seconds(k_challenge_timeout)));
            }
        });
        read();
    });
}

void LauncherShell::next_candidate(const std::string& why) {
    // Refused, silent or not this job's coordinator: try the next candidate at once; back off
    // only once every candidate has been tried.
    const auto tried = control();
    m_candidate = (m_candidate + 1) % m_candidates.size();
    if (m_candidate == 0) {
        retry_connect(fmt::format("{}: {}", tried, why));
        return;
    }
    logger().debug("{}: {}: {}; trying {}", label(), tried, why, control());
    m_last_connect_error = fmt::format("{}: {}", tried, why);
    close_attempt();
    asio::post(m_io, [this] { connect(); });
}

void LauncherShell::close_attempt() {
    m_link = Link::connecting;
    m_nonce.clear();
    m_challenge_timer.cancel();
    error_code ignored;
    m_socket.close(ignored);
    m_queue.clear();
}

void LauncherShell::retry_connect(const std::string& why) {
    m_last_connect_error = why;
    close_attempt();
    if (Clock::now() + m_backoff >= m_connect_deadline) {
        return; // the deadline timer reports it
    }
    m_retry_timer.expires_after(m_backoff);
    // A relay socket appears once the leader registered: look again soon.
    m_backoff = std::min(m_backoff * 2, m_relay_path.empty() ? Millis{1000} : Millis{100});
    m_retry_timer.async_wait([this](const error_code& ec) {
        if (!ec) {
            connect();
        }
    });
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
            next_candidate(fmt::format("connection closed during registration ({})", ec.message()));
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
            const protocol::Message message = protocol::decode_payload(*payload);
            if (m_link == Link::handshake) {
                handshake(message);
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
            // Another protocol version, a stale coordinator of an older tfslurm, garbage: not
            // this step's coordinator, whatever it is.
            not_the_coordinator(e.what());
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

// The registration exchange in message order (~70 lines): challenge -> hello with our proof,
// then the coordinator's welcome (its proof checked) or reject (its code decides whether the
// next candidate port is tried); one function keeps the order of the protocol readable.
void LauncherShell::handshake(const protocol::Message& message) {
    if (const auto* challenge = std::get_if<protocol::Challenge>(&message)) {
        if (!m_nonce.empty()) {
            not_the_coordinator("a second challenge");
            return;
        }
        m_challenge_timer.cancel();
        protocol::Hello hello;
        hello.job = m_plan.job_id.value_or(0);
        hello.step = m_plan.step_id.value_or(0);
        hello.rank = m_rank;
        hello.role = m_self.role;
        hello.host = m_self.host;
        hello.pid = ::getpid();
        hello.auth = m_auth->method();
        try {
            hello.credential = m_auth->prove(challenge->nonce, step_id(), m_rank);
            m_nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
        } catch (const std::exception& e) {
            fatal(errors::make(Errc::auth, "launcher", e.what()));
            return;
        }
        hello.nonce = m_nonce;
        hello.address = m_options.address;
        hello.relay = leads_node();
        hello.port = m_trainer_port.port();
        send(hello);
    } else if (const auto* welcome = std::get_if<protocol::Welcome>(&message)) {
        // Nothing the peer says is believed before it proves it is this job's coordinator:
        // any user of the node can bind the control port first.
        if (const auto why =
                m_auth->verify_coordinator(welcome->credential, m_nonce, step_id(), m_rank)) {
            // Another process holds this candidate (any user of the node can bind it): the
            // coordinator listens on a later one.
            not_the_coordinator(*why);
            return;
        }
        logger().debug("{}: coordinator at {}", label(), control());
        m_link = Link::session;
        // A proven coordinator (or relay) may send more than k_max_frame: a large `cluster`.
        m_decoder.set_limit(protocol::k_max_trusted_frame);
        m_deadline_timer.cancel();
        m_retry_timer.cancel();
        m_challenge_timer.cancel();
        m_machine.registered(control(), Clock::now());
        if (leads_node()) {
            start_relay();
        }
        perform();
    } else if (const auto* reject = std::get_if<protocol::Reject>(&message)) {
        if (reject->code == protocol::RejectCode::wrong_job ||
            reject->code == protocol::RejectCode::wrong_step) {
            // Another job's or another step's coordinator holds this candidate (derived ports
            // collide, or steps of one job share a fixed port): ours listens on a later one. The
            // code is unproven, but believing it only makes us look further.
            next_candidate(
                fmt::format("another {}'s coordinator ({})",
                            reject->code == protocol::RejectCode::wrong_job ? "job" : "step",
                            reject->reason));
            return;
        }
        // Unproven (a coordinator that cannot check our proof cannot prove itself to us either):
        // a real misconfiguration (another secret, another user, a rank registered twice) or a
        // squatter's word. Believing it would let any user of the node stop the job, so look
        // further, and name it at the deadline if no candidate proves to be the coordinator.
        m_refusal = fmt::format("{} rejected {}: {}", control(), label(), reject->reason);
        not_the_coordinator(fmt::format("it rejected {}: {}", label(), reject->reason));
    } else {
        not_the_coordinator(fmt::format("{} before the welcome", protocol::type_name(message)));
    }
}

void LauncherShell::not_the_coordinator(const std::string& why) {
    const auto job = m_plan.job_id.value_or(0);
    const std::string what =
        fmt::format("{} did not prove that it is job {}'s coordinator: {}", control(), job, why);
    // Every round of candidates meets the same peer again: one warning each.
    if (m_warned.insert(what).second) {
        logger().warn("{}: {}; trying the next control port", label(), what);
    }
    next_candidate(what);
}

void LauncherShell::send(const protocol::Message& message, bool own) {
    if (m_link != Link::handshake && m_link != Link::session) {
        return;
    }
    // A relayed message (at most k_max_frame) in its envelope may be slightly larger; it is
    // not the machine's (no written() for it).
    const bool relayed = own || std::holds_alternative<protocol::Relay>(message);
    m_queue.emplace_back(protocol::encode_frame(message, protocol::k_max_relay_frame),
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
                next_candidate(ec.message());
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

void LauncherShell::plan_tree() {
    if (!m_options.slurm_step) {
        // `--local`: N launchers of one machine for development and tests stay flat, so that
        // the control port's defences (impostors, fallback ports) stay exercised there.
        return;
    }
    const auto leaders = node_leaders(members_of(m_plan));
    m_leader = leaders.at(m_rank);
    for (std::uint32_t rank = 0; rank < leaders.size(); ++rank) {
        if (leaders[rank] == m_rank && rank != m_rank) {
            m_followers.insert(rank);
        }
    }
    if (m_leader != m_rank) {
        m_relay_path = relay_path(step_id(), m_leader);
        m_candidates = {m_plan.control_port};
        m_candidate = 0;
    }
}

void LauncherShell::start_relay() {
    m_relay = std::make_unique<NodeRelay>(
        m_io,
        *m_auth,
        step_id(),
        m_followers,
        m_options.run.heartbeat_timeout,
        [this](const protocol::Relay& relay) { send(relay, true); },
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
        // Its ranks then do not register: the coordinator names them at the connect timeout.
        logger().error("{}: {}", label(), e.what());
        m_relay->stop_waiting();
        return;
    }
    logger().debug("{}: relaying for ranks {}", label(), fmt::join(m_followers, ","));
    m_relay_timer.expires_at(m_connect_deadline);
    m_relay_timer.async_wait([this](const error_code& ec) {
        if (!ec && m_relay) {
            m_relay->stop_waiting();
        }
    });
}

bool LauncherShell::defer(const LauncherAction& action) {
    const bool closing = std::holds_alternative<launcher_action::HalfClose>(action) ||
                         std::holds_alternative<launcher_action::Disconnect>(action) ||
                         std::holds_alternative<launcher_action::Finish>(action);
    if (!closing || !m_relay || !m_relay->busy()) {
        return false;
    }
    // The leader's connection carries its node: it stays until every local launcher is done.
    if (m_deferred.empty()) {
        node_heartbeat();
    }
    m_deferred.push_back(action);
    return true;
}

void LauncherShell::node_heartbeat() {
    m_node_heartbeat.expires_after(m_options.run.heartbeat);
    m_node_heartbeat.async_wait([this](const error_code& ec) {
        if (ec || !m_relay || !m_relay->busy() || m_link != Link::session) {
            return;
        }
        send(protocol::Heartbeat{}, true);
        node_heartbeat();
    });
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
