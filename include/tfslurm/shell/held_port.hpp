// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// A TCP port a launcher holds for its trainer (exact mode, the reachability probe), and the
/// check that a port is free.

#include <cstdint>
#include <vector>

namespace tfslurm {

/// Whether TCP `port` can be bound on this node (a bind test with SO_REUSEADDR, on every
/// address). False when another process listens on it.
[[nodiscard]] bool port_is_free(std::uint16_t port);

/// A TCP port this process holds: bound without SO_REUSEADDR on every IPv4 address, so that no
/// other process can bind it, until release(); not listening (connections are refused).
/// Move-only.
class HeldPort {
  public:
    HeldPort() = default;
    HeldPort(const HeldPort&) = delete;
    HeldPort& operator=(const HeldPort&) = delete;
    HeldPort(HeldPort&& other) noexcept;
    HeldPort& operator=(HeldPort&& other) noexcept;
    ~HeldPort();

    /// Hold the first port of `candidates` that can be bound, trying them in order; an empty
    /// HeldPort (port() == 0) when none can.
    /// Input: {23000, 23001}, 23000 held by another process. Output: a HeldPort of 23001.
    [[nodiscard]] static HeldPort first_free(const std::vector<std::uint16_t>& candidates);

    /// The held port, 0 when none.
    [[nodiscard]] std::uint16_t port() const noexcept { return m_port; }
    /// Make the held socket listen (the reachability probe) and return a new descriptor of it
    /// (dup) for accepting; -1 (errno set) on failure or when none is held. The port stays held
    /// until both that descriptor is closed and release().
    [[nodiscard]] int listen() noexcept;
    /// Close the socket: the port is free for the trainer to bind (port() stays).
    void release() noexcept;

  private:
    int m_fd = -1;
    std::uint16_t m_port = 0;
};

} // namespace tfslurm
