// SPDX-License-Identifier: MIT
// How a launcher reaches its coordinator (the Connector), table-driven: each scenario is a list
// of events (with the time) and the actions each one must produce.
#include "fixtures.hpp"
#include "log_capture.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/connector.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

using tfslurm::test::k_t0;

/// Rank 1 (worker:0 on n2) of step 12.0, three candidate control ports on n1, 10 s to connect,
/// in a step of more nodes than quick polls are for (small_step() has them).
ConnectorSettings settings() {
    ConnectorSettings s;
    s.dialers = k_quick_poll_dialers + 1;
    s.rank = 1;
    s.self = {Role::worker, 0, "n2"};
    s.step = {12, 0};
    s.pid = 4242;
    s.control_address = "n1";
    s.control_port = 29000;
    s.candidates = {29000, 32000, 32001};
    s.connect_timeout = 10s;
    return s;
}

/// settings() in a step of 3 nodes: quick polls.
ConnectorSettings small_step() {
    ConnectorSettings s = settings();
    s.dialers = 3;
    return s;
}

/// settings() with one candidate.
ConnectorSettings one_port() {
    ConnectorSettings s = settings();
    s.candidates = {29000};
    return s;
}

/// settings() of a follower (rank 3) whose leader, rank 2, relays at @tfslurm-0/relay-12.0-2.
ConnectorSettings follower() {
    ConnectorSettings s = one_port();
    s.rank = 3;
    s.self = {Role::worker, 2, "n2"};
    s.leader = 2;
    s.relay_path = "@tfslurm-0/relay-12.0-2";
    return s;
}

protocol::RejectCode code_of(const std::string& word) {
    return word == "wrong_job"    ? protocol::RejectCode::wrong_job
           : word == "wrong_step" ? protocol::RejectCode::wrong_step
                                  : protocol::RejectCode::refused;
}

/// Feed one event, written as in the tables: `start`, `connected`, `refused <why>` (the
/// connection failed), `closed <why>` (it ended before the welcome), `unreachable <why>`,
/// `foreign <uid> <pid>` (the relay socket is that process's; this user is uid 0),
/// `challenge` (nonce c0ffee), `welcome` (credential proof), `reject <code> <reason>`,
/// `heartbeat`, `garbled <what>`, `proved` (credential cred, nonce n0nce), `proof failed
/// <what>`, `verified`, `bad proof <why>`, `timer retry|deadline|challenge`.
void feed(Connector& c, const std::string& event, Clock::time_point now) {
    std::istringstream in(event);
    std::string word;
    in >> word;
    std::string text;
    const auto rest = [&in] {
        std::string line;
        std::getline(in >> std::ws, line);
        return line;
    };
    if (word == "start") {
        c.start(now);
    } else if (word == "connected") {
        c.connected(now);
    } else if (word == "refused") {
        c.connect_failed(rest(), now);
    } else if (word == "closed") {
        c.disconnected(rest(), now);
    } else if (word == "unreachable") {
        c.unreachable(rest(), now);
    } else if (word == "foreign") {
        std::uint32_t uid = 0;
        std::int64_t pid = 0;
        in >> uid >> pid;
        c.foreign_peer(uid, pid, 0, now);
    } else if (word == "challenge") {
        c.received(protocol::Challenge{"c0ffee"}, now);
    } else if (word == "welcome") {
        c.received(protocol::Welcome{4, "proof"}, now);
    } else if (word == "reject") {
        in >> text;
        c.received(protocol::Reject{code_of(text), rest()}, now);
    } else if (word == "heartbeat") {
        c.received(protocol::Heartbeat{}, now);
    } else if (word == "garbled") {
        c.garbled(rest(), now);
    } else if (word == "proved") {
        c.proved("cred", "n0nce", now);
    } else if (word == "proof") {
        in >> text; // failed
        c.proof_failed(rest(), now);
    } else if (word == "verified") {
        c.verified(std::nullopt, now);
    } else if (word == "bad") {
        in >> text; // proof
        c.verified(rest(), now);
    } else if (word == "timer") {
        in >> text;
        c.timer_fired(text == "retry"      ? ConnectorTimer::retry
                      : text == "deadline" ? ConnectorTimer::deadline
                                           : ConnectorTimer::challenge,
                      now);
    } else {
        FAIL("unknown event in the table: " << event);
    }
}

/// Actions in one line each; a hello shows what it says of the launcher.
std::vector<std::string> render(const std::vector<ConnectorAction>& actions) {
    std::vector<std::string> out;
    for (const auto& action : actions) {
        const auto* send = std::get_if<connector_action::Send>(&action);
        const auto* hello =
            send != nullptr ? std::get_if<protocol::Hello>(&send->message) : nullptr;
        if (hello == nullptr) {
            out.push_back(describe(action, k_t0));
            continue;
        }
        out.push_back(fmt::format("send hello {}.{} rank {} {} on {} pid {} {} {} nonce {}{}{}{}",
                                  hello->job,
                                  hello->step,
                                  hello->rank,
                                  to_string(hello->role),
                                  hello->host,
                                  hello->pid,
                                  protocol::to_string(hello->auth),
                                  hello->credential,
                                  hello->nonce,
                                  hello->address.empty() ? "" : " address " + hello->address,
                                  hello->relay ? " relay" : "",
                                  hello->port == 0 ? "" : " port " + std::to_string(hello->port)));
    }
    return out;
}

struct Step {
    int at_ms = 0;
    std::string event;
    std::vector<std::string> actions;
};

/// Run a scenario; every step's actions must match exactly.
Connector play(const ConnectorSettings& connector_settings, const std::vector<Step>& steps) {
    Connector c(connector_settings);
    for (const auto& step : steps) {
        INFO("at " << step.at_ms << " ms: " << step.event);
        feed(c, step.event, k_t0 + Millis{step.at_ms});
        CHECK(render(c.take_actions()) == step.actions);
    }
    return c;
}

using Actions = std::vector<std::string>;
const Actions k_nothing;
/// The answer to the challenge at `endpoint` (what the proofs bind: the candidate dialled).
Actions challenged(const std::string& endpoint = "tcp:29000") {
    return {"cancel challenge", "prove c0ffee at " + endpoint};
}
const Actions k_challenged = challenged();
/// The welcome's proof checked at `endpoint`.
Actions verify(const std::string& endpoint = "tcp:29000") {
    return {"verify proof n0nce at " + endpoint};
}
const Actions k_hello{"send hello 12.0 rank 1 worker on n2 pid 4242 secret cred nonce n0nce"};
const Actions k_registered_29000{
    "cancel deadline", "cancel retry", "cancel challenge", "registered n1:29000"};

/// The actions of leaving the current attempt for `next` (a port of n1).
Actions next(int port) {
    return {"cancel challenge", "close attempt", fmt::format("connect n1:{}", port)};
}

/// The actions of a round that failed on every candidate: a retry `at` ms.
Actions retry(int at) {
    return {"cancel challenge", "close attempt", fmt::format("arm retry {}", at)};
}

const std::string k_io_hint = " (hint: is rank 0's launcher running? all tasks must run 'tfslurm "
                              "run' with the same plan options)";

} // namespace

TEST_CASE("connector: registered after the challenge and the hello and a proved welcome",
          "[connector]") {
    const auto c = play(settings(),
                        {
                            {0, "start", {"arm deadline 10000", "connect n1:29000"}},
                            {5, "connected", {"arm challenge 2005"}},
                            {6, "challenge", k_challenged},
                            {6, "proved", k_hello},
                            {9, "welcome", verify()},
                            {9, "verified", k_registered_29000},
                            {10, "timer deadline", k_nothing}, // a late expiry changes nothing
                            {10, "challenge", k_nothing},
                        });
    CHECK(c.phase() == Connector::Phase::registered);
    CHECK(c.control() == "n1:29000");
}

TEST_CASE("connector: the hello says what the launcher is and holds and relays", "[connector]") {
    ConnectorSettings s = settings();
    s.auth = protocol::AuthMethod::munge;
    s.address = "10.0.0.2";
    s.trainer_port = 23001;
    s.leads_node = true;
    play(s,
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "connected", {"arm challenge 2000"}},
             {0, "challenge", k_challenged},
             {0,
              "proved",
              {"send hello 12.0 rank 1 worker on n2 pid 4242 munge cred nonce n0nce address "
               "10.0.0.2 relay port 23001"}},
         });
}

TEST_CASE("connector: the candidates in order and then a back-off that doubles up to 1 s",
          "[connector]") {
    play(settings(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {1, "refused Connection refused", next(32000)},
             {2, "refused Connection refused", next(32001)},
             {3, "refused Connection refused", retry(5)},
             {5, "timer retry", {"connect n1:29000"}},
             {6, "refused Connection refused", next(32000)},
             {7, "refused Connection refused", next(32001)},
             {8, "refused Connection refused", retry(12)},
         });
    // One candidate: each refusal is a round; 2, 4, 8, ... 512, then 1000 ms each.
    std::vector<Step> steps{{0, "start", {"arm deadline 10000", "connect n1:29000"}}};
    int now = 0;
    for (const int backoff : {2, 4, 8, 16, 32, 64, 128, 256, 512, 1000, 1000}) {
        steps.push_back({now, "refused Connection refused", retry(now + backoff)});
        now += backoff;
        steps.push_back({now, "timer retry", {"connect n1:29000"}});
    }
    play(one_port(), steps);
}

TEST_CASE("connector: a small step's leader tries the first candidate alone every 1 ms while it "
          "refuses",
          "[connector]") {
    const auto c = play(small_step(),
                        {
                            {0, "start", {"arm deadline 10000", "connect n1:29000"}},
                            {0, "refused Connection refused", next(32000)},
                            {0, "refused Connection refused", next(32001)},
                            {0, "refused Connection refused", retry(1)},
                            {1, "timer retry", {"connect n1:29000"}},
                            {1, "refused Connection refused", retry(2)},
                            {2, "timer retry", {"connect n1:29000"}},
                            {2, "refused Connection refused", retry(3)},
                            {3, "timer retry", {"connect n1:29000"}},
                            {3, "connected", {"arm challenge 2003"}},
                            {3, "challenge", k_challenged},
                            {3, "proved", k_hello},
                            {4, "welcome", verify()},
                            {4, "verified", k_registered_29000},
                        });
    CHECK(c.control() == "n1:29000");
}

TEST_CASE("connector: after 100 ms the quick polls give way to rounds of every candidate",
          "[connector]") {
    std::vector<Step> steps{{0, "start", {"arm deadline 10000", "connect n1:29000"}},
                            {0, "refused Connection refused", next(32000)},
                            {0, "refused Connection refused", next(32001)},
                            {0, "refused Connection refused", retry(1)}};
    for (int now = 1; now < 100; ++now) {
        steps.push_back({now, "timer retry", {"connect n1:29000"}});
        steps.push_back({now, "refused Connection refused", retry(now + 1)});
    }
    // The back-off did not grow meanwhile: 2 ms, then 4.
    steps.push_back({100, "timer retry", {"connect n1:29000"}});
    steps.push_back({100, "refused Connection refused", retry(102)});
    steps.push_back({102, "timer retry", {"connect n1:29000"}});
    steps.push_back({102, "refused Connection refused", next(32000)});
    steps.push_back({102, "refused Connection refused", next(32001)});
    steps.push_back({102, "refused Connection refused", retry(106)});
    play(small_step(), steps);
}

TEST_CASE("connector: no quick poll once the first candidate answered, in a large step, or for "
          "an endpoint that cannot be resolved",
          "[connector]") {
    // Someone listens on the first candidate (another step's coordinator): polling it sooner
    // would find the same peer.
    play(small_step(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "connected", {"arm challenge 2000"}},
             {0, "challenge", k_challenged},
             {0, "proved", k_hello},
             {1, "reject wrong_step wrong step 12.0 (this is step 12.1)", next(32000)},
             {1, "refused Connection refused", next(32001)},
             {1, "refused Connection refused", retry(3)},
             {3, "timer retry", {"connect n1:29000"}},
             {3, "refused Connection refused", next(32000)},
         });
    // 33 nodes: each quick poll would be 33 connections a millisecond on rank 0's node.
    ConnectorSettings large = small_step();
    large.dialers = k_quick_poll_dialers + 1;
    play(large,
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "refused Connection refused", next(32000)},
             {0, "refused Connection refused", next(32001)},
             {0, "refused Connection refused", retry(2)},
         });
    play(small_step(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "unreachable cannot resolve n1: Host not found", retry(2)},
         });
}

TEST_CASE("connector: a follower on a node of many looks for its leader's relay again after 1 ms "
          "then within 100 ms",
          "[connector]") {
    // 33 followers (follower()'s dialers): no quick polls. 1, 2, 4, ... 64 ms, then the cap of
    // 100 ms.
    std::vector<Step> steps{
        {0, "start", {"arm deadline 10000", "connect @tfslurm-0/relay-12.0-2"}}};
    int now = 0;
    for (const int backoff : {1, 2, 4, 8, 16, 32, 64, 100, 100}) {
        steps.push_back({now, "refused No such file or directory", retry(now + backoff)});
        now += backoff;
        steps.push_back({now, "timer retry", {"connect @tfslurm-0/relay-12.0-2"}});
    }
    const auto c = play(follower(), steps);
    CHECK(c.control() == "rank 2's relay @tfslurm-0/relay-12.0-2");
}

TEST_CASE("connector: a follower on a node of few looks for its leader's relay every 1 ms, then "
          "backs off",
          "[connector]") {
    // Its leader has not bound the relay's socket yet (Slurm started the follower first): one
    // refused connect on its own node each millisecond for the first 100 ms, then 1, 2, 4 ms...
    ConnectorSettings few = follower();
    few.dialers = 1;
    std::vector<Step> steps{{0, "start", {"arm deadline 10000", "connect @tfslurm-0/relay-12.0-2"}},
                            {0, "refused Connection refused", retry(1)}};
    for (int now = 1; now < 100; ++now) {
        steps.push_back({now, "timer retry", {"connect @tfslurm-0/relay-12.0-2"}});
        steps.push_back({now, "refused Connection refused", retry(now + 1)});
    }
    int now = 100;
    for (const int backoff : {1, 2, 4}) {
        steps.push_back({now, "timer retry", {"connect @tfslurm-0/relay-12.0-2"}});
        steps.push_back({now, "refused Connection refused", retry(now + backoff)});
        now += backoff;
    }
    play(few, steps);
    // Once the socket answered (the leader listens and will challenge once it registered), a
    // connection lost before the welcome is made again after the back-off, not polled for.
    play(few,
         {
             {0, "start", {"arm deadline 10000", "connect @tfslurm-0/relay-12.0-2"}},
             {0, "refused Connection refused", retry(1)},
             {1, "timer retry", {"connect @tfslurm-0/relay-12.0-2"}},
             {1, "connected", {"arm challenge 2001"}},
             {5, "closed Connection reset by peer", retry(6)},
             {6, "timer retry", {"connect @tfslurm-0/relay-12.0-2"}},
             {6, "refused Connection refused", retry(8)},
         });
}

TEST_CASE("connector: an endpoint that cannot be resolved is tried again after the back-off",
          "[connector]") {
    play(settings(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "unreachable cannot resolve n1: Host not found", retry(2)},
             {2, "timer retry", {"connect n1:29000"}}, // the same candidate
         });
}

TEST_CASE("connector: a peer that does not prove itself is left for the next candidate",
          "[connector]") {
    const std::string peer = "n1:29000 did not prove that it is job 12's coordinator: ";
    using Row = std::vector<Step>;
    const auto [name, exchange, why] = GENERATE(table<std::string, Row, std::string>({
        {"silent", Row{{2005, "timer challenge", next(32000)}}, "no challenge within 2 s"},
        {"a bad proof",
         Row{{6, "challenge", k_challenged},
             {6, "proved", k_hello},
             {7, "welcome", verify()},
             {7, "bad proof bad secret proof", next(32000)}},
         "bad secret proof"},
        {"a second challenge",
         Row{{6, "challenge", k_challenged}, {6, "proved", k_hello}, {7, "challenge", next(32000)}},
         "a second challenge"},
        {"a message before the welcome",
         Row{{6, "challenge", k_challenged}, {6, "proved", k_hello}, {7, "heartbeat", next(32000)}},
         "heartbeat before the welcome"},
        {"a refusal",
         Row{{6, "challenge", k_challenged},
             {6, "proved", k_hello},
             {7, "reject refused rank 1 is already registered", next(32000)}},
         "it rejected rank 1 (worker:0): rank 1 is already registered"},
        {"garbage", Row{{6, "garbled protocol: bad frame", next(32000)}}, "protocol: bad frame"},
        {"a closed connection",
         Row{{6, "closed End of file", next(32000)}},
         "connection closed during registration (End of file)"},
    }));
    INFO(name);
    Row steps{{0, "start", {"arm deadline 10000", "connect n1:29000"}},
              {5, "connected", {"arm challenge 2005"}}};
    steps.insert(steps.end(), exchange.begin(), exchange.end());
    const test::LogCapture log(spdlog::level::warn);
    play(settings(), steps);
    if (name == "silent" || name == "a closed connection") {
        CHECK(log.text().empty()); // nothing the peer said: no warning
    } else {
        CHECK(log.text() ==
              "warning: rank 1 (worker:0): " + peer + why + "; trying the next control port\n");
    }
}

TEST_CASE("connector: the same impostor is warned about once per reason", "[connector]") {
    const test::LogCapture log(spdlog::level::warn);
    play(one_port(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "connected", {"arm challenge 2000"}},
             {0, "heartbeat", retry(2)},
             {2, "timer retry", {"connect n1:29000"}},
             {2, "connected", {"arm challenge 2002"}},
             {2, "heartbeat", retry(6)},
         });
    CHECK(log.text() ==
          "warning: rank 1 (worker:0): n1:29000 did not prove that it is job 12's "
          "coordinator: heartbeat before the welcome; trying the next control port\n");
}

TEST_CASE("connector: another step's coordinator is left for the next candidate unwarned",
          "[connector]") {
    const test::LogCapture log(spdlog::level::warn);
    play(settings(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "connected", {"arm challenge 2000"}},
             {0, "challenge", k_challenged},
             {0, "proved", k_hello},
             {1, "reject wrong_step wrong step 12.0 (this is step 12.1)", next(32000)},
             {1, "connected", {"arm challenge 2001"}},
             {1, "challenge", challenged("tcp:32000")},
             {1, "proved", k_hello},
             {2, "reject wrong_job wrong job 12 (this is job 13)", next(32001)},
             {2, "refused Connection refused", retry(4)},
             {10000,
              "timer deadline",
              {"fail coordinator: cannot register with n1:29000 (nor its 2 fallback ports) within "
               "10 s: n1:32001: Connection refused" +
               k_io_hint}},
             {10001, "timer retry", k_nothing},
         });
    CHECK(log.text().empty());
}

TEST_CASE("connector: at the deadline a refusal is named before any other error", "[connector]") {
    const auto c =
        play(one_port(),
             {
                 {0, "start", {"arm deadline 10000", "connect n1:29000"}},
                 {0, "connected", {"arm challenge 2000"}},
                 {0, "challenge", k_challenged},
                 {0, "proved", k_hello},
                 {1, "reject refused bad secret proof", retry(3)},
                 {3, "timer retry", {"connect n1:29000"}},
                 {4, "refused Connection refused", retry(8)},
                 {10000,
                  "timer deadline",
                  {"fail coordinator: n1:29000 rejected rank 1 (worker:0): bad secret proof (hint: "
                   "every task must run 'tfslurm run' with the same options, the same "
                   "TFSLURM_SECRET and as the same user)"}},
             });
    CHECK(c.phase() == Connector::Phase::failed);
}

TEST_CASE("connector: no retry is armed past the deadline which names the last error",
          "[connector]") {
    play(one_port(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {9998, "refused Connection refused", {"cancel challenge", "close attempt"}},
             {10000,
              "timer deadline",
              {"fail coordinator: cannot register with n1:29000 within 10 s: n1:29000: "
               "Connection refused" +
               k_io_hint}},
         });
    play(one_port(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {10000,
              "timer deadline",
              {"fail coordinator: cannot register with n1:29000 within 10 s: no attempt" +
               k_io_hint}},
         });
}

TEST_CASE("connector: a proof that cannot be made fails at once", "[connector]") {
    play(settings(),
         {
             {0, "start", {"arm deadline 10000", "connect n1:29000"}},
             {0, "connected", {"arm challenge 2000"}},
             {0, "challenge", k_challenged},
             {0,
              "proof failed munge: cannot encode a credential",
              {"fail launcher: munge: cannot encode a credential"}},
             {10000, "timer deadline", k_nothing},
         });
}

TEST_CASE("connector: a fallback candidate is named when it proves to be the coordinator",
          "[connector]") {
    const auto c =
        play(settings(),
             {
                 {0, "start", {"arm deadline 10000", "connect n1:29000"}},
                 {1, "refused Connection refused", next(32000)},
                 {2, "connected", {"arm challenge 2002"}},
                 {2, "challenge", challenged("tcp:32000")},
                 {2, "proved", k_hello},
                 {3, "welcome", verify("tcp:32000")},
                 {3,
                  "verified",
                  {"cancel deadline", "cancel retry", "cancel challenge", "registered n1:32000"}},
             });
    CHECK(c.control() == "n1:32000");
}

TEST_CASE("connector: each rank's place in the tree", "[connector]") {
    const std::vector<Member> ranks{{Role::ps, 0, "n1"},
                                    {Role::worker, 0, "n1"},
                                    {Role::worker, 1, "n2"},
                                    {Role::worker, 2, "n1"},
                                    {Role::worker, 3, "n3"}};
    struct Case {
        std::uint32_t rank;
        Tree tree;
        std::uint32_t leader;
        std::set<std::uint32_t> followers;
        std::size_t node_followers;
    };
    for (const auto& c : std::vector<Case>{
             {0, Tree::per_node, 0, {1, 3}, 2},
             {1, Tree::per_node, 0, {}, 2},
             {3, Tree::per_node, 0, {}, 2},
             {2, Tree::per_node, 2, {}, 0}, // alone on n2: flat
             {4, Tree::per_node, 4, {}, 0},
             {0, Tree::flat, 0, {}, 0},
             {3, Tree::flat, 3, {}, 0},
         }) {
        INFO("rank " << c.rank << (c.tree == Tree::flat ? " flat" : " per node"));
        const NodePlace place = node_place(ranks, c.rank, c.tree);
        CHECK(place.leader == c.leader);
        CHECK(place.followers == c.followers);
        CHECK(place.node_followers == c.node_followers);
    }
}

TEST_CASE("connector: a relay socket of another user fails the follower at once", "[connector]") {
    const std::string line =
        "fail relay: rank 3 (worker:2): rank 2's relay \"@tfslurm-0/relay-12.0-2\" is held by "
        "uid 65534 (pid 812), not by this job's user (uid 0) (hint: another process on this node "
        "took the relay's name; `ss -xlp | grep tfslurm` shows it)";
    SECTION("before the handshake: nothing is read from it, nothing is retried") {
        const auto c =
            play(follower(),
                 {
                     {0, "start", {"arm deadline 10000", "connect @tfslurm-0/relay-12.0-2"}},
                     {3, "foreign 65534 812", {"cancel challenge", "close attempt", line}},
                     {21, "timer retry", k_nothing},
                     {10000, "timer deadline", k_nothing},
                 });
        CHECK(c.phase() == Connector::Phase::failed);
    }
    SECTION("a uid the kernel did not give is refused the same way") {
        const auto c = play(
            follower(),
            {
                {0, "start", {"arm deadline 10000", "connect @tfslurm-0/relay-12.0-2"}},
                {3,
                 "foreign 4294967295 0",
                 {"cancel challenge",
                  "close attempt",
                  "fail relay: rank 3 (worker:2): rank 2's relay \"@tfslurm-0/relay-12.0-2\" is "
                  "held by a process whose uid the kernel did not give, not by this job's user "
                  "(uid 0) (hint: another process on this node took the relay's name; `ss -xlp | "
                  "grep tfslurm` shows it)"}},
            });
        CHECK(c.phase() == Connector::Phase::failed);
    }
    SECTION("after the session began it changes nothing") {
        play(follower(),
             {
                 {0, "start", {"arm deadline 10000", "connect @tfslurm-0/relay-12.0-2"}},
                 {5, "connected", {"arm challenge 2005"}},
                 {6, "challenge", challenged("unix:@tfslurm-0/relay-12.0-2")},
                 {6,
                  "proved",
                  {"send hello 12.0 rank 3 worker on n2 pid 4242 secret cred nonce n0nce"}},
                 {9, "welcome", verify("unix:@tfslurm-0/relay-12.0-2")},
                 {9,
                  "verified",
                  {"cancel deadline",
                   "cancel retry",
                   "cancel challenge",
                   "registered rank 2's relay @tfslurm-0/relay-12.0-2"}},
                 {10, "foreign 65534 812", k_nothing},
             });
    }
}
