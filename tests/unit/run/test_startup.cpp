// SPDX-License-Identifier: MIT
// summarize_startup(): where a step's start-up time went, the one rule behind `tfslurm events
// --startup`, `tfslurm top` while a step starts, and the metrics' phase figures.
#include <tfslurm/run/startup.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

const WallClock::time_point k_sum_t0 = WallClock::time_point{} + 1'796'047'358'000ms;

/// A phase not reached, in sum_phases().
constexpr int k_no = -1000;

/// Phases from `task` (ms after k_sum_t0) and each later phase's ms after the one before
/// (k_no: not reached).
StartupTimes sum_phases(std::chrono::milliseconds task, std::vector<int> steps) {
    StartupTimes out;
    out[StartupPhase::task] = k_sum_t0 + task;
    WallClock::time_point at = k_sum_t0 + task;
    for (std::size_t i = 0; i < steps.size(); ++i) {
        if (steps[i] == k_no) {
            continue;
        }
        at += std::chrono::milliseconds(steps[i]);
        out.at.at(i + 1) = at;
    }
    return out;
}

/// Rank i with `times[i]` on `hosts[i]`.
std::vector<RankPhases> sum_ranks(const std::vector<StartupTimes>& times,
                                  const std::vector<std::string>& hosts) {
    std::vector<RankPhases> out;
    out.reserve(times.size());
    for (std::uint32_t rank = 0; rank < times.size(); ++rank) {
        out.push_back({rank, hosts.at(rank), &times[rank]});
    }
    return out;
}

} // namespace

TEST_CASE("startup: the summary of four ranks on three nodes", "[startup]") {
    // Steps after the task: up, registered, cluster (none: no exchange), started, progress.
    const std::vector<StartupTimes> times{
        sum_phases(0ms, {30, 20, k_no, 10, 40}),    // rank 0 on n1
        sum_phases(5ms, {35, 20, k_no, 10, 40}),    // rank 1 on n2
        sum_phases(12ms, {30, 20, k_no, 13, 3012}), // rank 2 on n3: a slow first progress
        sum_phases(0ms, {30, 24, k_no, 10, 36}),    // rank 3 on n1
    };
    const std::vector<std::string> hosts{"n1", "n2", "n3", "n1"};
    const StartupSummary summary = summarize_startup(sum_ranks(times, hosts));
    CHECK(summary.reported == 4);
    CHECK(summary.end == StartupPhase::progress);
    REQUIRE(summary.phases.size() == 5);
    CHECK(summary.phases[0] == PhaseFigures{StartupPhase::task, 4, 0ms, 12ms, 12ms, 2});
    CHECK(summary.phases[1] == PhaseFigures{StartupPhase::up, 4, 30ms, 35ms, 35ms, 1});
    CHECK(summary.phases[2] == PhaseFigures{StartupPhase::registered, 4, 20ms, 24ms, 24ms, 3});
    CHECK(summary.phases[3] == PhaseFigures{StartupPhase::started, 4, 10ms, 13ms, 13ms, 2});
    CHECK(summary.phases[4] == PhaseFigures{StartupPhase::progress, 4, 40ms, 3012ms, 3012ms, 2});
    CHECK(summary.nodes == std::vector<NodeStartup>{{"n3", 3087ms}, {"n2", 110ms}, {"n1", 100ms}});
    CHECK(summary.more_nodes == 0);
    REQUIRE(summary.slowest);
    CHECK(*summary.slowest ==
          SlowestStartup{2, 3087ms, StartupPhase::progress, 3012ms, std::optional(40ms)});
}

TEST_CASE("startup: a summary while the step starts", "[startup]") {
    // Rank 1 has not started its trainer yet, rank 2 reported nothing: the totals run to the
    // trainers' start, over the ranks that reached it.
    const std::vector<StartupTimes> times{
        sum_phases(0ms, {30, 20, k_no, 10, k_no}),
        sum_phases(5ms, {400, k_no, k_no, k_no, k_no}),
        StartupTimes{},
    };
    const std::vector<RankPhases> ranks{
        {0, "n1", &times[0]}, {1, "n2", &times[1]}, {2, "n3", &times[2]}};
    const StartupSummary summary = summarize_startup(ranks);
    CHECK(summary.reported == 2);
    CHECK(summary.end == StartupPhase::started);
    REQUIRE(summary.phases.size() == 4);
    CHECK(summary.phases[1] == PhaseFigures{StartupPhase::up, 2, 30ms, 400ms, 400ms, 1});
    CHECK(summary.phases[2] == PhaseFigures{StartupPhase::registered, 1, 20ms, 20ms, 20ms, 0});
    CHECK(summary.phases[3] == PhaseFigures{StartupPhase::started, 1, 10ms, 10ms, 10ms, 0});
    CHECK(summary.nodes == std::vector<NodeStartup>{{"n1", 60ms}});
    REQUIRE(summary.slowest);
    // Its phases against the other ranks' medians: task 0 against 5 ms, up 30 against 400 ms,
    // registered 20 against nobody (0): registered is where it lost most.
    CHECK(*summary.slowest == SlowestStartup{0, 60ms, StartupPhase::registered, 20ms, {}});
}

TEST_CASE("startup: the three slowest nodes, and no phase below nothing", "[startup]") {
    std::vector<StartupTimes> times;
    times.reserve(5);
    for (int node = 0; node < 5; ++node) {
        // Up 10, 50, 40, 30, 20 ms after the task; a first progress 5 ms before the trainer's
        // start (a file's coarser clock) counts as 0.
        times.push_back(sum_phases(0ms, {10 + (node * 40) % 50, 1, k_no, 1, -5}));
    }
    const std::vector<std::string> hosts{"n1", "n2", "n3", "n4", "n5"};
    const StartupSummary summary = summarize_startup(sum_ranks(times, hosts));
    CHECK(summary.end == StartupPhase::progress);
    CHECK(summary.phases.back() == PhaseFigures{StartupPhase::progress, 5, 0ms, 0ms, 0ms, 0});
    // The totals are the times themselves: up + 2 - 5 ms.
    CHECK(summary.nodes == std::vector<NodeStartup>{{"n2", 47ms}, {"n3", 37ms}, {"n4", 27ms}});
    CHECK(summary.more_nodes == 2);
    REQUIRE(summary.slowest);
    CHECK(*summary.slowest == SlowestStartup{1, 47ms, StartupPhase::up, 50ms, 20ms});
}

TEST_CASE("startup: nothing reported, nothing summed", "[startup]") {
    const StartupTimes none;
    const StartupSummary summary = summarize_startup({{0, "n1", &none}});
    CHECK(summary == StartupSummary{});
    CHECK(summarize_startup({}) == StartupSummary{});
}
