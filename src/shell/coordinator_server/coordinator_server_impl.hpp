// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The insides of CoordinatorServer (coordinator_server.hpp), shared by its two files:
/// coordinator_server.cpp (the listener, the ticks, broadcasts to every connection) and
/// coordinator_session.cpp (one connection: challenge, hello, a node leader's `relay`
/// envelopes, the messages for the pure Coordinator, gathered writes). Single-threaded on the
/// caller's io_context; handlers never throw.

#include "shell/detail/proof_workers.hpp"

#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/shell/coordinator_server.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tfslurm {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

namespace detail {
/// Unauthenticated connections one address may hold: more than the launchers of a node.
constexpr std::size_t k_handshakes_per_peer = 256;
/// Unauthenticated connections in all, beyond one per rank.
constexpr std::size_t k_handshakes_headroom = 1024;
/// Warnings about connections without a valid hello: this many per window, then a summary.
constexpr std::size_t k_warnings_per_window = 10;
constexpr Millis k_warning_window{10000};
/// Watchers (`tfslurm top`) connected at once; one more is refused.
constexpr std::size_t k_max_watchers = 16;
/// How often watchers are sent a snapshot.
constexpr Millis k_snapshot_interval{1000};
} // namespace detail

/// `message` encoded once for every connection it goes to, as it is or in a `relay`.
inline std::shared_ptr<const protocol::SharedPayload>
shared_payload(const protocol::Message& message) {
    return std::make_shared<const protocol::SharedPayload>(protocol::encode_payload(message),
                                                           protocol::SharedPayload::Envelope::also);
}

/// An encoded payload sent as it is only (a watcher's snapshot), hashed once.
inline std::shared_ptr<const protocol::SharedPayload> shared_payload_of(std::string bytes) {
    return std::make_shared<const protocol::SharedPayload>(std::move(bytes));
}

struct CoordinatorServer::Impl : std::enable_shared_from_this<CoordinatorServer::Impl> {
    class Session;

    Impl(asio::io_context& context,
         CoordinatorSettings settings,
         protocol::Authenticator authenticator,
         protocol::StepId step_id)
        : io(context), acceptor(context), retry_timer(context), tick_timer(context),
          watch_timer(context), coordinator(std::move(settings), Clock::now()),
          auth(std::move(authenticator)), step(step_id), by_rank(coordinator.size()),
          leaders(node_leaders(coordinator.settings().ranks)),
          handshakes(detail::k_handshakes_per_peer,
                     detail::k_handshakes_headroom + coordinator.size()),
          noise(detail::k_warnings_per_window, detail::k_warning_window) {}

    /// Listen on the first of `ports` that can be bound. \throws Error (Errc::io) if none.
    void listen(const std::string& bind_address, const std::vector<std::uint16_t>& ports);
    /// Open, bind and listen; on failure the acceptor is closed again.
    [[nodiscard]] error_code try_listen(const Tcp::endpoint& endpoint);
    /// Wait until a connection is ready to be taken, then accept_ready().
    void accept();
    /// Take every waiting connection (at most k_accepts_per_turn, then the rest in the next
    /// turn of the loop), each with one accept4(): close-on-exec and non-blocking from the
    /// start, its peer's address in the same call.
    void accept_ready();
    /// accept() again k_accept_retry after `why` (EMFILE and friends): no spinning.
    void accept_later(const std::string& why);
    /// A new connection: its session, admitted among the unauthenticated ones, started.
    void admit(Tcp::socket socket, const Tcp::endpoint& peer);
    void tick();
    void flush();
    /// Send one message to its ranks: once per connection (a node's ranks in one `relay`),
    /// every connection's frame sharing the one encoded payload.
    void deliver(const std::vector<std::uint32_t>& ranks,
                 const std::shared_ptr<const protocol::SharedPayload>& payload);
    void remove(const std::shared_ptr<Session>& session);
    void close();
    /// A watcher registered: it gets a snapshot now and one every k_snapshot_interval.
    void add_watcher(const std::shared_ptr<Session>& session);
    /// One snapshot, encoded once, to every watcher that has written the last one (a slow or
    /// hung watcher skips snapshots: nothing queues up, nothing waits for it).
    void send_snapshots();
    /// Arm watch_timer while watchers are connected.
    void watch_tick();
    /// Warn about one unauthenticated connection, within the noise budget.
    void warn_connection(const std::string& text);

    asio::io_context& io;
    Tcp::acceptor acceptor;
    /// The acceptor's protocol and port once it listens: every accepted connection came in on
    /// that port, so no getsockname() is needed for it.
    Tcp listening_protocol = Tcp::v4();
    std::uint16_t listening_port = 0;
    asio::steady_timer retry_timer;
    asio::steady_timer tick_timer;
    asio::steady_timer watch_timer;
    bool watch_timer_armed = false;
    std::set<std::shared_ptr<Session>> watchers;
    Coordinator coordinator;
    protocol::Authenticator auth;
    protocol::StepId step;
    /// The connection each rank's messages go to: its own, or its node leader's (the tree).
    std::vector<std::shared_ptr<Session>> by_rank;
    std::vector<std::uint32_t> leaders; ///< node_leaders() of the plan
    std::set<std::shared_ptr<Session>> sessions;
    HandshakePool handshakes;
    std::unordered_map<std::uint64_t, std::weak_ptr<Session>> pending; ///< by connection id
    std::uint64_t next_id = 0;
    LogBudget noise;
    std::function<void()> finished_callback;
    std::function<void(const StepEvent&)> event_callback; ///< on_event()
    /// The answer to every heartbeat, encoded (and hashed) once.
    const std::shared_ptr<const protocol::SharedPayload> heartbeat_payload =
        shared_payload(protocol::Heartbeat{});
    /// The welcome of every relayed launcher, encoded once (the leader adds its own proof).
    const std::shared_ptr<const protocol::SharedPayload> relayed_welcome =
        shared_payload(protocol::Welcome{static_cast<std::uint32_t>(coordinator.size()), {}});
    bool finished_reported = false;
    bool closed = false;
    std::size_t proofs_pending = 0; ///< hellos on their way through `proofs` (the log says)
    /// MUNGE's round trips (decoding a hello's credential, encoding our proof) run here, up to
    /// k_munge_threads hellos at once (a thread started for each hello that finds the others
    /// busy), never on the io thread; made at the first MUNGE hello, stopped by close().
    /// Declared last: destroyed first, so no task outlives the members it reads (`auth`).
    std::optional<detail::ProofWorkers> proofs;
};

/// One accepted connection: challenge, hello, then heartbeats/exit/interrupt in, stop/abort out.
class CoordinatorServer::Impl::Session : public std::enable_shared_from_this<Session> {
  public:
    /// `peer`: where the connection comes from (accept4's address).
    Session(std::shared_ptr<Impl> server,
            Tcp::socket socket,
            const Tcp::endpoint& peer,
            std::uint64_t id);

    /// Send the challenge, start the hello deadline and read.
    void start();
    /// One message to this connection's own launcher.
    void send(const protocol::Message& message);

    /// `payload` (an encoded message) for `ranks`, all carried by this connection: as it is
    /// to the launcher itself, in one `relay` to the others of its node. The payload is shared
    /// by every connection's frame, never copied (a `cluster` of 10,000 ranks to 1,250 nodes).
    void send_to(const std::vector<std::uint32_t>& ranks,
                 const std::shared_ptr<const protocol::SharedPayload>& payload);

    /// A frame is a head, a payload shared with other connections (may be null) and a tail
    /// (which ends with the frame's tag once the connection is sealed).
    struct Frame {
        std::string head;
        std::shared_ptr<const protocol::SharedPayload> body;
        std::string tail;
    };

    /// `payload` in one frame: as it is (no `relayed`) or in a `relay` for those ranks; sealed
    /// with a tag over the payload's hash state and this frame's own tail.
    void send_shared(const std::vector<std::uint32_t>& relayed,
                     const std::shared_ptr<const protocol::SharedPayload>& payload);
    /// Queue a frame; the write starts once the handler that queued it is done.
    void send_frame(Frame frame);
    /// The welcome of every rank relayed since the last call, in one `relay` envelope.
    void send_welcomes();
    /// Close the connection; its registered ranks are lost (Impl::remove()).
    void close();

    [[nodiscard]] bool registered() const noexcept { return m_registered; }
    /// A watcher's connection (`tfslurm top`): read-only, never a rank's.
    [[nodiscard]] bool watcher() const noexcept { return m_watcher; }
    /// Nothing queued or being written: a snapshot may go.
    [[nodiscard]] bool idle() const noexcept { return m_queue.empty() && !m_writing; }
    [[nodiscard]] const std::string& address() const noexcept { return m_address; }
    [[nodiscard]] const std::string& peer() const noexcept { return m_peer; }
    [[nodiscard]] std::uint32_t rank() const noexcept { return m_rank; }
    /// The other ranks of its node this (leader's) connection registered.
    [[nodiscard]] const std::vector<std::uint32_t>& relayed() const noexcept { return m_relayed; }

  private:
    void read();
    /// Decode every complete frame and handle it; a protocol error closes the connection.
    void on_read(const error_code& ec, std::size_t n);

    /// Feed `fresh` bytes, then decode every complete frame and handle it, until a hello's
    /// MUNGE proof is on its way (m_proving); true when the connection should read on. A
    /// protocol error (an oversize frame's header among them) closes it.
    bool drain(std::string_view fresh = {});

    /// What proving a hello gave: a reject, or our credential for the welcome, or the error
    /// that kept us from making it.
    struct Proof {
        std::optional<protocol::Reject> reject;
        std::string credential;
        protocol::SessionKeys keys; ///< of the connection, once our credential is made
        std::string error;
    };
    /// Check a hello (its step, then the plan and its route, then its proof), prove ourselves
    /// and register it; else reject. A MUNGE hello is proved on the server's proofs pool
    /// (proved() goes on).
    void register_hello(const protocol::Hello& hello);
    /// Verify `hello` and make our credential for it. Thread-safe (only its arguments).
    [[nodiscard]] static Proof prove(const protocol::Authenticator& auth,
                                     const protocol::Hello& hello,
                                     const std::string& nonce,
                                     protocol::StepId step,
                                     const std::string& endpoint);
    /// Back on the io thread with a MUNGE hello's proof: the plan is checked again, then as
    /// finish_hello(), then the frames that came meanwhile.
    void proved(const protocol::Hello& hello, Proof proof);
    /// Reject `hello`, or register it with a welcome.
    void finish_hello(const protocol::Hello& hello, Proof proof);
    /// A watcher proved itself: welcome it; it gets snapshots from now on.
    void finish_watcher(const protocol::Hello& hello, Proof proof);
    /// Why a hello on this connection may not register its rank (the plan: rank, role, not
    /// registered yet; the tree: only a node's leader relays, and with the tree a rank that the
    /// plan routes through its leader never registers directly), or nullopt.
    [[nodiscard]] std::optional<std::string> admit_direct(const protocol::Hello& hello) const;

    /// `inner`: a relay's message, decoded with it (decode_unwrapped()).
    void handle(const protocol::Message& message, const std::optional<protocol::Message>& inner);

    /// A message of `rank` (this launcher's, or one relayed for its node) for the Coordinator.
    void dispatch(std::uint32_t rank, const protocol::Message& message, Clock::time_point now);

    /// A node leader's envelope: a local launcher's hello (registered here, answered with a
    /// welcome or reject for the leader to prove and pass on), its connection's end, or any
    /// other message of it. The leader proved who it is; it speaks only for ranks of its node.
    void relayed(const protocol::Relay& relay,
                 const std::optional<protocol::Message>& unwrapped,
                 Clock::time_point now);

    /// A follower's hello, relayed by its node leader (who checked its proof): admit it or
    /// reject it, through the leader.
    void register_relayed(std::uint32_t rank, const protocol::Hello& hello, Clock::time_point now);

    /// Write the queued frames, up to protocol::k_frames_per_write in one gather write: a node's
    /// welcomes go out in one system call, not one each.
    void write();
    void on_written(const error_code& ec);

    std::shared_ptr<Impl> m_server;
    Tcp::socket m_socket;
    asio::steady_timer m_hello_timer;
    std::uint64_t m_id;
    std::string m_address; ///< the peer's address, without the port
    std::string m_peer;    ///< address:port
    /// What the proofs bind of this end: `tcp:<the port the connection came in on>`.
    std::string m_endpoint;
    std::string m_nonce;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    /// From the welcome on: every frame each way sealed and checked.
    std::optional<protocol::Channel> m_channel;
    std::deque<Frame> m_queue;
    std::vector<asio::const_buffer> m_buffers; ///< of the frames being written
    std::size_t m_in_flight = 0;               ///< frames being written (the queue's first)
    bool m_writing = false;
    bool m_registered = false;
    bool m_close_after_write = false;
    bool m_closed = false;
    bool m_node = false;    ///< a node leader's connection (Hello::relay)
    bool m_watcher = false; ///< a watcher's connection (Hello::watch)
    /// A MUNGE hello is being proved on the proofs pool: nothing more is read or handled.
    bool m_proving = false;
    std::uint32_t m_rank = 0;
    std::vector<std::uint32_t> m_relayed;
    std::vector<std::uint32_t> m_welcomed; ///< relayed ranks whose welcome is not sent yet
};

} // namespace tfslurm
