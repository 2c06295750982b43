// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `tfslurm top`'s connection to a step's coordinator: connect, prove who it is like a
/// launcher (a `hello` with `watch` and k_watcher_rank: MUNGE, the same user, or the step's
/// secret), check the coordinator's proof, then read sealed `snapshot` frames. Read-only: it
/// sends only heartbeats. Blocking with deadlines (poll), one thread; every read bounded.

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/snapshot.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm {

/// Where a step's coordinator listens and which step it is.
struct WatchTarget {
    std::string host;    ///< rank 0's node, for messages
    std::string address; ///< what to dial: a name or an address
    std::uint16_t port = 0;
    protocol::StepId step;
};

/// One watcher's connection.
class WatchClient {
  public:
    /// Connect and prove both ways within `timeout`.
    /// \throws Error (Errc::io) `top: cannot reach step 12.0's coordinator at n1 (10.0.0.1:21865):
    ///         Connection refused` (or `did not answer within 10 s`); (Errc::auth) `top: step
    ///         12.0's coordinator refused this watcher: <its reason>`, or `top: the process at
    ///         n1 (10.0.0.1:21865) is not step 12.0's coordinator: <why>`; (Errc::protocol) for
    ///         a malformed frame.
    WatchClient(const WatchTarget& target, const protocol::Authenticator& auth, Millis timeout);
    ~WatchClient();
    WatchClient(const WatchClient&) = delete;
    WatchClient& operator=(const WatchClient&) = delete;

    /// The next snapshot, waiting at most `timeout`; nullopt when the step's coordinator closed
    /// the connection (the step ended). \throws Error (Errc::io) when nothing came within
    /// `timeout`, as the constructor for a bad frame.
    [[nodiscard]] std::optional<Snapshot> next(Millis timeout);

    /// The socket, for a caller that waits on it with other descriptors (the terminal).
    [[nodiscard]] int fd() const noexcept { return m_fd; }

    /// A complete frame is already buffered: next() returns without waiting.
    [[nodiscard]] bool buffered();

  private:
    /// Challenge, hello and proof, welcome and its proof checked, the channel opened.
    void handshake(const protocol::Authenticator& auth, Millis timeout, Clock::time_point deadline);
    /// Read until a whole frame is buffered or `deadline` passes; false at EOF.
    bool fill(Clock::time_point deadline, const std::string& waiting_for, Millis timeout);
    void send(const protocol::Message& message);
    [[nodiscard]] std::string where() const;
    /// `top: cannot reach step 12.0's coordinator at n1 (10.0.0.1:21865): <why>` (Errc::io).
    [[nodiscard]] Error unreachable(const std::string& why) const;
    /// `top: expected a <expected> from n1 (...), got <type>` (Errc::protocol).
    [[nodiscard]] Error unexpected(std::string_view expected, const protocol::Message& got) const;

    WatchTarget m_target;
    int m_fd = -1;
    std::string m_dialled; ///< address:port
    protocol::FrameDecoder m_decoder;
    std::optional<std::string> m_pending; ///< a frame read but not yet handed out
    std::optional<protocol::Channel> m_channel;
    Clock::time_point m_last_beat;
};

} // namespace tfslurm
