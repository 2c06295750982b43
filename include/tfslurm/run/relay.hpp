// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// A node leader's relay of `tfslurm run`'s tree (docs/protocol.md, "The tree"), its decisions:
/// a pure state machine (RelayMachine: events and the time in, actions out) over the node's
/// other launchers' local connections. The Asio shell that performs the actions is NodeRelay
/// (src/shell/detail/node_relay.hpp: the Unix socket, its sessions, their reads and writes).

#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace tfslurm {

struct RelaySettings {
    protocol::StepId step;
    std::set<std::uint32_t> ranks; ///< the node's other ranks (the leader's own is not relayed)
    /// How often the leader heartbeats for its node while its closing waits (hold()).
    Millis heartbeat = k_default_heartbeat;
    /// A registered local launcher silent this long is closed, and reported upstream as
    /// `closed` (`no heartbeat for 10 s`): its heartbeats stop here, so the coordinator cannot
    /// see it.
    Millis heartbeat_timeout = k_default_heartbeat_timeout;
    /// The connect timeout's end: ranks that did not come by then are not waited for
    /// (stop_waiting()); nullopt: until stop_waiting().
    std::optional<Clock::time_point> wait_until;
    /// The leader serves before it is registered: what goes upstream waits, in its order, for
    /// upstream_open(), while its followers' handshakes run (issue #33).
    bool upstream_waits = false;
};

/// One local connection, as the shell numbers them (each accepted connection a new one).
using SessionId = std::uint64_t;

/// The timers the shell keeps for the relay; each firing is fed back with timer_fired().
enum class RelayTimer {
    watch,          ///< check the local launchers' silence (every tick_interval())
    node_heartbeat, ///< while hold() holds the leader's closing: a heartbeat for the node
    wait            ///< RelaySettings::wait_until: stop waiting for ranks that never came
};

/// What the relay asks its shell to do.
namespace relay_action {
/// Write `payload` (an encoded message, shared between the sessions it goes to) on `session`:
/// framed by the shell, and sealed once the session's welcome was written (channel.hpp).
struct ToLocal {
    SessionId session = 0;
    std::shared_ptr<const protocol::SharedPayload> payload;
};
/// Check `hello` against this session's `nonce` (Authenticator::verify()); report verified().
struct Verify {
    SessionId session = 0;
    protocol::Hello hello;
    std::string nonce;
};
/// The coordinator welcomed `hello`'s launcher: the leader proves itself to it in the coordinator's
/// stead (Authenticator::prove_coordinator() with the hello's method, nonce and rank) and writes
/// `welcome` with that proof on `session`; when proving fails, report closed() with the error.
struct Welcome {
    SessionId session = 0;
    protocol::Welcome welcome;
    protocol::Hello hello;
};
/// Close `session`'s connection: at once, or once what was queued for it is written (a reject:
/// then report closed(session, "rejected")).
enum class CloseWhen { now, after_writes };
struct CloseLocal {
    SessionId session = 0;
    CloseWhen when = CloseWhen::now;
};
/// Send `message` over the leader's connection to the coordinator: a `relay` envelope, or the
/// node's heartbeat (not the leader machine's: no written() for it).
struct Upstream {
    protocol::Message message;
};
struct ArmTimer {
    RelayTimer timer = RelayTimer::watch;
    Clock::time_point at;
};
/// Stop accepting local connections, remove the socket, cancel the timers.
struct StopListening {};
/// The relay stopped being busy(): what waited for it may go on (post it: the shell checks
/// busy() again when it runs).
struct Idle {};
} // namespace relay_action

using RelayAction = std::variant<relay_action::ToLocal,
                                 relay_action::Verify,
                                 relay_action::Welcome,
                                 relay_action::CloseLocal,
                                 relay_action::Upstream,
                                 relay_action::ArmTimer,
                                 relay_action::StopListening,
                                 relay_action::Idle>;

/// One line per action, for logs and tests; times are milliseconds since `epoch`; a frame and
/// an upstream message are shown by their message type (an envelope: `relay [ranks] <type>`
/// or `relay [ranks] closed: <why>`).
/// Input: ToLocal{2, frame of Challenge}. Output: `to 2 challenge`. Others: `verify 2 rank 1`,
/// `welcome 2 rank 1`, `close 2`, `close 2 after writes`, `up relay [1] hello`,
/// `up heartbeat`, `arm watch 250`, `stop listening`, `idle`.
[[nodiscard]] std::string describe(const RelayAction& action, Clock::time_point epoch);

/// A node leader's relay. Pure: the caller feeds events with the current time and performs what
/// take_actions() returns, in order. Rules:
///
/// - Each accepted local connection gets a challenge; its first frame must be a hello that
///   proves itself (verify()), names a rank of this node that does not relay itself and is not
///   registered already; otherwise it gets a `refused` reject and is closed once that is
///   written, and the coordinator never hears of it.
/// - An accepted hello goes upstream unchanged in a `relay` envelope for its rank; anything
///   else before the coordinator's answer is a protocol error. While the leader is not
///   registered (RelaySettings::upstream_waits), what goes upstream waits and goes, in its
///   order, at upstream_open(): the followers' handshakes need not wait for the leader's. The
///   answer comes down: a welcome is proved by the leader to the local launcher (Welcome), a reject
///   is passed on and the connection closed once it is written.
/// - After the welcome every frame passes through unchanged (only its form is checked: one bad
///   frame costs its launcher its connection, not the node its leader's), except the local
///   launchers' heartbeats: the leader's own heartbeat stands for its node, so the relay keeps
///   them and answers them with a heartbeat whenever the coordinator answers the leader's
///   (pulse()). A registered launcher silent for the heartbeat timeout (silent_too_long()) is
///   closed. A local heartbeat that carries its trainer's `usage` is kept too: the relay keeps
///   each rank's last one (follower_usages()), for the leader's heartbeat to carry upstream,
///   and so are the start-up phases one carries (take_follower_startups(): sent once each).
/// - A local connection that ends after its hello went upstream is reported upstream as
///   `closed` with why, unless the relay itself was closed (the leader's connection is gone).
/// - busy(): a local connection is open, or a rank of the node never came and the relay still
///   waits for it (until stop_waiting()). hold(): while busy, the leader's closing waits (its
///   connection carries the node) and the leader heartbeats for its node every `heartbeat`;
///   Idle is emitted once the relay stops being busy.
class RelayMachine {
  public:
    explicit RelayMachine(RelaySettings settings);

    /// Events.
    /// The relay listens: the silence watch starts, and the wait for the node's ranks is
    /// bounded by RelaySettings::wait_until.
    void listening(Clock::time_point now);
    /// A local connection was accepted; `nonce`: its challenge (hex, drawn by the shell).
    void accepted(SessionId session, const std::string& nonce, Clock::time_point now);
    /// One frame's payload from a local connection.
    void received(SessionId session, const std::string& payload, Clock::time_point now);
    /// The answer to Verify: nullopt when the hello proves itself, else the reject to send.
    void verified(SessionId session,
                  const std::optional<protocol::Reject>& reject,
                  Clock::time_point now);
    /// A local connection ended (`why`: `connection closed`, an error, `rejected` after a
    /// CloseLocal after writes); the shell has closed it.
    void closed(SessionId session, const std::string& why, Clock::time_point now);
    /// A local connection sent what cannot be a frame (`what`: the protocol error, a frame over
    /// the limit): it is closed as on a protocol error.
    void unreadable(SessionId session, const std::string& what, Clock::time_point now);
    /// An envelope from the coordinator: each of its ranks gets the message.
    void downstream(const protocol::Relay& relay, Clock::time_point now);
    /// The leader is registered: what waited to go upstream goes, in its order, and from now
    /// on everything goes at once.
    void upstream_open(Clock::time_point now);
    /// The coordinator answered the leader's heartbeat: every registered local launcher gets
    /// a heartbeat (its proof that the coordinator is alive).
    void pulse(Clock::time_point now);
    void timer_fired(RelayTimer timer, Clock::time_point now);
    /// Stop waiting for ranks that never connected (the connect timeout is over).
    void stop_waiting(Clock::time_point now);
    /// Close every local connection, without reporting them (the leader's connection is gone,
    /// or the leader finishes: their launchers take the coordinator-lost path), stop listening.
    void close(Clock::time_point now);
    /// The leader's machine would close its connection now: whether that must wait (busy());
    /// the first time, the node heartbeat starts.
    [[nodiscard]] bool hold(Clock::time_point now);

    /// Actions to perform, in order; clears the queue.
    [[nodiscard]] std::vector<RelayAction> take_actions();

    /// The local launchers' last usages (from their heartbeats), by rank, for the leader's
    /// heartbeat (protocol::Heartbeat::followers); a rank whose connection ended is left out.
    [[nodiscard]] std::vector<protocol::RankUsage> follower_usages() const;

    /// The local launchers' start-up phases that came since the last call, by rank, for the
    /// leader's heartbeat (protocol::Heartbeat::startups): each change goes upstream once.
    [[nodiscard]] std::vector<protocol::RankStartup> take_follower_startups();

    [[nodiscard]] bool busy() const noexcept {
        return !m_sessions.empty() || (m_waiting && !m_unseen.empty());
    }
    /// Whether close() was called.
    [[nodiscard]] bool is_closed() const noexcept { return m_closed; }

  private:
    enum class State { handshake, verifying, pending, registered, closing };
    struct Session {
        State state = State::handshake;
        std::string nonce;
        protocol::Hello hello;
        std::string hello_payload;
        Clock::time_point last_heard;
        bool forwarded = false;               ///< its hello went upstream: its end must too
        std::optional<protocol::Usage> usage; ///< from its last heartbeat that had one
        StartupTimes startup;                 ///< from its last heartbeat that had some
        bool startup_new = false;             ///< not yet taken by take_follower_startups()
    };

    void hello(SessionId id, Session& session, const std::string& payload);
    void reject(SessionId id, Session& session, const protocol::Reject& reject);
    void deliver(SessionId id,
                 Session& session,
                 const std::string& payload,
                 const std::shared_ptr<const protocol::SharedPayload>& shared);
    /// End `id` (it is closed, or CloseLocal now is emitted when `close_it`): reported upstream
    /// when its hello went there.
    void end(SessionId id, const std::string& why, bool close_it);
    void check_idle();
    /// Send `message` upstream, or keep it for upstream_open().
    void up(protocol::Message message);

    RelaySettings m_settings;
    std::set<std::uint32_t> m_unseen; ///< local ranks that never sent a valid hello
    std::map<SessionId, Session> m_sessions;
    std::map<std::uint32_t, SessionId> m_by_rank;
    /// A local launcher's heartbeat, as every launcher encodes it.
    std::string m_heartbeat;
    std::shared_ptr<const protocol::SharedPayload> m_heartbeat_shared;
    bool m_waiting = true;
    bool m_closed = false;
    bool m_holding = false;
    bool m_idle = false; ///< Idle was emitted and nothing was accepted since
    /// What waits for upstream_open() (RelaySettings::upstream_waits), in its order.
    std::vector<protocol::Message> m_held_upstream;
    std::vector<RelayAction> m_actions;
};

} // namespace tfslurm
