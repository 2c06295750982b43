// SPDX-License-Identifier: MIT
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/shell/coordinator_server.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

/// Members from a role list; hosts n1, n2, ... two ranks per host; indices per role.
std::vector<Member> members(const std::vector<Role>& roles) {
    std::vector<Member> out;
    std::map<Role, std::uint32_t> next;
    for (std::size_t i = 0; i < roles.size(); ++i) {
        out.push_back({roles[i], next[roles[i]]++, "n" + std::to_string(i / 2 + 1)});
    }
    return out;
}

CoordinatorSettings settings(const std::vector<Role>& roles, Until until = Until::workers) {
    CoordinatorSettings s;
    s.ranks = members(roles);
    s.run.until = until;
    s.run.heartbeat_timeout = 10s;
    s.run.connect_timeout = 60s;
    s.linger = 15s;
    return s;
}

using tfslurm::test::k_t0;

protocol::Exit exited(int code) {
    return {ExitStatus::exited(code), {}};
}
protocol::Exit killed(int signo) {
    return {ExitStatus::signaled(signo), {}};
}

void register_all(Coordinator& c, Clock::time_point now = k_t0) {
    for (std::uint32_t rank = 0; rank < c.size(); ++rank) {
        REQUIRE_FALSE(c.admit(rank, c.settings().ranks[rank].role));
        c.registered(rank, now);
    }
}

/// Ranks that got a message of type T, in order.
template <typename T> std::vector<std::uint32_t> recipients(const std::vector<Outgoing>& out) {
    std::vector<std::uint32_t> ranks;
    for (const auto& o : out) {
        if (std::holds_alternative<T>(o.message)) {
            ranks.insert(ranks.end(), o.ranks.begin(), o.ranks.end());
        }
    }
    return ranks;
}

const std::vector<std::uint32_t> k_none;

} // namespace

TEST_CASE("coordinator: until workers stops the ps once every worker exited 0", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker, Role::ps}), k_t0);
    register_all(c);
    CHECK(c.take_outgoing().empty());
    c.exited(1, exited(0), k_t0 + 1s);
    CHECK(c.verdict() == Verdict::none);
    CHECK(c.take_outgoing().empty());
    c.exited(2, exited(0), k_t0 + 2s);
    CHECK(c.verdict() == Verdict::done);
    const auto out = c.take_outgoing();
    CHECK(recipients<protocol::Stop>(out) == std::vector<std::uint32_t>{0, 1, 2, 3});
    CHECK(std::get<protocol::Stop>(out.front().message).reason == protocol::StopReason::done);
    CHECK(c.step_status() == 0);

    // A stopped ps counts as success, whatever its status.
    c.exited(0, killed(15), k_t0 + 3s);
    c.exited(3, exited(143), k_t0 + 3s);
    CHECK(c.verdict() == Verdict::done);
    CHECK_FALSE(c.failure());
    CHECK(c.take_outgoing().empty());
    CHECK_FALSE(c.finished());
    for (std::uint32_t rank = 0; rank < 4; ++rank) {
        c.connection_lost(rank, k_t0 + 4s);
    }
    CHECK(c.finished());
    CHECK(c.step_status() == 0);
}

TEST_CASE("coordinator: until workers also waits for the chief", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::chief, Role::worker}), k_t0);
    register_all(c);
    c.exited(2, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::none);
    c.exited(1, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::done);
    CHECK(recipients<protocol::Stop>(c.take_outgoing()) == std::vector<std::uint32_t>{0, 1, 2});
}

TEST_CASE("coordinator: until chief stops workers, ps and evaluator when the chief exits 0",
          "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::chief, Role::worker, Role::worker, Role::evaluator},
                           Until::chief),
                  k_t0);
    register_all(c);
    // A worker exiting 0 early is fine (it is not what we wait for).
    c.exited(2, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::none);
    c.exited(1, exited(0), k_t0 + 1s);
    CHECK(c.verdict() == Verdict::done);
    CHECK(recipients<protocol::Stop>(c.take_outgoing()) ==
          std::vector<std::uint32_t>{0, 1, 2, 3, 4});
    c.exited(3, killed(15), k_t0 + 2s);
    c.exited(0, killed(9), k_t0 + 2s);
    CHECK(c.verdict() == Verdict::done);
    CHECK_FALSE(c.failure());
}

TEST_CASE("coordinator: until chief needs a chief", "[coordinator]") {
    CHECK_THROWS_WITH(Coordinator(settings({Role::ps, Role::worker}, Until::chief), k_t0),
                      R"(until: the plan has no chief: "chief")");
    CHECK_THROWS_WITH(Coordinator(settings({}), k_t0), R"(coordinator: the step has no rank: "0")");
}

TEST_CASE("coordinator: a ps or evaluator exiting 0 before the end is allowed", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::evaluator, Role::worker}), k_t0);
    register_all(c);
    c.exited(0, exited(0), k_t0);
    c.exited(1, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::none);
    c.exited(2, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::done);
}

TEST_CASE("coordinator: a plan without training ranks is done when every rank exited 0",
          "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::ps}), k_t0);
    register_all(c);
    c.exited(0, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::none);
    c.exited(1, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::done);
}

TEST_CASE("coordinator: a failing trainer aborts every rank", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker, Role::worker}), k_t0);
    register_all(c);
    c.exited(1, exited(0), k_t0);
    SECTION("non-zero exit") {
        c.exited(3, exited(3), k_t0 + 1s);
        CHECK(c.verdict() == Verdict::aborted);
        REQUIRE(c.failure());
        CHECK(protocol::describe(*c.failure()) == "rank 3 (worker:2) on n2 exited with status 3");
        CHECK(c.step_status() == 3);
    }
    SECTION("killed by a signal") {
        c.exited(2, killed(9), k_t0 + 1s);
        REQUIRE(c.failure());
        CHECK(protocol::describe(*c.failure()) ==
              "rank 2 (worker:1) on n2 was killed by signal 9 (Killed)");
        CHECK(c.step_status() == 137);
    }
    SECTION("a ps exiting non-zero") {
        c.exited(0, exited(1), k_t0 + 1s);
        REQUIRE(c.failure());
        CHECK(protocol::describe(*c.failure()) == "rank 0 (ps:0) on n1 exited with status 1");
        CHECK(c.step_status() == 1);
    }
    SECTION("a trainer that could not start") {
        c.exited(
            2, {ExitStatus::exited(127), R"(trainer: command not found in PATH: "pyhton")"}, k_t0);
        REQUIRE(c.failure());
        CHECK(c.failure()->cause == protocol::FailureCause::start);
        CHECK(
            protocol::describe(*c.failure()) ==
            R"(rank 2 (worker:1) on n2 could not start its trainer: trainer: command not found in PATH: "pyhton")");
        CHECK(c.step_status() == 127);
    }
    const auto out = c.take_outgoing();
    // Every connected launcher is told, the exited worker included (it waits for the verdict).
    CHECK(recipients<protocol::Abort>(out) == std::vector<std::uint32_t>{0, 1, 2, 3});
    CHECK(std::get<protocol::Abort>(out.front().message).failure.step_status == c.step_status());
    // Later exits are trainers stopped by us: never a second failure.
    const auto first = protocol::describe(*c.failure());
    c.exited(0, killed(15), k_t0 + 2s);
    c.exited(2, exited(1), k_t0 + 2s);
    CHECK(protocol::describe(*c.failure()) == first);
    CHECK(c.take_outgoing().empty());
}

TEST_CASE("coordinator: chosen addresses go to every launcher once all registered",
          "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    c.registered(2, k_t0, "10.1.0.2");
    c.registered(0, k_t0, "10.1.0.1");
    CHECK(c.take_outgoing().empty()); // rank 1 is missing: nobody may start
    c.registered(1, k_t0, "10.1.0.1");
    const auto out = c.take_outgoing();
    // One message for all, made once (one copy per rank took 1.4 GiB at 10,000 ranks).
    REQUIRE(out.size() == 1);
    CHECK(out[0].ranks == std::vector<std::uint32_t>{0, 1, 2});
    const auto& cluster = std::get<protocol::Cluster>(out[0].message);
    CHECK(cluster.addresses ==
          std::map<std::string, std::string, std::less<>>{{"n1", "10.1.0.1"}, {"n2", "10.1.0.2"}});

    // Without addresses (node names) nothing is exchanged.
    Coordinator by_name(settings({Role::worker, Role::worker}), k_t0);
    register_all(by_name);
    CHECK(by_name.take_outgoing().empty());
}

TEST_CASE("coordinator: cluster lists only the bound ports that differ from the plan's",
          "[coordinator]") {
    auto s = settings({Role::ps, Role::worker, Role::worker, Role::worker});
    s.ports = {23000, 23001, 23000, 23001};
    Coordinator c(s, k_t0);
    c.registered(0, k_t0, "10.1.0.1", 23000);
    c.registered(1, k_t0, "10.1.0.1", 23001);
    c.registered(2, k_t0, "10.1.0.2", 23003); // 23000 was held on n2
    c.registered(3, k_t0, "10.1.0.2", 23001);
    const auto out = c.take_outgoing();
    REQUIRE(out.size() == 1);
    CHECK(std::get<protocol::Cluster>(out[0].message).ports ==
          std::vector<std::uint16_t>{0, 0, 23003});

    // Every launcher got its planned port: no list at all.
    Coordinator planned(s, k_t0);
    for (std::uint32_t rank = 0; rank < 4; ++rank) {
        planned.registered(rank, k_t0, "10.1.0.1", s.ports[rank]);
    }
    const auto cluster = std::get<protocol::Cluster>(planned.take_outgoing().at(0).message);
    CHECK(cluster.ports.empty());
}

TEST_CASE("coordinator: registration is checked against the plan", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker}), k_t0);
    CHECK_FALSE(c.admit(0, Role::ps));
    c.registered(0, k_t0);
    CHECK(c.admit(0, Role::ps) == std::string("rank 0 is already registered"));
    CHECK(c.admit(2, Role::worker) == std::string("rank 2 is out of range (the step has 2 ranks)"));
    CHECK(c.admit(1, Role::ps) == std::string("rank 1 is worker in the plan, not ps"));
    CHECK_FALSE(c.admit(1, Role::worker));
    CHECK(c.registered_count() == 1);
    // A rejected newcomer does not disturb the registered rank.
    CHECK(c.verdict() == Verdict::none);
    CHECK(c.take_outgoing().empty());
}

TEST_CASE("coordinator: a rank reporting twice is ignored", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    register_all(c);
    c.exited(1, exited(0), k_t0);
    c.exited(1, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::none); // not counted twice
    c.exited(1, exited(5), k_t0);
    CHECK(c.verdict() == Verdict::none); // not a failure either
    c.exited(2, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::done);
}

TEST_CASE("coordinator: a lost launcher aborts the step", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    register_all(c);
    SECTION("connection closed") {
        c.connection_lost(2, k_t0 + 1s);
        REQUIRE(c.failure());
        CHECK(protocol::describe(*c.failure()) ==
              "rank 2 (worker:1) on n2 launcher lost (connection closed)");
        CHECK(c.step_status() == k_status_lost);
        CHECK(recipients<protocol::Abort>(c.take_outgoing()) == std::vector<std::uint32_t>{0, 1});
    }
    SECTION("no heartbeat") {
        c.heartbeat(0, k_t0 + 5s);
        c.heartbeat(1, k_t0 + 5s);
        c.tick(k_t0 + 10s);
        CHECK(c.verdict() == Verdict::none);
        c.tick(k_t0 + 10s + 1ms);
        REQUIRE(c.failure());
        CHECK(protocol::describe(*c.failure()) ==
              "rank 2 (worker:1) on n2 launcher lost (no heartbeat for 10 s)");
        CHECK(recipients<protocol::Abort>(c.take_outgoing()) ==
              std::vector<std::uint32_t>{0, 1, 2});
    }
    SECTION("after its exit report, a closed connection is fine") {
        c.exited(1, exited(0), k_t0);
        c.connection_lost(1, k_t0 + 1s);
        c.tick(k_t0 + 30s); // and silence too
        CHECK(c.verdict() == Verdict::aborted);
        CHECK(c.failure()->rank != 1);
    }
}

TEST_CASE("coordinator: ranks that do not register abort the step", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker, Role::worker}), k_t0);
    c.registered(0, k_t0 + 1s);
    c.registered(1, k_t0 + 1s);
    c.heartbeat(0, k_t0 + 55s);
    c.heartbeat(1, k_t0 + 55s);
    c.tick(k_t0 + 59s);
    CHECK(c.verdict() == Verdict::none);
    c.tick(k_t0 + 60s);
    REQUIRE(c.failure());
    CHECK(protocol::describe(*c.failure()) == "ranks 2-3 on n2 did not register within 60 s");
    CHECK(c.step_status() == k_status_unregistered);
    CHECK(recipients<protocol::Abort>(c.take_outgoing()) == std::vector<std::uint32_t>{0, 1});
    SECTION("a latecomer gets the verdict at once") {
        c.registered(3, k_t0 + 61s);
        const auto out = c.take_outgoing();
        CHECK(recipients<protocol::Abort>(out) == std::vector<std::uint32_t>{3});
    }
}

TEST_CASE("coordinator: the default registration timeout grows with the step's nodes",
          "[coordinator]") {
    // 4,000 ranks on 2,000 nodes (two a node), connect_timeout not set: 60 s + 2,000 x 20 ms.
    std::vector<Role> roles(4000, Role::worker);
    roles[0] = Role::ps;
    CoordinatorSettings s = settings(roles);
    s.run.connect_timeout.reset();
    Coordinator c(s, k_t0);
    for (std::uint32_t rank = 0; rank + 1 < roles.size(); ++rank) {
        c.registered(rank, k_t0 + 1s);
        c.heartbeat(rank, k_t0 + 95s);
    }
    c.tick(k_t0 + 99s);
    CHECK(c.verdict() == Verdict::none);
    c.tick(k_t0 + 100s);
    REQUIRE(c.failure());
    CHECK(protocol::describe(*c.failure()) ==
          "rank 3999 (worker:3998) on n2000 did not register within 100 s");
}

TEST_CASE("coordinator: the registration timeout names every missing rank and host, compactly",
          "[coordinator]") {
    using Row = std::tuple<std::vector<std::uint32_t>, std::string>;
    // Ranks 0-9 on n1..n5, two per host; the registered ones, then the line.
    const auto [present, line] = GENERATE(table<std::vector<std::uint32_t>, std::string>({
        Row{{0, 1, 2, 6, 7, 8}, "ranks 3-5,9 on n[2-3,5] did not register within 60 s"},
        Row{{0, 1, 2, 3, 4, 5, 6, 7, 8}, "rank 9 (worker:8) on n5 did not register within 60 s"},
        Row{{0}, "ranks 1-9 on n[1-5] did not register within 60 s"},
        Row{{1, 3, 5, 7, 9}, "ranks 0,2,4,6,8 on n[1-5] did not register within 60 s"},
    }));
    std::vector<Role> roles(10, Role::worker);
    roles[0] = Role::ps;
    Coordinator c(settings(roles), k_t0);
    for (const std::uint32_t rank : present) {
        c.registered(rank, k_t0 + 1s);
        c.heartbeat(rank, k_t0 + 55s);
    }
    c.tick(k_t0 + 60s);
    REQUIRE(c.failure());
    CHECK(protocol::describe(*c.failure()) == line);
    CHECK(c.step_status() == k_status_unregistered);
    // The line survives the wire.
    const auto abort = protocol::encode_payload(protocol::Abort{*c.failure()});
    const auto decoded = std::get<protocol::Abort>(protocol::decode_payload(abort));
    CHECK(protocol::describe(decoded.failure) == line);
}

TEST_CASE("coordinator: a stuck rank aborts the step naming it and its silence",
          "[coordinator][stall]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    register_all(c);
    c.stalled(2, 300s, k_t0 + 301s);
    REQUIRE(c.failure());
    CHECK(c.verdict() == Verdict::aborted);
    CHECK(protocol::describe(*c.failure()) ==
          "rank 2 (worker:1) on n2 is stuck: no progress for 300 s");
    CHECK(c.step_status() == k_status_stalled);
    CHECK(recipients<protocol::Abort>(c.take_outgoing()) == std::vector<std::uint32_t>{0, 1, 2});
    SECTION("its exit afterwards is no failure of its own; a second stall changes nothing") {
        c.exited(2, killed(6), k_t0 + 302s);
        c.stalled(1, 300s, k_t0 + 303s);
        CHECK(protocol::describe(*c.failure()) ==
              "rank 2 (worker:1) on n2 is stuck: no progress for 300 s");
    }
}

TEST_CASE("coordinator: an interrupted launcher stops every rank", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    register_all(c);
    c.interrupted(2, 15, k_t0);
    CHECK(c.verdict() == Verdict::interrupted);
    const auto out = c.take_outgoing();
    CHECK(recipients<protocol::Stop>(out) == std::vector<std::uint32_t>{0, 1, 2});
    const auto& stop = std::get<protocol::Stop>(out.front().message);
    CHECK(stop.reason == protocol::StopReason::signal);
    CHECK(stop.rank == 2);
    CHECK(stop.signal == 15);
    CHECK_FALSE(stop.whole_step);
    CHECK(c.step_status() == 143);
    c.exited(1, killed(15), k_t0 + 1s);
    c.interrupted(0, 15, k_t0 + 1s);
    CHECK(c.verdict() == Verdict::interrupted);
    CHECK_FALSE(c.failure());
    CHECK(c.take_outgoing().empty());
}

TEST_CASE("coordinator: a signal from slurmstepd to the whole step is told in the stop",
          "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    register_all(c);
    c.interrupted(1, 15, k_t0, true);
    const auto out = c.take_outgoing();
    REQUIRE(out.size() == 1); // one stop, addressed to every rank
    CHECK(out[0].ranks == std::vector<std::uint32_t>{0, 1, 2});
    const auto& stop = std::get<protocol::Stop>(out.front().message);
    CHECK(stop.whole_step);
    CHECK(stop.signal == 15);
}

TEST_CASE("coordinator: finished when every launcher left, or after the linger time",
          "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker}), k_t0);
    register_all(c);
    c.exited(1, exited(0), k_t0);
    CHECK(c.verdict() == Verdict::done);
    c.connection_lost(1, k_t0 + 1s);
    CHECK_FALSE(c.finished());
    c.heartbeat(0, k_t0 + 14s);
    c.tick(k_t0 + 15s);
    CHECK(c.finished()); // the ps launcher never left: linger (15 s) is over
}

TEST_CASE("coordinator: a launcher lost by its heartbeats does not hold the coordinator",
          "[coordinator]") {
    // Rank 2's launcher is stopped (SIGSTOP): its connection stays open, it never says goodbye.
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    register_all(c);
    c.heartbeat(0, k_t0 + 8s);
    c.heartbeat(1, k_t0 + 8s);
    c.tick(k_t0 + 10001ms);
    REQUIRE(c.verdict() == Verdict::aborted);
    REQUIRE(c.failure());
    CHECK(c.failure()->rank == 2);
    CHECK(c.failure()->cause == protocol::FailureCause::lost);
    // The lost rank still gets its abort (it may wake up).
    CHECK(recipients<protocol::Abort>(c.take_outgoing()) == std::vector<std::uint32_t>{0, 1, 2});
    c.exited(0, killed(15), k_t0 + 10100ms);
    c.connection_lost(0, k_t0 + 10200ms);
    c.exited(1, killed(15), k_t0 + 10100ms);
    c.connection_lost(1, k_t0 + 10300ms);
    // Everyone else left: finished now, not `linger` (15 s) after the verdict.
    CHECK(c.finished());
}

TEST_CASE("coordinator: after the verdict a silent launcher is not waited for", "[coordinator]") {
    Coordinator c(settings({Role::ps, Role::worker}), k_t0);
    register_all(c);
    c.exited(1, exited(0), k_t0 + 1s);
    REQUIRE(c.verdict() == Verdict::done);
    c.connection_lost(1, k_t0 + 1s);
    c.heartbeat(0, k_t0 + 2s);
    c.tick(k_t0 + 12s);
    CHECK_FALSE(c.finished()); // the ps launcher spoke 10 s ago: it may be stopping its trainer
    c.tick(k_t0 + 12001ms);
    CHECK(c.finished()); // silent for longer than the heartbeat timeout: gone
}

TEST_CASE("coordinator: after an early failure, ranks still to come are waited for",
          "[coordinator]") {
    // Rank 0 fails before the others even connected: they must learn the verdict.
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    c.registered(0, k_t0);
    c.exited(0, {ExitStatus::exited(127), "trainer: command not found"}, k_t0);
    REQUIRE(c.verdict() == Verdict::aborted);
    c.connection_lost(0, k_t0 + 1ms);
    CHECK_FALSE(c.finished());
    c.registered(1, k_t0 + 2ms);
    c.registered(2, k_t0 + 2ms);
    const auto out = c.take_outgoing();
    CHECK(recipients<protocol::Abort>(out) == std::vector<std::uint32_t>{0, 1, 2});
    c.connection_lost(1, k_t0 + 3ms);
    CHECK_FALSE(c.finished());
    c.connection_lost(2, k_t0 + 3ms);
    CHECK(c.finished());
}

namespace {

/// Run `body` in a child process with RLIMIT_NOFILE set to (soft, hard); its exit status.
int with_nofile_limit(rlim_t soft, rlim_t hard, const std::function<int()>& body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        const rlimit limit{soft, hard};
        if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
            ::_exit(90);
        }
        int code = 91;
        try {
            code = body();
        } catch (...) {
            code = 92;
        }
        ::_exit(code);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 99;
}

} // namespace

TEST_CASE("coordinator: the descriptor limit is raised, or named when it is too low",
          "[coordinator]") {
    CHECK(with_nofile_limit(100, 2000, [] {
              ensure_descriptor_limit(1064, "1000 launchers");
              rlimit now{};
              ::getrlimit(RLIMIT_NOFILE, &now);
              return now.rlim_cur == 2000 ? 0 : 1;
          }) == 0);
    CHECK(with_nofile_limit(100, 500, [] {
              try {
                  boost::asio::io_context io;
                  CoordinatorSettings s;
                  s.ranks.assign(1000, Member{Role::worker, 0, "n1"});
                  const auto auth = protocol::Authenticator::create(
                      {protocol::AuthMethod::secret, std::string(64, 'a'), "/nonexistent"});
                  CoordinatorServer server(io, s, auth, protocol::StepId{1, 0}, "127.0.0.1", 0);
                  return 1;
              } catch (const Error& e) {
                  const bool ok =
                      e.code() == Errc::io && std::string(e.what()) ==
                                                  "RLIMIT_NOFILE: hard limit 500 is below the 1064 "
                                                  "descriptors needed for 1000 launchers";
                  return ok ? 0 : 2;
              }
          }) == 0);
}

// --- the server, over real sockets -------------------------------------------------------------

namespace {

const std::string k_hex_secret = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";
constexpr std::uint64_t k_job = 4242;

/// A blocking client on 127.0.0.1 with a receive timeout.
class Client {
  public:
    explicit Client(std::uint16_t port) : m_port(port) {
        m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(port);
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::connect(m_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    }
    ~Client() { ::close(m_fd); }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    void send_raw(const std::string& bytes) const {
        // Errors (the server may have closed already) are fine here.
        [[maybe_unused]] const auto n = ::send(m_fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }
    /// Sealed after the welcome, as a launcher's.
    void send(const protocol::Message& message) {
        send_raw(m_channel
                     ? m_channel->seal(protocol::encode_payload(message), protocol::k_max_frame)
                     : protocol::encode_frame(message));
    }

    /// The next message, or nullopt on EOF/timeout.
    std::optional<protocol::Message> receive(std::chrono::milliseconds timeout = 5s) {
        const auto deadline = Clock::now() + timeout;
        for (;;) {
            if (auto payload = m_decoder.next()) {
                if (m_channel) {
                    payload = m_channel->open(std::move(*payload));
                }
                return protocol::decode_payload(*payload);
            }
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            if (left.count() <= 0) {
                return std::nullopt;
            }
            pollfd p{m_fd, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
                return std::nullopt;
            }
            std::array<char, 4096> buffer{};
            const ssize_t n = ::recv(m_fd, buffer.data(), buffer.size(), 0);
            if (n <= 0) {
                m_closed = true;
                return std::nullopt;
            }
            m_decoder.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
        }
    }

    /// True when the server closed the connection within `timeout` (messages are skipped).
    bool closed_within(std::chrono::milliseconds timeout) {
        const auto deadline = Clock::now() + timeout;
        while (Clock::now() < deadline && !m_closed) {
            (void)receive(
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
        }
        return m_closed;
    }

    /// Read the challenge and register as `rank`.
    std::optional<protocol::Message> hello(std::uint32_t rank,
                                           Role role,
                                           const std::string& secret_hex = k_hex_secret,
                                           std::uint64_t step = 0) {
        const auto challenge = receive();
        REQUIRE(challenge);
        const auto& nonce = std::get<protocol::Challenge>(*challenge).nonce;
        const auto auth = protocol::Authenticator::create(
            {protocol::AuthMethod::secret, secret_hex, "/nonexistent/munge.socket"});
        protocol::Hello h;
        h.job = k_job;
        h.step = step;
        h.rank = rank;
        h.role = role;
        h.host = "localhost";
        h.pid = ::getpid();
        h.auth = protocol::AuthMethod::secret;
        h.nonce = std::string(64, 'a');
        h.credential =
            auth.prove(nonce, protocol::StepId{k_job, step}, rank, protocol::tcp_endpoint(m_port));
        send(h);
        auto reply = receive();
        if (reply && std::holds_alternative<protocol::Welcome>(*reply)) {
            m_channel.emplace(auth.session_keys(protocol::AuthMethod::secret,
                                                {},
                                                {},
                                                nonce,
                                                h.nonce,
                                                protocol::StepId{k_job, step},
                                                rank,
                                                protocol::tcp_endpoint(m_port)),
                              protocol::End::launcher);
            m_decoder.set_limit(protocol::k_max_trusted_frame + protocol::k_tag_size);
        }
        return reply;
    }

  private:
    std::uint16_t m_port = 0; ///< dialled: what the proof binds
    int m_fd = -1;
    protocol::FrameDecoder m_decoder;
    std::optional<protocol::Channel> m_channel; ///< from the welcome on
    bool m_closed = false;
};

} // namespace

TEST_CASE("coordinator: hostile clients cannot crash or stall the coordinator", "[coordinator]") {
    boost::asio::io_context io;
    CoordinatorSettings s = settings({Role::ps, Role::worker});
    s.hello_timeout = 300ms;
    s.run.heartbeat_timeout = 5s;
    s.linger = 2s;
    const auto auth = protocol::Authenticator::create(
        {protocol::AuthMethod::secret, k_hex_secret, "/nonexistent/munge.socket"});
    CoordinatorServer server(io, s, auth, protocol::StepId{k_job, 0}, "127.0.0.1", 0);
    const std::uint16_t port = server.port();
    REQUIRE(port != 0);
    std::atomic<bool> finished{false};
    server.on_finished([&] { finished = true; });
    std::thread runner([&] { io.run(); });

    // Idle connections that never say anything, opened first and kept open throughout.
    std::vector<std::unique_ptr<Client>> idle;
    idle.reserve(50);
    for (int i = 0; i < 50; ++i) {
        idle.push_back(std::make_unique<Client>(port));
    }
    {
        Client garbage(port);
        garbage.send_raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        CHECK(garbage.closed_within(5s));
    }
    {
        Client huge(port);
        huge.send_raw(std::string("\xff\xff\xff\xff", 4) + std::string(1000, 'x'));
        CHECK(huge.closed_within(5s));
    }
    {
        Client json(port);
        json.send_raw(protocol::encode_frame(protocol::Heartbeat{})); // not a hello
        CHECK(json.closed_within(5s));
    }
    {
        Client wrong_version(port);
        const std::string payload = R"({"v":5,"type":"hello"})";
        wrong_version.send_raw(std::string("\0\0\0", 3) + static_cast<char>(payload.size()) +
                               payload);
        CHECK(wrong_version.closed_within(5s));
    }
    {
        Client truncated(port);
        truncated.send_raw(std::string("\0\0\0\x40{\"v\":1", 10)); // then nothing: hello timeout
        CHECK(truncated.closed_within(5s));
    }
    {
        Client bad_secret(port);
        const auto reply = bad_secret.hello(1, Role::worker, std::string(64, '7'));
        REQUIRE(reply);
        CHECK(std::get<protocol::Reject>(*reply) ==
              protocol::Reject{protocol::RejectCode::refused, "bad secret proof"});
        CHECK(bad_secret.closed_within(5s));
    }
    {
        // A launcher of step 1 of the same job, sharing the control port: a proof for its own
        // step, rejected with a code that sends it to the next candidate.
        Client other_step(port);
        const auto reply = other_step.hello(1, Role::worker, k_hex_secret, 1);
        REQUIRE(reply);
        const auto& reject = std::get<protocol::Reject>(*reply);
        CHECK(reject.code == protocol::RejectCode::wrong_step);
        CHECK(reject.reason == fmt::format("wrong step {}.1 (this is step {}.0)", k_job, k_job));
        CHECK(other_step.closed_within(5s));
    }
    {
        Client out_of_range(port);
        const auto reply = out_of_range.hello(7, Role::worker);
        REQUIRE(reply);
        CHECK(std::get<protocol::Reject>(*reply).reason ==
              "rank 7 is out of range (the step has 2 ranks)");
    }
    {
        Client wrong_role(port);
        const auto reply = wrong_role.hello(0, Role::worker);
        REQUIRE(reply);
        CHECK(std::get<protocol::Reject>(*reply).reason == "rank 0 is ps in the plan, not worker");
    }

    // The real launchers register and finish the step normally.
    auto ps = std::make_unique<Client>(port);
    auto worker = std::make_unique<Client>(port);
    auto welcome = ps->hello(0, Role::ps);
    REQUIRE(welcome);
    CHECK(std::get<protocol::Welcome>(*welcome).ranks == 2);
    welcome = worker->hello(1, Role::worker);
    REQUIRE(welcome);
    CHECK(std::holds_alternative<protocol::Welcome>(*welcome));
    {
        Client duplicate(port);
        const auto reply = duplicate.hello(1, Role::worker);
        REQUIRE(reply);
        CHECK(std::get<protocol::Reject>(*reply).reason == "rank 1 is already registered");
    }
    worker->send(protocol::Heartbeat{});
    const auto echo = worker->receive();
    REQUIRE(echo);
    CHECK(std::holds_alternative<protocol::Heartbeat>(*echo));
    worker->send(protocol::Exit{ExitStatus::exited(0), {}});
    const auto stop = ps->receive();
    REQUIRE(stop);
    CHECK(std::get<protocol::Stop>(*stop).reason == protocol::StopReason::done);
    const auto worker_stop = worker->receive();
    REQUIRE(worker_stop);
    CHECK(std::holds_alternative<protocol::Stop>(*worker_stop));
    ps->send(protocol::Exit{ExitStatus::signaled(15), {}});
    CHECK_FALSE(finished); // the launchers are still connected

    // The launchers leave; the idle intruders do not count: the coordinator finishes.
    ps.reset();
    worker.reset();
    const auto deadline = Clock::now() + 10s;
    while (!finished && Clock::now() < deadline) {
        std::this_thread::sleep_for(10ms);
    }
    CHECK(finished);
    idle.clear();
    boost::asio::post(io, [&] {
        server.close();
        io.stop();
    });
    runner.join();
    CHECK(server.state().verdict() == Verdict::done);
    CHECK_FALSE(server.state().failure());
}

// --- restarts
// -------------------------------------------------------------------------------------

namespace {

/// settings() with `per_rank` restarts per rank (and `total` in the step) for `roles`.
CoordinatorSettings restart_settings(const std::vector<Role>& plan,
                                     std::uint32_t per_rank,
                                     std::optional<std::uint32_t> total = std::nullopt,
                                     std::vector<Role> roles = {Role::worker}) {
    CoordinatorSettings s = settings(plan);
    s.run.restarts.per_rank = per_rank;
    s.run.restarts.total = total;
    s.run.restarts.roles = std::move(roles);
    return s;
}

/// The `restart` sent to `rank` in `out`, as `count/limit`; empty when none.
std::string restart_to(const std::vector<Outgoing>& out, std::uint32_t rank) {
    for (const auto& o : out) {
        if (const auto* restart = std::get_if<protocol::Restart>(&o.message);
            restart != nullptr && o.ranks == std::vector<std::uint32_t>{rank}) {
            return fmt::format("{}/{}", restart->count, restart->limit);
        }
    }
    return {};
}

} // namespace

TEST_CASE("coordinator: a failed worker with restarts left is restarted, not a failure",
          "[coordinator][restart]") {
    Coordinator c(restart_settings({Role::ps, Role::worker, Role::worker}, 2), k_t0);
    register_all(c);
    c.exited(2, exited(3), k_t0 + 1s);
    CHECK(c.verdict() == Verdict::none);
    auto out = c.take_outgoing();
    REQUIRE(out.size() == 1); // nobody else hears of it: ps and the other worker keep running
    CHECK(restart_to(out, 2) == "1/2");
    CHECK(c.restarts() == 1);
    SECTION("killed by a signal: restarted too; its count goes on") {
        c.exited(2, killed(11), k_t0 + 2s);
        CHECK(restart_to(c.take_outgoing(), 2) == "2/2");
    }
    SECTION("the restarted rank is training again: the work is done when it exits 0") {
        c.exited(1, exited(0), k_t0 + 2s);
        CHECK(c.verdict() == Verdict::none);
        c.exited(2, exited(0), k_t0 + 3s);
        CHECK(c.verdict() == Verdict::done);
        CHECK(c.step_status() == 0);
        CHECK(recipients<protocol::Stop>(c.take_outgoing()) == std::vector<std::uint32_t>{0, 1, 2});
    }
    SECTION("its launcher is watched again: falling silent now is a loss") {
        c.heartbeat(0, k_t0 + 9s);
        c.heartbeat(1, k_t0 + 9s);
        c.tick(k_t0 + 12s);
        REQUIRE(c.failure());
        CHECK(c.failure()->rank == 2);
        CHECK(c.failure()->cause == protocol::FailureCause::lost);
    }
}

TEST_CASE("coordinator: past its restart budget a worker aborts the step, saying so",
          "[coordinator][restart]") {
    Coordinator c(restart_settings({Role::ps, Role::worker, Role::worker}, 1), k_t0);
    register_all(c);
    c.exited(2, exited(3), k_t0 + 1s);
    CHECK(restart_to(c.take_outgoing(), 2) == "1/1");
    c.exited(2, exited(4), k_t0 + 2s);
    CHECK(c.verdict() == Verdict::aborted);
    REQUIRE(c.failure());
    CHECK(protocol::describe(*c.failure()) ==
          "rank 2 (worker:1) on n2 exited with status 4 (its restart budget is spent: 1 of 1 "
          "restarts used)");
    CHECK(c.step_status() == 4);
    const auto out = c.take_outgoing();
    CHECK(recipients<protocol::Abort>(out) == std::vector<std::uint32_t>{0, 1, 2});
    CHECK(restart_to(out, 2).empty());
}

TEST_CASE("coordinator: the step's total restart budget is shared by every rank",
          "[coordinator][restart]") {
    Coordinator c(restart_settings({Role::ps, Role::worker, Role::worker, Role::worker}, 2, 2),
                  k_t0);
    register_all(c);
    c.exited(1, exited(3), k_t0 + 1s);
    CHECK(restart_to(c.take_outgoing(), 1) == "1/2");
    c.exited(2, exited(3), k_t0 + 2s);
    CHECK(restart_to(c.take_outgoing(), 2) == "1/2");
    c.exited(3, exited(5), k_t0 + 3s);
    REQUIRE(c.failure());
    CHECK(protocol::describe(*c.failure()) ==
          "rank 3 (worker:2) on n2 exited with status 5 (the step's restart budget is spent: 2 "
          "of 2 restarts used)");
    CHECK(c.step_status() == 5);
}

TEST_CASE("coordinator: the default total is max restarts for each restartable rank",
          "[coordinator][restart]") {
    // Two workers, 1 restart each: 2 in all, whoever uses them.
    Coordinator c(restart_settings({Role::ps, Role::worker, Role::worker}, 1), k_t0);
    register_all(c);
    c.exited(1, exited(3), k_t0 + 1s);
    c.exited(2, exited(3), k_t0 + 2s);
    const auto out = c.take_outgoing();
    CHECK(restart_to(out, 1) == "1/1");
    CHECK(restart_to(out, 2) == "1/1");
    CHECK(c.verdict() == Verdict::none);
    CHECK(c.restarts() == 2);
}

TEST_CASE("coordinator: only restart roles are restarted, never what did not run by itself",
          "[coordinator][restart]") {
    Coordinator c(restart_settings({Role::ps, Role::worker, Role::chief, Role::evaluator},
                                   3,
                                   std::nullopt,
                                   {Role::worker, Role::evaluator}),
                  k_t0);
    register_all(c);
    SECTION("a ps failure aborts: its state is gone") {
        c.exited(0, exited(1), k_t0 + 1s);
        REQUIRE(c.failure());
        CHECK(protocol::describe(*c.failure()) == "rank 0 (ps:0) on n1 exited with status 1");
    }
    SECTION("a chief is not in the restart roles here") {
        c.exited(2, exited(2), k_t0 + 1s);
        REQUIRE(c.failure());
        CHECK(c.failure()->rank == 2);
        CHECK(c.failure()->detail.empty());
    }
    SECTION("an evaluator is") {
        c.exited(3, exited(2), k_t0 + 1s);
        CHECK(restart_to(c.take_outgoing(), 3) == "1/3");
        CHECK_FALSE(c.failure());
    }
    SECTION("a trainer that could not start would fail again the same way") {
        c.exited(1, {ExitStatus::exited(127), "trainer: command not found"}, k_t0 + 1s);
        REQUIRE(c.failure());
        CHECK(c.failure()->cause == protocol::FailureCause::start);
    }
    SECTION("a stuck worker") {
        c.stalled(1, 300s, k_t0 + 301s);
        REQUIRE(c.failure());
        CHECK(c.failure()->cause == protocol::FailureCause::stalled);
    }
    SECTION("a lost launcher") {
        c.connection_lost(1, k_t0 + 1s);
        REQUIRE(c.failure());
        CHECK(c.failure()->cause == protocol::FailureCause::lost);
    }
    SECTION("a failure after the verdict: that trainer was stopped by us") {
        c.interrupted(0, SIGTERM, k_t0 + 1s);
        (void)c.take_outgoing();
        c.exited(1, exited(3), k_t0 + 2s);
        CHECK(restart_to(c.take_outgoing(), 1).empty());
        CHECK(c.verdict() == Verdict::interrupted);
    }
    CHECK(c.restarts() <= 1);
}

TEST_CASE("coordinator: restarts off by default", "[coordinator][restart]") {
    Coordinator c(settings({Role::ps, Role::worker}), k_t0);
    register_all(c);
    c.exited(1, exited(3), k_t0 + 1s);
    REQUIRE(c.failure());
    CHECK(protocol::describe(*c.failure()) == "rank 1 (worker:0) on n1 exited with status 3");
}

// --- the reachability probe
// ----------------------------------------------------------------------------

namespace {

protocol::Probed unreached(const std::vector<std::pair<std::uint32_t, std::string>>& peers) {
    protocol::Probed probed;
    for (const auto& [rank, address] : peers) {
        probed.failures.push_back({rank, address, "Connection timed out"});
    }
    return probed;
}

} // namespace

TEST_CASE("coordinator: probe: go once every rank reached its peers", "[coordinator][probe]") {
    Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
    register_all(c);
    (void)c.take_outgoing();
    c.probed(1, {}, k_t0 + 1s);
    c.probed(0, {}, k_t0 + 1s);
    c.probed(0, unreached({{2, "n2:23002"}}), k_t0 + 1s); // a second report: ignored
    CHECK(c.take_outgoing().empty()); // rank 2 may still be probing: every listener stays open
    c.probed(2, {}, k_t0 + 2s);
    CHECK(recipients<protocol::Go>(c.take_outgoing()) == std::vector<std::uint32_t>{0, 1, 2});
    CHECK(c.verdict() == Verdict::none);
}

TEST_CASE("coordinator: probe: a node cut off is named, whichever report came first",
          "[coordinator][probe]") {
    // n2 (rank 2) cannot be reached by anyone, nor reach anyone.
    const std::string line = "rank 0 (ps:0) on n1 cannot reach rank 2 (worker:1) at "
                             "10.1.0.2:23002: Connection timed out";
    for (const auto& order : std::vector<std::vector<std::uint32_t>>{{2, 0, 1}, {1, 2, 0}}) {
        Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
        register_all(c);
        (void)c.take_outgoing();
        const std::map<std::uint32_t, protocol::Probed> reports{
            {0, unreached({{2, "10.1.0.2:23002"}})},
            {1, unreached({{2, "10.1.0.2:23002"}})},
            {2, unreached({{0, "10.1.0.1:23000"}, {1, "10.1.0.1:23001"}})}};
        for (const std::uint32_t rank : order) {
            CHECK(c.verdict() == Verdict::none);
            c.probed(rank, reports.at(rank), k_t0 + 30s);
        }
        REQUIRE(c.verdict() == Verdict::aborted);
        CHECK(c.failure()->cause == protocol::FailureCause::unreachable);
        CHECK(protocol::describe(*c.failure()) == line);
        CHECK(c.step_status() == k_status_unreachable);
        const auto out = c.take_outgoing();
        CHECK(recipients<protocol::Abort>(out) == std::vector<std::uint32_t>{0, 1, 2});
        CHECK(recipients<protocol::Go>(out).empty());
    }
    SECTION("one pair only: its reporter names it") {
        Coordinator c(settings({Role::ps, Role::worker, Role::worker}), k_t0);
        register_all(c);
        c.probed(0, {}, k_t0);
        c.probed(1, {}, k_t0);
        c.probed(2, unreached({{0, "[fd78::1]:23000"}}), k_t0);
        CHECK(protocol::describe(*c.failure()) ==
              "rank 2 (worker:1) on n2 cannot reach rank 0 (ps:0) at [fd78::1]:23000: Connection "
              "timed out");
    }
    SECTION("a report after another verdict changes nothing") {
        Coordinator c(settings({Role::ps, Role::worker}), k_t0);
        register_all(c);
        c.exited(1, exited(3), k_t0);
        c.probed(0, unreached({{1, "n1:23001"}}), k_t0);
        c.probed(1, {}, k_t0);
        CHECK(c.failure()->cause == protocol::FailureCause::trainer);
    }
}

// --- the health checks (preflight), behind the probe's barrier
// ----------------------------------------------------------------------------

namespace {

protocol::Probed sick(std::string check, std::string detail) {
    protocol::Probed probed;
    probed.preflight = protocol::PreflightFailure{std::move(check), std::move(detail)};
    return probed;
}

CoordinatorSettings preflight_settings(Probe probe) {
    CoordinatorSettings s = settings({Role::ps, Role::worker, Role::worker, Role::worker});
    s.run.preflight = true;
    s.run.probe = probe;
    return s;
}

} // namespace

TEST_CASE("coordinator: preflight: a failed check aborts before any trainer starts, naming the "
          "lowest sick rank's node, whichever report came first",
          "[coordinator][preflight]") {
    // Ranks 0-1 on n1, 2-3 on n2 (the node leaders check: 0 and 2). n2 failed its command;
    // with the probe, its peers also could not reach it: the check is named, not the pair.
    using Reports = std::map<std::uint32_t, protocol::Probed>;
    // clang-format off
    const auto row = GENERATE(table<std::string, Probe, Reports, std::string>({
        {"one sick node", Probe::off,
         Reports{{0, {}}, {1, {}}, {2, sick("command", "\"test $(hostname) != n2\" exited with status 1")}, {3, {}}},
         "preflight failed on n2 (rank 2, worker:1): command: \"test $(hostname) != n2\" exited with status 1"},
        {"with the probe: the check before the unreachable pair", Probe::on,
         Reports{{0, unreached({{2, "n2:23002"}})}, {1, unreached({{2, "n2:23002"}})},
                 {2, sick("command", "\"test $(hostname) != n2\" exited with status 1")}, {3, {}}},
         "preflight failed on n2 (rank 2, worker:1): command: \"test $(hostname) != n2\" exited with status 1"},
        {"two sick nodes: the lowest rank", Probe::off,
         Reports{{0, sick("tmpdir", "\"/tmp\" has 12 MiB free (at least 1024 MiB needed)")}, {1, {}},
                 {2, sick("command", "\"test $(hostname) != n2\" exited with status 1")}, {3, {}}},
         "preflight failed on n1 (rank 0, ps:0): tmpdir: \"/tmp\" has 12 MiB free (at least 1024 MiB needed)"},
    }));
    // clang-format on
    const auto& [name, probe, reports, line] = row;
    INFO(name);
    for (const auto& order : std::vector<std::vector<std::uint32_t>>{{2, 0, 1, 3}, {3, 1, 0, 2}}) {
        Coordinator c(preflight_settings(probe), k_t0);
        register_all(c);
        (void)c.take_outgoing();
        for (const std::uint32_t rank : order) {
            CHECK(c.verdict() == Verdict::none); // every report first: the same line each time
            c.probed(rank, reports.at(rank), k_t0 + 1s);
        }
        REQUIRE(c.verdict() == Verdict::aborted);
        CHECK(c.failure()->cause == protocol::FailureCause::preflight);
        CHECK(protocol::describe(*c.failure()) == line);
        CHECK(c.step_status() == k_status_preflight);
        const auto out = c.take_outgoing();
        CHECK(recipients<protocol::Abort>(out) == std::vector<std::uint32_t>{0, 1, 2, 3});
        CHECK(recipients<protocol::Go>(out).empty());
    }
}

TEST_CASE("coordinator: preflight: go once every node passed", "[coordinator][preflight]") {
    for (const Probe probe : {Probe::off, Probe::on}) {
        Coordinator c(preflight_settings(probe), k_t0);
        register_all(c);
        CHECK(recipients<protocol::Go>(c.take_outgoing()).empty());
        for (std::uint32_t rank = 0; rank < 4; ++rank) {
            CHECK(c.take_outgoing().empty());
            c.probed(rank, {}, k_t0 + 1s);
        }
        CHECK(recipients<protocol::Go>(c.take_outgoing()) ==
              std::vector<std::uint32_t>{0, 1, 2, 3});
        CHECK(c.verdict() == Verdict::none);
    }
}

TEST_CASE("coordinator: a launcher lost by silence says how many nodes still answer",
          "[coordinator][requeue]") {
    // n1 {0, 1}, n2 {2, 3}, n3 {4, 5}; n3's launchers fall silent first (heard at 0 s).
    // When n2's were heard within half the heartbeat timeout (5 s), rank 0 holds 2 of the 3
    // nodes: a strict majority; heard 6 s before, n2 is counted with the silent side.
    const auto [n2_heard, answering] = GENERATE(table<Millis, std::uint32_t>({
        {Millis{8000}, 2},
        {Millis{4000}, 1},
    }));
    Coordinator c(
        settings(
            {Role::worker, Role::worker, Role::worker, Role::worker, Role::worker, Role::worker}),
        k_t0);
    register_all(c);
    c.heartbeat(0, k_t0 + 8s);
    c.heartbeat(1, k_t0 + 8s);
    c.heartbeat(2, k_t0 + n2_heard);
    c.heartbeat(3, k_t0 + n2_heard);
    c.tick(k_t0 + 10001ms);
    REQUIRE(c.failure());
    CHECK(c.failure()->rank == 4);
    CHECK(c.failure()->cause == protocol::FailureCause::lost);
    CHECK(c.failure()->answering == answering);
}

TEST_CASE("coordinator: a closed connection is a fact: no count of the nodes that answer",
          "[coordinator][requeue]") {
    Coordinator c(settings({Role::worker, Role::worker, Role::worker}), k_t0);
    register_all(c);
    c.connection_lost(2, k_t0 + 1s, "connection closed");
    REQUIRE(c.failure());
    CHECK(c.failure()->cause == protocol::FailureCause::lost);
    CHECK(c.failure()->answering == 0);
}
