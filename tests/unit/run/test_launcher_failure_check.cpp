// SPDX-License-Identifier: MIT
// The launcher machine's node check after a failure (--on-failure-check), table-driven: the
// failed rank's launcher checks its node before it leaves, rank 0's launcher tells the result
// and leaves a node that failed it out of a requeue.
#include "launcher_table.hpp"

#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

// Inside the tables' namespace rather than `using` it: in a unity batch, a using-directive
// would carry its `Step` into the next file.
namespace tfslurm::test {

using namespace std::chrono_literals;

namespace {

/// settings(rank) with `on_failure_check`.
LauncherSettings check_settings(std::uint32_t rank) {
    LauncherSettings s = settings(rank);
    s.run.on_failure_check = "nvidia-smi -L";
    return s;
}

} // namespace

TEST_CASE("launcher: on-failure check: the failed rank's launcher checks its node, then leaves",
          "[launcher][on_failure_check]") {
    SECTION("its trainer failed: the check runs after the abort, `checked` goes before the EOF") {
        play(check_settings(3),
             running({
                 {100, "exited 3", {"cancel grace", "send exit exited with status 3"}},
                 {100, "written", k_nothing},
                 {110, "abort", {"check node after failure"}},
                 // Still heartbeating while the check runs: the coordinator waits for it.
                 {1000, "timer heartbeat", {"send heartbeat", "arm heartbeat 2000"}},
                 {1000, "written", k_nothing},
                 {1500, "checked fail", {"send checked failed command"}},
                 {1500, "written", {"half-close", "arm close 3500"}},
                 {1600, "checked ok", k_nothing}, // one check only
                 {1600, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
             }));
    }
    SECTION("a check that passed is sent as such") {
        play(check_settings(3),
             running({
                 {100, "exited 3", {"cancel grace", "send exit exited with status 3"}},
                 // The check runs while the exit is on its way.
                 {110, "abort", {"check node after failure"}},
                 {120, "written", k_nothing},
                 {900, "checked ok", {"send checked passed"}},
                 {900, "written", {"half-close", "arm close 2900"}},
             }));
    }
    SECTION("a stuck trainer: its node is checked once the trainer ended") {
        const std::string line = "aborting: rank 2 (worker:1) on n2 is stuck: no progress for 10 s";
        play(check_settings(2),
             running({
                 {100, "abort stall", {"signal 15", "arm grace 10100"}},
                 {200,
                  "killed 15",
                  {"cancel grace",
                   "send exit was killed by signal 15 (Terminated)",
                   "check node after failure"}},
                 {200, "written", k_nothing},
                 {700, "checked ok", {"send checked passed"}},
                 {700, "written", {"half-close", "arm close 2700"}},
                 {710, "eof", {"disconnect", "finish aborted 9 9 quiet " + line}},
             }));
    }
    SECTION("another rank's failure: no check here") {
        play(check_settings(2),
             running({
                 {110, "abort", {"signal 15", "arm grace 10110"}},
                 {200,
                  "killed 15",
                  {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
                 {200, "written", {"half-close", "arm close 2200"}},
             }));
    }
    SECTION("without on_failure_check: no check") {
        play(3,
             running({
                 {100, "exited 3", {"cancel grace", "send exit exited with status 3"}},
                 {100, "written", k_nothing},
                 {110, "abort", {"half-close", "arm close 2110"}},
             }));
    }
    SECTION("SIGTERM during the check does not cut it (Slurm 26.05 signals every task then)") {
        play(check_settings(3),
             running({
                 {100, "exited 3", {"cancel grace", "send exit exited with status 3"}},
                 {100, "written", k_nothing},
                 {110, "abort", {"check node after failure"}},
                 {300, "step signal 15", k_nothing},
                 {400, "checked fail", {"send checked failed command"}},
                 {400, "written", {"half-close", "arm close 2400"}},
                 {410, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
             }));
    }
    SECTION("the coordinator lost during the check: the launcher leaves") {
        play(check_settings(3),
             running({
                 {100, "exited 3", {"cancel grace", "send exit exited with status 3"}},
                 {100, "written", k_nothing},
                 {110, "abort", {"check node after failure"}},
                 {300, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
                 {400, "checked fail", k_nothing},
             }));
    }
}

TEST_CASE("launcher: on-failure check: rank 0 tells the result, a failed node is left out",
          "[launcher][on_failure_check][requeue]") {
    // The node check's result as rank 0's coordinator got it, and the line's end.
    using Row = std::tuple<std::string, std::string>;
    const auto [check, tail] = GENERATE(table<std::string, std::string>({
        Row{"check-fail",
            R"(; node check failed on n2: command: "false" exited with status 1; requeueing )"
            R"(job 12 without n2 (requeue 1 of 2))"},
        Row{"check-ok", "; node check passed on n2"},
        Row{"", "; no node check result from n2 (its launcher left without one)"},
    }));
    INFO(check);
    LauncherSettings s = check_settings(0);
    s.requeue = RequeuePolicy{12, 0, std::nullopt};
    s.run.max_requeues = 2;
    s.slurm_step = StepRef{12, 0};
    const LauncherMachine m = play(
        s,
        running({
            {100, "abort", {"signal 15", "arm grace 10100"}},
            {200, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {200, "written", {"half-close", "arm close 2200"}},
            {210, "eof", {"disconnect"}},
        }));
    LauncherMachine finished = m;
    feed(finished, "server finished started " + check, k_t0 + 900ms);
    (void)finished.take_actions();
    REQUIRE(finished.result());
    const LaunchResult& r = *finished.result();
    CHECK(r.message == k_abort_line + tail);
    CHECK(r.announce); // rank 0 tells the whole story, not the failed rank
    REQUIRE(r.requeue.has_value() == (check == "check-fail"));
    if (r.requeue) {
        CHECK(r.requeue->exclusion ==
              std::optional<NodeExclusion>(NodeExclusion{{"n2"}, "rank 3 node check failed", 1}));
        CHECK(r.exit_status == k_status_requeued);
        CHECK(r.requeue->status_if_refused == 3);
    } else {
        CHECK(r.exit_status == 3);
    }
}

TEST_CASE("launcher: on-failure check: the failed rank keeps quiet, rank 0 speaks",
          "[launcher][on_failure_check]") {
    for (const std::uint32_t rank : {1U, 3U}) {
        INFO("rank " << rank);
        LauncherMachine m = running_machine(check_settings(rank));
        const LaunchResult r = result_after_abort(m, abort_rank3().failure, rank);
        CHECK(r.message == k_abort_line);
        CHECK_FALSE(r.announce);
    }
    // A trainer that could not start is no node's fault to check: it tells the line itself.
    LauncherMachine m = running_machine(check_settings(3));
    const LaunchResult r = result_after_abort(
        m, failure_of(3, protocol::FailureCause::start, 1, "python3: not found"), 3);
    CHECK(r.announce);
}

} // namespace tfslurm::test
