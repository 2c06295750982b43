// SPDX-License-Identifier: MIT
// The coordinator's view of a rank (Coordinator::rank_view()): the `stuck` and `restarting`
// states, and the CPU use and output rate taken from successive usage reports.
#include "fixtures.hpp"

#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <variant>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

/// ps 0 on n1, workers 0 and 1 on n2; a stall timeout of 60 s; `restarts` per worker.
CoordinatorSettings cview_settings(std::uint32_t restarts = 0) {
    CoordinatorSettings s;
    s.ranks = {{Role::ps, 0, "n1"}, {Role::worker, 0, "n2"}, {Role::worker, 1, "n2"}};
    s.run.heartbeat_timeout = 10s;
    s.run.connect_timeout = 60s;
    s.run.stall_timeout = 60s;
    s.run.restarts.per_rank = restarts;
    s.run.restarts.roles = {Role::worker};
    return s;
}

void cview_register_all(Coordinator& c, Clock::time_point now) {
    for (std::uint32_t rank = 0; rank < c.size(); ++rank) {
        c.registered(rank, now);
    }
}

/// The optional number `value`, for comparisons.
std::optional<std::uint64_t> cview_some(std::uint64_t value) {
    return value;
}

} // namespace

TEST_CASE("coordinator view: a rank its launcher reported stuck is stuck", "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(), t0);
    cview_register_all(c, t0);
    c.progressed(2, 1s, t0 + 5s);
    REQUIRE(c.rank_view(2, t0 + 6s).progress_age == Millis{2000});
    c.stalled(2, 60s, t0 + 66s);
    CHECK(c.verdict() == Verdict::aborted);
    const RankView stuck = c.rank_view(2, t0 + 66s);
    CHECK(stuck.activity == RankActivity::stuck);
    CHECK_FALSE(stuck.progress_age); // only a running rank has one
    // The others still run (until their launchers report the end).
    CHECK(c.rank_view(0, t0 + 66s).activity == RankActivity::running);
    CHECK(c.rank_view(1, t0 + 66s).activity == RankActivity::running);
    SECTION("it stays stuck when its trainer's end is reported") {
        c.exited(2, protocol::Exit{ExitStatus::signaled(6)}, t0 + 67s);
        CHECK(c.rank_view(2, t0 + 67s).activity == RankActivity::stuck);
        c.connection_lost(2, t0 + 68s);
        CHECK(c.rank_view(2, t0 + 68s).activity == RankActivity::stuck);
    }
    SECTION("it stays stuck when its trainer exits 0 after all") {
        c.exited(2, protocol::Exit{ExitStatus::exited(0)}, t0 + 67s);
        CHECK(c.rank_view(2, t0 + 67s).activity == RankActivity::stuck);
    }
    SECTION("a stall after the verdict makes no rank stuck") {
        c.stalled(1, 60s, t0 + 67s);
        CHECK(c.rank_view(1, t0 + 67s).activity == RankActivity::running);
        c.exited(1, protocol::Exit{ExitStatus::signaled(15)}, t0 + 68s);
        CHECK(c.rank_view(1, t0 + 68s).activity == RankActivity::failed);
    }
}

TEST_CASE("coordinator view: a stall of a rank that did not register changes nothing",
          "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(), t0);
    c.registered(0, t0);
    c.stalled(1, 60s, t0 + 61s);
    CHECK(c.verdict() == Verdict::none);
    CHECK(c.rank_view(1, t0 + 61s).activity == RankActivity::waiting);
    c.stalled(7, 60s, t0 + 61s); // out of range: ignored
    CHECK(c.verdict() == Verdict::none);
}

TEST_CASE("coordinator view: a restarted rank is restarting for the restart delay",
          "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(1), t0);
    cview_register_all(c, t0);
    REQUIRE(c.settings().run.restarts.delay == Millis{1000}); // the default
    c.exited(1, protocol::Exit{ExitStatus::exited(3)}, t0 + 10s);
    REQUIRE(c.verdict() == Verdict::none);
    const auto out = c.take_outgoing();
    REQUIRE(out.size() == 1);
    CHECK(out[0].ranks == std::vector<std::uint32_t>{1});
    CHECK(std::holds_alternative<protocol::Restart>(out[0].message));

    const RankView restarting = c.rank_view(1, t0 + 10s);
    CHECK(restarting.activity == RankActivity::restarting);
    CHECK(restarting.restarts == 1);
    CHECK(c.rank_view(1, t0 + 10999ms).activity == RankActivity::restarting);
    const RankView running = c.rank_view(1, t0 + 11s);
    CHECK(running.activity == RankActivity::running);
    CHECK(running.restarts == 1);
    // The other ranks are not affected.
    CHECK(c.rank_view(2, t0 + 10s).activity == RankActivity::running);
    CHECK(c.rank_view(0, t0 + 10s).activity == RankActivity::running);

    SECTION("its progress age shows again only once it runs") {
        c.progressed(1, 0ms, t0 + 10500ms);
        CHECK_FALSE(c.rank_view(1, t0 + 10900ms).progress_age);
        CHECK(c.rank_view(1, t0 + 12s).progress_age == Millis{1500});
    }
    SECTION("a second failure past its budget fails it, within the delay too") {
        c.exited(1, protocol::Exit{ExitStatus::exited(4)}, t0 + 10500ms);
        CHECK(c.verdict() == Verdict::aborted);
        CHECK(c.rank_view(1, t0 + 10500ms).activity == RankActivity::failed);
        CHECK(c.rank_view(1, t0 + 20s).activity == RankActivity::failed);
    }
    SECTION("its launcher lost during the delay is lost") {
        c.connection_lost(1, t0 + 10500ms);
        CHECK(c.rank_view(1, t0 + 10500ms).activity == RankActivity::lost);
    }
    SECTION("its trainer exiting 0 after the restart has exited") {
        c.exited(1, protocol::Exit{ExitStatus::exited(0)}, t0 + 20s);
        CHECK(c.rank_view(1, t0 + 20s).activity == RankActivity::exited);
    }
    SECTION("a stall during the delay makes it stuck") {
        c.stalled(1, 60s, t0 + 10500ms);
        CHECK(c.rank_view(1, t0 + 10500ms).activity == RankActivity::stuck);
    }
}

TEST_CASE("coordinator view: the restart delay is the setting's", "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    CoordinatorSettings s = cview_settings(2);
    s.run.restarts.delay = 5s;
    Coordinator c(std::move(s), t0);
    cview_register_all(c, t0);
    c.exited(2, protocol::Exit{ExitStatus::signaled(9)}, t0 + 1s);
    CHECK(c.rank_view(2, t0 + 5999ms).activity == RankActivity::restarting);
    CHECK(c.rank_view(2, t0 + 6s).activity == RankActivity::running);
    // A second restart starts a new delay.
    c.exited(2, protocol::Exit{ExitStatus::exited(1)}, t0 + 30s);
    const RankView again = c.rank_view(2, t0 + 34s);
    CHECK(again.activity == RankActivity::restarting);
    CHECK(again.restarts == 2);
    CHECK(c.rank_view(2, t0 + 35s).activity == RankActivity::running);
}

TEST_CASE("coordinator view: a failure that is not restarted is never restarting",
          "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    SECTION("a role that is not restartable") {
        Coordinator c(cview_settings(1), t0);
        cview_register_all(c, t0);
        c.exited(0, protocol::Exit{ExitStatus::exited(3)}, t0 + 1s);
        CHECK(c.verdict() == Verdict::aborted);
        CHECK(c.rank_view(0, t0 + 1s).activity == RankActivity::failed);
        CHECK(c.rank_view(0, t0 + 1s).restarts == 0);
    }
    SECTION("no restarts") {
        Coordinator c(cview_settings(0), t0);
        cview_register_all(c, t0);
        c.exited(1, protocol::Exit{ExitStatus::exited(3)}, t0 + 1s);
        CHECK(c.rank_view(1, t0 + 1s).activity == RankActivity::failed);
    }
    SECTION("a trainer that could not start") {
        Coordinator c(cview_settings(1), t0);
        cview_register_all(c, t0);
        c.exited(1, protocol::Exit{ExitStatus::exited(1), "port 2222 in use"}, t0 + 1s);
        CHECK(c.rank_view(1, t0 + 1s).activity == RankActivity::failed);
    }
}

TEST_CASE("coordinator view: CPU use from two usage samples", "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(), t0);
    cview_register_all(c, t0);
    c.usage_reported(1, protocol::Usage{1000, 4096, {}}, t0 + 5s);
    RankView view = c.rank_view(1, t0 + 5s);
    CHECK(view.usage == protocol::Usage{1000, 4096, {}});
    CHECK_FALSE(view.cpu_percent); // one sample: no rate yet
    CHECK_FALSE(view.output_rate);

    // 500 ms of CPU time in 5 s: 10 %.
    c.usage_reported(1, protocol::Usage{1500, 8192, {}}, t0 + 10s);
    view = c.rank_view(1, t0 + 10s);
    CHECK(view.usage == protocol::Usage{1500, 8192, {}});
    CHECK(view.cpu_percent == cview_some(10));
    CHECK_FALSE(view.output_rate); // no output counts

    // 20 s of CPU time in 5 s: four cores, 400 %.
    c.usage_reported(1, protocol::Usage{21500, 8192, {}}, t0 + 15s);
    CHECK(c.rank_view(1, t0 + 15s).cpu_percent == cview_some(400));

    // 1 ms in 3 s: rounded down to 0 %.
    c.usage_reported(1, protocol::Usage{21501, 8192, {}}, t0 + 18s);
    CHECK(c.rank_view(1, t0 + 18s).cpu_percent == cview_some(0));

    // 333 ms in 1 s: 33 % (integer division).
    c.usage_reported(1, protocol::Usage{21834, 8192, {}}, t0 + 19s);
    CHECK(c.rank_view(1, t0 + 19s).cpu_percent == cview_some(33));

    // Less CPU time than before (a restarted trainer's new count): 0 %.
    c.usage_reported(1, protocol::Usage{200, 8192, {}}, t0 + 24s);
    CHECK(c.rank_view(1, t0 + 24s).cpu_percent == cview_some(0));
    CHECK(c.rank_view(1, t0 + 24s).usage == protocol::Usage{200, 8192, {}});

    // The other ranks have none.
    CHECK_FALSE(c.rank_view(2, t0 + 24s).usage);
    CHECK_FALSE(c.rank_view(2, t0 + 24s).cpu_percent);
}

TEST_CASE("coordinator view: the rates are taken over the time since the sample changed",
          "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(), t0);
    cview_register_all(c, t0);
    c.usage_reported(1, protocol::Usage{1000, 4096, 0}, t0 + 5s);
    // Heartbeats repeat the launcher's last sample: no change, no rate.
    c.usage_reported(1, protocol::Usage{1000, 4096, 0}, t0 + 6s);
    c.usage_reported(1, protocol::Usage{1000, 4096, 0}, t0 + 7s);
    CHECK_FALSE(c.rank_view(1, t0 + 7s).cpu_percent);
    CHECK_FALSE(c.rank_view(1, t0 + 7s).output_rate);
    // A new memory figure alone is no new sample either (but it is shown).
    c.usage_reported(1, protocol::Usage{1000, 9999, 0}, t0 + 8s);
    CHECK(c.rank_view(1, t0 + 8s).usage == protocol::Usage{1000, 9999, 0});
    CHECK_FALSE(c.rank_view(1, t0 + 8s).cpu_percent);
    // The new sample at 10 s: 500 ms and 2000 bytes over the 5 s since the last change.
    c.usage_reported(1, protocol::Usage{1500, 9999, 2000}, t0 + 10s);
    RankView view = c.rank_view(1, t0 + 10s);
    CHECK(view.cpu_percent == cview_some(10));
    CHECK(view.output_rate == cview_some(400));
    // Repeated: the rates stay.
    c.usage_reported(1, protocol::Usage{1500, 9999, 2000}, t0 + 15s);
    view = c.rank_view(1, t0 + 15s);
    CHECK(view.cpu_percent == cview_some(10));
    CHECK(view.output_rate == cview_some(400));
    // Only the output changed: both rates over the 7.5 s since 10 s (no CPU time: 0 %; 1000
    // bytes: 133 per second).
    c.usage_reported(1, protocol::Usage{1500, 9999, 3000}, t0 + 17500ms);
    view = c.rank_view(1, t0 + 17500ms);
    CHECK(view.cpu_percent == cview_some(0));
    CHECK(view.output_rate == cview_some(133));
}

TEST_CASE("coordinator view: the rates fall to 0 when the sample has not changed for 12 s",
          "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    REQUIRE(k_usage_idle == Millis{12000});
    Coordinator c(cview_settings(), t0);
    cview_register_all(c, t0);
    c.usage_reported(1, protocol::Usage{1000, 4096, 100}, t0 + 5s);
    c.usage_reported(1, protocol::Usage{1500, 4096, 2100}, t0 + 10s); // changed at 10 s
    REQUIRE(c.rank_view(1, t0 + 10s).cpu_percent == cview_some(10));
    REQUIRE(c.rank_view(1, t0 + 10s).output_rate == cview_some(400));
    // 11.999 s after the change: the rates stay.
    c.usage_reported(1, protocol::Usage{1500, 4096, 2100}, t0 + 21999ms);
    CHECK(c.rank_view(1, t0 + 21999ms).cpu_percent == cview_some(10));
    CHECK(c.rank_view(1, t0 + 21999ms).output_rate == cview_some(400));
    // Nothing falls by itself: only a report applies the rule.
    CHECK(c.rank_view(1, t0 + 60s).cpu_percent == cview_some(10));
    // 12 s after the change: idle.
    c.usage_reported(1, protocol::Usage{1500, 4096, 2100}, t0 + 22s);
    RankView view = c.rank_view(1, t0 + 22s);
    CHECK(view.cpu_percent == cview_some(0));
    CHECK(view.output_rate == cview_some(0));
    // The next change is measured from the last one (10 s): 1700 ms in 17 s, 10 %;
    // 3400 bytes in 17 s, 200 per second.
    c.usage_reported(1, protocol::Usage{3200, 4096, 5500}, t0 + 27s);
    view = c.rank_view(1, t0 + 27s);
    CHECK(view.cpu_percent == cview_some(10));
    CHECK(view.output_rate == cview_some(200));
}

TEST_CASE("coordinator view: an idle sample without output counts leaves the output rate",
          "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(), t0);
    cview_register_all(c, t0);
    c.usage_reported(0, protocol::Usage{1000, 4096, {}}, t0 + 5s);
    c.usage_reported(0, protocol::Usage{1000, 4096, {}}, t0 + 17s);
    RankView view = c.rank_view(0, t0 + 17s);
    CHECK(view.cpu_percent == cview_some(0));
    CHECK_FALSE(view.output_rate);
    // One sample with an output count and one without: no output rate.
    c.usage_reported(0, protocol::Usage{2000, 4096, 500}, t0 + 20s);
    view = c.rank_view(0, t0 + 20s);
    CHECK(view.cpu_percent == cview_some(6)); // 1000 ms in 15 s
    CHECK_FALSE(view.output_rate);
}

TEST_CASE("coordinator view: two samples at the same time give no rate", "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(), t0);
    cview_register_all(c, t0);
    c.usage_reported(1, protocol::Usage{1000, 4096, 10}, t0 + 5s);
    c.usage_reported(1, protocol::Usage{2000, 4096, 20}, t0 + 5s);
    RankView view = c.rank_view(1, t0 + 5s);
    CHECK(view.usage == protocol::Usage{2000, 4096, 20});
    CHECK_FALSE(view.cpu_percent);
    CHECK_FALSE(view.output_rate);
    // The second sample counts as the last change.
    c.usage_reported(1, protocol::Usage{2500, 4096, 520}, t0 + 10s);
    view = c.rank_view(1, t0 + 10s);
    CHECK(view.cpu_percent == cview_some(10));
    CHECK(view.output_rate == cview_some(100));
}

TEST_CASE("coordinator view: the usage of a rank that did not register is ignored",
          "[coordinator]") {
    const auto t0 = tfslurm::test::k_t0;
    Coordinator c(cview_settings(), t0);
    c.registered(0, t0);
    c.usage_reported(1, protocol::Usage{1000, 4096, 10}, t0 + 5s);
    c.usage_reported(9, protocol::Usage{1000, 4096, 10}, t0 + 5s); // out of range
    CHECK_FALSE(c.rank_view(1, t0 + 5s).usage);
    c.registered(1, t0 + 6s);
    c.usage_reported(1, protocol::Usage{2000, 4096, 10}, t0 + 10s);
    CHECK(c.rank_view(1, t0 + 10s).usage == protocol::Usage{2000, 4096, 10});
    CHECK_FALSE(c.rank_view(1, t0 + 10s).cpu_percent); // its first sample
}

TEST_CASE("coordinator view: start-up phases come on heartbeats and exits and are summed",
          "[coordinator][startup]") {
    const auto t0 = tfslurm::test::k_t0;
    const WallClock::time_point wall = WallClock::time_point{} + 1'796'047'358'000ms;
    Coordinator c(cview_settings(), t0);
    c.registered(0, t0);
    c.registered(1, t0);
    CHECK(c.startup_summary().reported == 0);
    StartupTimes first;
    first[StartupPhase::task] = wall;
    first[StartupPhase::up] = wall + 30ms;
    c.startup_reported(0, first);
    // Rank 2 has not registered: its phases are not believed.
    c.startup_reported(2, first);
    CHECK(c.startup(2).empty());
    CHECK(c.startup_summary().reported == 1);
    // A later heartbeat adds the phases reached since; the known ones stay.
    StartupTimes later;
    later[StartupPhase::registered] = wall + 50ms;
    later[StartupPhase::started] = wall + 60ms;
    c.startup_reported(0, later);
    CHECK(c.startup(0)[StartupPhase::up] == wall + 30ms);
    CHECK(c.startup(0)[StartupPhase::started] == wall + 60ms);
    const StartupSummary& summary = c.startup_summary();
    CHECK(summary.reported == 1);
    REQUIRE(summary.phases.size() == 4);
    CHECK(summary.phases[3] == PhaseFigures{StartupPhase::started, 1, 10ms, 10ms, 10ms, 0});
    // Rank 1's exit carries its phases: summed with rank 0's.
    protocol::Exit exit{ExitStatus::exited(0)};
    exit.startup[StartupPhase::task] = wall + 5ms;
    exit.startup[StartupPhase::up] = wall + 405ms;
    c.exited(1, exit, t0 + 1s);
    const StartupSummary& after = c.startup_summary();
    CHECK(after.reported == 2);
    CHECK(after.phases[1] == PhaseFigures{StartupPhase::up, 2, 30ms, 400ms, 400ms, 1});
}
