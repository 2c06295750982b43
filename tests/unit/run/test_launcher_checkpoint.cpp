// SPDX-License-Identifier: MIT
// The launcher machine's checkpoint signal before the job's end, and the requeue that follows,
// table-driven.
#include "launcher_table.hpp"
#include "log_capture.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::test;
using namespace std::chrono_literals;

namespace {

const std::string k_ours = "checkpointed: the trainers got signal 10 (User defined signal 1) "
                           "before the job's time limit (" +
                           setting_ref("checkpoint_before", "50") + ")";
const std::string k_slurms = "checkpointed: the trainers got signal 10 (User defined signal 1) "
                             "from Slurm";

/// Rank `rank`'s launcher: the checkpoint timer fires at 10 s, its trainer saves and exits 0,
/// the step ends done; Actions of the last event (`server finished` on rank 0, `eof` elsewhere).
std::vector<Step> checkpoint_then_done(std::uint32_t rank, const Actions& last) {
    std::vector<Step> steps{
        {0, "welcome", k_registered},
        {0, "start due", {"start trainer"}},
        {0, "started", {"arm checkpoint 10000"}},
        {10000, "timer checkpoint", {"signal 10"}},
        {10001, "timer checkpoint", k_nothing}, // once
        {12000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
        {12000, "written", k_nothing},
        {12100, "stop done", {"half-close", "arm close 14100"}},
    };
    if (rank == 0) {
        steps.push_back({12200, "eof", {"disconnect"}});
        steps.push_back({12300, "server finished", last});
    } else {
        steps.push_back({12200, "eof", last});
    }
    return steps;
}

} // namespace

TEST_CASE("launcher: the checkpoint signal goes out checkpoint_before ahead of the job's end",
          "[launcher][checkpoint]") {
    // A worker: it says nothing (rank 0 does) and exits with status 10.
    const auto m =
        play(checkpoint_settings(2),
             checkpoint_then_done(2, {"disconnect", "finish checkpointed 10 10 quiet " + k_ours}));
    REQUIRE(m.result());
    CHECK(m.result()->outcome == Outcome::checkpointed);
    CHECK_FALSE(m.result()->requeue);
    // Without --requeue, rank 0 says what happened and exits 10 too.
    LauncherSettings no_requeue = checkpoint_settings(0);
    no_requeue.requeue.reset();
    play(no_requeue, checkpoint_then_done(0, {"finish checkpointed 10 10 announce " + k_ours}));
    // An end time already nearer than checkpoint_before when the trainer starts: no signal (it
    // would kill a trainer that has not installed its handler yet, and has nothing to save).
    // Rank 0 warns; the others say it at debug level only.
    const test::LogCapture log(spdlog::level::info);
    for (const std::uint32_t rank : {0U, 2U}) {
        LauncherSettings late = checkpoint_settings(rank);
        late.job_end = k_t0 + 20s;
        play(late,
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {30, "started", k_nothing},
                 {12000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
             });
    }
    CHECK(log.text() == "warning: rank 0 (ps:0): the job ends in 19.97 s, sooner than " +
                            setting_ref("checkpoint_before", "50") +
                            " after the trainer started: no checkpoint signal\n");
    // No end time (no time limit): no timer.
    LauncherSettings unlimited = checkpoint_settings(2);
    unlimited.job_end.reset();
    play(unlimited, running({}));
}

TEST_CASE("launcher: rank 0 requeues a checkpointed job within max_requeues",
          "[launcher][checkpoint]") {
    const auto m = play(checkpoint_settings(0),
                        checkpoint_then_done(0,
                                             {"finish checkpointed 11 10 announce " + k_ours +
                                              "; requeueing job 12 (requeue 1 of 2) + requeue 12 "
                                              "(10 if refused)"}));
    REQUIRE(m.result());
    REQUIRE(m.result()->requeue);
    CHECK(m.result()->requeue->restart == 1);
    CHECK(m.result()->exit_status == k_status_requeued);
    // The second requeue is the last one.
    play(checkpoint_settings(0, 1),
         checkpoint_then_done(0,
                              {"finish checkpointed 11 10 announce " + k_ours +
                               "; requeueing job 12 (requeue 2 of 2) + requeue 12 (10 if "
                               "refused)"}));
    // The budget is spent: not requeued, and the line says why.
    play(checkpoint_settings(0, 2),
         checkpoint_then_done(0,
                              {"finish checkpointed 10 10 announce " + k_ours +
                               "; not requeueing job 12: it was requeued 2 times already (" +
                               setting_ref("max_requeues", "2") + ")"}));
}

TEST_CASE("launcher: Slurm's own --signal is the checkpoint: the trainer gets it once",
          "[launcher][checkpoint]") {
    play(checkpoint_settings(0),
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", {"arm checkpoint 10000"}},
             {5000, "step signal 10", {"cancel checkpoint"}}, // not forwarded: it has it
             {5001, "step signal 10", k_nothing},
             {10000, "timer checkpoint", k_nothing}, // a firing that raced the cancel
             {12000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
             {12000, "written", k_nothing},
             {12100, "stop done", {"half-close", "arm close 14100"}},
             {12200, "eof", {"disconnect"}},
             {12300,
              "server finished",
              {"finish checkpointed 11 10 announce " + k_slurms +
               "; requeueing job 12 (requeue 1 of 2) + requeue 12 (10 if refused)"}},
         });
    // Only --requeue (no --checkpoint-before): Slurm's signal still counts, no timer to cancel.
    LauncherSettings only_requeue = checkpoint_settings(2);
    only_requeue.run.checkpoint_before.reset();
    only_requeue.job_end.reset();
    const auto m =
        play(only_requeue,
             running({
                 {5000, "step signal 10", k_nothing},
                 {6000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
                 {6000, "written", k_nothing},
                 {6100, "stop done", {"half-close", "arm close 8100"}},
                 {6200, "eof", {"disconnect", "finish checkpointed 10 10 quiet " + k_slurms}},
             }));
    CHECK(m.result()->outcome == Outcome::checkpointed);
}

TEST_CASE("launcher: Slurm's --signal before the trainer started is not passed on, and said",
          "[launcher][checkpoint]") {
    // Only --requeue: no timer of ours. The signal comes while the trainer is being started; it
    // would kill a trainer that has not installed its handler yet, and has nothing to save.
    // Rank 0 warns; the others say it at debug level only. The step is not checkpointed.
    const test::LogCapture log(spdlog::level::info);
    for (const std::uint32_t rank : {0U, 2U}) {
        LauncherSettings only_requeue = checkpoint_settings(rank);
        only_requeue.run.checkpoint_before.reset();
        only_requeue.job_end.reset();
        std::vector<Step> steps{
            {0, "welcome", k_registered},
            {0, "start due", {"start trainer"}},
            {10, "step signal 10", k_nothing},
            {20, "signal 12", k_nothing}, // any other signal: not passed on either
            {30, "started", k_nothing},
            {6000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
            {6000, "written", k_nothing},
            {6100, "stop done", {"half-close", "arm close 8100"}},
        };
        if (rank == 0) {
            steps.push_back({6200, "eof", {"disconnect"}});
            steps.push_back({6300, "server finished", {"finish done 0 0"}});
        } else {
            steps.push_back({6200, "eof", {"disconnect", "finish done 0 0"}});
        }
        const auto m = play(only_requeue, steps);
        REQUIRE(m.result());
        CHECK(m.result()->outcome == Outcome::done);
        CHECK_FALSE(m.checkpoint_signalled());
    }
    CHECK(log.text() == "warning: rank 0 (ps:0): Slurm's checkpoint signal 10 (User defined "
                        "signal 1) came before the trainer started: not passed on (a trainer "
                        "that has just started has nothing to save)\n");
}

TEST_CASE("launcher: a preemption (slurmstepd's SIGTERM) is requeued by rank 0",
          "[launcher][checkpoint]") {
    const std::string stopping =
        "stopping: rank 1 (worker:0) on n1 received signal 15 (Terminated)";
    play(
        checkpoint_settings(0),
        {
            {0, "welcome", k_registered},
            {0, "start due", {"start trainer"}},
            {0, "started", {"arm checkpoint 10000"}},
            {3000, "stop signal 1 15 whole", {"arm grace 13000"}},
            {3100, "timer checkpoint", k_nothing}, // stopping anyway: no checkpoint signal
            {3500, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {3500, "written", {"half-close", "arm close 5500"}},
            {3600, "eof", {"disconnect"}},
            {3700,
             "server finished",
             {"finish interrupted 11 143 announce " + stopping +
              "; requeueing job 12 (requeue 1 of 2) + requeue 12 (143 if refused)"}},
        });
    // A user's kill of one launcher (not the whole step) is no preemption: not requeued.
    play(
        checkpoint_settings(0),
        {
            {0, "welcome", k_registered},
            {0, "start due", {"start trainer"}},
            {0, "started", {"arm checkpoint 10000"}},
            {3000, "stop signal 1 15", {"signal 15", "arm grace 13000"}},
            {3500, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {3500, "written", {"half-close", "arm close 5500"}},
            {3600, "eof", {"disconnect"}},
            {3700, "server finished", {"finish interrupted 143 143 quiet " + stopping}},
        });
}

TEST_CASE("launcher: a real failure after the checkpoint signal is not requeued",
          "[launcher][checkpoint]") {
    const auto m =
        play(checkpoint_settings(0),
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", {"arm checkpoint 10000"}},
                 {10000, "timer checkpoint", {"signal 10"}},
                 {11000, "abort", {"signal 15", "arm grace 21000"}},
                 {11100,
                  "killed 15",
                  {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
                 {11100, "written", {"half-close", "arm close 13100"}},
                 {11200, "eof", {"disconnect"}},
                 {11300, "server finished", {"finish aborted 3 3 quiet " + k_abort_line}},
             });
    CHECK_FALSE(m.result()->requeue);
    // Done without any checkpoint signal: the work is finished, nothing to requeue.
    play(checkpoint_settings(2),
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", {"arm checkpoint 10000"}},
             {5000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
             {5000, "written", k_nothing},
             {5100, "stop done", {"half-close", "arm close 7100"}},
             {5200, "eof", {"disconnect", "finish done 0 0"}},
         });
}

TEST_CASE("launcher: rank 0 stops a requeue loop: two runs in a row without progress, or ending "
          "at one step",
          "[launcher][requeue][storm]") {
    const auto steps = [](const std::string& server, const std::string& tail) {
        auto out = checkpoint_then_done(0, {"finish checkpointed " + tail});
        out.back().event = server;
        return out;
    };
    const std::string stopped =
        "10 10 announce " + k_ours + "; not requeueing job 12: runs 1 and 2 ";
    const std::string requeued = "11 10 announce " + k_ours +
                                 "; requeueing job 12 (requeue 2 of 2) + requeue 12 (10 if "
                                 "refused)";
    // Run 2, after a run 1 that made no progress.
    LauncherSettings s = checkpoint_settings(0, 1);
    s.requeue->previous = RunRecord{1, std::nullopt, ProgressMark{ProgressMark::Kind::none, 0}};
    play(s,
         steps("server finished started",
               stopped + "both ended before any trainer's first progress: another run would "
                         "likely end the same way"));
    play(s,
         steps("server finished",
               stopped + "both ended before any trainer's first progress: another run would "
                         "likely end the same way"));
    // This one reported progress: requeued, and its record says so.
    auto m = play(s, steps("server finished started reported", requeued));
    REQUIRE(m.result()->requeue);
    CHECK(m.result()->requeue->progress == ProgressMark{ProgressMark::Kind::made, 0});
    // Two runs that ended at one step.
    s.requeue->previous->progress = ProgressMark{ProgressMark::Kind::step, 40};
    play(s,
         steps("server finished started reported step 40",
               stopped + "both ended at step 40: another run would likely end the same way"));
    m = play(s, steps("server finished started reported step 41", requeued));
    CHECK(m.result()->requeue->progress == ProgressMark{ProgressMark::Kind::step, 41});
    // A record of an older run, or one without progress (an older tfslurm): no judgement.
    s.requeue->previous = RunRecord{1, std::nullopt, std::nullopt};
    play(s, steps("server finished", requeued));
    LauncherSettings first = checkpoint_settings(0);
    first.requeue->previous = RunRecord{1, std::nullopt, ProgressMark{ProgressMark::Kind::none, 0}};
    play(first,
         steps("server finished",
               "11 10 announce " + k_ours +
                   "; requeueing job 12 (requeue 1 of 2) + requeue 12 (10 if refused)"));
}

TEST_CASE("launcher: preemptions are no requeue storm, and leave no mark for the next run",
          "[launcher][requeue][storm]") {
    // Run 2, preempted at once after a run 1 that made no progress: requeued all the same.
    LauncherSettings s = checkpoint_settings(0, 1);
    s.requeue->previous = RunRecord{1, std::nullopt, ProgressMark{ProgressMark::Kind::none, 0}};
    const auto m = play(
        s,
        {
            {0, "welcome", k_registered},
            {0, "start due", {"start trainer"}},
            {0, "started", {"arm checkpoint 10000"}},
            {3000, "stop signal 1 15 whole", {"arm grace 13000"}},
            {3500, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {3500, "written", {"half-close", "arm close 5500"}},
            {3600, "eof", {"disconnect"}},
            {3700,
             "server finished started",
             {"finish interrupted 11 143 announce stopping: rank 1 (worker:0) on n1 received "
              "signal 15 (Terminated); requeueing job 12 (requeue 2 of 2) + requeue 12 (143 if "
              "refused)"}},
        });
    REQUIRE(m.result()->requeue);
    CHECK_FALSE(m.result()->requeue->progress);
}
