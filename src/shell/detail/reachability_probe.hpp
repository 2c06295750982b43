// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The sockets of the reachability probe (`probe`, launcher_action::ProbePeers): a listener on
/// the trainer's port and connection attempts to the peers' trainer addresses. The decisions
/// (which peers, when to start) are LauncherMachine's and the coordinator's.

#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/shell/held_port.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace tfslurm::detail {

/// How long one connection attempt may take before it counts as timed out.
inline constexpr Millis k_probe_attempt_timeout{2000};
/// The pause after a failed attempt (a peer not listening yet refuses at once).
inline constexpr Millis k_probe_retry_delay{250};

class ReachabilityProbe {
  public:
    using Done = std::function<void(std::vector<protocol::ProbeFailure>)>;
    /// The addresses of a name, in the order a connecting client tries them, or an error.
    using Resolved = std::function<void(const boost::system::error_code& ec,
                                        std::vector<boost::asio::ip::address> addresses)>;
    /// Resolves a node name and calls back on the io_context's thread.
    using Resolve = std::function<void(const std::string& name, Resolved resolved)>;

    /// `resolve` empty: Asio's resolver (getaddrinfo on its own thread). Tests give their own.
    explicit ReachabilityProbe(boost::asio::io_context& io, Resolve resolve = {})
        : m_io(io), m_resolve(std::move(resolve)) {}
    ReachabilityProbe(const ReachabilityProbe&) = delete;
    ReachabilityProbe& operator=(const ReachabilityProbe&) = delete;
    ~ReachabilityProbe();

    /// Accept (and close at once) connections on `held`'s socket when it holds a port (exact
    /// mode; plus an IPv6-only socket on the same port, best effort), else on `port` on every
    /// address (IPv6 and IPv4, SO_REUSEADDR). A port that cannot be listened on is logged and
    /// left alone: the trainer's own port check reports it.
    void listen(HeldPort& held, std::uint16_t port);
    /// Try each target until it answers or `timeout` passed; then `done` with the failures,
    /// by rank. A name is tried at every address it resolves to, in order, as a connecting
    /// client would (`localhost` may be ::1 first, where the peer listens on IPv4 only); it
    /// is reached when one of them answers. Each success is closed with a reset (SO_LINGER 0): no
    /// TIME_WAIT is left.
    void start(std::vector<ProbeTarget> targets, Millis timeout, Done done);
    /// Stop listening and attempting (before the trainer binds the port).
    void close() noexcept;

  private:
    struct Attempt;
    void accept(std::size_t listener);
    /// Resolve a node name off the event loop, then attempt each of `waiting`.
    void resolve(const std::string& name, std::vector<std::shared_ptr<Attempt>> waiting);
    void resolved(const std::vector<std::shared_ptr<Attempt>>& waiting,
                  const boost::system::error_code& ec,
                  const std::vector<boost::asio::ip::address>& addresses);
    void attempt(const std::shared_ptr<Attempt>& attempt);
    void failed(const std::shared_ptr<Attempt>& attempt, std::string error);
    void settle(const std::shared_ptr<Attempt>& attempt);

    boost::asio::io_context& m_io;
    Resolve m_resolve;
    boost::asio::steady_timer m_deadline_timer{m_io}; ///< ends name resolutions at the timeout
    boost::asio::ip::tcp::resolver m_resolver{m_io};
    std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> m_listeners;
    std::vector<std::shared_ptr<Attempt>> m_attempts;
    std::size_t m_pending = 0;
    Clock::time_point m_deadline;
    Done m_done;
    bool m_closed = false;
};

} // namespace tfslurm::detail
