// SPDX-License-Identifier: MIT
// A node leader's relay (RelayMachine), table-driven: each scenario is a list of events (with
// the time) and the actions each one must produce. The relay's sockets are test_node_relay's.
#include "fixtures.hpp"
#include "log_capture.hpp"

#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/relay.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>

#include <sstream>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

using tfslurm::test::k_t0;

/// The leader of ranks 1 and 2 in step 4242.0: heartbeat 1 s, timeout 10 s, ranks awaited until
/// 60 s.
RelaySettings settings() {
    RelaySettings s;
    s.step = {4242, 0};
    s.ranks = {1, 2};
    s.heartbeat = 1s;
    s.heartbeat_timeout = 10s;
    s.wait_until = k_t0 + 60s;
    return s;
}

/// A hello of `rank`; `relay`: one that claims to relay itself.
std::string hello(std::uint32_t rank, bool relay) {
    protocol::Hello h;
    h.job = 4242;
    h.rank = rank;
    h.host = "n1";
    h.pid = 100 + rank;
    h.nonce = std::string(64, 'a');
    h.relay = relay;
    return protocol::encode_payload(h);
}

std::vector<std::uint32_t> ranks_of(std::istringstream& in) {
    std::vector<std::uint32_t> ranks;
    std::string list;
    in >> list;
    std::istringstream items(list);
    for (std::string item; std::getline(items, item, ',');) {
        ranks.push_back(static_cast<std::uint32_t>(std::stoul(item)));
    }
    return ranks;
}

/// The start-up phases a `send S phases` heartbeat carries: task and up, 40 ms apart.
StartupTimes relay_phases() {
    StartupTimes out;
    out[StartupPhase::task] = WallClock::time_point{} + std::chrono::milliseconds{1000};
    out[StartupPhase::up] = WallClock::time_point{} + std::chrono::milliseconds{1040};
    return out;
}

/// Feed one event, written as in the tables: `listening`, `accept S` (nonce SSS...), `hello S R
/// [relay]`, `verified S`, `verified S reject <reason>`, `send S exit|heartbeat|welcome|garbage`
/// (a local launcher's frame), `unreadable S <what>`, `closed S <why>`, `down R,R
/// welcome|reject|stop|heartbeat` (from the coordinator), `pulse`, `timer watch|node
/// heartbeat|wait`, `stop waiting`, `close`, `hold` (its answer is shown as `held` or `not
/// held`), `upstream open` (the leader registered).
std::vector<std::string> feed(RelayMachine& m, const std::string& event, Clock::time_point now) {
    std::istringstream in(event);
    std::string word;
    in >> word;
    SessionId session = 0;
    std::string text;
    const auto rest = [&in] {
        std::string line;
        std::getline(in >> std::ws, line);
        return line;
    };
    std::vector<std::string> extra;
    if (word == "listening") {
        m.listening(now);
    } else if (word == "accept") {
        in >> session;
        m.accepted(session, std::string(64, static_cast<char>('0' + session % 10)), now);
    } else if (word == "hello") {
        std::uint32_t rank = 0;
        in >> session >> rank >> text;
        m.received(session, hello(rank, text == "relay"), now);
    } else if (word == "verified") {
        in >> session >> text;
        if (text == "reject") {
            m.verified(session, protocol::Reject{protocol::RejectCode::refused, rest()}, now);
        } else {
            m.verified(session, std::nullopt, now);
        }
    } else if (word == "send") {
        in >> session >> text;
        const std::string payload =
            text == "exit" ? protocol::encode_payload(protocol::Exit{ExitStatus::exited(0), {}})
            : text == "heartbeat" ? protocol::encode_payload(protocol::Heartbeat{})
            : text == "usage"     ? protocol::encode_payload(protocol::Heartbeat{
                                    protocol::Usage{1200, 4096, {}}, {}, {}, {}})
            : text == "leader-beat"
                ? protocol::encode_payload(protocol::Heartbeat{{}, {{3, {1, 1, {}}}}, {}, {}})
            : text == "phases"
                ? protocol::encode_payload(protocol::Heartbeat{{}, {}, relay_phases(), {}})
            : text == "leader-phases"
                ? protocol::encode_payload(protocol::Heartbeat{{}, {}, {}, {{3, relay_phases()}}})
            : text == "welcome" ? protocol::encode_payload(protocol::Welcome{3, "x"})
                                : std::string("{\"type\":");
        m.received(session, payload, now);
    } else if (word == "unreadable") {
        in >> session;
        m.unreadable(session, rest(), now);
    } else if (word == "closed") {
        in >> session;
        m.closed(session, rest(), now);
    } else if (word == "down") {
        const auto ranks = ranks_of(in);
        in >> text;
        const protocol::Message message =
            text == "welcome"  ? protocol::Message{protocol::Welcome{3, {}}}
            : text == "reject" ? protocol::Message{protocol::Reject{protocol::RejectCode::refused,
                                                                    "rank 1 is already registered"}}
            : text == "stop"   ? protocol::Message{protocol::Stop{}}
                               : protocol::Message{protocol::Heartbeat{}};
        m.downstream({ranks, protocol::encode_payload(message), {}}, now);
    } else if (word == "pulse") {
        m.pulse(now);
    } else if (word == "upstream") {
        m.upstream_open(now);
    } else if (word == "timer") {
        text = rest();
        m.timer_fired(text == "watch"            ? RelayTimer::watch
                      : text == "node heartbeat" ? RelayTimer::node_heartbeat
                                                 : RelayTimer::wait,
                      now);
    } else if (word == "stop") {
        m.stop_waiting(now);
    } else if (word == "close") {
        m.close(now);
    } else if (word == "hold") {
        extra.emplace_back(m.hold(now) ? "held" : "not held");
    } else {
        FAIL("unknown event in the table: " << event);
    }
    std::vector<std::string> out;
    for (const auto& action : m.take_actions()) {
        out.push_back(describe(action, k_t0));
    }
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
}

struct Step {
    int at_ms = 0;
    std::string event;
    std::vector<std::string> actions;
};

/// Run a scenario; every step's actions must match exactly.
RelayMachine play(const RelaySettings& relay_settings, const std::vector<Step>& steps) {
    RelayMachine m(relay_settings);
    for (const auto& step : steps) {
        INFO("at " << step.at_ms << " ms: " << step.event);
        CHECK(feed(m, step.event, k_t0 + Millis{step.at_ms}) == step.actions);
    }
    return m;
}

using Actions = std::vector<std::string>;
const Actions k_nothing;

/// Rank `rank` registers on session `s` (accepted, hello, verified, welcomed) from `at` ms.
std::vector<Step> registers(SessionId s, std::uint32_t rank, int at) {
    const auto id = std::to_string(s);
    const auto r = std::to_string(rank);
    return {
        {at, "accept " + id, {"to " + id + " challenge"}},
        {at, "hello " + id + " " + r, {"verify " + id + " rank " + r}},
        {at, "verified " + id, {"up relay [" + r + "] hello"}},
        {at, "down " + r + " welcome", {"welcome " + id + " rank " + r}},
    };
}

std::vector<Step> operator+(std::vector<Step> a, const std::vector<Step>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

} // namespace

TEST_CASE("relay: followers register through the leader and then every frame passes unchanged",
          "[relay]") {
    const auto m =
        play(settings(),
             std::vector<Step>{{0, "listening", {"arm watch 250", "arm wait 60000"}}} +
                 registers(1, 1, 10) +
                 std::vector<Step>{
                     {20, "send 1 exit", {"up relay [1] exit"}},
                     {20, "send 1 welcome", {"up relay [1] welcome"}},
                     {30, "down 1,2 stop", {"to 1 stop"}}, // rank 2 is not here yet
                     {40, "closed 1 connection closed", {"up relay [1] closed: connection closed"}},
                 });
    CHECK(m.busy()); // rank 2 never came
}

TEST_CASE("relay: before the leader registered its followers' hellos are checked and wait, then "
          "go up in their order",
          "[relay]") {
    auto waiting = settings();
    waiting.upstream_waits = true;
    play(waiting,
         {
             {0, "listening", {"arm watch 250", "arm wait 60000"}},
             {1, "accept 1", {"to 1 challenge"}},
             {1, "accept 2", {"to 2 challenge"}},
             {2, "hello 2 2", {"verify 2 rank 2"}},
             {2, "verified 2", {}},
             {3, "hello 1 1", {"verify 1 rank 1"}},
             {3, "verified 1", {}},
             {4, "closed 2 connection closed", {}},
             // The leader's welcome: what waited goes, as it came: rank 2's hello before its end.
             {5,
              "upstream open",
              {"up relay [2] hello",
               "up relay [1] hello",
               "up relay [2] closed: connection closed"}},
             {6, "down 1 welcome", {"welcome 1 rank 1"}},
             {7, "send 1 exit", {"up relay [1] exit"}},
             {8, "upstream open", {}},
         });
}

TEST_CASE("relay: a relay closed before its leader registered sends nothing up", "[relay]") {
    auto waiting = settings();
    waiting.upstream_waits = true;
    play(waiting,
         {
             {0, "accept 1", {"to 1 challenge"}},
             {1, "hello 1 1", {"verify 1 rank 1"}},
             {1, "verified 1", {}},
             {2, "close", {"stop listening", "close 1", "idle"}},
             {3, "upstream open", {}},
         });
}

TEST_CASE("relay: the local heartbeats stay here and the coordinator's answer comes down",
          "[relay]") {
    play(settings(),
         registers(1, 1, 0) + registers(2, 2, 0) +
             std::vector<Step>{
                 {10, "send 1 heartbeat", k_nothing},
                 {20, "pulse", {"to 1 heartbeat", "to 2 heartbeat"}},
             });
}

TEST_CASE("relay: a follower's usage stays here for the leader's heartbeat", "[relay][metrics]") {
    const test::LogCapture log(spdlog::level::warn);
    const auto m = play(settings(),
                        registers(1, 1, 0) + registers(2, 2, 0) +
                            std::vector<Step>{
                                {10, "send 2 usage", k_nothing},
                                {10, "send 1 heartbeat", k_nothing},
                            });
    CHECK(m.follower_usages() ==
          std::vector<protocol::RankUsage>{{2, protocol::Usage{1200, 4096, {}}}});
    // A follower's heartbeat that speaks for others is a protocol error: its connection ends.
    auto again =
        play(settings(),
             registers(1, 1, 0) +
                 std::vector<Step>{
                     {10, "send 1 leader-beat", {"close 1", "up relay [1] closed: protocol error"}},
                 });
    CHECK(again.follower_usages().empty());
}

TEST_CASE("relay: a follower's start-up phases go up once with the leader's heartbeat",
          "[relay][startup]") {
    const test::LogCapture log(spdlog::level::warn);
    auto m = play(settings(),
                  registers(1, 1, 0) + registers(2, 2, 0) +
                      std::vector<Step>{
                          {10, "send 2 phases", k_nothing},
                          {10, "send 1 heartbeat", k_nothing},
                      });
    CHECK(m.take_follower_startups() == std::vector<protocol::RankStartup>{{2, relay_phases()}});
    CHECK(m.take_follower_startups().empty()); // taken: sent once
    CHECK(m.follower_usages().empty());        // phases are no usage
    // A follower's heartbeat that carries others' phases is a protocol error.
    auto again = play(
        settings(),
        registers(1, 1, 0) +
            std::vector<Step>{
                {10, "send 1 leader-phases", {"close 1", "up relay [1] closed: protocol error"}},
            });
    CHECK(again.take_follower_startups().empty());
}

TEST_CASE("relay: a hello that fails a check is refused here and the coordinator never hears "
          "of it",
          "[relay]") {
    const test::LogCapture log(spdlog::level::warn);
    play(
        settings(),
        registers(1, 1, 0) +
            std::vector<Step>{
                // A bad proof.
                {10, "accept 2", {"to 2 challenge"}},
                {10, "hello 2 2", {"verify 2 rank 2"}},
                {10, "verified 2 reject bad secret proof", {"to 2 reject", "close 2 after writes"}},
                {11, "send 2 exit", k_nothing}, // closing: ignored
                {12, "closed 2 rejected", k_nothing},
                // Another node's rank, one that claims to relay, one registered already.
                {20, "accept 3", {"to 3 challenge"}},
                {20, "hello 3 5", {"verify 3 rank 5"}},
                {20, "verified 3", {"to 3 reject", "close 3 after writes"}},
                {21, "accept 4", {"to 4 challenge"}},
                {21, "hello 4 2 relay", {"verify 4 rank 2"}},
                {21, "verified 4", {"to 4 reject", "close 4 after writes"}},
                {22, "accept 5", {"to 5 challenge"}},
                {22, "hello 5 1", {"verify 5 rank 1"}},
                {22, "verified 5", {"to 5 reject", "close 5 after writes"}},
            });
    CHECK(log.text() ==
          "warning: relay: rejected rank 2 (pid 102): bad secret proof\n"
          "warning: relay: rejected rank 5 (pid 105): rank 5 does not run on this "
          "node's relay\n"
          "warning: relay: rejected rank 2 (pid 102): rank 2 does not run on this "
          "node's relay\n"
          "warning: relay: rejected rank 1 (pid 101): rank 1 is already registered\n");
}

TEST_CASE("relay: a protocol error costs the local launcher its connection and not the node",
          "[relay]") {
    const test::LogCapture log(spdlog::level::warn);
    play(settings(),
         std::vector<Step>{
             // Not a hello first: closed, nobody upstream heard of it.
             {0, "accept 1", {"to 1 challenge"}},
             {0, "send 1 exit", {"close 1"}},
             // A message before the coordinator's answer: its hello went up, so does its end.
             {1, "accept 2", {"to 2 challenge"}},
             {1, "hello 2 1", {"verify 2 rank 1"}},
             {1, "verified 2", {"up relay [1] hello"}},
             {2, "send 2 exit", {"close 2", "up relay [1] closed: protocol error"}},
         } + registers(3, 2, 3) +
             std::vector<Step>{
                 {4, "send 3 garbage", {"close 3", "up relay [2] closed: protocol error", "idle"}},
             });
    CHECK(log.text() ==
          "warning: relay: closing a local connection: protocol: expected hello, got exit\n"
          "warning: relay: closing a local connection (rank 1): protocol: a message before the "
          "welcome\n"
          "warning: relay: closing a local connection (rank 2): protocol: not valid JSON: "
          "\"{\\\"type\\\":\"\n");
}

TEST_CASE("relay: the coordinator's reject is passed on and its end reported", "[relay]") {
    play(settings(),
         std::vector<Step>{
             {0, "accept 1", {"to 1 challenge"}},
             {0, "hello 1 1", {"verify 1 rank 1"}},
             {0, "verified 1", {"up relay [1] hello"}},
             {1, "down 1 reject", {"to 1 reject", "close 1 after writes"}},
             {2, "closed 1 rejected", {"up relay [1] closed: rejected"}},
             // Anything but a welcome or a reject as the answer closes it.
             {3, "accept 2", {"to 2 challenge"}},
             {3, "hello 2 1", {"verify 2 rank 1"}},
             {3, "verified 2", {"up relay [1] hello"}},
             {4,
              "down 1 stop",
              {"close 2",
               "up relay [1] closed: protocol: expected welcome or reject for rank 1, got stop"}},
         });
}

TEST_CASE("relay: a registered launcher silent for the heartbeat timeout is closed", "[relay]") {
    const test::LogCapture log(spdlog::level::warn);
    play(settings(),
         std::vector<Step>{{0, "listening", {"arm watch 250", "arm wait 60000"}}} +
             registers(1, 1, 0) + registers(2, 2, 0) +
             std::vector<Step>{
                 {9000, "send 2 heartbeat", k_nothing},
                 {10000, "timer watch", {"arm watch 10250"}}, // 10 s is not too long
                 {10250,
                  "timer watch",
                  {"close 1", "up relay [1] closed: no heartbeat for 10 s", "arm watch 10500"}},
                 {19000, "timer watch", {"arm watch 19250"}},
                 {19250,
                  "timer watch",
                  {"close 2",
                   "up relay [2] closed: no heartbeat for 10 s",
                   "idle",
                   "arm watch 19500"}},
             });
    CHECK(log.text() == "warning: relay: rank 1: no heartbeat for 10 s\n"
                        "warning: relay: rank 2: no heartbeat for 10 s\n");
}

TEST_CASE("relay: busy until every local launcher is gone and the wait is over", "[relay]") {
    auto m =
        play(settings(),
             std::vector<Step>{{0, "listening", {"arm watch 250", "arm wait 60000"}}} +
                 registers(1, 1, 0) +
                 std::vector<Step>{
                     {5, "closed 1 connection closed", {"up relay [1] closed: connection closed"}},
                 });
    CHECK(m.busy()); // rank 2 may still come
    CHECK(feed(m, "timer wait", k_t0 + 60s) == Actions{"idle"});
    CHECK_FALSE(m.busy());
    // A launcher that connects after the wait makes it busy again, and idle once gone.
    CHECK(feed(m, "accept 2", k_t0 + 61s) == Actions{"to 2 challenge"});
    CHECK(m.busy());
    CHECK(feed(m, "closed 2 connection closed", k_t0 + 62s) == Actions{"idle"});
    CHECK(feed(m, "stop waiting", k_t0 + 63s) == k_nothing); // idle already
}

TEST_CASE("relay: the leader's closing waits for its node while it heartbeats for it", "[relay]") {
    play(settings(),
         registers(1, 1, 0) +
             std::vector<Step>{
                 {0, "stop waiting", k_nothing}, // rank 1 is still there
                 {100, "hold", {"arm node heartbeat 1100", "held"}},
                 {200, "hold", {"held"}}, // one heartbeat, however many actions wait
                 {1100, "timer node heartbeat", {"up heartbeat", "arm node heartbeat 2100"}},
                 {1500,
                  "closed 1 connection closed",
                  {"up relay [1] closed: connection closed", "idle"}},
                 {2100, "timer node heartbeat", k_nothing},
                 {2200, "hold", {"not held"}},
             });
}

TEST_CASE("relay: closed with the leader's connection it closes every local launcher unreported",
          "[relay]") {
    auto m = play(settings(),
                  registers(1, 1, 0) +
                      std::vector<Step>{
                          {1, "accept 2", {"to 2 challenge"}},
                          {2, "close", {"stop listening", "close 1", "close 2", "idle"}},
                          {3, "closed 1 connection closed", k_nothing},
                          {4, "timer watch", k_nothing},
                          {5, "accept 3", {"close 3"}},
                          {6, "close", k_nothing},
                      });
    CHECK(m.is_closed());
    CHECK_FALSE(m.busy());
}
