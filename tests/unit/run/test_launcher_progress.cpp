// SPDX-License-Identifier: MIT
// The launcher machine's stall and straggler rules (src/run/launcher/launcher_progress.cpp),
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

TEST_CASE("launcher: progress is sampled every tenth of the stall timeout, within bounds",
          "[launcher][stall]") {
    CHECK(stall_sample_interval(60s) == 6s);
    CHECK(stall_sample_interval(500ms) == 100ms);
    CHECK(stall_sample_interval(1000s) == 10s);
}

namespace {
const std::string k_stall_line = "aborting: rank 2 (worker:1) on n2 is stuck: no progress for 10 s";
} // namespace

TEST_CASE("launcher: a trainer without progress for the stall timeout is asked for its stack "
          "traces, then the step aborts naming it",
          "[launcher][stall]") {
    const auto m =
        play(stall_settings(2),
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", {"arm stall 1000", "arm report 1000"}},
                 {1000, "timer stall", {"sample progress"}},
                 {1000, "sample 5 0", {"arm stall 2000"}},
                 // CPU time used: progress at 2 s.
                 {2000, "sample 7 0", {"arm stall 3000"}},
                 // The progress file touched: progress at 3 s.
                 {3000, "sample 7 42", {"arm stall 4000"}},
                 {12900, "sample 7 42", {"arm stall 13900"}},
                 {13000, "sample 7 42", {"signal 6", "arm stall 18000"}},
                 {13100, "sample 9 42", k_nothing}, // the dump is no progress
                 // Python's faulthandler dumped the threads and re-raised SIGABRT.
                 {13200,
                  "killed 6",
                  {"cancel grace",
                   "cancel stall",
                   "send stall 10000",
                   "send exit was killed by signal 6 (Aborted)"}},
                 {13200, "written", k_nothing},
                 {13200, "written", k_nothing},
                 {13300, "abort stall", {"half-close", "arm close 15300"}},
                 {13400, "eof", {"disconnect", "finish aborted 9 9 announce " + k_stall_line}},
             });
    REQUIRE(m.result());
    CHECK(m.result()->exit_status == k_status_stalled);
}

TEST_CASE("launcher: --stall-roles: a ps is not judged unless asked for, a worker is unless left "
          "out",
          "[launcher][stall]") {
    using Row = std::tuple<std::uint32_t, std::vector<Role>, Actions>;
    const auto [rank, roles, on_start] = GENERATE(table<std::uint32_t, std::vector<Role>, Actions>({
        // The default: every role but ps.
        Row{0, {Role::chief, Role::evaluator, Role::worker}, k_nothing},
        Row{2, {Role::chief, Role::evaluator, Role::worker}, {"arm stall 1000", "arm report 1000"}},
        // `all`, and a list without workers.
        Row{0,
            {Role::chief, Role::evaluator, Role::ps, Role::worker},
            {"arm stall 1000", "arm report 1000"}},
        Row{2, {Role::ps}, k_nothing},
    }));
    CAPTURE(rank);
    auto s = stall_settings(rank);
    s.run.stall_roles = roles;
    s.host = CoordinatorHost::elsewhere;
    play(s,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", on_start},
         });
}

TEST_CASE("launcher: --stall-progress: only the sources it names are progress",
          "[launcher][stall]") {
    using S = ProgressSource;
    using Row = std::tuple<ProgressSample, std::vector<S>, bool>;
    const ProgressSample before{5, 42, 100};
    const auto [after,
                sources,
                expected] = GENERATE_COPY(table<ProgressSample, std::vector<S>, bool>({
        Row{{5, 42, 100}, {S::cpu, S::file, S::output}, false},
        Row{{6, 42, 100}, {S::cpu, S::file}, true},
        Row{{6, 42, 100}, {S::file, S::output}, false}, // CPU time spent spinning: not asked for
        Row{{5, 43, 100}, {S::file}, true},
        Row{{5, 43, 100}, {S::cpu, S::output}, false},
        Row{{5, 42, 180}, {S::output}, true},
        Row{{5, 42, 180}, {S::cpu, S::file}, false}, // output without `output`: the default
        Row{{9, 50, 180}, {}, false},
    }));
    CAPTURE(after.cpu_ticks, after.file_mtime_ns, after.output_bytes, sources.size());
    CHECK(progressed(before, after, sources) == expected);
}

TEST_CASE("launcher: the shell counts the trainer's output only for a judged rank with `output`",
          "[launcher][stall]") {
    using S = ProgressSource;
    using Row = std::tuple<std::uint32_t, bool, std::vector<S>, bool>;
    const auto [rank, timeout, sources, expected] =
        GENERATE(table<std::uint32_t, bool, std::vector<S>, bool>({
            Row{2, true, {S::output}, true},
            Row{2, true, {S::cpu, S::file, S::output}, true},
            Row{2, true, {S::cpu, S::file}, false},
            Row{2, false, {S::output}, false}, // no stall timeout: nothing is judged
            Row{0, true, {S::output}, false},  // the ps: not judged by default
        }));
    CAPTURE(rank, timeout);
    auto s = stall_settings(rank);
    if (!timeout) {
        s.run.stall_timeout.reset();
    }
    s.run.stall_progress = sources;
    CHECK(LauncherMachine(s).counts_output() == expected);
}

TEST_CASE("launcher: progress reports come every tenth of the stall timeout, at most ~1,000 a "
          "second for the whole step",
          "[launcher][straggler]") {
    CHECK(straggler_report_interval(60s, 4) == 6s);
    CHECK(straggler_report_interval(4s, 4) == 1s);       // at least a second
    CHECK(straggler_report_interval(3600s, 4) == 60s);   // at most a minute
    CHECK(straggler_report_interval(60s, 10000) == 10s); // 10,000 ranks: 1,000 reports a second
    CHECK(straggler_report_interval(60s, 100000) == 100s);
}

TEST_CASE("launcher: --stall-progress output: a quiet-but-alive trainer that prints is not stuck, "
          "one that only spins is, and reports tell the coordinator its progress' age",
          "[launcher][stall][straggler]") {
    auto s = stall_settings(2);
    s.run.stall_progress = {ProgressSource::output};
    SECTION("output every few seconds, no CPU time: progress") {
        play(s,
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", {"arm stall 1000", "arm report 1000"}},
                 {1000, "timer report", {"send progress 1000", "arm report 2000"}},
                 {1000, "written", k_nothing},
                 {1000, "sample 5 0 0", {"arm stall 2000"}},
                 {6000, "sample 5 0 80", {"arm stall 7000"}},
                 {7500, "timer report", {"send progress 1500", "arm report 8500"}},
                 {7500, "written", k_nothing},
                 {15000, "sample 5 0 160", {"arm stall 16000"}},
                 {24000, "sample 5 0 240", {"arm stall 25000"}},
                 {25000, "sample 5 0 240", {"arm stall 26000"}},
             });
    }
    SECTION("CPU time and progress file but no output: stuck, and reports stop") {
        play(s,
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", {"arm stall 1000", "arm report 1000"}},
                 {1000, "sample 5 0 0", {"arm stall 2000"}},
                 {6000, "sample 50 7 0", {"arm stall 7000"}},
                 {9000, "timer report", {"send progress 8000", "arm report 10000"}},
                 {9000, "written", k_nothing},
                 {11000, "sample 90 9 0", {"signal 6", "arm stall 16000"}},
                 {11500, "timer report", k_nothing}, // stuck: no more reports
             });
    }
}

TEST_CASE("launcher: a stuck trainer that survives the stall signal is reported after the stall "
          "grace and stopped by the abort",
          "[launcher][stall]") {
    play(stall_settings(2),
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", {"arm stall 1000", "arm report 1000"}},
             {1000, "sample 5 0", {"arm stall 2000"}},
             {11000, "sample 5 0", {"signal 6", "arm stall 16000"}},
             {16000, "timer stall", {"cancel stall", "send stall 10000"}},
             {16000, "written", k_nothing},
             {16100, "abort stall", {"signal 15", "arm grace 26100"}},
             {16200,
              "killed 15",
              {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
             {16200, "written", {"half-close", "arm close 18200"}},
             {16300, "eof", {"disconnect", "finish aborted 9 9 announce " + k_stall_line}},
         });
}

TEST_CASE("launcher: no stall watch without a stall timeout, after a verdict or a stop",
          "[launcher][stall]") {
    SECTION("no stall timeout: nothing is sampled") {
        play(2,
             running({
                 {60000, "timer stall", k_nothing},
                 {60000, "sample 1 0", k_nothing},
             }));
    }
    SECTION("another rank's failure: the stopped trainer is not watched") {
        play(stall_settings(2),
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", {"arm stall 1000", "arm report 1000"}},
                 {1000, "sample 5 0", {"arm stall 2000"}},
                 {1500, "abort", {"signal 15", "arm grace 11500"}},
                 {2000, "timer stall", k_nothing},
                 {11000, "sample 5 0", k_nothing},
             });
    }
    SECTION("a SIGTERM: the trainer is stopping, not stuck") {
        play(stall_settings(2),
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", {"arm stall 1000", "arm report 1000"}},
                 {1000, "sample 5 0", {"arm stall 2000"}},
                 {1500, "signal 15", {"signal 15", "send interrupt 15", "arm grace 11500"}},
                 {12000, "sample 5 0", k_nothing},
             });
    }
}

TEST_CASE("launcher: its start-up phases and its trainer's first progress go with its exit",
          "[launcher][startup]") {
    play(startup_settings(2),
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {10, "started", {"arm first-progress 1010"}},
             // Looked for every second until the trainer touched its progress file.
             {1010, "timer first-progress", {"sample progress file"}},
             {1010, "progress file none", {"arm first-progress 2010"}},
             {2010, "timer first-progress", {"sample progress file"}},
             // Touched at 1.5 s: that is its first progress, found half a second later.
             {2010, "progress file 1500", k_nothing},
             {3010, "timer first-progress", k_nothing},
             // The shell's last look when the trainer ended: the step it wrote.
             {4000, "progress file 3900 1200", k_nothing},
             {4000,
              "exited 0",
              {"cancel grace",
               "send exit exited with status 0 [task -50 up 0 registered 0 started 10 progress "
               "1500] step 1200"}},
         });
}

TEST_CASE("launcher: its heartbeats carry its start-up phases once each, as they are reached",
          "[launcher][startup]") {
    play(startup_settings(2),
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {10, "started", {"arm first-progress 1010"}},
             {1000,
              "timer heartbeat",
              {"send heartbeat [task -50 up 0 registered 0 started 10]", "arm heartbeat 2000"}},
             {1010, "timer first-progress", {"sample progress file"}},
             {1010, "progress file none", {"arm first-progress 2010"}},
             // No phase since: a bare heartbeat; then the first progress.
             {1500, "timer heartbeat", {"send heartbeat", "arm heartbeat 2500"}},
             {2010, "timer first-progress", {"sample progress file"}},
             {2010, "progress file 1505", k_nothing},
             {2500,
              "timer heartbeat",
              {"send heartbeat [task -50 up 0 registered 0 started 10 progress 1505]",
               "arm heartbeat 3500"}},
             {3500, "timer heartbeat", {"send heartbeat", "arm heartbeat 4500"}},
         });
}

TEST_CASE("launcher: with the address exchange the addresses' arrival is a phase and an "
          "untouched progress file gives no first progress",
          "[launcher][startup]") {
    play(startup_settings(2, true),
         {
             {0, "welcome", {"arm heartbeat 1000", "arm watch 250"}},
             {20, "cluster", {"schedule start"}},
             {20, "start due", {"start trainer"}},
             {30, "started", {"arm first-progress 1030"}},
             {1030, "timer first-progress", {"sample progress file"}},
             {1030, "progress file none", {"arm first-progress 2030"}},
             {1500, "progress file none", {"arm first-progress 2500"}},
             {1500,
              "exited 3",
              {"cancel grace",
               "send exit exited with status 3 [task -50 up 0 registered 0 cluster 20 started "
               "30]"}},
             {2030, "timer first-progress", k_nothing},
         });
}

TEST_CASE("launcher: a machine without its start-up clock takes no phases", "[launcher][startup]") {
    play(settings(2),
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {10, "started", k_nothing},
             {500, "progress file 400 7", k_nothing},
             {1000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
         });
}

TEST_CASE("launcher: a first progress is never before its trainer's start", "[launcher][startup]") {
    // The file's time is the kernel's coarse clock: a touch right after the start may read a
    // few milliseconds earlier.
    play(startup_settings(2),
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {10, "started", {"arm first-progress 1010"}},
             {20, "progress file 6", k_nothing},
             {30,
              "exited 0",
              {"cancel grace",
               "send exit exited with status 0 [task -50 up 0 registered 0 started 10 progress "
               "10]"}},
         });
}
