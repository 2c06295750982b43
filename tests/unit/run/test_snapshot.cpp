// SPDX-License-Identifier: MIT
// What a watcher is sent (tfslurm/run/snapshot.hpp): the snapshot of a real coordinator, its
// exact payload, the payload read back, and every way a payload is refused.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/snapshot.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <tuple>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

/// ps 0 on n1, worker 0 on n2, worker 1 on n3; a stall timeout of 60 s, one restart per worker.
CoordinatorSettings snap_settings() {
    CoordinatorSettings s;
    s.ranks = {{Role::ps, 0, "n1"}, {Role::worker, 0, "n2"}, {Role::worker, 1, "n3"}};
    s.run.heartbeat_timeout = 10s;
    s.run.connect_timeout = 60s;
    s.run.stall_timeout = 60s;
    s.run.restarts.per_rank = 1;
    s.run.restarts.roles = {Role::worker};
    s.run_id = "c-94-0";
    return s;
}

/// The snapshot of the header's example.
Snapshot snap_example() {
    Snapshot s;
    s.job = 94;
    s.step = 0;
    s.run_id = "c-94-0";
    s.elapsed = Millis{8000};
    s.nodes = 2;
    s.verdict = Verdict::none;
    s.failure = "";
    s.restarts = 1;
    s.stall_timeout = std::nullopt;
    s.ranks = {
        SnapshotRank{0,
                     Role::ps,
                     0,
                     "n1",
                     RankActivity::running,
                     0,
                     std::nullopt,
                     protocol::Usage{120, 31457280, {}},
                     2,
                     std::nullopt},
        SnapshotRank{1,
                     Role::worker,
                     0,
                     "n2",
                     RankActivity::restarting,
                     1,
                     std::nullopt,
                     std::nullopt,
                     std::nullopt,
                     std::nullopt},
    };
    return s;
}

/// The header's example payload.
const std::string k_snap_example_payload =
    R"({"elapsed_ms":8000,"failure":"","job":94,"nodes":2,"ranks":[[0,"ps",0,"n1","running",0,)"
    R"(null,120,31457280,2,null],[1,"worker",0,"n2","restarting",1,null,null,null,null,null]],)"
    R"("restarts":1,"run_id":"c-94-0","stall_timeout_ms":null,"step":0,"type":"snapshot","v":7,)"
    R"("verdict":"none"})";

/// A payload whose ranks are `ranks`.
std::string snap_payload(const std::string& ranks) {
    return R"({"elapsed_ms":0,"failure":"","job":1,"nodes":1,"ranks":[)" + ranks +
           R"(],"restarts":0,"run_id":"","stall_timeout_ms":null,"step":0,"type":"snapshot",)"
           R"("v":7,"verdict":"none"})";
}

/// A well-formed row of rank 0.
const std::string k_snap_row = R"([0,"worker",0,"n1","running",0,null,null,null,null,null])";

/// Every field of two snapshots is the same.
void snap_check_same(const Snapshot& a, const Snapshot& b) {
    CHECK(a.job == b.job);
    CHECK(a.step == b.step);
    CHECK(a.run_id == b.run_id);
    CHECK(a.elapsed == b.elapsed);
    CHECK(a.nodes == b.nodes);
    CHECK(a.verdict == b.verdict);
    CHECK(a.failure == b.failure);
    CHECK(a.restarts == b.restarts);
    CHECK(a.stall_timeout == b.stall_timeout);
    CHECK(a.startup == b.startup);
    REQUIRE(a.ranks.size() == b.ranks.size());
    for (std::size_t i = 0; i < a.ranks.size(); ++i) {
        INFO("rank " << i);
        const SnapshotRank& x = a.ranks[i];
        const SnapshotRank& y = b.ranks[i];
        CHECK(x.rank == y.rank);
        CHECK(x.role == y.role);
        CHECK(x.index == y.index);
        CHECK(x.host == y.host);
        CHECK(x.activity == y.activity);
        CHECK(x.restarts == y.restarts);
        CHECK(x.progress_age == y.progress_age);
        CHECK(x.usage == y.usage);
        CHECK(x.cpu_percent == y.cpu_percent);
        CHECK(x.output_rate == y.output_rate);
    }
}

/// The message of the Error (Errc::protocol) that decoding `payload` throws.
std::string snap_decode_error(const std::string& payload) {
    try {
        (void)decode_snapshot(payload);
    } catch (const Error& e) {
        CHECK(e.code() == Errc::protocol);
        return e.what();
    }
    FAIL("no error for " << payload);
    return {};
}

/// What decode_snapshot() says of `payload` with `problem`: it quotes the payload's first 200
/// bytes, and says when it shortened it.
std::string snap_refusal(const std::string& problem, const std::string& payload) {
    constexpr std::size_t k_snap_quoted = 200;
    return "protocol: snapshot: " + problem + ": " + quote(payload.substr(0, k_snap_quoted)) +
           (payload.size() > k_snap_quoted ? " (shortened)" : "");
}

} // namespace

TEST_CASE("snapshot: taken from a coordinator that runs", "[snapshot]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(snap_settings(), t0);
    c.registered(0, t0);
    c.registered(1, t0);
    // Rank 0 used 500 ms of CPU time in 5 s (10 %) and last made progress 3 s before the
    // snapshot; rank 1's trainer failed and is restarted (the 1 s delay is not over); rank 2
    // never registered.
    c.usage_reported(0, protocol::Usage{100, 1000, {}}, t0 + 1s);
    c.usage_reported(0, protocol::Usage{600, 2000, {}}, t0 + 6s);
    c.progressed(0, 2500ms, t0 + 7s);
    c.exited(1, protocol::Exit{ExitStatus::exited(3)}, t0 + 7s);
    StartupTimes phases;
    phases[StartupPhase::task] = WallClock::time_point{} + 1'796'047'358'000ms;
    phases[StartupPhase::up] = WallClock::time_point{} + 1'796'047'358'040ms;
    c.startup_reported(0, phases);

    const Snapshot s = take_snapshot(c, t0 + 7500ms, protocol::StepId{94, 3});
    CHECK(s.startup == c.startup_summary());
    CHECK(s.startup.reported == 1);
    CHECK(s.job == 94);
    CHECK(s.step == 3);
    CHECK(s.run_id == "c-94-0");
    CHECK(s.elapsed == 7500ms);
    CHECK(s.nodes == 3); // every host of the plan, registered or not
    CHECK(s.verdict == Verdict::none);
    CHECK(s.failure.empty());
    CHECK(s.restarts == 1);
    CHECK(s.stall_timeout == Millis{60000});
    REQUIRE(s.ranks.size() == 3);

    const SnapshotRank& ps = s.ranks[0];
    CHECK(ps.rank == 0);
    CHECK(ps.role == Role::ps);
    CHECK(ps.index == 0);
    CHECK(ps.host == "n1");
    CHECK(ps.activity == RankActivity::running);
    CHECK(ps.restarts == 0);
    CHECK(ps.progress_age == Millis{3000});
    CHECK(ps.usage == protocol::Usage{600, 2000, {}});
    CHECK(ps.cpu_percent == std::optional<std::uint64_t>{10});
    CHECK_FALSE(ps.output_rate);

    const SnapshotRank& worker = s.ranks[1];
    CHECK(worker.rank == 1);
    CHECK(worker.role == Role::worker);
    CHECK(worker.index == 0);
    CHECK(worker.host == "n2");
    CHECK(worker.activity == RankActivity::restarting);
    CHECK(worker.restarts == 1);
    CHECK_FALSE(worker.progress_age);
    CHECK_FALSE(worker.usage);
    CHECK_FALSE(worker.cpu_percent);
    CHECK_FALSE(worker.output_rate);

    const SnapshotRank& missing = s.ranks[2];
    CHECK(missing.rank == 2);
    CHECK(missing.index == 1);
    CHECK(missing.host == "n3");
    CHECK(missing.activity == RankActivity::waiting);

    // After the delay rank 1 runs again.
    CHECK(take_snapshot(c, t0 + 8s, protocol::StepId{94, 3}).ranks[1].activity ==
          RankActivity::running);
}

TEST_CASE("snapshot: an aborted step carries its failure and its stuck rank", "[snapshot]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(snap_settings(), t0);
    c.registered(0, t0);
    c.registered(1, t0);
    c.registered(2, t0);
    c.stalled(2, 60s, t0 + 61s);
    const Snapshot s = take_snapshot(c, t0 + 62s, protocol::StepId{7, 1});
    CHECK(s.verdict == Verdict::aborted);
    CHECK(s.failure == "rank 2 (worker:1) on n3 is stuck: no progress for 60 s");
    CHECK(s.restarts == 0);
    REQUIRE(s.ranks.size() == 3);
    CHECK(s.ranks[2].activity == RankActivity::stuck);
    CHECK(s.ranks[0].activity == RankActivity::running);
    // The snapshot's payload says so too.
    const std::string payload = encode_snapshot(s);
    CHECK(payload.find(R"("failure":"rank 2 (worker:1) on n3 is stuck: no progress for 60 s")") !=
          std::string::npos);
    CHECK(payload.find(R"("verdict":"aborted")") != std::string::npos);
    CHECK(payload.find(R"([2,"worker",1,"n3","stuck",0,null,null,null,null,null])") !=
          std::string::npos);
}

TEST_CASE("snapshot: the elapsed time is never negative", "[snapshot]") {
    const auto t0 = tfslurm::test::k_t0;
    const Coordinator c(snap_settings(), t0 + 10s);
    CHECK(take_snapshot(c, t0 + 9s, protocol::StepId{1, 0}).elapsed == Millis{0});
    CHECK(take_snapshot(c, t0 + 10s, protocol::StepId{1, 0}).elapsed == Millis{0});
    CHECK(take_snapshot(c, t0 + 10s + 1ms, protocol::StepId{1, 0}).elapsed == Millis{1});
}

TEST_CASE("snapshot: the payload of the header's example", "[snapshot]") {
    CHECK(encode_snapshot(snap_example()) == k_snap_example_payload);
}

TEST_CASE("snapshot: the payload's optional fields and odd values", "[snapshot]") {
    Snapshot s = snap_example();
    s.stall_timeout = Millis{300000};
    s.verdict = Verdict::aborted;
    s.failure = R"(rank 1 "x" failed)";
    s.ranks[0].progress_age = Millis{1500};
    s.ranks[0].output_rate = 4096;
    s.ranks[1].progress_age = Millis{-5}; // a clock step: never negative on the wire
    s.ranks[1].host = "n\xff";            // not UTF-8: replaced, never thrown
    CHECK(encode_snapshot(s) ==
          R"({"elapsed_ms":8000,"failure":"rank 1 \"x\" failed","job":94,"nodes":2,"ranks":)"
          R"([[0,"ps",0,"n1","running",0,1500,120,31457280,2,4096],)"
          "[1,\"worker\",0,\"n\xef\xbf\xbd\",\"restarting\",1,0,null,null,null,null]],"
          R"("restarts":1,"run_id":"c-94-0","stall_timeout_ms":300000,"step":0,)"
          R"("type":"snapshot","v":7,"verdict":"aborted"})");
}

TEST_CASE("snapshot: a payload read back is the snapshot", "[snapshot]") {
    SECTION("the header's example") {
        const Snapshot decoded = decode_snapshot(k_snap_example_payload);
        snap_check_same(decoded, snap_example());
        CHECK(encode_snapshot(decoded) == k_snap_example_payload);
    }
    SECTION("every field set") {
        Snapshot s = snap_example();
        s.job = 18446744073709551615ULL;
        s.step = 4294967294ULL;
        s.elapsed = Millis{31536000000}; // a year, the most a payload may say
        s.verdict = Verdict::interrupted;
        s.failure = "caf\xc3\xa9";
        s.stall_timeout = Millis{60000};
        s.ranks[0].progress_age = Millis{31536000000};
        s.ranks[0].output_rate = 0;
        s.ranks[1].activity = RankActivity::lost;
        s.ranks[1].role = Role::evaluator;
        s.ranks[1].index = 4294967295U;
        s.ranks[1].restarts = 4294967295U;
        s.ranks[1].host = "n[1-2]"; // brackets in a string are no nesting
        s.ranks[1].usage = protocol::Usage{0, 0, {}};
        s.ranks[1].cpu_percent = 400;
        snap_check_same(decode_snapshot(encode_snapshot(s)), s);
    }
    SECTION("a rank's output count is not sent: its rate is") {
        Snapshot s = snap_example();
        s.ranks[0].usage = protocol::Usage{120, 31457280, 5000};
        s.ranks[0].output_rate = 250;
        const Snapshot decoded = decode_snapshot(encode_snapshot(s));
        CHECK(decoded.ranks[0].usage == protocol::Usage{120, 31457280, {}});
        CHECK(decoded.ranks[0].output_rate == std::optional<std::uint64_t>{250});
    }
    SECTION("every state and verdict") {
        const auto activity = GENERATE(RankActivity::waiting,
                                       RankActivity::running,
                                       RankActivity::straggling,
                                       RankActivity::stuck,
                                       RankActivity::restarting,
                                       RankActivity::exited,
                                       RankActivity::failed,
                                       RankActivity::lost);
        const auto verdict =
            GENERATE(Verdict::none, Verdict::done, Verdict::interrupted, Verdict::aborted);
        Snapshot s = snap_example();
        s.ranks[1].activity = activity;
        s.verdict = verdict;
        const Snapshot decoded = decode_snapshot(encode_snapshot(s));
        CHECK(decoded.ranks[1].activity == activity);
        CHECK(decoded.verdict == verdict);
    }
    SECTION("no rank") {
        Snapshot s = snap_example();
        s.ranks.clear();
        const Snapshot decoded = decode_snapshot(encode_snapshot(s));
        CHECK(decoded.ranks.empty());
        snap_check_same(decoded, s);
    }
    SECTION("a rank's missing restarts count as none") {
        const std::string payload =
            snap_payload(R"([0,"worker",0,"n1","running",null,null,null,null,null,null])");
        CHECK(decode_snapshot(payload).ranks.at(0).restarts == 0);
    }
}

namespace {

/// The header's example of a start-up summary.
const std::string k_snap_startup =
    R"({"end":"started","more_nodes":0,"nodes":[["n2",412]],"phases":[["task",2,0,5,5,1],)"
    R"(["up",2,31,40,40,1]],"reported":2,"slowest":[1,412,"up",40,31]})";

/// The header's example payload with `startup` as its start-up summary.
std::string snap_with_startup(const std::string& startup) {
    std::string payload = k_snap_example_payload;
    payload.insert(payload.find(R"(,"step":)"), R"(,"startup":)" + startup);
    return payload;
}

} // namespace

TEST_CASE("snapshot: the start-up summary travels with it", "[snapshot][startup]") {
    const Snapshot decoded = decode_snapshot(snap_with_startup(k_snap_startup));
    StartupSummary want;
    want.reported = 2;
    want.end = StartupPhase::started;
    want.phases = {{StartupPhase::task, 2, 0ms, 5ms, 5ms, 1},
                   {StartupPhase::up, 2, 31ms, 40ms, 40ms, 1}};
    want.nodes = {{"n2", 412ms}};
    want.slowest = SlowestStartup{1, 412ms, StartupPhase::up, 40ms, 31ms};
    CHECK(decoded.startup == want);
    CHECK(encode_snapshot(decoded) == snap_with_startup(k_snap_startup));
    // None reported: no `startup` on the wire.
    CHECK(decode_snapshot(k_snap_example_payload).startup == StartupSummary{});
    CHECK(encode_snapshot(decode_snapshot(k_snap_example_payload)) == k_snap_example_payload);
    // Signed times (two nodes' clocks), a phase nobody else reached, no slowest yet.
    const std::string odd =
        R"({"end":"progress","more_nodes":4,"nodes":[],"phases":[["task",1,-3,-3,-3,0]],)"
        R"("reported":1,"slowest":null})";
    const Snapshot back = decode_snapshot(snap_with_startup(odd));
    CHECK(back.startup.end == StartupPhase::progress);
    CHECK(back.startup.more_nodes == 4);
    CHECK(back.startup.phases.at(0).median == -3ms);
    CHECK_FALSE(back.startup.slowest);
    CHECK(encode_snapshot(back) == snap_with_startup(odd));
}

TEST_CASE("snapshot: a start-up summary that is not right is refused", "[snapshot][startup]") {
    const std::vector<std::pair<std::string, std::string>> bad{
        {"[]", R"(field "startup" is not an object)"},
        {R"({"end":"soon","more_nodes":0,"nodes":[],"phases":[],"reported":0,"slowest":null})",
         "the start-up's end is not a start-up phase"},
        {R"({"end":"up","more_nodes":0,"nodes":[],"phases":[],"reported":3,"slowest":null})",
         R"(field "reported" is not a number in [0, 2])"},
        {R"({"end":"up","more_nodes":0,"nodes":[],"phases":[["up",1,0,0,0,0],["task",1,0,0,0,0]],)"
         R"("reported":1,"slowest":null})",
         "start-up phase task is out of order or has no ranks"},
        {R"({"end":"up","more_nodes":0,"nodes":[],"phases":[["up",1,0,0,0,2]],"reported":1,)"
         R"("slowest":null})",
         "a start-up phase's slowest rank is not one of the step's ranks"},
        {R"({"end":"up","more_nodes":0,"nodes":[],"phases":[["up",1,0,0,1e20,0]],"reported":1,)"
         R"("slowest":null})",
         "a start-up phase's maximum is not a number of milliseconds within a year"},
        {R"({"end":"up","more_nodes":0,"nodes":[["a",1],["b",1],["c",1],["d",1]],"phases":[],)"
         R"("reported":1,"slowest":null})",
         "the start-up's nodes are not a list of at most 3"},
        {R"({"end":"up","more_nodes":0,"nodes":[],"phases":[],"reported":1})",
         R"(missing field "slowest" of the start-up)"},
        {R"({"end":"up","more_nodes":0,"nodes":[],"phases":[],"reported":1,"slowest":[7,1,null,1,null]})",
         "the start-up's slowest rank is not one of the step's ranks"},
        {R"({"end":"up","more_nodes":0,"nodes":[],"phases":[],"reported":1,"slowest":[1,1,"x",1,null]})",
         "the slowest rank's phase is not a start-up phase"},
    };
    for (const auto& [startup, problem] : bad) {
        INFO(startup);
        const std::string payload = snap_with_startup(startup);
        CHECK(snap_decode_error(payload) == snap_refusal(problem, payload));
    }
}

TEST_CASE("snapshot: a payload that is not an object is refused", "[snapshot]") {
    CHECK(snap_decode_error("[1]") == R"(protocol: snapshot: not a JSON object: "[1]")");
    CHECK(snap_decode_error("") == R"(protocol: snapshot: not a JSON object: "")");
    CHECK(snap_decode_error("{") == R"(protocol: snapshot: not a JSON object: "{")");
    CHECK(snap_decode_error("\"snapshot\"") ==
          R"(protocol: snapshot: not a JSON object: "\"snapshot\"")");
}

TEST_CASE("snapshot: a payload of another type or version is refused", "[snapshot]") {
    CHECK(snap_decode_error(R"({"type":"hello","v":7})") ==
          R"(protocol: snapshot: of another type: "{\"type\":\"hello\",\"v\":7}")");
    CHECK(snap_decode_error(R"({"v":7})") ==
          R"(protocol: snapshot: missing field "type": "{\"v\":7}")");
    CHECK(snap_decode_error(R"({"type":7,"v":7})") ==
          R"(protocol: snapshot: field "type" is not a string of at most 4096 bytes: )"
          R"("{\"type\":7,\"v\":7}")");
    CHECK(snap_decode_error(R"({"type":"snapshot","v":6})") ==
          R"(protocol: snapshot: not version 7: "{\"type\":\"snapshot\",\"v\":6}")");
    CHECK(snap_decode_error(R"({"type":"snapshot"})") ==
          R"(protocol: snapshot: field "v" is not a number in [0, 18446744073709551615]: )"
          R"("{\"type\":\"snapshot\"}")");
}

TEST_CASE("snapshot: a payload nested too deeply is refused before it is parsed", "[snapshot]") {
    const std::string payload = snap_payload("[[[0]]]");
    CHECK(snap_decode_error(payload) == "protocol: nested too deeply: " + quote(payload));
    // Four levels are fine (a start-up phase is the fourth) (and brackets in strings are not
    // counted).
    CHECK_NOTHROW(decode_snapshot(
        snap_payload(R"([0,"worker",0,"[[[[n1]]]]","running",0,null,null,null,null,null])")));
}

TEST_CASE("snapshot: a rank that is not right is refused", "[snapshot]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [ranks, problem] = GENERATE(table<std::string, std::string>({
        Row{R"([1,"worker",0,"n1","running",0,null,null,null,null,null])",
            "rank 0 is out of order"},
        Row{R"([null,"worker",0,"n1","running",0,null,null,null,null,null])",
            "rank 0 is out of order"},
        Row{k_snap_row + "," + k_snap_row, "rank 1 is out of order"},
        Row{R"([0,"worker",0,"n1","asleep",0,null,null,null,null,null])",
            "rank 0's state is unknown"},
        Row{R"([0,"worker",0,"n1","Running",0,null,null,null,null,null])",
            "rank 0's state is unknown"},
        Row{R"([0,"boss",0,"n1","running",0,null,null,null,null,null])",
            "rank 0's role is unknown"},
        Row{R"([0,1,0,"n1","running",0,null,null,null,null,null])", "rank 0's role is unknown"},
        Row{R"([0,"worker",0,"n1","running",0,null,null,null,null])",
            "rank 0 is not a list of 11 items"},
        Row{R"([0,"worker",0,"n1","running",0,null,null,null,null,null,null])",
            "rank 0 is not a list of 11 items"},
        Row{R"({"rank":0})", "rank 0 is not a list of 11 items"},
        Row{R"([0,"worker",0,"n1","running",0,null,120,null,null,null])",
            "rank 0's CPU time and memory are not both given"},
        Row{R"([0,"worker",0,"n1","running",0,null,null,4096,null,null])",
            "rank 0's CPU time and memory are not both given"},
        Row{R"([0,"worker",null,"n1","running",0,null,null,null,null,null])",
            "rank 0's index is missing"},
        Row{R"([0,"worker",-1,"n1","running",0,null,null,null,null,null])",
            "rank 0's index is not a number in [0, 4294967295] or null"},
        Row{R"([0,"worker",0,null,"running",0,null,null,null,null,null])",
            "rank 0's host is not a string of at most 4096 bytes"},
        Row{R"([0,"worker",0,"n1","running",4294967296,null,null,null,null,null])",
            "rank 0's restarts is not a number in [0, 4294967295] or null"},
        Row{R"([0,"worker",0,"n1","running",0,31536000001,null,null,null,null])",
            "rank 0's progress age is not a number in [0, 31536000000] or null"},
        Row{R"([0,"worker",0,"n1","running",0,1.5,null,null,null,null])",
            "rank 0's progress age is not a number in [0, 31536000000] or null"},
        Row{R"([0,"worker",0,"n1","running",0,null,null,null,"10",null])",
            "rank 0's CPU use is not a number in [0, 18446744073709551615] or null"},
        Row{R"([0,"worker",0,"n1","running",0,null,null,null,null,-3])",
            "rank 0's output rate is not a number in [0, 18446744073709551615] or null"},
    }));
    const std::string payload = snap_payload(ranks);
    INFO(payload);
    CHECK(snap_decode_error(payload) == snap_refusal(problem, payload));
}

TEST_CASE("snapshot: a step field that is not right is refused", "[snapshot]") {
    using Row = std::tuple<std::string, std::string, std::string>;
    const auto [from, to, problem] = GENERATE(table<std::string, std::string, std::string>({
        Row{R"("job":1,)",
            R"("job":-1,)",
            R"(field "job" is not a number in [0, 18446744073709551615])"},
        Row{R"("job":1,)", "", R"(field "job" is not a number in [0, 18446744073709551615])"},
        Row{R"("elapsed_ms":0,)",
            R"("elapsed_ms":31536000001,)",
            R"(field "elapsed_ms" is not a number in [0, 31536000000])"},
        Row{R"("nodes":1,)",
            R"("nodes":4294967296,)",
            R"(field "nodes" is not a number in [0, 4294967295])"},
        Row{R"("failure":"",)", "", R"(missing field "failure")"},
        Row{R"("verdict":"none")", R"("verdict":"won")", R"(field "verdict" is unknown)"},
        Row{R"("restarts":0,)",
            R"("restarts":4294967296,)",
            R"(field "restarts" is not a number in [0, 4294967295])"},
        Row{R"("stall_timeout_ms":null,)", "", R"(missing field "stall_timeout_ms")"},
        Row{R"("stall_timeout_ms":null,)",
            R"("stall_timeout_ms":"60s",)",
            R"(field "stall_timeout_ms" is not a number in [0, 31536000000] or null)"},
        Row{R"("step":0,)",
            R"("step":true,)",
            R"(field "step" is not a number in [0, 18446744073709551615])"},
        Row{R"("run_id":"",)",
            R"("run_id":null,)",
            R"(field "run_id" is not a string of at most 4096 bytes)"},
    }));
    std::string payload = snap_payload(k_snap_row);
    const auto at = payload.find(from);
    REQUIRE(at != std::string::npos);
    REQUIRE(payload.find(from, at + 1) == std::string::npos);
    payload.replace(at, from.size(), to);
    INFO(payload);
    CHECK(snap_decode_error(payload) == snap_refusal(problem, payload));
}

TEST_CASE("snapshot: ranks that are not a list are refused", "[snapshot]") {
    const std::string payload =
        R"({"elapsed_ms":0,"failure":"","job":1,"nodes":1,"ranks":{},"restarts":0,"run_id":"",)"
        R"("stall_timeout_ms":null,"step":0,"type":"snapshot","v":7,"verdict":"none"})";
    CHECK(snap_decode_error(payload) == snap_refusal(R"(field "ranks" is not a list)", payload));
}

TEST_CASE("snapshot: an error quotes the beginning of a long payload", "[snapshot]") {
    Snapshot s = snap_example();
    s.ranks[1].host = std::string(4097, 'h'); // one byte too many
    const std::string payload = encode_snapshot(s);
    REQUIRE(payload.size() > 4200);
    CHECK(snap_decode_error(payload) ==
          "protocol: snapshot: rank 1's host is not a string of at most 4096 bytes: " +
              quote(payload.substr(0, 200)) + " (shortened)");
    s.ranks[1].host.pop_back(); // 4096 bytes: fine
    CHECK(decode_snapshot(encode_snapshot(s)).ranks[1].host == std::string(4096, 'h'));
}

TEST_CASE("snapshot: the states and verdicts by name", "[snapshot]") {
    for (std::size_t i = 0; i < k_rank_activities; ++i) {
        const auto activity = static_cast<RankActivity>(i);
        CHECK(parse_rank_activity(to_string(activity)) == activity);
    }
    CHECK(parse_rank_activity("stuck") == RankActivity::stuck);
    CHECK(parse_rank_activity("restarting") == RankActivity::restarting);
    CHECK_FALSE(parse_rank_activity("Stuck"));
    CHECK_FALSE(parse_rank_activity(""));
    CHECK_FALSE(parse_rank_activity("stuck "));
    for (const Verdict verdict :
         {Verdict::none, Verdict::done, Verdict::interrupted, Verdict::aborted}) {
        CHECK(parse_verdict(to_string(verdict)) == verdict);
    }
    CHECK(parse_verdict("aborted") == Verdict::aborted);
    CHECK_FALSE(parse_verdict("abort"));
    CHECK_FALSE(parse_verdict(""));
}

TEST_CASE("snapshot: a payload is told from the protocol's messages by its type", "[snapshot]") {
    CHECK(is_snapshot_payload(k_snap_example_payload));
    CHECK(is_snapshot_payload(R"({"type":"snapshot","v":7})"));
    CHECK_FALSE(is_snapshot_payload(R"({"type":"heartbeat","v":7})"));
    CHECK_FALSE(is_snapshot_payload(R"({"type":"snapshots","v":7})"));
    CHECK_FALSE(is_snapshot_payload(""));
    // A host named like a type is escaped in a string: no snapshot.
    CHECK_FALSE(
        is_snapshot_payload(R"({"host":"\"type\":\"snapshot\"","type":"heartbeat","v":7})"));
}
