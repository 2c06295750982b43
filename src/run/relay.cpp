// SPDX-License-Identifier: MIT
// A node leader's relay (relay.hpp): registration bookkeeping, what goes upstream and what is
// answered here, the local launchers' silence and the leader's held closing. Pure: no socket,
// no clock.
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/relay.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <algorithm>
#include <exception>
#include <utility>

namespace tfslurm {

namespace {

/// The message type of an encoded payload.
std::string payload_type(const std::string& payload) {
    try {
        return std::string(protocol::type_name(protocol::decode_payload(payload)));
    } catch (const Error&) {
        return "?";
    }
}

struct RelayDescriber {
    Clock::time_point epoch;

    std::string operator()(const relay_action::ToLocal& a) const {
        return fmt::format("to {} {}", a.session, a.payload ? payload_type(a.payload->bytes) : "?");
    }
    std::string operator()(const relay_action::Verify& a) const {
        return fmt::format("verify {} rank {}", a.session, a.hello.rank);
    }
    std::string operator()(const relay_action::Welcome& a) const {
        return fmt::format("welcome {} rank {}", a.session, a.hello.rank);
    }
    std::string operator()(const relay_action::CloseLocal& a) const {
        return fmt::format("close {}{}",
                           a.session,
                           a.when == relay_action::CloseWhen::after_writes ? " after writes" : "");
    }
    std::string operator()(const relay_action::Upstream& a) const {
        const auto* relay = std::get_if<protocol::Relay>(&a.message);
        if (relay == nullptr) {
            return fmt::format("up {}", protocol::type_name(a.message));
        }
        if (relay->message.empty()) {
            return fmt::format(
                "up relay [{}] closed: {}", fmt::join(relay->ranks, ","), relay->closed);
        }
        std::string type = "?";
        try {
            type = protocol::type_name(protocol::decode_payload(relay->message));
        } catch (const Error&) {
            // shown as `?`
        }
        return fmt::format("up relay [{}] {}", fmt::join(relay->ranks, ","), type);
    }
    std::string operator()(const relay_action::ArmTimer& a) const {
        return fmt::format("arm {} {}",
                           a.timer == RelayTimer::watch            ? "watch"
                           : a.timer == RelayTimer::node_heartbeat ? "node heartbeat"
                                                                   : "wait",
                           std::chrono::duration_cast<Millis>(a.at - epoch).count());
    }
    std::string operator()(const relay_action::StopListening& /*a*/) const {
        return "stop listening";
    }
    std::string operator()(const relay_action::Idle& /*a*/) const { return "idle"; }
};

} // namespace

std::string describe(const RelayAction& action, Clock::time_point epoch) {
    return std::visit(RelayDescriber{epoch}, action);
}

RelayMachine::RelayMachine(RelaySettings settings)
    : m_settings(std::move(settings)), m_unseen(m_settings.ranks),
      m_heartbeat(protocol::encode_payload(protocol::Heartbeat{})),
      m_heartbeat_shared(std::make_shared<const protocol::SharedPayload>(m_heartbeat)) {}

std::vector<RelayAction> RelayMachine::take_actions() {
    return std::exchange(m_actions, {});
}

void RelayMachine::listening(Clock::time_point now) {
    m_actions.emplace_back(relay_action::ArmTimer{
        RelayTimer::watch, now + tick_interval(m_settings.heartbeat_timeout)});
    if (m_settings.wait_until) {
        m_actions.emplace_back(relay_action::ArmTimer{RelayTimer::wait, *m_settings.wait_until});
    }
}

void RelayMachine::accepted(SessionId session, const std::string& nonce, Clock::time_point now) {
    if (m_closed) {
        m_actions.emplace_back(relay_action::CloseLocal{session, relay_action::CloseWhen::now});
        return;
    }
    m_idle = false;
    Session& s = m_sessions[session];
    s.nonce = nonce;
    s.last_heard = now;
    m_actions.emplace_back(
        relay_action::ToLocal{session,
                              std::make_shared<const protocol::SharedPayload>(
                                  protocol::encode_payload(protocol::Challenge{nonce}))});
}

void RelayMachine::received(SessionId id, const std::string& payload, Clock::time_point now) {
    const auto it = m_sessions.find(id);
    if (it == m_sessions.end()) {
        return;
    }
    Session& session = it->second;
    session.last_heard = now;
    try {
        switch (session.state) {
        case State::handshake:
            hello(id, session, payload);
            return;
        case State::registered:
            if (payload == m_heartbeat) {
                return; // heard (above); the leader's own heartbeat speaks for the node
            }
            if (payload.find(R"("type":"heartbeat")") != std::string::npos) {
                // With its trainer's usage or its start-up phases: kept for the leader's
                // heartbeat, not relayed.
                const protocol::Message message = protocol::decode_payload(payload);
                if (const auto* beat = std::get_if<protocol::Heartbeat>(&message)) {
                    if (!beat->followers.empty() || !beat->startups.empty()) {
                        throw errors::make(Errc::protocol,
                                           "protocol",
                                           "a follower's heartbeat with other ranks' figures");
                    }
                    session.usage = beat->usage;
                    if (!beat->startup.empty()) {
                        session.startup = beat->startup;
                        session.startup_new = true;
                    }
                    return;
                }
            }
            // Anything else passes through: only its form is checked, so that one bad frame
            // costs this launcher its connection, not the node its leader's.
            protocol::check_relayable(payload);
            up(protocol::Relay{{session.hello.rank}, payload, {}});
            return;
        case State::verifying:
        case State::pending:
            throw errors::make(Errc::protocol, "protocol", "a message before the welcome");
        case State::closing:
            return;
        }
    } catch (const std::exception& e) {
        logger().warn("relay: closing a local connection{}: {}",
                      session.forwarded ? fmt::format(" (rank {})", session.hello.rank)
                                        : std::string(),
                      e.what());
        end(id, "protocol error", true);
    }
}

void RelayMachine::hello(SessionId id, Session& session, const std::string& payload) {
    const protocol::Message message = protocol::decode_payload(payload);
    const auto* hello = std::get_if<protocol::Hello>(&message);
    if (hello == nullptr) {
        throw errors::make(Errc::protocol,
                           "protocol",
                           fmt::format("expected hello, got {}", protocol::type_name(message)));
    }
    session.state = State::verifying;
    session.hello = *hello;
    session.hello_payload = payload;
    m_actions.emplace_back(relay_action::Verify{id, *hello, session.nonce});
}

void RelayMachine::verified(SessionId id,
                            const std::optional<protocol::Reject>& reject,
                            Clock::time_point /*now*/) {
    const auto it = m_sessions.find(id);
    if (it == m_sessions.end() || it->second.state != State::verifying) {
        return;
    }
    Session& session = it->second;
    const std::uint32_t rank = session.hello.rank;
    if (reject) {
        this->reject(id, session, *reject);
    } else if (m_settings.ranks.count(rank) == 0 || session.hello.relay) {
        this->reject(id,
                     session,
                     {protocol::RejectCode::refused,
                      fmt::format("rank {} does not run on this node's relay", rank)});
    } else if (m_by_rank.count(rank) != 0) {
        this->reject(
            id,
            session,
            {protocol::RejectCode::refused, fmt::format("rank {} is already registered", rank)});
    } else {
        session.forwarded = true;
        session.state = State::pending;
        m_by_rank[rank] = id;
        m_unseen.erase(rank);
        up(protocol::Relay{{rank}, std::move(session.hello_payload), {}});
        session.hello_payload.clear();
    }
}

void RelayMachine::reject(SessionId id, Session& session, const protocol::Reject& reject) {
    logger().warn("relay: rejected rank {} (pid {}): {}",
                  session.hello.rank,
                  session.hello.pid,
                  reject.reason);
    m_actions.emplace_back(relay_action::ToLocal{
        id, std::make_shared<const protocol::SharedPayload>(protocol::encode_payload(reject))});
    m_actions.emplace_back(relay_action::CloseLocal{id, relay_action::CloseWhen::after_writes});
    session.state = State::closing;
}

void RelayMachine::closed(SessionId session, const std::string& why, Clock::time_point /*now*/) {
    end(session, why, false);
}

void RelayMachine::unreadable(SessionId id, const std::string& what, Clock::time_point /*now*/) {
    const auto it = m_sessions.find(id);
    if (it == m_sessions.end()) {
        return;
    }
    logger().warn("relay: closing a local connection{}: {}",
                  it->second.forwarded ? fmt::format(" (rank {})", it->second.hello.rank)
                                       : std::string(),
                  what);
    end(id, "protocol error", true);
}

void RelayMachine::end(SessionId id, const std::string& why, bool close_it) {
    const auto it = m_sessions.find(id);
    if (it == m_sessions.end()) {
        return;
    }
    const Session& session = it->second;
    const bool announced = session.state == State::pending || session.state == State::registered ||
                           (session.state == State::closing && session.forwarded);
    if (close_it) {
        m_actions.emplace_back(relay_action::CloseLocal{id, relay_action::CloseWhen::now});
    }
    if (announced && !m_closed) {
        up(protocol::Relay{{session.hello.rank}, {}, why});
    }
    if (session.forwarded) {
        const auto owner = m_by_rank.find(session.hello.rank);
        if (owner != m_by_rank.end() && owner->second == id) {
            m_by_rank.erase(owner);
        }
    }
    m_sessions.erase(it);
    check_idle();
}

void RelayMachine::downstream(const protocol::Relay& relay, Clock::time_point /*now*/) {
    // Hashed once here; each session MACs only the digest (channel.hpp).
    const auto shared = std::make_shared<const protocol::SharedPayload>(relay.message);
    for (const std::uint32_t rank : relay.ranks) {
        const auto owner = m_by_rank.find(rank);
        if (owner == m_by_rank.end()) {
            continue;
        }
        const SessionId id = owner->second;
        deliver(id, m_sessions.at(id), relay.message, shared);
    }
}

void RelayMachine::deliver(SessionId id,
                           Session& session,
                           const std::string& payload,
                           const std::shared_ptr<const protocol::SharedPayload>& shared) {
    if (session.state == State::registered) {
        m_actions.emplace_back(relay_action::ToLocal{id, shared});
        return;
    }
    if (session.state != State::pending) {
        return;
    }
    // The coordinator's answer to the hello: the leader proves itself to its launcher.
    try {
        const protocol::Message answer = protocol::decode_payload(payload);
        if (const auto* welcome = std::get_if<protocol::Welcome>(&answer)) {
            session.state = State::registered;
            m_actions.emplace_back(relay_action::Welcome{id, *welcome, session.hello});
            return;
        }
        if (std::holds_alternative<protocol::Reject>(answer)) {
            m_actions.emplace_back(relay_action::ToLocal{id, shared});
            m_actions.emplace_back(
                relay_action::CloseLocal{id, relay_action::CloseWhen::after_writes});
            session.state = State::closing;
            return;
        }
        throw errors::make(Errc::protocol,
                           "protocol",
                           fmt::format("expected welcome or reject for rank {}, got {}",
                                       session.hello.rank,
                                       protocol::type_name(answer)));
    } catch (const std::exception& e) {
        logger().error("relay: rank {}: {}", session.hello.rank, e.what());
        end(id, e.what(), true);
    }
}

std::vector<protocol::RankUsage> RelayMachine::follower_usages() const {
    std::vector<protocol::RankUsage> out;
    for (const auto& [id, session] : m_sessions) {
        if (session.state == State::registered && session.usage &&
            out.size() < protocol::k_max_follower_usages) {
            out.push_back({session.hello.rank, *session.usage});
        }
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    return out;
}

std::vector<protocol::RankStartup> RelayMachine::take_follower_startups() {
    std::vector<protocol::RankStartup> out;
    for (auto& [id, session] : m_sessions) {
        if (session.state == State::registered && session.startup_new &&
            out.size() < protocol::k_max_follower_usages) {
            out.push_back({session.hello.rank, session.startup});
            session.startup_new = false;
        }
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
    return out;
}

void RelayMachine::upstream_open(Clock::time_point /*now*/) {
    m_settings.upstream_waits = false;
    for (auto& message : std::exchange(m_held_upstream, {})) {
        m_actions.emplace_back(relay_action::Upstream{std::move(message)});
    }
}

void RelayMachine::up(protocol::Message message) {
    if (m_settings.upstream_waits) {
        m_held_upstream.push_back(std::move(message));
    } else {
        m_actions.emplace_back(relay_action::Upstream{std::move(message)});
    }
}

void RelayMachine::pulse(Clock::time_point /*now*/) {
    for (const auto& [id, session] : m_sessions) {
        if (session.state == State::registered) {
            m_actions.emplace_back(relay_action::ToLocal{id, m_heartbeat_shared});
        }
    }
}

void RelayMachine::timer_fired(RelayTimer timer, Clock::time_point now) {
    if (m_closed) {
        return;
    }
    if (timer == RelayTimer::wait) {
        stop_waiting(now);
        return;
    }
    if (timer == RelayTimer::node_heartbeat) {
        if (busy()) {
            up(protocol::Heartbeat{});
            m_actions.emplace_back(
                relay_action::ArmTimer{RelayTimer::node_heartbeat, now + m_settings.heartbeat});
        }
        return;
    }
    std::vector<SessionId> silent;
    for (const auto& [id, session] : m_sessions) {
        if (session.state == State::registered &&
            silent_too_long(session.last_heard, now, m_settings.heartbeat_timeout)) {
            silent.push_back(id);
        }
    }
    for (const SessionId id : silent) {
        const std::string why = no_heartbeat(m_settings.heartbeat_timeout);
        logger().warn("relay: rank {}: {}", m_sessions.at(id).hello.rank, why);
        end(id, why, true);
    }
    m_actions.emplace_back(relay_action::ArmTimer{
        RelayTimer::watch, now + tick_interval(m_settings.heartbeat_timeout)});
}

void RelayMachine::stop_waiting(Clock::time_point /*now*/) {
    m_waiting = false;
    check_idle();
}

void RelayMachine::close(Clock::time_point /*now*/) {
    if (m_closed) {
        return;
    }
    m_closed = true;
    m_waiting = false;
    m_held_upstream.clear(); // the leader's connection is gone, or it never came
    m_actions.emplace_back(relay_action::StopListening{});
    std::vector<SessionId> all;
    for (const auto& entry : m_sessions) {
        all.push_back(entry.first);
    }
    for (const SessionId id : all) {
        end(id, "relay closed", true);
    }
    check_idle();
}

bool RelayMachine::hold(Clock::time_point now) {
    if (!busy()) {
        return false;
    }
    // The leader's connection carries its node: it stays until every local launcher is done,
    // and heartbeats for them meanwhile (the leader machine's heartbeats stopped with its end).
    if (!m_holding) {
        m_holding = true;
        m_actions.emplace_back(
            relay_action::ArmTimer{RelayTimer::node_heartbeat, now + m_settings.heartbeat});
    }
    return true;
}

void RelayMachine::check_idle() {
    if (!busy() && !m_idle) {
        m_idle = true;
        m_holding = false;
        m_actions.emplace_back(relay_action::Idle{});
    }
}

} // namespace tfslurm
