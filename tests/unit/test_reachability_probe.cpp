// SPDX-License-Identifier: MIT
// The reachability probe's sockets alone, on loopback in one io_context: a listener that
// answers, a port nobody listens on, a node name that resolves and one that does not.
#include "detail/reachability_probe.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using Tcp = asio::ip::tcp;

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
    std::optional<std::vector<protocol::ProbeFailure>> result;
    probe.start({{1, "localhost", reachable},
                 {2, "nosuch.invalid", reachable},
                 {3, "127.0.0.1", reachable},
                 {4, "127.0.0.1", closed},
                 {5, "localhost", reachable}},
                1s,
                [&](std::vector<protocol::ProbeFailure> failures) {
                    result = std::move(failures);
                    io.stop();
                });
    io.run_for(20s);
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
