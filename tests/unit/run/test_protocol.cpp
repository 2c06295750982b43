// SPDX-License-Identifier: MIT
// The protocol's messages (src/run/protocol/protocol.cpp): round trips, their JSON, what each
// version added, and malformed payloads as protocol errors. Frames and descriptions have files of
// their own.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <string>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::protocol;
using tfslurm::test::failure_of_rank;

namespace {

std::string round_trip(const Message& message) {
    FrameDecoder decoder;
    decoder.feed(encode_frame(message));
    const auto payload = decoder.next();
    REQUIRE(payload);
    CHECK_FALSE(decoder.partial());
    return encode_payload(decode_payload(*payload));
}

const std::string k_nonce(64, 'a');

} // namespace

TEST_CASE("protocol: every message survives a round trip", "[protocol]") {
    Hello hello;
    hello.job = 18446744073709551615ULL;
    hello.step = 4294967294ULL;
    hello.rank = 4294967295U;
    hello.role = Role::evaluator;
    hello.host = "n1-ib0";
    hello.pid = 12345;
    hello.auth = AuthMethod::munge;
    hello.credential = "MUNGE:AwQ...:";
    hello.nonce = std::string(64, 'e');
    Failure failure = failure_of_rank(3, Role::worker, 2, "n2", FailureCause::trainer, 137);
    failure.status = ExitStatus::signaled(9);
    Failure stalled = failure;
    stalled.cause = FailureCause::stalled;
    stalled.detail = "300 s";
    stalled.step_status = 9;
    Failure unregistered = failure;
    unregistered.cause = FailureCause::unregistered;
    unregistered.missing = 4;
    unregistered.ranks = "3-5,9";
    unregistered.host = "n[2-3,5]";
    Failure silent = failure;
    silent.cause = FailureCause::lost;
    silent.detail = "no heartbeat for 10 s";
    silent.answering = 2;
    const std::vector<Message> messages{
        Challenge{std::string(64, 'f')},
        hello,
        Welcome{16, "MUNGE:AwQ...:"},
        Reject{RejectCode::refused, "rank 3 is already registered"},
        Reject{RejectCode::wrong_job, "wrong job 8 (this is job 7)"},
        Reject{RejectCode::wrong_step, "wrong step 7.1 (this is step 7.0)"},
        Heartbeat{},
        Exit{ExitStatus::exited(3), ""},
        Exit{ExitStatus::signaled(15), "port 20001 is already in use"},
        Interrupt{15},
        Interrupt{15, true},
        Stop{StopReason::done, 0, 0},
        Stop{StopReason::signal, 2, 2},
        Stop{StopReason::signal, 2, 15, true},
        Abort{failure},
        Abort{stalled},
        Abort{unregistered},
        Abort{silent},
        Stall{300000},
        Cluster{{{"n1", "10.1.0.1"}, {"n2", "fd00::2"}}, {}},
        Cluster{},
        Restart{1, 2},
        Probed{},
        Probed{{{2, "[fd78::13]:23000", "Connection timed out"}, {5, "n3:23001", "No route"}}, {}},
        Go{},
        Progress{0},
        Progress{42000},
        Checked{},
        Checked{PreflightFailure{"command", "\"true\" did not end within 2 s"}},
        Heartbeat{Usage{1200, 52428800, {}}, {}, {}, {}},
        Heartbeat{Usage{1200, 52428800, 4096}, {}, {}, {}},
        Heartbeat{{}, {{1, {250, 31457280, {}}}, {3, {0, 0, 17}}}, {}, {}},
    };
    hello.address = "fd00:1::5";
    CHECK(round_trip(hello) == encode_payload(hello));
    for (const auto& message : messages) {
        INFO(encode_payload(message));
        CHECK(round_trip(message) == encode_payload(message));
        CHECK(decode_payload(encode_payload(message)).index() == message.index());
    }
}

TEST_CASE("protocol: an abort for a silent launcher says how many nodes answered",
          "[protocol][requeue]") {
    Failure silent = failure_of_rank(2, Role::worker, 1, "n3", FailureCause::lost, 8);
    silent.detail = "no heartbeat for 10 s";
    const std::string closed = encode_payload(Abort{silent});
    CHECK(closed.find("answering") == std::string::npos); // absent when not counted
    silent.answering = 2;
    const std::string counted = encode_payload(Abort{silent});
    CHECK(counted.find(R"("answering":2,)") != std::string::npos);
    CHECK(std::get<Abort>(decode_payload(counted)).failure.answering == 2);
    std::string zero = counted;
    zero.replace(zero.find(R"("answering":2)"), 13, R"("answering":0)");
    CHECK_THROWS_WITH(decode_payload(zero),
                      Catch::StartsWith(R"(protocol: field "answering" of abort is not an )"
                                        R"(integer in [1, 4294967295]: )"));
}

TEST_CASE("protocol: payloads are compact JSON with a version and a type", "[protocol]") {
    CHECK(encode_payload(Heartbeat{}) == R"({"type":"heartbeat","v":7})");
    CHECK(encode_payload(Interrupt{15}) == R"({"signal":15,"type":"interrupt","v":7})");
    CHECK(encode_payload(Stall{3000}) == R"({"silent_ms":3000,"type":"stall","v":7})");
    CHECK(encode_payload(Restart{1, 2}) == R"({"count":1,"limit":2,"type":"restart","v":7})");
    CHECK_THROWS_WITH(decode_payload(R"({"count":-1,"limit":2,"type":"restart","v":7})"),
                      Catch::Contains("count"));
    CHECK(encode_payload(Interrupt{15, true}) ==
          R"({"signal":15,"type":"interrupt","v":7,"whole_step":true})");
    CHECK(encode_payload(Stop{StopReason::signal, 1, 15, true}) ==
          R"({"rank":1,"reason":"signal","signal":15,"type":"stop","v":7,"whole_step":true})");
    CHECK(
        std::get<Stop>(
            decode_payload(
                R"({"rank":1,"reason":"signal","signal":15,"type":"stop","v":7,"whole_step":true})"))
            .whole_step);
    CHECK_THROWS_WITH(decode_payload(R"({"signal":15,"type":"interrupt","v":7,"whole_step":1})"),
                      Catch::Contains("field \"whole_step\" of interrupt is not a boolean"));
    CHECK(encode_payload(Exit{ExitStatus::exited(3), ""}) ==
          R"({"status":{"code":3,"kind":"exited"},"type":"exit","v":7})");
    CHECK(encode_payload(Stop{StopReason::done, 0, 0}) ==
          R"({"reason":"done","type":"stop","v":7})");
    const std::string frame = encode_frame(Heartbeat{});
    CHECK(frame.substr(0, 4) == std::string("\0\0\0\x1a", 4));
    CHECK(frame.size() == 4 + 26);
    const auto exit = std::get<Exit>(
        decode_payload(R"({"v":7,"type":"exit","status":{"kind":"signaled","signal":9}})"));
    CHECK(exit.status == ExitStatus::signaled(9));
    CHECK(exit.error.empty());
}

TEST_CASE("protocol: an exit carries its launcher's start-up phases and reported step",
          "[protocol][startup]") {
    Exit exit{ExitStatus::exited(0)};
    const WallClock::time_point t{std::chrono::milliseconds{1796047358123}};
    exit.startup[StartupPhase::task] = t;
    exit.startup[StartupPhase::registered] = t + std::chrono::milliseconds{40};
    exit.startup[StartupPhase::progress] = t + std::chrono::milliseconds{2500};
    exit.progress_step = 1200;
    const std::string payload =
        R"({"progress_step":1200,"startup":{"progress":1796047360623,"registered":)"
        R"(1796047358163,"task":1796047358123},"status":{"code":0,"kind":"exited"},)"
        R"("type":"exit","v":7})";
    CHECK(encode_payload(exit) == payload);
    const auto back = std::get<Exit>(decode_payload(payload));
    CHECK(back.startup == exit.startup);
    CHECK(back.progress_step == std::optional<std::uint64_t>(1200));
    CHECK(round_trip(exit) == payload);
    // Without phases (a machine tested alone), nothing is added.
    CHECK(encode_payload(Exit{ExitStatus::exited(0)}) ==
          R"({"status":{"code":0,"kind":"exited"},"type":"exit","v":7})");
    const std::vector<std::pair<std::string, std::string>> bad{
        {R"({"startup":{"boot":1},"status":{"code":0,"kind":"exited"},"type":"exit","v":7})",
         R"(protocol: field "startup" of exit has an unknown phase "boot": )"},
        {R"({"startup":{"task":-1},"status":{"code":0,"kind":"exited"},"type":"exit","v":7})",
         R"(protocol: field "task" of exit is not an integer in [0, 9223372036854]: )"},
        // Past the wall clock's end (2262): refused, not overflowed.
        {R"({"startup":{"up":9223372036855},"status":{"code":0,"kind":"exited"},"type":"exit",)"
         R"("v":7})",
         R"(protocol: field "up" of exit is not an integer in [0, 9223372036854]: )"},
        {R"({"startup":[],"status":{"code":0,"kind":"exited"},"type":"exit","v":7})",
         R"(protocol: field "startup" of exit is not an object: )"},
        {R"({"progress_step":"12","status":{"code":0,"kind":"exited"},"type":"exit","v":7})",
         R"(protocol: field "progress_step" of exit is not an integer in [0, )"},
    };
    for (const auto& [text, message] : bad) {
        INFO(text);
        CHECK_THROWS_WITH(decode_payload(text), Catch::StartsWith(message));
    }
}

TEST_CASE("protocol: v3 carries the chosen addresses", "[protocol]") {
    CHECK(encode_payload(Cluster{{{"n1", "10.1.0.1"}, {"n2", "fd00::2"}}, {}}) ==
          R"({"addresses":{"n1":"10.1.0.1","n2":"fd00::2"},"type":"cluster","v":7})");
    Hello hello;
    hello.nonce = std::string(64, 'e');
    CHECK(encode_payload(hello).find("address") == std::string::npos); // names: absent
    hello.address = "10.1.0.1";
    CHECK(encode_payload(hello).find(R"("address":"10.1.0.1")") != std::string::npos);
    const std::string nonce(64, 'a');
    const std::string head = R"({"v":7,"type":"hello","job":1,"step":0,"rank":0,"role":"ps",)"
                             R"("host":"n","pid":1,"auth":"secret","credential":"","nonce":")" +
                             nonce + R"(","address":)";
    for (const std::string bad : {R"("n1")", R"("10.1.0.1:22")", R"("[fd00::1]")", R"(3)"}) {
        INFO(bad);
        CHECK_THROWS_WITH(
            decode_payload(head + bad + "}"),
            Catch::StartsWith(
                bad == "3"
                    ? R"(protocol: field "address" of hello is not a string)"
                    : R"(protocol: field "address" of hello is not an IPv4 or IPv6 address)"));
    }
    CHECK_THROWS_WITH(
        decode_payload(R"({"v":7,"type":"cluster","addresses":{"n1":"n1"}})"),
        R"(protocol: field "addresses" of cluster maps a node name to an IPv4 or IPv6 address: "{\"v\":7,\"type\":\"cluster\",\"addresses\":{\"n1\":\"n1\"}}")");
    CHECK_THROWS_WITH(decode_payload(R"({"v":7,"type":"cluster","addresses":{"n\"1":"10.0.0.1"}})"),
                      Catch::StartsWith(R"(protocol: field "addresses" of cluster maps)"));
    CHECK_THROWS_WITH(
        decode_payload(R"({"v":7,"type":"cluster","addresses":["10.0.0.1"]})"),
        Catch::StartsWith(R"(protocol: field "addresses" of cluster is not an object)"));
}

TEST_CASE("protocol: v4 carries the bound ports", "[protocol]") {
    Hello hello;
    hello.nonce = std::string(64, 'e');
    hello.address = "10.1.0.1";
    CHECK(encode_payload(hello).find("port") == std::string::npos); // none bound: absent
    hello.port = 23005;
    CHECK(encode_payload(hello).find(R"("port":23005)") != std::string::npos);
    CHECK(std::get<Hello>(decode_payload(encode_payload(hello))).port == 23005);
    Cluster cluster{{{"n1", "10.1.0.1"}}, {0, 23005}};
    CHECK(encode_payload(cluster) ==
          R"({"addresses":{"n1":"10.1.0.1"},"ports":[0,23005],"type":"cluster","v":7})");
    CHECK(std::get<Cluster>(decode_payload(encode_payload(cluster))).ports ==
          std::vector<std::uint16_t>{0, 23005});
    CHECK(std::get<Cluster>(decode_payload(R"({"v":7,"type":"cluster","addresses":{}})"))
              .ports.empty());
    for (const std::string bad : {"[-1]", "[65536]", R"(["1"])", R"({"0":1})", "[1.5]", "3"}) {
        INFO(bad);
        CHECK_THROWS_WITH(
            decode_payload(R"({"v":7,"type":"cluster","addresses":{},"ports":)" + bad + "}"),
            Catch::StartsWith(
                R"(protocol: field "ports" of cluster is not a list of ports (0 to 65535): )"));
    }
    const std::string head = R"({"v":7,"type":"hello","job":1,"step":0,"rank":0,"role":"ps",)"
                             R"("host":"n","pid":1,"auth":"secret","credential":"","nonce":")" +
                             std::string(64, 'a') + R"(","port":)";
    for (const std::string bad : {"0", "65536", R"("80")"}) {
        INFO(bad);
        CHECK_THROWS_WITH(
            decode_payload(head + bad + "}"),
            Catch::StartsWith(
                R"(protocol: field "port" of hello is not an integer in [1, 65535])"));
    }
}

TEST_CASE("protocol: the reachability probe's messages", "[protocol][probe]") {
    const Probed probed{{{2, "10.78.0.13:23000", "Connection timed out"}}, {}};
    CHECK(encode_payload(probed) ==
          R"({"failures":[{"address":"10.78.0.13:23000","error":"Connection timed out",)"
          R"("rank":2}],"type":"probed","v":7})");
    CHECK(std::get<Probed>(decode_payload(encode_payload(probed))).failures == probed.failures);
    CHECK(encode_payload(Probed{}) == R"({"failures":[],"type":"probed","v":7})");
    CHECK(encode_payload(Go{}) == R"({"type":"go","v":7})");
    CHECK(encode_payload(Progress{42000}) == R"({"idle_ms":42000,"type":"progress","v":7})");
    std::string many = "[";
    for (int i = 0; i < 9; ++i) {
        many += std::string(i == 0 ? "" : ",") + R"({"rank":1,"address":"a","error":"e"})";
    }
    many += "]";
    for (const std::string& bad : {many, std::string("[1]"), std::string("{}")}) {
        INFO(bad);
        CHECK_THROWS_WITH(
            decode_payload(R"({"v":7,"type":"probed","failures":)" + bad + "}"),
            Catch::StartsWith(
                R"(protocol: field "failures" of probed is not a list of at most 8 objects: )"));
    }
    CHECK_THROWS_WITH(
        decode_payload(
            R"({"v":7,"type":"probed","failures":[{"rank":-1,"address":"a","error":"e"}]})"),
        Catch::StartsWith(R"(protocol: field "rank" of probed is not an integer)"));
    Failure failure = failure_of_rank(2, Role::worker, 1, "n3", FailureCause::unreachable, 12);
    failure.detail = "rank 0 (ps:0) at 10.78.0.11:23000: Connection timed out";
    CHECK(describe(failure) == "rank 2 (worker:1) on n3 cannot reach rank 0 (ps:0) at "
                               "10.78.0.11:23000: Connection timed out");
    CHECK(round_trip(Abort{failure}) == encode_payload(Abort{failure}));
}

TEST_CASE("protocol: a probed carries its node's failed health check", "[protocol][preflight]") {
    Probed probed;
    probed.preflight =
        PreflightFailure{"command", R"("test $(hostname) != n2" exited with status 1)"};
    const std::string payload =
        R"({"failures":[],"preflight":{"check":"command","detail":"\"test $(hostname) != n2\" )"
        R"(exited with status 1"},"type":"probed","v":7})";
    CHECK(encode_payload(probed) == payload);
    const auto decoded = std::get<Probed>(decode_payload(payload));
    CHECK(decoded.failures.empty());
    CHECK(decoded.preflight == probed.preflight);
    CHECK_FALSE(std::get<Probed>(decode_payload(R"({"failures":[],"type":"probed","v":7})"))
                    .preflight.has_value());
    const std::vector<std::pair<std::string, std::string>> bad{
        {R"("preflight":[])", R"(protocol: field "preflight" of probed is not an object: )"},
        {R"("preflight":{"detail":"x"})", R"(protocol: missing field "check" in probed: )"},
        {R"("preflight":{"check":"","detail":"x"})",
         R"(protocol: field "check" of probed's preflight is empty: )"},
        {R"("preflight":{"check":"tmpdir","detail":7})",
         R"(protocol: field "detail" of probed is not a string of at most 4096 bytes: )"},
    };
    for (const auto& [field, message] : bad) {
        INFO(field);
        CHECK_THROWS_WITH(decode_payload(R"({"v":7,"type":"probed","failures":[],)" + field + "}"),
                          Catch::StartsWith(message));
    }
    Failure failure = failure_of_rank(1, Role::worker, 0, "n2", FailureCause::preflight, 13);
    failure.detail = R"(tmpdir: "/tmp" has 12 MiB free (at least 1024 MiB needed))";
    CHECK(describe(failure) == R"(preflight failed on n2 (rank 1, worker:0): tmpdir: "/tmp" has )"
                               R"(12 MiB free (at least 1024 MiB needed))");
    CHECK(encode_payload(Abort{failure}).find(R"("cause":"preflight")") != std::string::npos);
    CHECK(round_trip(Abort{failure}) == encode_payload(Abort{failure}));
    CHECK(to_string(FailureCause::preflight) == "preflight");
    CHECK(to_string(FailureCause::trainer) == "trainer");
}

TEST_CASE("protocol: a heartbeat may carry its trainer's usage and its followers'",
          "[protocol][metrics]") {
    CHECK(encode_payload(Heartbeat{}) == R"({"type":"heartbeat","v":7})");
    const Heartbeat beat{Usage{1200, 52428800, {}}, {{1, {250, 31457280, {}}}}, {}, {}};
    const std::string payload = R"({"followers":[[1,250,31457280]],"type":"heartbeat",)"
                                R"("usage":{"cpu_ms":1200,"rss":52428800},"v":7})";
    CHECK(encode_payload(beat) == payload);
    const auto decoded = std::get<Heartbeat>(decode_payload(payload));
    CHECK(decoded.usage == beat.usage);
    CHECK(decoded.followers == beat.followers);
    // With output counts (`--label`): `out`, and a follower's fourth item.
    const Heartbeat counted{Usage{1200, 52428800, 4096}, {{1, {250, 31457280, 77}}}, {}, {}};
    const std::string counted_payload =
        R"({"followers":[[1,250,31457280,77]],"type":"heartbeat",)"
        R"("usage":{"cpu_ms":1200,"out":4096,"rss":52428800},"v":7})";
    CHECK(encode_payload(counted) == counted_payload);
    const auto counted_back = std::get<Heartbeat>(decode_payload(counted_payload));
    CHECK(counted_back.usage == counted.usage);
    CHECK(counted_back.followers == counted.followers);
    const std::vector<std::pair<std::string, std::string>> bad{
        {R"("usage":{"cpu_ms":-1,"rss":0})", R"(protocol: field "cpu_ms" of heartbeat)"},
        {R"("followers":[[1,2]])", R"(protocol: field "followers" of heartbeat is not a list)"},
        {R"("followers":[[4294967296,2,3]])",
         R"(protocol: field "followers" of heartbeat is not a list)"},
        {R"("followers":{})", R"(protocol: field "followers" of heartbeat is not a list)"},
    };
    for (const auto& [field, message] : bad) {
        INFO(field);
        CHECK_THROWS_WITH(decode_payload(R"({"v":7,"type":"heartbeat",)" + field + "}"),
                          Catch::StartsWith(message));
    }
}

TEST_CASE("protocol: a heartbeat may carry start-up phases, its own and its followers'",
          "[protocol][startup]") {
    Heartbeat beat;
    beat.startup[StartupPhase::task] = WallClock::time_point{} + std::chrono::milliseconds{1000};
    beat.startup[StartupPhase::up] = WallClock::time_point{} + std::chrono::milliseconds{1040};
    StartupTimes follower;
    follower[StartupPhase::registered] =
        WallClock::time_point{} + std::chrono::milliseconds{1796047358123};
    beat.startups = {{3, follower}};
    const std::string payload = R"({"startup":{"task":1000,"up":1040},"startups":[[3,)"
                                R"({"registered":1796047358123}]],"type":"heartbeat","v":7})";
    CHECK(encode_payload(beat) == payload);
    const auto decoded = std::get<Heartbeat>(decode_payload(payload));
    CHECK(decoded.startup == beat.startup);
    CHECK(decoded.startups == beat.startups);
    CHECK_FALSE(decoded.usage);
    const std::vector<std::pair<std::string, std::string>> bad{
        {R"("startup":{"soon":1})",
         R"(protocol: field "startup" of heartbeat has an unknown phase "soon")"},
        {R"("startup":{"up":-1})", R"(protocol: field "up" of heartbeat)"},
        {R"("startup":[])", R"(protocol: field "startup" of heartbeat)"},
        {R"("startups":[[3]])", R"(protocol: field "startups" of heartbeat is not a list)"},
        {R"("startups":[[4294967296,{}]])",
         R"(protocol: field "startups" of heartbeat is not a list)"},
        {R"("startups":[[3,{"up":"x"}]])", R"(protocol: field "up" of heartbeat)"},
        {R"("startups":{})", R"(protocol: field "startups" of heartbeat is not a list)"},
    };
    for (const auto& [field, message] : bad) {
        INFO(field);
        CHECK_THROWS_WITH(decode_payload(R"({"v":7,"type":"heartbeat",)" + field + "}"),
                          Catch::StartsWith(message));
    }
}

TEST_CASE("protocol: checked carries the failed rank's node check", "[protocol][preflight]") {
    const Checked failed{PreflightFailure{"command", R"("nvidia-smi" exited with status 1)"}};
    const std::string payload = R"({"failure":{"check":"command","detail":"\"nvidia-smi\" )"
                                R"(exited with status 1"},"type":"checked","v":7})";
    CHECK(encode_payload(failed) == payload);
    CHECK(std::get<Checked>(decode_payload(payload)).failure == failed.failure);
    CHECK(encode_payload(Checked{}) == R"({"type":"checked","v":7})");
    CHECK_FALSE(std::get<Checked>(decode_payload(R"({"type":"checked","v":7})")).failure);
    CHECK(type_name(Checked{}) == "checked");
    const std::vector<std::pair<std::string, std::string>> bad{
        {R"("failure":"x")", R"(protocol: field "failure" of checked is not an object: )"},
        {R"("failure":{"detail":"x"})", R"(protocol: missing field "check" in checked: )"},
        {R"("failure":{"check":"","detail":"x"})",
         R"(protocol: field "check" of checked's failure is empty: )"},
    };
    for (const auto& [field, message] : bad) {
        INFO(field);
        CHECK_THROWS_WITH(decode_payload(R"({"v":7,"type":"checked",)" + field + "}"),
                          Catch::StartsWith(message));
    }
}

TEST_CASE("protocol: the cluster of 10,000 ranks stays compact", "[protocol]") {
    // 1,250 nodes of 8 tasks, each with an IPv4 address.
    Cluster cluster;
    for (int node = 1; node <= 1250; ++node) {
        cluster.addresses.emplace(fmt::format("node{:04}", node),
                                  fmt::format("10.78.{}.{}", node / 250, node % 250 + 1));
    }
    const auto size = [&cluster] { return encode_payload(cluster).size(); };
    const std::size_t addresses_only = size();
    CHECK(addresses_only < std::size_t{40} * 1024);
    // Usually every launcher got its planned port: nothing more is sent.
    // One moved port per node, in the node's last task: a zero for every other rank.
    cluster.ports.assign(10000, 0);
    for (std::size_t rank = 7; rank < 10000; rank += 8) {
        cluster.ports[rank] = 31999;
    }
    CHECK(size() < k_max_frame);
    // Every port moved (the worst case): above 64 KiB, which an authenticated coordinator's
    // frames may exceed (docs/protocol.md).
    cluster.ports.assign(10000, 31999);
    CHECK(size() > k_max_frame);
    CHECK(size() < std::size_t{100} * 1024);
}

TEST_CASE("protocol: malformed payloads are protocol errors", "[protocol]") {
    const auto [payload, message] = GENERATE(table<std::string, std::string>({
        {"", R"(protocol: not valid JSON: "")"},
        {"{", R"(protocol: not valid JSON: "{")"},
        {"[1,2]", R"(protocol: not a JSON object: "[1,2]")"},
        {R"({"type":"heartbeat"})",
         R"(protocol: unsupported protocol version (expected "v":7): "{\"type\":\"heartbeat\"}")"},
        // Version 1 (a hello without a step) is no longer understood.
        {R"({"v":1,"type":"heartbeat"})",
         R"(protocol: protocol version 1 (this tfslurm speaks version 7): "{\"v\":1,\"type\":\"heartbeat\"}")"},
        {R"({"v":"1","type":"heartbeat"})",
         R"(protocol: unsupported protocol version (expected "v":7): "{\"v\":\"1\",\"type\":\"heartbeat\"}")"},
        {R"({"v":7})", R"(protocol: missing field "type" in message: "{\"v\":7}")"},
        {R"({"v":7,"type":"launch"})",
         R"(protocol: unknown message type "launch": "{\"v\":7,\"type\":\"launch\"}")"},
        {R"({"v":7,"type":"interrupt"})",
         R"(protocol: missing field "signal" in interrupt: "{\"v\":7,\"type\":\"interrupt\"}")"},
        {R"({"v":7,"type":"interrupt","signal":"15"})",
         R"(protocol: field "signal" of interrupt is not an integer in [1, 127]: "{\"v\":7,\"type\":\"interrupt\",\"signal\":\"15\"}")"},
        {R"({"v":7,"type":"interrupt","signal":0})",
         R"(protocol: field "signal" of interrupt is not an integer in [1, 127]: "{\"v\":7,\"type\":\"interrupt\",\"signal\":0}")"},
        {R"({"v":7,"type":"welcome","ranks":-1})",
         R"(protocol: field "ranks" of welcome is not an integer in [0, 4294967295]: "{\"v\":7,\"type\":\"welcome\",\"ranks\":-1}")"},
        {R"({"v":7,"type":"exit","status":{"kind":"stopped"}})",
         R"(protocol: field "status.kind" of exit has an unknown value: "{\"v\":7,\"type\":\"exit\",\"status\":{\"kind\":\"stopped\"}}")"},
        {R"({"v":7,"type":"exit","status":3})",
         R"(protocol: field "status" of exit is not an object: "{\"v\":7,\"type\":\"exit\",\"status\":3}")"},
        {R"({"v":7,"type":"challenge","nonce":"zz"})",
         R"(protocol: field "nonce" of challenge is not 32 bytes of hex: "{\"v\":7,\"type\":\"challenge\",\"nonce\":\"zz\"}")"},
        {R"({"v":7,"type":"stop","reason":"bored"})",
         R"(protocol: field "reason" of stop has an unknown value: "{\"v\":7,\"type\":\"stop\",\"reason\":\"bored\"}")"},
        {R"({"v":7,"type":"hello","job":1,"step":0,"rank":0,"role":"master","host":"n","pid":1,"auth":"secret","credential":""})",
         "protocol: field \"role\" of hello has an unknown value: "},
        {R"({"v":7,"type":"hello","job":1,"step":0,"rank":0,"role":"ps","host":"n","pid":1,"auth":"none","credential":""})",
         "protocol: field \"auth\" of hello has an unknown value: "},
        {R"({"v":7,"type":"hello","job":1,"step":0,"rank":4294967296,"role":"ps","host":"n","pid":1,"auth":"secret","credential":""})",
         "protocol: field \"rank\" of hello is not an integer in [0, 4294967295]: "},
        {R"({"v":7,"type":"hello","job":1,"step":0,"rank":0,"role":"ps","host":"n","pid":1,"auth":"secret","credential":"","nonce":"ab"})",
         "protocol: field \"nonce\" of hello is not 32 bytes of hex: "},
        {R"({"v":7,"type":"hello","job":1,"step":0,"rank":0,"role":"ps","host":"n","pid":1,"auth":"secret","credential":""})",
         "protocol: missing field \"nonce\" in hello: "},
        {R"({"v":7,"type":"hello","job":1,"rank":0,"role":"ps","host":"n","pid":1,"auth":"secret","credential":"","nonce":"ab"})",
         "protocol: missing field \"step\" in hello: "},
        {R"({"v":7,"type":"reject","reason":"no"})",
         "protocol: missing field \"code\" in reject: "},
        {R"({"v":7,"type":"reject","code":"wrong job","reason":"no"})",
         "protocol: field \"code\" of reject has an unknown value: "},
        {R"({"v":7,"type":"welcome","ranks":2})",
         "protocol: missing field \"credential\" in welcome: "},
        {"[[[[[[[[[[1]]]]]]]]]]", R"(protocol: nested too deeply: "[[[[[[[[[[1]]]]]]]]]]")"},
        {"{\"v\":7,\"type\":\"reject\",\"reason\":\"\xff\"}", "protocol: not valid JSON: "},
        // Stricter than nlohmann/json, whose parser read these before the protocol's own reader
        // (issue #33): a repeated key (it kept the last), bytes after a NUL (its end of input).
        {R"({"v":7,"type":"go","v":7})",
         R"(protocol: an object repeats a key: "{\"v\":7,\"type\":\"go\",\"v\":7}")"},
        {std::string("{\"v\":7,\"type\":\"go\"}\0{}", 22), "protocol: not valid JSON: "},
        {"{\"v\":7,\"type\":\"go\",\"x\":1e400}", "protocol: not valid JSON: "},
    }));
    INFO(payload);
    try {
        (void)decode_payload(payload);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::protocol);
        CHECK_THAT(e.what(), Catch::StartsWith(message));
    }
}

TEST_CASE("protocol: deep nesting is refused without recursion", "[protocol]") {
    const std::string deep = std::string(60000, '[') + std::string(60000, ']');
    CHECK_THROWS_MATCHES(decode_payload(deep), Error, Catch::Predicate<Error>([](const Error& e) {
                             return e.code() == Errc::protocol;
                         }));
    // Brackets inside strings do not count.
    const auto reject = std::get<Reject>(
        decode_payload(R"({"v":7,"type":"reject","code":"refused","reason":"[[[[[[[[[[[["})"));
    CHECK(reject.reason == "[[[[[[[[[[[[");
}

TEST_CASE("protocol: relay envelopes carry any message unchanged (the tree)", "[protocol]") {
    SECTION("a leader's hello says so; others do not carry the field") {
        Hello hello;
        hello.host = "n1";
        hello.auth = AuthMethod::secret;
        hello.nonce = k_nonce;
        CHECK(encode_payload(hello).find("relay") == std::string::npos);
        hello.relay = true;
        CHECK(encode_payload(hello).find("\"relay\":true") != std::string::npos);
        CHECK(std::get<Hello>(decode_payload(encode_payload(hello))).relay);
    }
    SECTION("upstream: one rank and its message, spliced in as text") {
        const Relay up{{5}, encode_payload(Heartbeat{}), {}};
        CHECK(encode_payload(up) ==
              R"({"msg":{"type":"heartbeat","v":7},"ranks":[5],"type":"relay","v":7})");
        CHECK(round_trip(up) == encode_payload(up));
    }
    SECTION("a message type the relay does not know passes through") {
        const std::string future = R"({"ports":[1,2],"type":"future","v":7})";
        check_relayable(future);
        const auto relay = std::get<Relay>(decode_payload(encode_payload(Relay{{7}, future, {}})));
        CHECK(relay.message == future);
        CHECK(relay.ranks == std::vector<std::uint32_t>{7});
        // The message's text as it came, spaces and all: the relay passes it on unchanged.
        const auto spaced = std::get<Relay>(decode_payload(
            R"({"msg": { "type" : "future", "v":7 } ,"ranks":[7],"type":"relay","v":7})"));
        CHECK(spaced.message == R"({ "type" : "future", "v":7 })");
    }
    SECTION("downstream: a broadcast once for several ranks") {
        const Relay down{{1, 2, 3}, encode_payload(Stop{StopReason::done, 0, 0}), {}};
        const auto decoded = std::get<Relay>(decode_payload(encode_payload(down)));
        CHECK(decoded.ranks == std::vector<std::uint32_t>{1, 2, 3});
        CHECK(decode_payload(decoded.message).index() == Message(Stop{}).index());
    }
    SECTION("frame parts around a shared payload make the same bytes as encoding") {
        const std::string stop = encode_payload(Stop{StopReason::done, 0, 0});
        const auto relayed = frame_parts(stop.size(), {1, 2, 3}, k_max_trusted_frame);
        CHECK(relayed.head + stop + relayed.tail ==
              frame_payload(encode_payload(Relay{{1, 2, 3}, stop, {}}), k_max_trusted_frame));
        const auto direct = frame_parts(stop.size(), {}, k_max_trusted_frame);
        CHECK(direct.tail.empty());
        CHECK(direct.head + stop == frame_payload(stop, k_max_trusted_frame));
        CHECK_THROWS_WITH(frame_parts(k_max_frame, {1}),
                          Catch::StartsWith("protocol: message of 65577 bytes exceeds the 65536"));
    }
    SECTION("a local connection's end") {
        const Relay closed{{4}, {}, "connection closed"};
        CHECK(encode_payload(closed) ==
              R"({"closed":"connection closed","ranks":[4],"type":"relay","v":7})");
        CHECK(round_trip(closed) == encode_payload(closed));
    }
    SECTION("malformed envelopes") {
        CHECK_THROWS_WITH(decode_payload(R"({"msg":{},"ranks":[],"type":"relay","v":7})"),
                          Catch::StartsWith("protocol: field \"ranks\" of relay is not a list"));
        CHECK_THROWS_WITH(decode_payload(R"({"msg":{},"ranks":[-1],"type":"relay","v":7})"),
                          Catch::StartsWith("protocol: field \"ranks\" of relay holds"));
        CHECK_THROWS_WITH(decode_payload(R"({"msg":"x","ranks":[1],"type":"relay","v":7})"),
                          Catch::StartsWith("protocol: field \"msg\" of relay is not an object"));
        CHECK_THROWS_WITH(decode_payload(R"({"ranks":[1],"type":"relay","v":7})"),
                          Catch::StartsWith("protocol: relay carries neither"));
        CHECK_THROWS_WITH(check_relayable("[1]"), "protocol: not a JSON object: \"[1]\"");
        CHECK_THROWS_WITH(
            check_relayable(R"({"type":"x","v":2})"),
            Catch::StartsWith("protocol: protocol version 2 (this tfslurm speaks version 7)"));
        CHECK_THROWS_AS(check_relayable(R"({"v":7})"), Error);
    }
}

TEST_CASE("protocol: a batch is several payloads under one tag", "[protocol]") {
    const std::string heartbeat = encode_payload(Heartbeat{});
    const std::string relayed = encode_payload(Relay{{5}, encode_payload(Exit{}), {}});
    SECTION("one object is one message, decoded as decode_unwrapped() does") {
        const std::vector<Unwrapped> one = decode_batch(relayed);
        REQUIRE(one.size() == 1);
        CHECK(std::get<Relay>(one[0].message).ranks == std::vector<std::uint32_t>{5});
        REQUIRE(one[0].inner);
        CHECK(std::holds_alternative<Exit>(*one[0].inner));
    }
    SECTION("an array of payloads: each as it would go alone, in order") {
        const std::vector<Unwrapped> three =
            decode_batch("[" + relayed + "," + heartbeat + "," + relayed + "]");
        REQUIRE(three.size() == 3);
        CHECK(std::holds_alternative<Relay>(three[0].message));
        CHECK(std::holds_alternative<Exit>(*three[0].inner));
        CHECK(std::holds_alternative<Heartbeat>(three[1].message));
        CHECK_FALSE(three[1].inner);
        CHECK(std::holds_alternative<Exit>(*three[2].inner));
    }
    SECTION("an element nests as deep as a payload alone, not deeper") {
        const auto nested = [](int levels) {
            std::string text = R"({"type":"heartbeat","v":7,"x":)";
            for (int i = 1; i < levels; ++i) {
                text += i + 1 < levels ? R"({"x":)" : "{";
            }
            return text + std::string(static_cast<std::size_t>(levels), '}');
        };
        CHECK(decode_batch(nested(8)).size() == 1);
        CHECK(decode_batch("[" + nested(8) + "," + heartbeat + "]").size() == 2);
        CHECK_THROWS_WITH(decode_batch(nested(9)),
                          Catch::StartsWith("protocol: nested too deeply"));
        CHECK_THROWS_WITH(decode_batch("[" + nested(9) + "," + heartbeat + "]"),
                          Catch::StartsWith("protocol: nested too deeply"));
    }
    SECTION("malformed batches, each error quoting what it refuses") {
        CHECK_THROWS_WITH(decode_batch("[]"),
                          "protocol: a batch of 0 messages (expected 2 or more): \"[]\"");
        CHECK_THROWS_WITH(
            decode_batch("[" + heartbeat + "]"),
            R"(protocol: a batch of 1 message (expected 2 or more): "[{\"type\":\"heartbeat\",\"v\":7}]")");
        CHECK_THROWS_WITH(decode_batch("[1," + heartbeat + "]"),
                          "protocol: not a JSON object: \"1\"");
        CHECK_THROWS_WITH(
            decode_batch("[" + heartbeat + R"(,{"type":"heartbeat","v":6}])"),
            R"(protocol: protocol version 6 (this tfslurm speaks version 7): "{\"type\":\"heartbeat\",\"v\":6}")");
        CHECK_THROWS_WITH(decode_batch("[" + heartbeat + "," + heartbeat),
                          Catch::StartsWith("protocol: not valid JSON"));
        CHECK_THROWS_WITH(decode_batch("[" + heartbeat + "],"),
                          Catch::StartsWith("protocol: not valid JSON"));
        CHECK_THROWS_WITH(decode_batch(" [" + heartbeat + "," + heartbeat + "]"),
                          Catch::StartsWith("protocol: not a JSON object"));
        CHECK_THROWS_WITH(decode_batch("[[" + heartbeat + "," + heartbeat + "]," + heartbeat + "]"),
                          Catch::StartsWith("protocol: not a JSON object: \"[{"));
    }
}
