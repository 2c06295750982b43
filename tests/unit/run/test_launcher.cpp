// SPDX-License-Identifier: MIT
// The launcher's state machine, table-driven (launcher_table.hpp): registration, the verdicts,
// signals, the loss of the coordinator, the grace period and the address exchange. Its results
// are in test_launch_result.cpp; stalls, restarts, checkpoints and the barrier before the start
// have test files of their own.
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

TEST_CASE("launcher: done: a ps is stopped with SIGTERM, reports, and rank 0 waits for its "
          "coordinator",
          "[launcher]") {
    const auto m = play(
        0,
        running({
            {1000, "timer heartbeat", {"send heartbeat", "arm heartbeat 2000"}},
            {1000, "written", k_nothing},
            {1100, "heartbeat", k_nothing},
            {1250, "timer watch", {"arm watch 1500"}},
            {2000, "stop done", {"signal 15", "arm grace 12000"}},
            {2100, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {2100, "written", {"half-close", "arm close 4100"}},
            {2200, "heartbeat", k_nothing},
            {2300, "eof", {"disconnect"}},
            {2400, "server finished", {"finish done 0 0"}},
        }));
    REQUIRE(m.result());
    CHECK(m.result()->outcome == Outcome::done);
    CHECK(m.result()->exit_status == 0);
    CHECK(m.result()->message.empty());
}

TEST_CASE("launcher: abort while running stops the trainer and names the failure", "[launcher]") {
    const auto m = play(
        2,
        running({
            {500, "abort", {"signal 15", "arm grace 10500"}},
            {600, "abort", k_nothing}, // a second verdict is ignored
            {700, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {700, "written", {"half-close", "arm close 2700"}},
            {800, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
        }));
    REQUIRE(m.result());
    CHECK(m.result()->message == k_abort_line);
    CHECK(m.result()->step_status == 3);
}

TEST_CASE("launcher: a verdict before the trainer started: it is never started", "[launcher]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [verdict, finish] = GENERATE(table<std::string, std::string>({
        Row{"abort", "finish aborted 3 3 quiet " + k_abort_line},
        Row{"stop done", "finish done 0 0"},
        Row{"stop signal 1 15",
            "finish interrupted 143 0 quiet stopping: rank 1 (worker:0) on n1 received signal 15 "
            "(Terminated)"},
    }));
    INFO(verdict);
    play(2,
         {
             {0, "welcome", k_registered},
             {0, verdict, k_nothing}, // in the same read as the welcome
             {0, "start due", {"half-close", "arm close 2000"}},
             {5, "eof", {"disconnect", finish}},
         });
}

TEST_CASE("launcher: SIGTERM before registration: nothing is started, it finishes at once",
          "[launcher]") {
    play(2,
         {
             {0,
              "signal 15",
              {"finish interrupted 143 143 announce stopping: rank 2 (worker:1) received signal "
               "15 "
               "(Terminated) before its trainer started"}},
         });
    play(1,
         {
             {0,
              "signal 2",
              {"finish interrupted 130 130 announce stopping: rank 1 (worker:0) received signal 2 "
               "(Interrupt) before its trainer started"}},
         });
}

TEST_CASE("launcher: SIGTERM while running is forwarded, sent as interrupt, and graced",
          "[launcher]") {
    const std::string stopping =
        "stopping: rank 1 (worker:0) on n1 received signal 15 (Terminated)";
    const auto m = play(
        2,
        running({
            {100, "signal 15", {"signal 15", "send interrupt 15", "arm grace 10100"}},
            {100, "written", k_nothing},
            // A second SIGTERM is forwarded; the grace period is already counting.
            {200, "signal 15", {"signal 15"}},
            // The trainer already received SIGTERM: the verdict sends no other.
            {300, "stop signal 1 15", k_nothing},
            {400, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {400, "written", {"half-close", "arm close 2400"}},
            {500, "eof", {"disconnect", "finish interrupted 143 143 quiet " + stopping}},
        }));
    REQUIRE(m.result());
    CHECK(m.result()->outcome == Outcome::interrupted);
    CHECK(m.result()->message == stopping);
}

TEST_CASE("launcher: a trainer killed by the cancel's SIGTERM before its launcher's own copy is "
          "part of the interrupt",
          "[launcher]") {
    // Slurm signals every process of the step at once: the trainer may die before the
    // launcher handled its SIGTERM. Its exit is held, and reported after the interrupt.
    using Row = std::tuple<std::string, std::string, std::string>;
    const auto [death, signal, name] = GENERATE(table<std::string, std::string, std::string>({
        Row{"killed 15", "signal 15", "15 (Terminated)"},
        Row{"killed 2", "signal 2", "2 (Interrupt)"},
    }));
    INFO(death);
    const std::string exit_line = "send exit was killed by signal " + name;
    play(2,
         running({
             {100, death, {"cancel grace", "arm settle 1100"}},
             {105,
              signal,
              {"send interrupt " + name.substr(0, name.find(' ')), "cancel settle", exit_line}},
             {105, "written", k_nothing},
             {105, "written", k_nothing},
             {110,
              "stop signal 2 " + name.substr(0, name.find(' ')),
              {"half-close", "arm close 2110"}},
             {120,
              "eof",
              {"disconnect",
               fmt::format("finish interrupted {0} {0} announce stopping: rank 2 (worker:1) on n2 "
                           "received signal {1}",
                           128 + std::stoi(name),
                           name)}},
         }));
}

TEST_CASE("launcher: a held exit is reported when the settle window ends or a verdict comes",
          "[launcher]") {
    // Killed by someone else's SIGTERM: no signal comes, the exit is reported (a failure).
    play(2,
         running({
             {100, "killed 15", {"cancel grace", "arm settle 1100"}},
             {1100,
              "timer settle",
              {"cancel settle", "send exit was killed by signal 15 (Terminated)"}},
             {1100, "written", k_nothing},
             {1200, "abort", {"half-close", "arm close 3200"}},
             {1300, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
         }));
    // Another launcher's interrupt won: the verdict releases the report.
    play(2,
         running({
             {100, "killed 15", {"cancel grace", "arm settle 1100"}},
             {110,
              "stop signal 1 15",
              {"cancel settle", "send exit was killed by signal 15 (Terminated)"}},
             {110, "written", {"half-close", "arm close 2110"}},
             {120,
              "eof",
              {"disconnect",
               "finish interrupted 143 143 quiet stopping: rank 1 (worker:0) on n1 received "
               "signal 15 (Terminated)"}},
             {1100, "timer settle", k_nothing},
         }));
    // Other deaths are reported at once.
    play(2,
         running({
             {100, "killed 9", {"cancel grace", "send exit was killed by signal 9 (Killed)"}},
         }));
}

TEST_CASE("launcher: SIGTERM after registration before the start: reported, never started",
          "[launcher]") {
    play(2,
         {
             {0, "welcome", k_registered},
             {0,
              "signal 15",
              {"send interrupt 15", "send exit was killed by signal 15 (Terminated)"}},
             {0, "start due", k_nothing},
             {10, "stop signal 2 15", k_nothing}, // the exit report is still being written
             {10, "written", k_nothing},
             {10, "written", {"half-close", "arm close 2010"}},
             {20,
              "eof",
              {"disconnect",
               "finish interrupted 143 143 announce stopping: rank 2 (worker:1) on n2 received "
               "signal 15 "
               "(Terminated)"}},
         });
}

TEST_CASE("launcher: a signal from slurmstepd reached the trainer already: never sent again",
          "[launcher]") {
    const std::string stopping =
        "stopping: rank 2 (worker:1) on n2 received signal 15 (Terminated)";
    play(2,
         running({
             {10, "step signal 10", k_nothing}, // scancel -s USR1: no second SIGUSR1
             {20, "signal 10", {"signal 10"}},  // kill -USR1 of the launcher alone
             {30, "step signal 15", {"send interrupt 15 whole step", "arm grace 10030"}},
             {30, "written", k_nothing},
             {40, "stop signal 2 15", k_nothing}, // no second SIGTERM from the verdict
             {50, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
             {50, "written", {"half-close", "arm close 2050"}},
             {60, "eof", {"disconnect", "finish interrupted 143 143 announce " + stopping}},
         }));
    // SIGINT from slurmstepd: the verdict's SIGTERM is another signal, still sent once.
    play(2,
         running({
             {30, "step signal 2", {"send interrupt 2 whole step", "arm grace 10030"}},
             {40, "stop signal 2 2", {"signal 15"}},
             {50, "abort", k_nothing},
         }));
    // The stop for another launcher's slurmstepd SIGTERM comes before this launcher's own copy:
    // every trainer has it already, none is signalled again.
    play(1,
         running({
             {20, "stop signal 2 15 whole", {"arm grace 10020"}},
             {30, "step signal 15", k_nothing},
         }));
    // A verdict's SIGTERM is not repeated by a later slurmstepd SIGTERM or verdict.
    play(2,
         running({
             {30, "abort", {"signal 15", "arm grace 10030"}},
             {40, "step signal 15", k_nothing},
         }));
}

TEST_CASE("launcher: other signals are only forwarded", "[launcher]") {
    play(2,
         {
             {0, "signal 10", k_nothing}, // nothing to forward to yet
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {10, "signal 10", {"signal 10"}},
             {20, "signal 12", {"signal 12"}},
             {30, "signal 1", {"signal 1"}},
             {40, "signal 3", {"signal 3"}},
             {50, "exited 0", {"cancel grace", "send exit exited with status 0"}},
             {60, "signal 10", k_nothing},
         });
}

TEST_CASE("launcher: losing the coordinator stops the trainer", "[launcher]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [event, why] = GENERATE(table<std::string, std::string>({
        Row{"eof", "connection closed"},
        Row{"lost Connection reset by peer", "Connection reset by peer"},
        Row{"unexpected welcome", "unexpected welcome message"},
    }));
    INFO(event);
    play(2,
         running({
             {3000, event, {"disconnect", "signal 15", "arm grace 13000"}},
             {3000, "timer heartbeat", k_nothing}, // disconnected: no more heartbeats
             {3500,
              "killed 15",
              {"cancel grace",
               "finish coordinator_lost 8 8 announce aborting: coordinator at n1:29000 lost (" +
                   why + ")"}},
         }));
}

TEST_CASE("launcher: no message from the coordinator for the heartbeat timeout", "[launcher]") {
    play(2,
         running({
             {5000, "heartbeat", k_nothing},
             {15000, "timer watch", {"arm watch 15250"}},
             {15001, "timer watch", {"disconnect", "signal 15", "arm grace 25001"}},
             {16000,
              "exited 0",
              {"cancel grace",
               "finish coordinator_lost 8 8 announce aborting: coordinator at n1:29000 lost (no "
               "heartbeat "
               "for 10 s)"}},
         }));
}

TEST_CASE("launcher: messages name the control port where the coordinator answered", "[launcher]") {
    // The first candidate (n1:29000) was held by another process: the coordinator answered on a
    // fallback candidate, and that is the port the loss names.
    play(2,
         {
             {0, "welcome n1:32005", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {3000, "eof", {"disconnect", "signal 15", "arm grace 13000"}},
             {3500,
              "killed 15",
              {"cancel grace",
               "finish coordinator_lost 8 8 announce aborting: coordinator at n1:32005 lost "
               "(connection closed)"}},
         });
}

TEST_CASE("launcher: a trainer that ignores SIGTERM gets SIGKILL when the grace expires",
          "[launcher]") {
    play(2,
         running({
             {1000, "stop done", {"signal 15", "arm grace 11000"}},
             {11000, "timer grace", {"signal 9"}},
             {11010, "killed 9", {"cancel grace", "send exit was killed by signal 9 (Killed)"}},
             {11010, "written", {"half-close", "arm close 13010"}},
             // The coordinator never closes: the close timer gives up.
             {13010, "timer close", {"disconnect", "finish done 0 0"}},
             {13020, "timer grace", k_nothing},
         }));
}

TEST_CASE("launcher: a trainer's own exit is reported before the verdict", "[launcher]") {
    play(2,
         running({
             {100, "exited 0", {"cancel grace", "send exit exited with status 0"}},
             {100, "written", k_nothing},
             {200, "stop done", {"half-close", "arm close 2200"}},
             {300, "eof", {"disconnect", "finish done 0 0"}},
         }));
}

TEST_CASE("launcher: a trainer that cannot start is reported with its error", "[launcher]") {
    const protocol::Failure failure =
        failure_of(2, protocol::FailureCause::start, 7, "trainer: port 2222 is already in use");
    LauncherMachine m(settings(2));
    m.registered("n1:29000", k_t0);
    m.start_due(k_t0);
    CHECK(render(m.take_actions()) ==
          Actions{k_registered[0], k_registered[1], k_registered[2], "start trainer"});
    m.trainer_failed(ExitStatus::exited(7), "trainer: port 2222 is already in use", k_t0);
    CHECK(render(m.take_actions()) ==
          Actions{"send exit exited with status 7: trainer: port 2222 is already in use"});
    m.written(k_t0);
    m.received(protocol::Abort{failure}, k_t0);
    CHECK(render(m.take_actions()) == Actions{"half-close", "arm close 2000"});
    m.connection_lost("connection closed", k_t0);
    CHECK(render(m.take_actions()) ==
          Actions{"disconnect",
                  "finish aborted 7 7 announce aborting: rank 2 (worker:1) on n2 could not start "
                  "its "
                  "trainer: trainer: port 2222 is already in use"});
}

TEST_CASE("launcher: with an address exchange the trainer waits for every node's address",
          "[launcher]") {
    const Actions registered{"arm heartbeat 1000", "arm watch 250"};
    const auto m = play(exchange_settings(2),
                        {
                            {0, "welcome", registered},
                            {500, "heartbeat", k_nothing},
                            {900, "cluster", {"schedule start"}},
                            {900, "start due", {"start trainer"}},
                        });
    CHECK(m.cluster().addresses ==
          std::map<std::string, std::string, std::less<>>{{"n1", "10.1.0.1"}, {"n2", "10.1.0.2"}});

    SECTION("a verdict before the addresses: never started") {
        play(exchange_settings(2),
             {
                 {0, "welcome", registered},
                 {10, "abort", {"schedule start"}},
                 {10, "start due", {"half-close", "arm close 2010"}},
                 {15, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
             });
    }
    SECTION("without an exchange, addresses are a protocol violation") {
        play(2,
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {5, "started", k_nothing},
                 {10, "cluster", {"disconnect", "signal 15", "arm grace 10010"}},
             });
    }
}
