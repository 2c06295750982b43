// SPDX-License-Identifier: MIT
// The coordinator's straggler rule (Coordinator::progressed(), at its ticks): which warnings a
// sequence of progress reports gives, once per episode, never for a phase that most ranks share.
#include "log_capture.hpp"

#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/events.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

const Clock::time_point k_straggler_t0{};

/// ps 0 on n1, then workers on n1, n2, n2, n3, ... (two ranks a host); a 20 s stall timeout
/// (a 10 s straggler window); recording the step's events.
CoordinatorSettings straggler_settings(std::size_t workers) {
    CoordinatorSettings s;
    std::vector<Role> roles{Role::ps};
    roles.insert(roles.end(), workers, Role::worker);
    for (std::size_t i = 0; i < roles.size(); ++i) {
        const auto index = static_cast<std::uint32_t>(roles[i] == Role::ps ? 0 : i - 1);
        s.ranks.push_back({roles[i], index, "n" + std::to_string(i / 2 + 1)});
    }
    s.run.heartbeat_timeout = 60s;
    s.run.connect_timeout = 60s;
    s.run.stall_timeout = 20s;
    s.run.events = "step.events";
    return s;
}

struct StragglerStep {
    int at_ms = 0;
    std::string event;
    std::vector<std::string> lines; ///< the log lines (info and above) it gives, in order
};

/// Feed `progress R IDLE_MS`, `tick`, `exited R STATUS` or `stalled R SILENT_MS`.
void straggler_feed(Coordinator& c, const std::string& event, Clock::time_point now) {
    std::istringstream in(event);
    std::string word;
    std::uint32_t rank = 0;
    long long value = 0;
    in >> word >> rank >> value;
    if (word == "progress") {
        c.progressed(rank, Millis{value}, now);
    } else if (word == "tick") {
        c.tick(now);
    } else if (word == "exited") {
        c.exited(rank, {ExitStatus::exited(static_cast<int>(value)), {}}, now);
    } else if (word == "stalled") {
        c.stalled(rank, Millis{value}, now);
    } else {
        FAIL("unknown event in the table: " << event);
    }
}

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        out.push_back(line);
    }
    return out;
}

/// Register every rank at 0, run the steps (every step's log lines must match exactly) and
/// return the machine.
Coordinator straggler_play(const CoordinatorSettings& settings,
                           const std::vector<StragglerStep>& steps) {
    Coordinator c(settings, k_straggler_t0);
    for (std::uint32_t rank = 0; rank < c.size(); ++rank) {
        c.registered(rank, k_straggler_t0);
    }
    (void)c.take_events();
    const test::LogCapture log(spdlog::level::info);
    std::size_t seen = 0;
    for (const auto& step : steps) {
        INFO("at " << step.at_ms << " ms: " << step.event);
        straggler_feed(c, step.event, k_straggler_t0 + Millis{step.at_ms});
        const std::string text = log.text();
        CHECK(split_lines(text.substr(seen)) == step.lines);
        seen = text.size();
    }
    return c;
}

const std::vector<std::string> k_quiet;

} // namespace

TEST_CASE("coordinator: the straggler window is half the stall timeout",
          "[coordinator][straggler]") {
    CHECK(straggler_window(20s) == 10s);
    CHECK(straggler_window(600s) == 300s);
}

TEST_CASE("coordinator: a worker without progress while most progressed is named once per "
          "episode, before the stall timeout",
          "[coordinator][straggler]") {
    Coordinator c = straggler_play(
        straggler_settings(3),
        {
            {1000, "progress 1 0", k_quiet},
            {1000, "progress 2 0", k_quiet},
            {1000, "progress 3 0", k_quiet},
            {1000, "tick", k_quiet},
            // Rank 3 made no progress since 0 s; 1 and 2 did within the last 10 s.
            {9000, "progress 1 500", k_quiet},
            {9000, "progress 2 800", k_quiet},
            {9000, "progress 3 9000", k_quiet},
            {9000, "tick", k_quiet}, // 9 s: not yet the window
            {11000, "progress 1 200", k_quiet},
            {11000, "progress 2 100", k_quiet},
            {11000, "progress 3 11000", k_quiet},
            {11000,
             "tick",
             {"warning: rank 3 (worker:2) on n2 is straggling: no progress for 11 s while 2 of 3 "
              "workers progressed in the last 10 s"}},
            {12000, "tick", k_quiet}, // once per episode, not every tick
            {13000, "progress 3 13000", k_quiet},
            {13000, "tick", k_quiet},
            // It progresses again: the episode is over.
            {14000, "progress 3 300", {"info: rank 3 (worker:2) on n2 makes progress again"}},
            {14000, "tick", k_quiet},
            // A second episode is told again.
            {30000, "progress 1 100", k_quiet},
            {30000, "progress 2 100", k_quiet},
            {30000, "progress 3 16000", k_quiet},
            {30000,
             "tick",
             {"warning: rank 3 (worker:2) on n2 is straggling: no progress for 16 s while 2 of 3 "
              "workers progressed in the last 10 s"}},
        });
    const auto events = c.take_events();
    REQUIRE(events.size() == 2);
    CHECK(
        to_json_line(events[0]).find(
            R"("event":"straggling","rank":3,"role":"worker","index":2,"host":"n2","behind_ms":11000})") !=
        std::string::npos);
    CHECK(events[1].millis == Millis{16000});
    CHECK(c.verdict() == Verdict::none); // a warning only
}

TEST_CASE("coordinator: no straggler when most ranks are idle too, with two ranks, for an "
          "unjudged ps, after an exit or the verdict, or without a stall timeout",
          "[coordinator][straggler]") {
    SECTION("most workers idle: a phase of the step (evaluation, checkpoint), not a straggler") {
        straggler_play(straggler_settings(3),
                       {
                           {12000, "progress 1 0", k_quiet},
                           {12000, "progress 2 12000", k_quiet},
                           {12000, "progress 3 12000", k_quiet},
                           {12000, "tick", k_quiet},
                       });
    }
    SECTION("two workers: one of two is no majority") {
        straggler_play(straggler_settings(2),
                       {
                           {12000, "progress 1 0", k_quiet},
                           {12000, "progress 2 12000", k_quiet},
                           {12000, "tick", k_quiet},
                       });
    }
    SECTION("the ps is not judged by default, even if it reported") {
        straggler_play(straggler_settings(3),
                       {
                           {12000, "progress 0 12000", k_quiet},
                           {12000, "progress 1 0", k_quiet},
                           {12000, "progress 2 0", k_quiet},
                           {12000, "progress 3 0", k_quiet},
                           {12000, "tick", k_quiet},
                       });
    }
    SECTION("a worker that exited makes no progress and is no straggler") {
        straggler_play(straggler_settings(3),
                       {
                           {1000, "progress 1 0", k_quiet},
                           {1000, "progress 2 0", k_quiet},
                           {1000, "progress 3 0", k_quiet},
                           {2000, "exited 3 0", k_quiet},
                           {12000, "progress 1 0", k_quiet},
                           {12000, "progress 2 0", k_quiet},
                           {12000, "progress 3 12000", k_quiet}, // late, after its exit
                           {12000, "tick", k_quiet},
                       });
    }
    SECTION("after the verdict: nothing") {
        straggler_play(straggler_settings(3),
                       {
                           {1000, "progress 1 0", k_quiet},
                           {1000, "progress 2 0", k_quiet},
                           {1000, "progress 3 0", k_quiet},
                           {2000, "stalled 1 20000", k_quiet},
                           {12000, "progress 2 0", k_quiet},
                           {12000, "progress 3 0", k_quiet},
                           {12000, "tick", k_quiet},
                       });
    }
    SECTION("no stall timeout: reports are ignored") {
        auto s = straggler_settings(3);
        s.run.stall_timeout.reset();
        straggler_play(s,
                       {
                           {12000, "progress 1 0", k_quiet},
                           {12000, "progress 2 0", k_quiet},
                           {12000, "progress 3 12000", k_quiet},
                           {12000, "tick", k_quiet},
                       });
    }
}

TEST_CASE("coordinator: a straggler among mixed roles is counted among ranks",
          "[coordinator][straggler]") {
    auto s = straggler_settings(3);
    s.ranks[1] = {Role::chief, 0, "n1"};
    s.ranks[2] = {Role::worker, 0, "n2"};
    s.ranks[3] = {Role::worker, 1, "n2"};
    straggler_play(s,
                   {
                       {10000, "progress 1 100", k_quiet},
                       {10000, "progress 2 10000", k_quiet},
                       {10000, "progress 3 200", k_quiet},
                       {10000,
                        "tick",
                        {"warning: rank 2 (worker:0) on n2 is straggling: no progress for 10 s "
                         "while 2 of 3 ranks progressed in the last 10 s"}},
                   });
}
