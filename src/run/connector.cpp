// SPDX-License-Identifier: MIT
// The launcher's way to its coordinator (connector.hpp): candidates, back-off, the challenge and
// the hello, the welcome's proof and the connect deadline. Pure: no socket, no clock.
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/connector.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <utility>

namespace tfslurm {

namespace connect_action = connector_action; // unity builds: launcher*.cpp alias `action`

NodePlace node_place(const std::vector<Member>& ranks, std::uint32_t rank, Tree tree) {
    NodePlace place;
    place.leader = rank;
    if (tree == Tree::flat) {
        return place;
    }
    const auto leaders = node_leaders(ranks);
    place.leader = leaders.at(rank);
    for (std::uint32_t other = 0; other < leaders.size(); ++other) {
        if (leaders[other] == place.leader && other != place.leader) {
            ++place.node_followers;
            if (place.leader == rank) {
                place.followers.insert(other);
            }
        }
    }
    return place;
}

namespace {

std::string_view timer_name(ConnectorTimer timer) noexcept {
    switch (timer) {
    case ConnectorTimer::retry:
        return "retry";
    case ConnectorTimer::deadline:
        return "deadline";
    case ConnectorTimer::challenge:
        return "challenge";
    }
    return "?";
}

struct ConnectorDescriber {
    Clock::time_point epoch;

    std::string operator()(const connect_action::Connect& a) const {
        return a.path.empty() ? fmt::format("connect {}:{}", a.address, a.port)
                              : fmt::format("connect {}", a.path);
    }
    std::string operator()(const connect_action::Prove& a) const {
        return fmt::format("prove {} at {}", a.challenge, a.endpoint);
    }
    std::string operator()(const connect_action::Send& a) const {
        return "send " + std::string(protocol::type_name(a.message));
    }
    std::string operator()(const connect_action::Verify& a) const {
        return fmt::format("verify {} {} at {}", a.credential, a.nonce, a.endpoint);
    }
    std::string operator()(const connect_action::CloseAttempt& /*a*/) const {
        return "close attempt";
    }
    std::string operator()(const connect_action::ArmTimer& a) const {
        return fmt::format("arm {} {}",
                           timer_name(a.timer),
                           std::chrono::duration_cast<Millis>(a.at - epoch).count());
    }
    std::string operator()(const connect_action::CancelTimer& a) const {
        return fmt::format("cancel {}", timer_name(a.timer));
    }
    std::string operator()(const connect_action::Registered& a) const {
        return "registered " + a.control;
    }
    std::string operator()(const connect_action::Fail& a) const {
        return a.error.hint().empty()
                   ? fmt::format("fail {}", a.error.what())
                   : fmt::format("fail {} (hint: {})", a.error.what(), a.error.hint());
    }
};

} // namespace

std::string describe(const ConnectorAction& action, Clock::time_point epoch) {
    return std::visit(ConnectorDescriber{epoch}, action);
}

Connector::Connector(ConnectorSettings settings)
    : m_settings(std::move(settings)),
      m_backoff(m_settings.relay_path.empty() ? k_first_backoff : k_first_relay_backoff) {}

std::vector<ConnectorAction> Connector::take_actions() {
    return std::exchange(m_actions, {});
}

std::string Connector::label() const {
    return fmt::format(
        "rank {} ({}:{})", m_settings.rank, to_string(m_settings.self.role), m_settings.self.index);
}

std::string Connector::control() const {
    if (!m_settings.relay_path.empty()) {
        return fmt::format("rank {}'s relay {}", m_settings.leader, m_settings.relay_path);
    }
    return fmt::format("{}:{}", m_settings.control_address, m_settings.candidates.at(m_candidate));
}

std::string Connector::endpoint() const {
    return m_settings.relay_path.empty()
               ? protocol::tcp_endpoint(m_settings.candidates.at(m_candidate))
               : protocol::unix_endpoint(m_settings.relay_path);
}

void Connector::start(Clock::time_point now) {
    m_started = now;
    m_deadline = now + m_settings.connect_timeout;
    m_actions.emplace_back(connect_action::ArmTimer{ConnectorTimer::deadline, m_deadline});
    connect();
}

void Connector::connect() {
    m_phase = Phase::connecting;
    if (!m_settings.relay_path.empty()) {
        m_actions.emplace_back(connect_action::Connect{{}, 0, m_settings.relay_path});
    } else {
        m_actions.emplace_back(connect_action::Connect{
            m_settings.control_address, m_settings.candidates.at(m_candidate), {}});
    }
}

void Connector::connected(Clock::time_point now) {
    if (m_phase != Phase::connecting) {
        return;
    }
    m_phase = Phase::handshake;
    m_nonce.clear();
    if (m_candidate == 0) {
        m_first_answered = true; // someone listens there: polling it sooner finds no one new
    }
    m_actions.emplace_back(
        connect_action::ArmTimer{ConnectorTimer::challenge, now + k_challenge_timeout});
}

void Connector::foreign_peer(std::uint32_t uid,
                             std::int64_t pid,
                             std::uint32_t self_uid,
                             Clock::time_point /*now*/) {
    if (m_phase != Phase::connecting && m_phase != Phase::handshake) {
        return;
    }
    close_attempt();
    const std::string holder = uid == k_unknown_uid
                                   ? std::string("a process whose uid the kernel did not give")
                                   : fmt::format("uid {} (pid {})", uid, pid);
    fail(errors::make(Errc::auth,
                      "relay",
                      fmt::format("{}: rank {}'s relay {} is held by {}, not by this job's user "
                                  "(uid {})",
                                  label(),
                                  m_settings.leader,
                                  quote(m_settings.relay_path),
                                  holder,
                                  self_uid),
                      "another process on this node took the relay's name; `ss -xlp | grep "
                      "tfslurm` shows it"));
}

void Connector::connect_failed(const std::string& why, Clock::time_point now) {
    if (m_phase == Phase::connecting || m_phase == Phase::handshake) {
        if (m_candidate == 0) {
            m_first_refused = m_phase == Phase::connecting;
        }
        next_candidate(why, now);
    }
}

void Connector::disconnected(const std::string& why, Clock::time_point now) {
    if (m_phase == Phase::handshake) {
        next_candidate(fmt::format("connection closed during registration ({})", why), now);
    }
}

void Connector::unreachable(const std::string& why, Clock::time_point now) {
    if (m_phase == Phase::connecting) {
        m_first_refused = false; // not a refusal: no quick poll (a lookup each time)
        retry(why, now);
    }
}

void Connector::garbled(const std::string& what, Clock::time_point now) {
    if (m_phase == Phase::handshake) {
        // Another protocol version, a stale coordinator of an older tfslurm, garbage: not this
        // step's coordinator, whatever it is.
        not_the_coordinator(what, now);
    }
}

void Connector::next_candidate(const std::string& why, Clock::time_point now) {
    // Refused, silent or not this job's coordinator: try the next candidate at once; back off
    // only once every candidate has been tried.
    const auto tried = control();
    if (m_quick && !m_first_answered) {
        retry(fmt::format("{}: {}", tried, why), now); // a quick poll is the first alone
        return;
    }
    m_quick = false;
    m_candidate = (m_candidate + 1) % m_settings.candidates.size();
    if (m_candidate == 0) {
        retry(fmt::format("{}: {}", tried, why), now);
        return;
    }
    logger().debug("{}: {}: {}; trying {}", label(), tried, why, control());
    m_last_error = fmt::format("{}: {}", tried, why);
    close_attempt();
    connect();
}

void Connector::close_attempt() {
    m_phase = Phase::connecting;
    m_nonce.clear();
    m_actions.emplace_back(connect_action::CancelTimer{ConnectorTimer::challenge});
    m_actions.emplace_back(connect_action::CloseAttempt{});
}

bool Connector::quick_poll_next(Clock::time_point now) const {
    // The control ports (a node leader) or the relay's socket (a follower): the first candidate.
    return m_settings.dialers <= k_quick_poll_dialers && m_first_refused && !m_first_answered &&
           now < m_started + k_quick_window;
}

void Connector::retry(const std::string& why, Clock::time_point now) {
    m_last_error = why;
    close_attempt();
    m_quick = quick_poll_next(now);
    if (m_quick) {
        if (now + k_quick_poll < m_deadline) {
            m_actions.emplace_back(
                connect_action::ArmTimer{ConnectorTimer::retry, now + k_quick_poll});
        }
        return;
    }
    if (now + m_backoff >= m_deadline) {
        return; // the deadline reports it
    }
    m_actions.emplace_back(connect_action::ArmTimer{ConnectorTimer::retry, now + m_backoff});
    m_backoff = std::min(m_backoff * 2,
                         m_settings.relay_path.empty() ? k_max_backoff : k_max_relay_backoff);
}

void Connector::not_the_coordinator(const std::string& why, Clock::time_point now) {
    const std::string what = fmt::format("{} did not prove that it is job {}'s coordinator: {}",
                                         control(),
                                         m_settings.step.job,
                                         why);
    // Every round of candidates meets the same peer again: one warning each.
    if (m_warned.insert(what).second) {
        logger().warn("{}: {}; trying the next control port", label(), what);
    }
    next_candidate(what, now);
}

void Connector::fail(Error error) {
    m_phase = Phase::failed;
    m_actions.emplace_back(connect_action::Fail{std::move(error)});
}

// The registration exchange in message order: challenge -> hello with our proof (Prove, then
// proved()), then the coordinator's welcome (its proof checked: Verify, then verified()) or
// reject (its code decides whether the warning is given); one function keeps the order of the
// protocol readable.
void Connector::received(const protocol::Message& message, Clock::time_point now) {
    if (m_phase != Phase::handshake) {
        return;
    }
    if (const auto* challenge = std::get_if<protocol::Challenge>(&message)) {
        if (!m_nonce.empty() || m_proving) {
            not_the_coordinator("a second challenge", now);
            return;
        }
        m_proving = true;
        m_actions.emplace_back(connect_action::CancelTimer{ConnectorTimer::challenge});
        m_actions.emplace_back(connect_action::Prove{challenge->nonce, endpoint()});
    } else if (const auto* welcome = std::get_if<protocol::Welcome>(&message)) {
        // Nothing the peer says is believed before it proves it is this job's coordinator:
        // any user of the node can bind the control port first.
        m_actions.emplace_back(connect_action::Verify{welcome->credential, m_nonce, endpoint()});
    } else if (const auto* reject = std::get_if<protocol::Reject>(&message)) {
        if (reject->code == protocol::RejectCode::wrong_job ||
            reject->code == protocol::RejectCode::wrong_step) {
            // Another job's or another step's coordinator holds this candidate (derived ports
            // collide, or steps of one job share a fixed port): ours listens on a later one. The
            // code is unproven, but believing it only makes us look further.
            next_candidate(
                fmt::format("another {}'s coordinator ({})",
                            reject->code == protocol::RejectCode::wrong_job ? "job" : "step",
                            reject->reason),
                now);
            return;
        }
        // Unproven (a coordinator that cannot check our proof cannot prove itself to us either):
        // a real misconfiguration (another secret, another user, a rank registered twice) or a
        // squatter's word. Believing it would let any user of the node stop the job, so look
        // further, and name it at the deadline if no candidate proves to be the coordinator.
        m_refusal = fmt::format("{} rejected {}: {}", control(), label(), reject->reason);
        not_the_coordinator(fmt::format("it rejected {}: {}", label(), reject->reason), now);
    } else {
        not_the_coordinator(fmt::format("{} before the welcome", protocol::type_name(message)),
                            now);
    }
}

void Connector::proved(const std::string& credential,
                       const std::string& nonce,
                       Clock::time_point /*now*/) {
    if (m_phase != Phase::handshake || !m_proving) {
        return;
    }
    m_proving = false;
    m_nonce = nonce;
    protocol::Hello hello;
    hello.job = m_settings.step.job;
    hello.step = m_settings.step.step;
    hello.rank = m_settings.rank;
    hello.role = m_settings.self.role;
    hello.host = m_settings.self.host;
    hello.pid = m_settings.pid;
    hello.auth = m_settings.auth;
    hello.credential = credential;
    hello.nonce = m_nonce;
    hello.address = m_settings.address;
    hello.relay = m_settings.leads_node;
    hello.port = m_settings.trainer_port;
    m_actions.emplace_back(connect_action::Send{std::move(hello)});
}

void Connector::proof_failed(const std::string& what, Clock::time_point /*now*/) {
    if (m_phase == Phase::handshake) {
        m_proving = false;
        fail(errors::make(Errc::auth, "launcher", what));
    }
}

void Connector::verified(const std::optional<std::string>& why_not, Clock::time_point now) {
    if (m_phase != Phase::handshake) {
        return;
    }
    if (why_not) {
        // Another process holds this candidate (any user of the node can bind it): the
        // coordinator listens on a later one.
        not_the_coordinator(*why_not, now);
        return;
    }
    logger().debug("{}: coordinator at {}", label(), control());
    m_phase = Phase::registered;
    m_actions.emplace_back(connect_action::CancelTimer{ConnectorTimer::deadline});
    m_actions.emplace_back(connect_action::CancelTimer{ConnectorTimer::retry});
    m_actions.emplace_back(connect_action::CancelTimer{ConnectorTimer::challenge});
    m_actions.emplace_back(connect_action::Registered{control()});
}

void Connector::timer_fired(ConnectorTimer timer, Clock::time_point now) {
    switch (timer) {
    case ConnectorTimer::retry:
        if (m_phase == Phase::connecting) {
            connect();
        }
        return;
    case ConnectorTimer::challenge:
        if (m_phase == Phase::handshake && m_nonce.empty() && !m_proving) {
            next_candidate(
                fmt::format("no challenge within {}", format_seconds(k_challenge_timeout)), now);
        }
        return;
    case ConnectorTimer::deadline:
        break;
    }
    if (m_phase != Phase::connecting && m_phase != Phase::handshake) {
        return;
    }
    if (m_refusal) {
        // No candidate proved to be the coordinator, and one refused us: most likely the real
        // coordinator, naming a misconfiguration.
        fail(errors::make(Errc::auth,
                          "coordinator",
                          *m_refusal,
                          "every task must run 'tfslurm run' with the same options, the same "
                          "TFSLURM_SECRET and as the same user"));
        return;
    }
    const std::size_t fallbacks = m_settings.candidates.size() - 1;
    fail(errors::make(Errc::io,
                      "coordinator",
                      fmt::format("cannot register with {}:{}{} within {}: {}",
                                  m_settings.control_address,
                                  m_settings.control_port,
                                  fallbacks > 0
                                      ? fmt::format(" (nor its {} fallback ports)", fallbacks)
                                      : std::string(),
                                  format_seconds(m_settings.connect_timeout),
                                  m_last_error),
                      "is rank 0's launcher running? all tasks must run 'tfslurm run' "
                      "with the same plan options"));
}

} // namespace tfslurm
