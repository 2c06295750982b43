// SPDX-License-Identifier: MIT
// The coordinator's defences against unauthenticated connections (src/run/connection_limits.cpp),
// pure: the handshake pool's admissions and evictions, and the log budget's window.
#include <tfslurm/run/connection_limits.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

TEST_CASE("connection_limits: a new connection is always admitted, a flood evicts itself",
          "[connection_limits]") {
    HandshakePool pool(2, 5);
    SECTION("per peer: the peer's own oldest connection makes room") {
        CHECK(pool.admit(1, "10.0.0.9").empty());
        CHECK(pool.admit(2, "10.0.0.9").empty());
        CHECK(pool.admit(3, "10.0.0.9") == std::vector<std::uint64_t>{1});
        CHECK(pool.admit(4, "10.0.0.1").empty());
        CHECK(pool.size() == 3);
    }
    SECTION("in total: the oldest connection of the peer holding the most") {
        CHECK(pool.admit(1, "a").empty());
        CHECK(pool.admit(2, "b").empty());
        CHECK(pool.admit(3, "b").empty());
        CHECK(pool.admit(4, "c").empty());
        CHECK(pool.admit(5, "d").empty());
        CHECK(pool.admit(6, "e") == std::vector<std::uint64_t>{2});
        CHECK(pool.size() == 5);
    }
    SECTION("every loopback address is one peer: a flood cannot spread over 127.0.0.0/8") {
        CHECK(pool.admit(1, "127.0.0.1").empty());
        CHECK(pool.admit(2, "127.0.0.2").empty());
        CHECK(pool.admit(3, "127.255.3.4") == std::vector<std::uint64_t>{1});
        CHECK(pool.admit(4, "::1") == std::vector<std::uint64_t>{2});
        CHECK(pool.admit(5, "::ffff:127.0.0.9") == std::vector<std::uint64_t>{3});
        CHECK(pool.admit(6, "10.0.0.1").empty()); // another peer
        CHECK(pool.size() == 3);
    }
    SECTION("authenticated or closed connections no longer count") {
        CHECK(pool.admit(1, "a").empty());
        CHECK(pool.admit(2, "a").empty());
        pool.remove(1);
        pool.remove(1); // twice: ignored
        pool.remove(99);
        CHECK(pool.size() == 1);
        CHECK(pool.admit(3, "a").empty());
        CHECK(pool.admit(4, "a") == std::vector<std::uint64_t>{2});
    }
}

TEST_CASE("connection_limits: the peer a connection counts for", "[connection_limits]") {
    const auto [address, key] = GENERATE(table<std::string, std::string>({
        {"127.0.0.1", "loopback"},
        {"127.4.5.6", "loopback"},
        {"::1", "loopback"},
        {"::ffff:127.0.0.1", "loopback"},
        {"10.0.0.1", "10.0.0.1"},
        {"128.0.0.1", "128.0.0.1"},
        {"::2", "::2"},
        {"fe80::1", "fe80::1"},
        {"::ffff:10.0.0.1", "::ffff:10.0.0.1"},
    }));
    CAPTURE(address);
    CHECK(HandshakePool::peer_key(address) == key);
}

TEST_CASE("connection_limits: warnings are bounded per window, then summarised",
          "[connection_limits]") {
    LogBudget budget(2, 10s);
    const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
    CHECK(budget.allow(t0));
    CHECK(budget.allow(t0 + 1s));
    CHECK_FALSE(budget.allow(t0 + 2s));
    CHECK_FALSE(budget.allow(t0 + 3s));
    CHECK(budget.take_summary(t0 + 9s) == std::nullopt); // the window is not over
    CHECK_FALSE(budget.allow(t0 + 11s));                 // owed a summary: still counted
    CHECK(budget.take_summary(t0 + 11s) == 3U);
    CHECK(budget.take_summary(t0 + 12s) == std::nullopt);
    CHECK(budget.allow(t0 + 12s)); // a new window
    CHECK(budget.allow(t0 + 12s));
    CHECK_FALSE(budget.allow(t0 + 12s));
}
