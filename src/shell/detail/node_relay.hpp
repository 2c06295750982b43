// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The node relay of `tfslurm run`'s tree (docs/protocol.md, "The tree"), its Asio shell: hosted
/// by a node leader's launcher (the lowest rank on its node), it accepts the node's other
/// launchers on a Unix socket in a private directory and performs what its machine
/// (RelayMachine, relay.hpp: every rule of the relay) decides: challenges, the proofs of
/// auth.hpp in both directions, frames both ways, `relay` envelopes over the leader's one
/// connection.

#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/relay.hpp>
#include <tfslurm/run/run.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tfslurm::detail {

/// Where the relay of `leader` in step `step` listens: a name in the abstract namespace of Unix
/// sockets, written with `@` for its leading NUL byte (as ss(8) shows it). The abstract
/// namespace belongs to the node's network namespace and has no directory that another user
/// could create first, own or fill; who may use a name is checked with SO_PEERCRED at both
/// ends instead (peer_uid()). The leader's rank keeps two nodes apart where they share a network
/// namespace. Input: {12345, 0}, 4 (uid 1000). Output: `@tfslurm-1000/relay-12345.0-4`.
[[nodiscard]] std::string relay_path(protocol::StepId step, std::uint32_t leader);

/// The endpoint of a relay path: `@name` is the abstract name `\0name`, anything else a path.
[[nodiscard]] boost::asio::local::stream_protocol::endpoint relay_endpoint(const std::string& path);

/// The credentials of the process at the other end of the connected Unix socket `fd`
/// (SO_PEERCRED: fixed by the kernel when the connection was made, not claimed by the peer).
struct PeerCredentials {
    std::uint32_t uid = 0;
    std::int64_t pid = 0;
};
/// nullopt when the kernel does not say (not a Unix socket).
[[nodiscard]] std::optional<PeerCredentials> peer_credentials(int fd) noexcept;

class NodeRelay {
  public:
    /// `settings`: the machine's (the node's other ranks, the timeouts). `upstream` sends a
    /// message over the leader's connection (an envelope, or the node's heartbeat while hold()
    /// holds); `idle` is called (posted) whenever the relay stops being busy().
    NodeRelay(boost::asio::io_context& io,
              const protocol::Authenticator& auth,
              RelaySettings settings,
              std::function<void(const protocol::Message&)> upstream,
              std::function<void()> idle);
    ~NodeRelay();
    NodeRelay(const NodeRelay&) = delete;
    NodeRelay& operator=(const NodeRelay&) = delete;

    /// Bind `path` (relay_path()) and listen, without accepting yet: the leader does it when it
    /// starts, so that its followers' connections are never refused and backing off (issue
    /// #33), and the name is this job's early.
    /// \throws Error (Errc::auth) when another process holds the name (`relay:
    /// @tfslurm-0/relay-12.0-2 is held by uid 65534 (pid 812), not by this job's user (uid
    /// 0)`, naming the holder when it answers), (Errc::io) when it cannot listen.
    void listen(const std::string& path);
    /// Accept the local launchers (after listen()); the leader serves as it starts, with
    /// RelaySettings::upstream_waits until it registered (upstream_open()).
    void serve();
    /// The leader registered: its followers' checked hellos go upstream (RelayMachine).
    void upstream_open();
    /// An envelope from the coordinator: each of its ranks gets the message.
    void downstream(const protocol::Relay& relay);
    /// The coordinator answered the leader's heartbeat: every registered local launcher gets
    /// a heartbeat (its proof that the coordinator is alive).
    void pulse();
    /// RelayMachine::follower_usages().
    [[nodiscard]] std::vector<protocol::RankUsage> follower_usages() const;
    /// RelayMachine::take_follower_startups().
    [[nodiscard]] std::vector<protocol::RankStartup> take_follower_startups();
    /// The leader's connection is gone: close every local connection (their launchers then
    /// take the coordinator-lost path) and stop accepting.
    void upstream_lost();
    /// Stop waiting for ranks that never connected (the connect timeout is over).
    void stop_waiting();
    /// A local launcher is connected, or one never came and stop_waiting() was not called.
    [[nodiscard]] bool busy() const noexcept;
    /// The leader's machine would close its connection: true when that must wait until idle
    /// (RelayMachine::hold(); the node heartbeat goes upstream meanwhile).
    [[nodiscard]] bool hold();
    void close();

  private:
    struct Impl;
    std::shared_ptr<Impl> m_impl;
};

} // namespace tfslurm::detail
