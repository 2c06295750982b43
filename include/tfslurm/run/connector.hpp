// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// How one launcher of `tfslurm run` reaches its coordinator, its decisions: a pure state
/// machine (Connector: events and the time in, actions out) from the first attempt to the
/// `welcome`, and where the launcher sits in the tree (node_place()). The Asio shell that
/// performs the actions is the launcher's link (src/shell/launcher/launcher_link.cpp); after
/// `welcome` the launcher's machine (launcher.hpp) decides.

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

namespace tfslurm {

/// Whether the launchers of a step form the tree (one connection per node, docs/protocol.md) or
/// each speaks to the coordinator itself (`--local`, so that the control port's defences stay
/// exercised there).
enum class Tree { flat, per_node };

/// Where one rank sits in the tree: its node's leader, the ranks it relays for when it leads
/// a node of several ranks, and how many ranks of its node follow that leader (the launchers
/// that dial the leader's relay).
struct NodePlace {
    std::uint32_t leader = 0;
    std::set<std::uint32_t> followers; ///< empty unless this rank leads a node of several
    std::size_t node_followers = 0;    ///< its node's followers (0: alone, or Tree::flat)
};

/// Rank `rank`'s place: its leader by node_leaders(), and the other ranks that name it leader.
/// Tree::flat: every rank leads itself alone.
/// Input: hosts n1, n1, n2, n1; rank 0; Tree::per_node. Output: {0, {1, 3}, 2}.
/// Input: the same, rank 3. Output: {0, {}, 2}.
[[nodiscard]] NodePlace node_place(const std::vector<Member>& ranks, std::uint32_t rank, Tree tree);

/// The uid foreign_peer() names when the kernel would not say whose a socket is.
inline constexpr std::uint32_t k_unknown_uid = 0xffffffffU;

/// How long a connected candidate control port may stay silent before the launcher tries the
/// next: a coordinator sends its challenge as soon as it accepts, so a silent peer is some other
/// program (a listener that never accepts) holding the port.
inline constexpr Millis k_challenge_timeout{2000};
/// The first back-off after an attempt that failed on every candidate; it doubles each time.
/// Short: the nodes' launchers start within milliseconds of each other, and a node leader that
/// came before rank 0 listened should not wait long: 10 ms cost a 3-node step about 5 ms
/// (issue #33). A refused connection costs the coordinator's node one reset, and the rounds
/// double (2, 4, 8, ... 512 ms, then every second): 9 rounds in the first second.
inline constexpr Millis k_first_backoff{2};
/// The back-off's cap towards the coordinator's control ports.
inline constexpr Millis k_max_backoff{1000};
/// Quick polls: while the first candidate refuses connections (nothing listens there yet: rank
/// 0's launcher has not started its coordinator), a node leader of a step of at most
/// k_quick_poll_dialers nodes tries that candidate alone again every k_quick_poll, for the first
/// k_quick_window after its start, instead of waiting out a round's back-off (2, then 4 ms): in
/// a small step rank 0 is often the last task Slurm starts, and the leaders that came before it
/// waited 1 to 5 ms after it listened (issue #33). A quick poll is one refused connection on
/// rank 0's node; the dialers bound how many of them it gets (32 a millisecond at most). Once
/// something answers on the first candidate, or after the window, the rounds are as above.
/// A follower on a node of at most k_quick_poll_dialers followers polls its leader's relay
/// socket the same way (each poll one refused `connect` on its own node): a follower that
/// Slurm started before its leader waited out back-offs of 1, 2, 4, 8 ms... and came up to
/// half its wait late (issue #33).
inline constexpr Millis k_quick_poll{1};
inline constexpr Millis k_quick_window{100};
inline constexpr std::size_t k_quick_poll_dialers = 32;
/// The first back-off towards a node leader's relay (after the quick polls, or on a node of more
/// than k_quick_poll_dialers followers): a Unix socket on the follower's own node, which
/// appears within milliseconds as the leader starts, and whose refusal costs a system call,
/// not a packet on the network (issue #33).
inline constexpr Millis k_first_relay_backoff{1};
/// The back-off's cap towards a node leader's relay: its socket appears as the leader starts
/// (and accepts once it registered), so a follower looks again soon.
inline constexpr Millis k_max_relay_backoff{100};

struct ConnectorSettings {
    std::uint32_t rank = 0;
    Member self; ///< role, index and host, for the hello and messages
    protocol::StepId step;
    std::int64_t pid = 0;                                     ///< the hello's pid
    protocol::AuthMethod auth = protocol::AuthMethod::secret; ///< the hello's method
    std::string address;            ///< the hello's chosen address (empty: node names)
    std::uint16_t trainer_port = 0; ///< the hello's held trainer port (0: none)
    bool leads_node = false;        ///< the hello's `relay`: this launcher relays for its node
    /// The control endpoint: the plan's address and port (named when nothing answered).
    std::string control_address;
    std::uint16_t control_port = 0;
    /// The ports tried in order (control_port_candidates(); rank 0: its coordinator's only; a
    /// follower: the plan's, to name it).
    std::vector<std::uint16_t> candidates;
    /// How many launchers dial what this one dials: the control ports (the step's node leaders;
    /// every launcher of a flat `--local` step), or, for a follower, its leader's relay (the
    /// node's followers). Quick polls only for at most k_quick_poll_dialers.
    std::size_t dialers = 1;
    /// A follower's node leader and the leader's relay socket; empty: the control ports.
    std::uint32_t leader = 0;
    std::string relay_path;
    Millis connect_timeout{60000};
};

/// The timers the shell keeps for the connector; each firing is fed back with timer_fired().
enum class ConnectorTimer {
    retry,     ///< the back-off is over: connect again
    deadline,  ///< the connect timeout: nothing proved to be the coordinator
    challenge, ///< a connected candidate stayed silent for k_challenge_timeout
};

/// How many ConnectorTimer values there are: the shell keeps one timer each.
inline constexpr std::size_t k_connector_timer_count =
    static_cast<std::size_t>(ConnectorTimer::challenge) + 1;

/// What the connector asks its shell to do.
namespace connector_action {
/// Open a connection (after the current attempt's close): to `address`:`port`, or to the Unix
/// socket `path` when it is set. Report connected(), connect_failed() or unreachable().
struct Connect {
    std::string address;
    std::uint16_t port = 0;
    std::string path;
};
/// Prove this launcher for `challenge` at `endpoint` (Authenticator::prove(): the candidate
/// dialled, `tcp:<port>`, or the relay, `unix:<path>`) and draw this connection's own challenge
/// to the coordinator; report proved(), or proof_failed() when proving failed.
struct Prove {
    std::string challenge;
    std::string endpoint;
};
/// Write `message` (the hello) on the connection.
struct Send {
    protocol::Message message;
};
/// Check the welcome's `credential` over `nonce` at `endpoint` (the one dialled,
/// Authenticator::verify_coordinator()); report verified().
struct Verify {
    std::string credential;
    std::string nonce;
    std::string endpoint;
};
/// Close the current attempt's connection, and drop what was not written on it.
struct CloseAttempt {};
/// (Re)arm `timer` to fire at `at`, replacing any pending expiry.
struct ArmTimer {
    ConnectorTimer timer = ConnectorTimer::retry;
    Clock::time_point at;
};
struct CancelTimer {
    ConnectorTimer timer = ConnectorTimer::retry;
};
/// The coordinator proved itself at `control` (`<address>:<port>`, or the relay): the session
/// begins (LauncherMachine::registered()).
struct Registered {
    std::string control;
};
/// Registration failed for good: stop, and throw `error`.
struct Fail {
    Error error;
};
} // namespace connector_action

using ConnectorAction = std::variant<connector_action::Connect,
                                     connector_action::Prove,
                                     connector_action::Send,
                                     connector_action::Verify,
                                     connector_action::CloseAttempt,
                                     connector_action::ArmTimer,
                                     connector_action::CancelTimer,
                                     connector_action::Registered,
                                     connector_action::Fail>;

/// One line per action, for logs and tests; times are milliseconds since `epoch`.
/// Input: Connect{"n1", 29000, ""}. Output: `connect n1:29000`. Others: `connect <path>`,
/// `prove <challenge> at <endpoint>`, `send hello`, `verify <credential> <nonce> at <endpoint>`,
/// `close attempt`, `arm deadline 60000`, `cancel challenge`, `registered n1:29001`, `fail <what()>
/// (hint: ...)`.
[[nodiscard]] std::string describe(const ConnectorAction& action, Clock::time_point epoch);

/// A launcher's way to its coordinator, from the first attempt to the `welcome`. Pure: the
/// caller feeds events with the current time and performs what take_actions() returns, in
/// order. Rules:
///
/// - The candidates are tried in order; a candidate that refuses the connection, stays silent
///   for k_challenge_timeout, closes it during registration or does not prove that it is this
///   step's coordinator is left for the next at once. Once every candidate was tried, the next
///   round starts after a back-off: k_first_backoff, doubled each round up to k_max_backoff
///   (k_first_relay_backoff up to k_max_relay_backoff towards a node leader's relay). An
///   endpoint that cannot be resolved or opened is tried again after the back-off.
/// - Quick polls (k_quick_poll): after a round in which the first candidate refused the
///   connection, within k_quick_window of start() and with at most k_quick_poll_dialers
///   dialers, the next round is the first candidate alone, k_quick_poll later, and so on while
///   it refuses; the back-off does not grow meanwhile. Once the first candidate accepted a
///   connection (whoever it was), no quick poll again.
/// - Nothing the peer says is believed before its welcome's proof: a second challenge, a
///   message before the welcome, a bad proof, a frame that cannot be decoded or a `refused`
///   reject only make the launcher try the next candidate (warned once per peer and reason).
///   A `wrong_job`/`wrong_step` reject is another step's coordinator: the next candidate too,
///   without a warning.
/// - At the connect timeout (from start()), if no candidate proved to be the coordinator:
///   Fail. It names the last `refused` reject when one came (most likely the real coordinator
///   naming a misconfiguration: Errc::auth), else the endpoint and the last error (Errc::io).
/// - A proof that cannot be made (MUNGE down): Fail at once (Errc::auth).
class Connector {
  public:
    explicit Connector(ConnectorSettings settings);

    /// Where the connector stands: `connecting` (no connection, or one being opened),
    /// `handshake` (connected, waiting for the challenge or the welcome), `registered`, or
    /// `failed` (Fail emitted).
    enum class Phase { connecting, handshake, registered, failed };

    /// Events.
    void start(Clock::time_point now);
    /// The connection of the last Connect is open.
    void connected(Clock::time_point now);
    /// The last Connect's candidate refused the connection, or the connection failed before
    /// the welcome (a write error): try the next candidate.
    void connect_failed(const std::string& why, Clock::time_point now);
    /// The connection ended before the welcome (`why`: `End of file`, an error).
    void disconnected(const std::string& why, Clock::time_point now);
    /// The relay socket of the last Connect is held by another user's process (the kernel's
    /// SO_PEERCRED says `uid`, `pid`; k_unknown_uid when it would not say): Fail at once
    /// (Errc::auth) naming it, before a byte is read. Anyone on a node can bind an abstract
    /// name; only this user's process may be the relay. Input: uid 65534, pid 812, self 0 at
    /// rank 3's connector to rank 2's relay. Output: Fail `relay: rank 3 (worker:2): rank 2's
    /// relay "@tfslurm-0/relay-12.0-2" is held by uid 65534 (pid 812), not by this job's user
    /// (uid 0)`.
    void foreign_peer(std::uint32_t uid,
                      std::int64_t pid,
                      std::uint32_t self_uid,
                      Clock::time_point now);
    /// The endpoint could not be resolved or no socket opened: try again after the back-off.
    void unreachable(const std::string& why, Clock::time_point now);
    /// A message before the welcome (challenge, welcome, reject, anything else).
    void received(const protocol::Message& message, Clock::time_point now);
    /// A frame before the welcome that could not be decoded (`what`: the protocol error).
    void garbled(const std::string& what, Clock::time_point now);
    /// The answer to Prove: the hello's credential and this connection's challenge (hex).
    void proved(const std::string& credential, const std::string& nonce, Clock::time_point now);
    void proof_failed(const std::string& what, Clock::time_point now);
    /// The answer to Verify: nullopt when the welcome proves the coordinator, else why not.
    void verified(const std::optional<std::string>& why_not, Clock::time_point now);
    void timer_fired(ConnectorTimer timer, Clock::time_point now);

    /// Actions to perform, in order; clears the queue.
    [[nodiscard]] std::vector<ConnectorAction> take_actions();

    [[nodiscard]] Phase phase() const noexcept { return m_phase; }
    /// The candidate endpoint being tried (`n1:29000`), or the node leader's relay
    /// (`rank 0's relay <path>`).
    [[nodiscard]] std::string control() const;

  private:
    [[nodiscard]] std::string label() const;
    /// What the proofs bind of the current candidate: `tcp:<port>` or `unix:<relay path>`.
    [[nodiscard]] std::string endpoint() const;
    void connect();
    void next_candidate(const std::string& why, Clock::time_point now);
    void not_the_coordinator(const std::string& why, Clock::time_point now);
    void retry(const std::string& why, Clock::time_point now);
    /// Whether the next round is a quick poll (see the rules above).
    [[nodiscard]] bool quick_poll_next(Clock::time_point now) const;
    void close_attempt();
    void fail(Error error);

    ConnectorSettings m_settings;
    Phase m_phase = Phase::connecting;
    std::size_t m_candidate = 0;
    Clock::time_point m_deadline;
    Millis m_backoff = k_first_backoff; // k_first_relay_backoff towards a relay
    Clock::time_point m_started;
    bool m_quick = false;          ///< this round is a quick poll: the first candidate alone
    bool m_first_refused = false;  ///< the last attempt at the first candidate was refused
    bool m_first_answered = false; ///< the first candidate accepted a connection once
    std::string m_nonce; ///< this connection's challenge to the coordinator (after proved())
    bool m_proving = false;
    std::string m_last_error = "no attempt";
    /// The last `refused` reject (`n1:25006 rejected rank 1 (worker:0): bad secret proof`): a
    /// real misconfiguration or a squatter's word, unproven either way; named at the deadline.
    std::optional<std::string> m_refusal;
    std::set<std::string> m_warned; ///< not_the_coordinator() warnings given (once each)
    std::vector<ConnectorAction> m_actions;
};

} // namespace tfslurm
