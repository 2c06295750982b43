// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The coordinator's defences against unauthenticated peers, pure: HandshakePool bounds the
/// connections still in their handshake, per peer and in total; LogBudget rate-limits the
/// warnings they cause and owes a summary of the rest. The server (coordinator_server.hpp)
/// feeds them connection ids and the time, and closes and logs what they say.

#include <tfslurm/run/run.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tfslurm {

/// Which unauthenticated connections the coordinator keeps, so that a flood of connections
/// (any user of a node can connect to the control port) cannot lock real launchers out. Pure:
/// the server feeds it connection ids and closes what it says. Rules: a new connection is always
/// admitted; when its peer address already holds `per_peer` unauthenticated connections, the
/// peer's oldest one is closed; when all peers together hold `total`, the oldest connection of
/// the peer holding the most is closed. A real launcher sends its hello within milliseconds, so
/// what is closed is the idle connections of whoever floods.
class HandshakePool {
  public:
    HandshakePool(std::size_t per_peer, std::size_t total);

    /// A new unauthenticated connection `id` from `peer` (its address, without the port).
    /// Returns the ids to close, oldest first (empty when it fits). Every loopback address
    /// (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104) is one peer (peer_key()): a user of rank 0's
    /// node can connect from any of them.
    /// Input: per_peer 2; admit(1, "a"), admit(2, "a"), admit(3, "a"). Output of the last: {1}.
    /// Input: per_peer 2; admit(1, "127.0.0.1"), admit(2, "127.0.0.2"), admit(3, "::1").
    /// Output of the last: {1}.
    [[nodiscard]] std::vector<std::uint64_t> admit(std::uint64_t id, const std::string& peer);
    /// `id` authenticated or closed: it no longer counts. Unknown ids are ignored.
    void remove(std::uint64_t id);
    [[nodiscard]] std::size_t size() const noexcept { return m_size; }

    /// The peer a connection from `address` counts for: `loopback` for every loopback address,
    /// else the address itself. Input: "127.4.5.6". Output: "loopback".
    [[nodiscard]] static std::string peer_key(const std::string& address);

  private:
    std::uint64_t evict_from(const std::string& peer);

    std::size_t m_per_peer;
    std::size_t m_total;
    std::size_t m_size = 0;
    std::map<std::string, std::deque<std::uint64_t>> m_by_peer;
    std::unordered_map<std::uint64_t, std::string> m_peer_of;
};

/// At most `per_window` log lines of one kind in each `window`; the rest are counted and
/// summarised once the window is over (one client timing out connections must not write
/// thousands of lines into the job's output). Pure: the time is an argument.
class LogBudget {
  public:
    LogBudget(std::size_t per_window, Millis window);

    /// True: log this one. False: it is counted for the summary.
    [[nodiscard]] bool allow(Clock::time_point now);
    /// After a window in which lines were suppressed has ended: how many (then forgotten).
    /// Input: per_window 1; allow(t0), allow(t0), take_summary(t0 + window). Output: 1.
    [[nodiscard]] std::optional<std::size_t> take_summary(Clock::time_point now);

  private:
    std::size_t m_per_window;
    Millis m_window;
    Clock::time_point m_start{};
    bool m_started = false;
    std::size_t m_logged = 0;
    std::size_t m_suppressed = 0;
};

} // namespace tfslurm
