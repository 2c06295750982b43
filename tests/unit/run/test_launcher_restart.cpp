// SPDX-License-Identifier: MIT
// The launcher machine's restarts (--max-restarts): a failed trainer started again on the
// coordinator's word, table-driven.
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

TEST_CASE("launcher: restart: a failed trainer is started again after the back-off",
          "[launcher][restart]") {
    const auto m =
        play(2,
             running({
                 {500, "exited 3", {"cancel grace", "send exit exited with status 3"}},
                 {500, "written", k_nothing}, // no verdict: the launcher waits for one
                 {600, "restart 1 2", {"arm restart 1600"}},
                 {700, "restart 1 2", k_nothing}, // a duplicate is ignored
                 {1600, "timer restart", {"start trainer (restart 1)"}},
                 {1600, "started", k_nothing},
                 {1700, "signal 10", {"signal 10"}}, // the new trainer is supervised like the first
                 {2000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
                 {2000, "written", k_nothing},
                 {2100, "stop done", {"half-close", "arm close 4100"}},
                 {2200, "eof", {"disconnect", "finish done 0 0"}},
             }));
    CHECK(m.restarts() == 1);
}

TEST_CASE("launcher: restart: a verdict, a loss or an interrupt during the back-off",
          "[launcher][restart]") {
    const std::vector<Step> failed = running({
        {500, "exited 3", {"cancel grace", "send exit exited with status 3"}},
        {500, "written", k_nothing},
        {600, "restart 1 2", {"arm restart 1600"}},
    });
    auto steps = failed;
    SECTION("an abort: the trainer is never started again") {
        steps.insert(steps.end(),
                     {
                         {700, "abort", {"cancel restart", "half-close", "arm close 2700"}},
                         {800, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
                     });
    }
    SECTION("the coordinator lost") {
        steps.insert(steps.end(),
                     {
                         {700,
                          "eof",
                          {"disconnect",
                           "cancel restart",
                           "finish coordinator_lost 8 8 announce aborting: coordinator at "
                           "n1:29000 lost (connection closed)"}},
                     });
    }
    SECTION("SIGTERM: reported as a trainer that never started again") {
        steps.insert(steps.end(),
                     {
                         {700,
                          "signal 15",
                          {"send interrupt 15",
                           "cancel restart",
                           "send exit was killed by signal 15 (Terminated)"}},
                         {700, "written", k_nothing},
                         {700, "written", k_nothing},
                         {800, "stop signal 2 15", {"half-close", "arm close 2800"}},
                         {1600, "timer restart", k_nothing},
                         {900,
                          "eof",
                          {"disconnect",
                           "finish interrupted 143 143 announce stopping: rank 2 (worker:1) on "
                           "n2 received signal 15 (Terminated)"}},
                     });
    }
    (void)play(2, steps);
}

TEST_CASE("launcher: restart: ignored unless the trainer failed and waits for it",
          "[launcher][restart]") {
    (void)play(2,
               running({
                   {100, "restart 1 2", k_nothing}, // still running
                   {500, "exited 0", {"cancel grace", "send exit exited with status 0"}},
                   {500, "written", k_nothing},
                   {600, "restart 1 2", k_nothing}, // it succeeded
                   {700, "stop done", {"half-close", "arm close 2700"}},
               }));
}
