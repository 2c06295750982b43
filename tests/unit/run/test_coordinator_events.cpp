// SPDX-License-Identifier: MIT
// The coordinator's record of a step (Coordinator::take_events(), --events): which events a
// sequence of launcher reports gives, in order, with their fields.
#include "fixtures.hpp"

#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/events.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

using tfslurm::test::k_t0;

/// ps 0 on n1, workers 0 and 1 on n2 and n3; recording unless `events` is empty.
CoordinatorSettings recorded(std::string events = "step.events") {
    CoordinatorSettings s;
    s.ranks = {{Role::ps, 0, "n1"}, {Role::worker, 0, "n2"}, {Role::worker, 1, "n3"}};
    s.run.heartbeat_timeout = 10s;
    s.run.connect_timeout = 60s;
    s.run.events = std::move(events);
    s.linger = 15s;
    return s;
}

/// The events' lines without their time (stamped by the server, not the machine).
std::vector<std::string> lines(Coordinator& c) {
    std::vector<std::string> out;
    for (const auto& event : c.take_events()) {
        std::string line = to_json_line(event);
        const std::string time = R"("time":"1970-01-01T00:00:00.000Z",)";
        line.erase(line.find(time), time.size());
        line.pop_back();
        out.push_back(line);
    }
    return out;
}

} // namespace

TEST_CASE("coordinator events: a worker's failure, from registration to the verdict",
          "[coordinator][events]") {
    Coordinator c(recorded(), k_t0);
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        c.registered(rank, k_t0);
    }
    CHECK(
        lines(c) ==
        std::vector<std::string>{
            R"x({"v":1,"event":"registered","rank":0,"role":"ps","index":0,"host":"n1"})x",
            R"x({"v":1,"event":"started","rank":0,"role":"ps","index":0,"host":"n1","restart":0})x",
            R"x({"v":1,"event":"registered","rank":1,"role":"worker","index":0,"host":"n2"})x",
            R"x({"v":1,"event":"started","rank":1,"role":"worker","index":0,"host":"n2","restart":0})x",
            R"x({"v":1,"event":"registered","rank":2,"role":"worker","index":1,"host":"n3"})x",
            R"x({"v":1,"event":"started","rank":2,"role":"worker","index":1,"host":"n3","restart":0})x",
        });
    c.exited(2, {ExitStatus::exited(1), {}}, k_t0 + 1s);
    CHECK(
        lines(c) ==
        std::vector<std::string>{
            R"x({"v":1,"event":"exited","rank":2,"role":"worker","index":1,"host":"n3","status":1})x",
            R"x({"v":1,"event":"verdict","verdict":"aborted","status":1,"cause":"trainer","why":"rank 2 (worker:1) on n3 exited with status 1"})x",
        });
    // The others, stopped by the verdict, exit too: still recorded, no second verdict.
    c.exited(0, {ExitStatus::signaled(15), {}}, k_t0 + 2s);
    CHECK(
        lines(c) ==
        std::vector<std::string>{
            R"x({"v":1,"event":"exited","rank":0,"role":"ps","index":0,"host":"n1","signal":15})x",
        });
}

TEST_CASE("coordinator events: with the address exchange the trainers start at `cluster`",
          "[coordinator][events]") {
    Coordinator c(recorded(), k_t0);
    c.registered(0, k_t0, "10.0.0.1");
    c.registered(1, k_t0, "10.0.0.2");
    CHECK(lines(c).size() == 2); // registered only
    c.registered(2, k_t0, "10.0.0.3");
    const auto events = lines(c);
    REQUIRE(events.size() == 4);
    CHECK(events[0] ==
          R"x({"v":1,"event":"registered","rank":2,"role":"worker","index":1,"host":"n3"})x");
    CHECK(events[1] ==
          R"x({"v":1,"event":"started","rank":0,"role":"ps","index":0,"host":"n1","restart":0})x");
    CHECK(
        events[3] ==
        R"x({"v":1,"event":"started","rank":2,"role":"worker","index":1,"host":"n3","restart":0})x");
}

TEST_CASE("coordinator events: restart, stall, loss and an interrupt", "[coordinator][events]") {
    SECTION("a restarted worker, then a stuck one") {
        auto s = recorded();
        s.run.restarts.per_rank = 1;
        s.run.restarts.roles = {Role::worker};
        Coordinator c(s, k_t0);
        for (std::uint32_t rank = 0; rank < 3; ++rank) {
            c.registered(rank, k_t0);
        }
        (void)lines(c);
        c.exited(1, {ExitStatus::signaled(9), {}}, k_t0 + 1s);
        CHECK(
            lines(c) ==
            std::vector<std::string>{
                R"x({"v":1,"event":"exited","rank":1,"role":"worker","index":0,"host":"n2","signal":9})x",
                R"x({"v":1,"event":"restarted","rank":1,"role":"worker","index":0,"host":"n2","restart":1})x",
            });
        c.stalled(2, 10s, k_t0 + 12s);
        CHECK(
            lines(c) ==
            std::vector<std::string>{
                R"x({"v":1,"event":"stalled","rank":2,"role":"worker","index":1,"host":"n3","silent_ms":10000})x",
                R"x({"v":1,"event":"verdict","verdict":"aborted","status":9,"cause":"stalled","why":"rank 2 (worker:1) on n3 is stuck: no progress for 10 s"})x",
            });
    }
    SECTION("a launcher lost by its silence") {
        Coordinator c(recorded(), k_t0);
        for (std::uint32_t rank = 0; rank < 3; ++rank) {
            c.registered(rank, k_t0);
        }
        (void)lines(c);
        c.heartbeat(0, k_t0 + 10s);
        c.heartbeat(1, k_t0 + 10s);
        c.tick(k_t0 + 11s);
        CHECK(
            lines(c) ==
            std::vector<std::string>{
                R"x({"v":1,"event":"lost","rank":2,"role":"worker","index":1,"host":"n3","why":"no heartbeat for 10 s"})x",
                R"x({"v":1,"event":"verdict","verdict":"aborted","status":8,"cause":"lost","why":"rank 2 (worker:1) on n3 launcher lost (no heartbeat for 10 s)"})x",
            });
    }
    SECTION("SIGTERM at one rank") {
        Coordinator c(recorded(), k_t0);
        for (std::uint32_t rank = 0; rank < 3; ++rank) {
            c.registered(rank, k_t0);
        }
        (void)lines(c);
        c.interrupted(1, 15, k_t0 + 1s);
        CHECK(
            lines(c) ==
            std::vector<std::string>{
                R"x({"v":1,"event":"verdict","verdict":"interrupted","status":143,"why":"rank 1 (worker:0) on n2 received signal 15 (Terminated)"})x",
            });
    }
}

TEST_CASE("coordinator events: nothing is recorded without a record", "[coordinator][events]") {
    Coordinator c(recorded(""), k_t0);
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        c.registered(rank, k_t0);
    }
    c.exited(1, {ExitStatus::exited(1), {}}, k_t0 + 1s);
    CHECK(c.take_events().empty());
}

TEST_CASE("coordinator events: a failed preflight: no trainer started, the verdict's cause",
          "[coordinator][events][preflight]") {
    CoordinatorSettings s = recorded();
    s.run.preflight = true;
    Coordinator c(s, k_t0);
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        c.registered(rank, k_t0);
    }
    (void)lines(c); // registered only: the trainers wait for `go`
    c.probed(0, {}, k_t0 + 1s);
    c.probed(2, {}, k_t0 + 1s);
    protocol::Probed sick;
    sick.preflight = protocol::PreflightFailure{"command", R"("false" exited with status 1)"};
    c.probed(1, sick, k_t0 + 1s);
    CHECK(
        lines(c) ==
        std::vector<std::string>{
            R"x({"v":1,"event":"verdict","verdict":"aborted","status":13,"cause":"preflight","why":"preflight failed on n2 (rank 1, worker:0): command: \"false\" exited with status 1"})x",
        });
}

TEST_CASE("coordinator events: each rank's start-up, once, and the progress its trainers reported",
          "[coordinator][events][startup]") {
    Coordinator c(recorded(), k_t0);
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        c.registered(rank, k_t0);
    }
    static_cast<void>(lines(c));
    const WallClock::time_point t{std::chrono::milliseconds{1796047358123}};
    protocol::Exit exit{ExitStatus::exited(0)};
    exit.startup[StartupPhase::task] = t;
    exit.startup[StartupPhase::started] = t + 60ms;
    exit.startup[StartupPhase::progress] = t + 2500ms;
    exit.progress_step = 1200;
    c.exited(1, exit, k_t0 + 3s);
    CHECK(
        lines(c) ==
        std::vector<std::string>{
            R"x({"v":1,"event":"exited","rank":1,"role":"worker","index":0,"host":"n2","status":0})x",
            R"x({"v":1,"event":"startup","rank":1,"role":"worker","index":0,"host":"n2","task":"2026-11-30T14:02:38.123Z","started":"2026-11-30T14:02:38.183Z","progress":"2026-11-30T14:02:40.623Z","progress_step":1200})x",
        });
    CHECK(c.run_progress() == RunProgress{true, true, 1200});
    // A rank without phases (an older launcher) has no start-up event; a lower step is not
    // the run's step.
    protocol::Exit plain{ExitStatus::exited(0)};
    plain.progress_step = 900;
    c.exited(2, plain, k_t0 + 3s);
    CHECK(
        lines(c) ==
        std::vector<std::string>{
            R"x({"v":1,"event":"exited","rank":2,"role":"worker","index":1,"host":"n3","status":0})x",
            R"x({"v":1,"event":"verdict","verdict":"done","status":0})x",
        });
    CHECK(c.run_progress() == RunProgress{true, true, 1200});
}

TEST_CASE("coordinator: a run whose trainers reported nothing has no reported progress",
          "[coordinator][startup]") {
    Coordinator c(recorded(""), k_t0);
    c.registered(0, k_t0);
    protocol::Exit exit{ExitStatus::exited(1)};
    exit.startup[StartupPhase::task] = WallClock::time_point{};
    c.exited(0, exit, k_t0 + 1s);
    CHECK(c.run_progress() == RunProgress{});
    CHECK(c.take_events().empty());
}

TEST_CASE("coordinator events: the failed rank's node check after the abort",
          "[coordinator][events][on_failure_check]") {
    CoordinatorSettings s = recorded();
    s.run.on_failure_check = "nvidia-smi -L";
    Coordinator c(s, k_t0);
    for (std::uint32_t rank = 0; rank < 3; ++rank) {
        c.registered(rank, k_t0);
    }
    (void)c.take_events();
    c.exited(2, {ExitStatus::exited(1), {}}, k_t0 + 1s);
    REQUIRE(c.verdict() == Verdict::aborted);
    (void)c.take_events();
    // Only the failed rank's check counts; another rank's is ignored.
    c.node_checked(1, protocol::Checked{}, k_t0 + 2s);
    CHECK_FALSE(c.node_check());
    CHECK(lines(c).empty());
    const protocol::Checked failed{
        protocol::PreflightFailure{"command", R"("nvidia-smi -L" exited with status 9)"}};
    c.node_checked(2, failed, k_t0 + 3s);
    REQUIRE(c.node_check());
    CHECK(c.node_check()->failure == failed.failure);
    CHECK(
        lines(c) ==
        std::vector<std::string>{
            R"x({"v":1,"event":"checked","rank":2,"role":"worker","index":1,"host":"n3","result":"failed","check":"command","why":"\"nvidia-smi -L\" exited with status 9"})x",
        });
    // A second one changes nothing.
    c.node_checked(2, protocol::Checked{}, k_t0 + 4s);
    CHECK(c.node_check()->failure == failed.failure);
    CHECK(lines(c).empty());
    // The coordinator waits for the checking launcher as for any connected one.
    c.connection_lost(0, k_t0 + 4s);
    c.connection_lost(1, k_t0 + 4s);
    c.tick(k_t0 + 4s);
    CHECK_FALSE(c.finished());
    c.connection_lost(2, k_t0 + 5s);
    CHECK(c.finished());
}

TEST_CASE("coordinator: a node check without the setting, or before any abort, is ignored",
          "[coordinator][on_failure_check]") {
    const protocol::Checked passed{};
    {
        Coordinator c(recorded(), k_t0); // no on_failure_check
        c.registered(0, k_t0);
        c.registered(1, k_t0);
        c.registered(2, k_t0);
        c.exited(1, {ExitStatus::exited(1), {}}, k_t0 + 1s);
        c.node_checked(1, passed, k_t0 + 2s);
        CHECK_FALSE(c.node_check());
    }
    CoordinatorSettings s = recorded();
    s.run.on_failure_check = "true";
    Coordinator c(s, k_t0);
    c.registered(0, k_t0);
    c.registered(1, k_t0);
    c.node_checked(1, passed, k_t0 + 1s); // no verdict yet
    CHECK_FALSE(c.node_check());
    c.registered(2, k_t0 + 1s);
    // A lost launcher's node is not checked (it is left out as it is).
    c.connection_lost(2, k_t0 + 2s);
    REQUIRE(c.verdict() == Verdict::aborted);
    c.node_checked(2, passed, k_t0 + 2s);
    CHECK_FALSE(c.node_check());
}
