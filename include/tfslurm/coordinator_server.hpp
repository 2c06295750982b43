// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The coordinator on a TCP port (Boost.Asio, single-threaded): the only part of the
/// coordinator that touches the network.

#include <tfslurm/auth.hpp>
#include <tfslurm/coordinator.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace boost::asio {
class io_context;
} // namespace boost::asio

namespace tfslurm {

/// The coordinator on a TCP port: accepts launchers, sends each a challenge, authenticates
/// and registers its hello, feeds the Coordinator and sends its messages. A connection that
/// sends garbage, an oversize frame, a bad proof or nothing at all (hello_timeout) is closed
/// and logged; it never affects the step. Single-threaded: runs on the caller's io_context.
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
                      std::uint64_t job,
                      const std::string& bind_address,
                      std::uint16_t port);
    ~CoordinatorServer();
    CoordinatorServer(const CoordinatorServer&) = delete;
    CoordinatorServer& operator=(const CoordinatorServer&) = delete;

    /// The bound port.
    [[nodiscard]] std::uint16_t port() const noexcept;
    [[nodiscard]] const Coordinator& state() const noexcept;
    /// Called once, when the coordinator is finished (all launchers gone after the verdict).
    void on_finished(std::function<void()> callback);
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
