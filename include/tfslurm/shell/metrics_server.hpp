// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The metrics endpoint of `tfslurm run --metrics` on rank 0's launcher: an HTTP listener on the
/// launcher's event loop that answers each request with metrics.hpp's rules. Bounded: at most
/// k_metrics_connections at once (more are closed at once), a request head of at most
/// k_max_request_head bytes read within k_metrics_read_timeout, one answer per connection. A
/// watcher that hangs holds one slot until its timeout, never the step: the coordinator's
/// frames and heartbeats do not wait for a scrape.

#include <tfslurm/run/run.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <boost/asio/io_context.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace tfslurm {

/// Connections served at once; more are closed as they come.
inline constexpr std::size_t k_metrics_connections = 16;
/// A request head must come within this.
inline constexpr Millis k_metrics_read_timeout{5000};

class MetricsServer {
  public:
    /// The scrape's text (render_metrics()), made when a request asks for it.
    using Render = std::function<std::string()>;

    /// Listen on `endpoint` (every IPv4 address when its address is empty; port 0: any free
    /// one, port()); a request head must come within `read_timeout`.
    /// \throws Error (Errc::io) naming `metrics` when the address cannot be bound.
    MetricsServer(boost::asio::io_context& io,
                  const MetricsEndpoint& endpoint,
                  Render render,
                  Millis read_timeout = k_metrics_read_timeout);
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;
    MetricsServer(MetricsServer&&) = delete;
    MetricsServer& operator=(MetricsServer&&) = delete;
    ~MetricsServer();

    /// The port it listens on.
    [[nodiscard]] std::uint16_t port() const noexcept;
    /// Stop listening and close every connection.
    void close() noexcept;

  private:
    struct Impl;
    std::shared_ptr<Impl> m_impl;
};

} // namespace tfslurm
