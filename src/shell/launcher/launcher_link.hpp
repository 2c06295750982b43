// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The launcher's link to its coordinator, or to its node leader's relay: one connection that
/// performs what the Connector (connector.hpp) decides until `welcome` (the endpoint to try, the
/// proofs, its timers, the failure), then carries sealed frames both ways. Socket plumbing only:
/// what the frames mean is the launcher's machine's, told through LinkEvents.

#include "shell/detail/resolved_host.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/connector.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::detail {

/// One timer per value of a timer enum (asio timers cannot be default-constructed):
/// `make_timers(io, std::make_index_sequence<k_connector_timer_count>{})`.
template <std::size_t... Index>
[[nodiscard]] std::array<boost::asio::steady_timer, sizeof...(Index)>
make_timers(boost::asio::io_context& io, std::index_sequence<Index...> /*timers*/) {
    return {((void)Index, boost::asio::steady_timer(io))...};
}

/// What the link tells its launcher. Each is called from the event loop, never re-entered.
struct LinkEvents {
    /// `welcome` came and proved itself: the session is open (`control`: where it answered).
    std::function<void(const std::string& control)> opened;
    /// A message of the session.
    std::function<void(const protocol::Message& message)> received;
    /// The session ended: EOF (`connection closed`), an error, or a frame that failed its check;
    /// `loss` tells which (loss_of()).
    std::function<void(const std::string& reason, CoordinatorLoss loss)> lost;
    /// One machine frame (send(..., true)) was written.
    std::function<void()> written;
    /// The Connector gave up, or the session's keys could not be made.
    std::function<void(Error error)> failed;
};

class LauncherLink {
  public:
    LauncherLink(boost::asio::io_context& io,
                 const protocol::Authenticator& auth,
                 protocol::StepId step,
                 std::uint32_t rank,
                 LinkEvents events);

    /// Start the Connector at `now` (the connect timeout's start).
    void start(ConnectorSettings settings, Clock::time_point now);
    /// Queue `message` (dropped unless connected). `machine`: the launcher machine's Send,
    /// acknowledged with LinkEvents::written once written (in the session only).
    void send(const protocol::Message& message, bool machine);
    /// Half-close: nothing more to send; the peer's EOF then comes as LinkEvents::lost. What is
    /// queued is written first.
    void half_close();
    /// Close for good; nothing more is read, written or reported.
    void close();
    /// Stop the Connector's timers (the launcher is on its way out).
    void cancel_timers();

  private:
    using Stream = boost::asio::generic::stream_protocol;
    using ErrorCode = boost::system::error_code;

    void perform();
    void perform(const ConnectorAction& action);
    void open_session(const std::string& control);
    void connect(const connector_action::Connect& target);
    void close_attempt();
    void read();
    void on_read(const ErrorCode& ec, std::size_t n);
    void write();
    /// The half-close itself (half_close(), once nothing is queued).
    void shutdown_send();
    /// The session ended (`reason`, `loss`), or the handshake did (told to the Connector).
    void end(const std::string& reason,
             bool connect_error,
             CoordinatorLoss loss = CoordinatorLoss::other);
    boost::asio::steady_timer& timer(ConnectorTimer which) {
        return m_timers.at(static_cast<std::size_t>(which));
    }

    boost::asio::io_context& m_io;
    const protocol::Authenticator& m_auth;
    protocol::StepId m_step;
    std::uint32_t m_rank;
    LinkEvents m_events;
    std::optional<Connector> m_connector;
    Stream::socket m_socket;
    std::array<boost::asio::steady_timer, k_connector_timer_count> m_timers; ///< by ConnectorTimer
    /// The coordinator's host, resolved once for every candidate port and every retry.
    ResolvedHost m_host;

    /// The connection's state, set by performing the Connector's actions (and close()); after
    /// `welcome` (session) the launcher's machine decides.
    enum class State { connecting, handshake, session, closed };
    State m_state = State::connecting;

    /// What the session keys are made of, gathered while the Connector's proofs are performed:
    /// the challenge answered, this launcher's nonce, the endpoint, both ends' MUNGE key material.
    struct Handshake {
        std::string challenge;
        std::string nonce;
        std::string endpoint;
        std::string own_key;
        std::string peer_key;
    };
    Handshake m_handshake;
    /// From the welcome on: every frame each way sealed and checked.
    std::optional<protocol::Channel> m_channel;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    /// Frames to write (the handshake's, and every sealed frame to a relay); `second`: a
    /// machine Send, acknowledged with LinkEvents::written.
    std::deque<std::pair<std::string, bool>> m_queue;
    /// The session's payloads to the coordinator (a TCP peer), sealed as batches as they are
    /// written; a relay takes no batch, so a follower's frames go through m_queue.
    protocol::Outbox m_outbox;
    bool m_batches = false;                           ///< this connection's peer is the coordinator
    std::vector<std::string> m_writing;               ///< the frames being written
    std::vector<boost::asio::const_buffer> m_buffers; ///< of m_writing
    std::size_t m_acknowledged = 0;                   ///< machine Sends in m_writing
    bool m_in_flight = false;                         ///< a write is in flight
    bool m_write_posted = false;                      ///< a write() is posted
    bool m_half_close_pending = false;                ///< half_close() waits for what is queued
};

} // namespace tfslurm::detail
