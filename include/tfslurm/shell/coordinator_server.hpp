// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The coordinator on a TCP port (Boost.Asio, single-threaded): the only part of the
/// coordinator that touches the network.

#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/connection_limits.hpp>
#include <tfslurm/run/coordinator.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace boost::asio {
class io_context;
} // namespace boost::asio

namespace tfslurm {

/// The coordinator on a TCP port: accepts launchers, sends each a challenge, authenticates
/// and registers its hello, feeds the Coordinator and sends its messages. A connection that
/// sends garbage, an oversize frame, a bad proof or nothing at all (hello_timeout) is closed
/// and logged (at most 10 such lines per 10 s, then a summary); it never affects the step.
/// A hello of another job or another step (sharing the control port) is rejected with
/// RejectCode::wrong_job / wrong_step, naming both (`wrong step 12345.1 (this is step 12345.0)`).
/// Unauthenticated connections are bounded per peer address and in total by a HandshakePool
/// (256 per peer, 1024 + ranks in all). Text a peer sent is quoted before it is logged.
/// Single-threaded: runs on the caller's io_context.
class CoordinatorServer {
  public:
    /// Listen on `bind_address:port` (port 0 = any free port). Raises RLIMIT_NOFILE's soft
    /// limit to the hard limit when the step needs more descriptors.
    /// \throws Error (Errc::io) when the port cannot be bound (`coordinator: cannot listen on
    ///         <address>:<port> (<strerror>)`) or the descriptor limit is too low;
    ///         (Errc::invalid_argument) from Coordinator.
    CoordinatorServer(boost::asio::io_context& io,
                      CoordinatorSettings settings,
                      protocol::Authenticator auth,
                      protocol::StepId step,
                      const std::string& bind_address,
                      std::uint16_t port);
    /// Listen on the first of `ports` (control_port_candidates()) that can be bound; a
    /// fallback is logged as a warning
    /// (`coordinator: cannot listen on 0.0.0.0:22018 (Address already in use): listening on
    /// fallback port 32246 (1 of 7)`). Throws as above, naming the first port and the fallbacks
    /// (`... (Address already in use) nor on its fallback ports 32246, 32333, ...`).
    CoordinatorServer(boost::asio::io_context& io,
                      CoordinatorSettings settings,
                      protocol::Authenticator auth,
                      protocol::StepId step,
                      const std::string& bind_address,
                      const std::vector<std::uint16_t>& ports);
    ~CoordinatorServer();
    CoordinatorServer(const CoordinatorServer&) = delete;
    CoordinatorServer& operator=(const CoordinatorServer&) = delete;

    /// The bound port.
    [[nodiscard]] std::uint16_t port() const noexcept;
    [[nodiscard]] const Coordinator& state() const noexcept;
    /// Called once, when the coordinator is finished (all launchers gone after the verdict).
    void on_finished(std::function<void()> callback);
    /// Called with each of the step's events (Coordinator::take_events(), stamped with the
    /// wall-clock time it was taken), in order; only when `run.events` names a record.
    void on_event(std::function<void(const StepEvent&)> callback);
    /// Stop accepting and close every connection.
    void close();

  private:
    struct Impl;
    std::shared_ptr<Impl> m_impl;
};

/// Raise RLIMIT_NOFILE's soft limit to the hard limit if `needed` descriptors exceed it.
/// \throws Error (Errc::io) `RLIMIT_NOFILE: hard limit <n> is below the <needed> descriptors
///         needed ...` when the hard limit is too low.
void ensure_descriptor_limit(std::size_t needed, std::string_view what);

/// The address the coordinator binds for a control address: a loopback address as it is
/// (local mode stays on loopback), anything else every address (a node name may resolve to
/// 127.0.1.1 on the node itself, as in Debian's /etc/hosts).
/// Input: `localhost`. Output: `127.0.0.1`. Input: `n1`. Output: `0.0.0.0`.
[[nodiscard]] std::string bind_address_for(const std::string& control_address);

} // namespace tfslurm
