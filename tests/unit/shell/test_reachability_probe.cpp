// SPDX-License-Identifier: MIT
// The reachability probe's sockets alone, on loopback in one io_context: a listener that
// answers, a port nobody listens on, a node name that resolves and one that does not.
#include "shell/detail/reachability_probe.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using Tcp = asio::ip::tcp;

namespace {

/// Probe `targets` with a 1 s timeout on `io`, run until the probe is done (at most 20 s):
/// its failures, or nothing when it never finished.
std::optional<std::vector<protocol::ProbeFailure>> probe_all(asio::io_context& io,
                                                             detail::ReachabilityProbe& probe,
                                                             std::vector<ProbeTarget> targets) {
    std::optional<std::vector<protocol::ProbeFailure>> result;
    probe.start(std::move(targets), 1s, [&](std::vector<protocol::ProbeFailure> failures) {
        result = std::move(failures);
        io.stop();
    });
    io.run_for(20s);
    return result;
}

} // namespace

TEST_CASE("reachability_probe: names are resolved off the loop, failures come by rank", "[probe]") {
    asio::io_context io;
    // A listener the probe reaches (the kernel completes the connection in its backlog), and
    // a port that was free a moment ago: nobody listens there.
    Tcp::acceptor open(io, Tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const auto reachable = open.local_endpoint().port();
    std::uint16_t closed = 0;
    {
        Tcp::acceptor gone(io, Tcp::endpoint(asio::ip::address_v4::loopback(), 0));
        closed = gone.local_endpoint().port();
    }
    detail::ReachabilityProbe probe(io);
    const auto result = probe_all(io,
                                  probe,
                                  {{1, "localhost", reachable},
                                   {2, "nosuch.invalid", reachable},
                                   {3, "127.0.0.1", reachable},
                                   {4, "127.0.0.1", closed},
                                   {5, "localhost", reachable}});
    REQUIRE(result);
    REQUIRE(result->size() == 2);
    CHECK((*result)[0].rank == 2);
    CHECK((*result)[0].address == "nosuch.invalid:" + std::to_string(reachable));
    CHECK_FALSE((*result)[0].error.empty()); // the resolver's message, or the timeout
    CHECK((*result)[1].rank == 4);
    CHECK((*result)[1].address == "127.0.0.1:" + std::to_string(closed));
    CHECK((*result)[1].error == "Connection refused");
    probe.close();
}

TEST_CASE("reachability_probe: no targets, done at once", "[probe]") {
    asio::io_context io;
    detail::ReachabilityProbe probe(io);
    std::optional<std::vector<protocol::ProbeFailure>> result;
    probe.start({}, 30s, [&](std::vector<protocol::ProbeFailure> failures) {
        result = std::move(failures);
    });
    // Nothing is left to wait for once it is done: run() returns without a stop.
    io.run_for(5s);
    REQUIRE(result);
    CHECK(result->empty());
}

TEST_CASE("reachability_probe: a name is tried at every address it resolves to, in order",
          "[probe]") {
    asio::io_context io;
    // Debian's /etc/hosts maps `localhost` to ::1 first: a peer listening on IPv4 only is
    // reached at the name's second address, as a connecting client would reach it.
    Tcp::acceptor open(io, Tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    const auto port = open.local_endpoint().port();
    const auto v6 = asio::ip::make_address("::1");
    const auto v4 = asio::ip::make_address("127.0.0.1");
    const auto unused = asio::ip::make_address("127.0.0.2"); // nobody listens there on `port`
    std::vector<std::string> asked;
    detail::ReachabilityProbe probe(
        io, [&](const std::string& name, const detail::ReachabilityProbe::Resolved& resolved) {
            asked.push_back(name);
            std::vector<asio::ip::address> addresses;
            if (name == "dual") {
                addresses = {v6, v4, v4}; // getaddrinfo lists an address once per socket type
            } else if (name == "v4-second") {
                addresses = {unused, v4};
            } else if (name == "none-listening") {
                addresses = {v6, unused};
            }
            asio::post(io, [resolved, addresses] { resolved({}, addresses); });
        });
    const auto result = probe_all(
        io, probe, {{1, "dual", port}, {2, "v4-second", port}, {3, "none-listening", port}});
    REQUIRE(result);
    std::sort(asked.begin(), asked.end());
    CHECK(asked == std::vector<std::string>{"dual", "none-listening", "v4-second"});
    REQUIRE(result->size() == 1);
    CHECK((*result)[0].rank == 3);
    CHECK((*result)[0].address == "none-listening:" + std::to_string(port));
    CHECK((*result)[0].error == "Connection refused"); // the last address's error
    probe.close();
}
