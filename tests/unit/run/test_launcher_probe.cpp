// SPDX-License-Identifier: MIT
// The launcher machine's barrier before the start, table-driven: the reachability probe
// (--probe) and the node's health checks (--preflight).
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

/// settings(rank) with `probe` and the plan's ports 23000 to 23003.
LauncherSettings probe_settings(std::uint32_t rank, AddressExchange exchange) {
    LauncherSettings s = settings(rank);
    s.exchange = exchange;
    s.run.probe = Probe::on;
    s.ports = {23000, 23001, 23002, 23003};
    return s;
}

} // namespace

TEST_CASE("launcher: probe: the trainer starts only after the probe and the coordinator's go",
          "[launcher][probe]") {
    const Actions registered{"arm heartbeat 1000", "arm watch 250"};
    SECTION("with the address exchange: after `cluster`, towards the exchanged addresses") {
        play(probe_settings(2, AddressExchange::coordinator),
             {
                 {0, "welcome", registered},
                 {900, "cluster", {"probe 10.1.0.1:23000 10.1.0.1:23001 10.1.0.2:23003"}},
                 {1500, "probe ok", {"send probed 0 failed"}},
                 {1500, "written", k_nothing},
                 {1600, "go", {"schedule start"}},
                 {1600, "start due", {"start trainer"}},
                 {1700, "go", k_nothing}, // a second one changes nothing
             });
    }
    SECTION("without an exchange: right after the welcome, towards the node names") {
        play(probe_settings(0, AddressExchange::none),
             {
                 {0,
                  "welcome",
                  {"arm heartbeat 1000", "arm watch 250", "probe n1:23001 n2:23002 n2:23003"}},
                 {30000, "probe fail", {"send probed 1 failed"}},
             });
    }
    SECTION("a verdict while probing: never started, a late probe result is dropped") {
        const std::string line = "aborting: rank 3 (worker:2) on n2 exited with status 3";
        play(probe_settings(2, AddressExchange::none),
             {
                 {0,
                  "welcome",
                  {"arm heartbeat 1000", "arm watch 250", "probe n1:23000 n1:23001 n2:23003"}},
                 {10, "abort", {"schedule start"}},
                 {10, "start due", {"half-close", "arm close 2010"}},
                 {20, "probe ok", k_nothing},
                 {25, "eof", {"disconnect", "finish aborted 3 3 quiet " + line}},
             });
    }
    SECTION("without probe, go is a protocol violation") {
        play(2,
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {5, "started", k_nothing},
                 {10, "go", {"disconnect", "signal 15", "arm grace 10010"}},
             });
    }
}

TEST_CASE("launcher: probe: the rank that could not reach its peer shows the abort line",
          "[launcher][probe]") {
    const protocol::Failure failure =
        failure_of(2,
                   protocol::FailureCause::unreachable,
                   k_status_unreachable,
                   "rank 0 (ps:0) at 10.1.0.1:23000: Connection timed out");
    const std::string line = "aborting: rank 2 (worker:1) on n2 cannot reach rank 0 (ps:0) at "
                             "10.1.0.1:23000: Connection timed out";
    for (const std::uint32_t rank : {2U, 3U}) {
        LauncherMachine m(probe_settings(rank, AddressExchange::none));
        m.registered({}, k_t0);
        m.probe_finished({}, k_t0);
        m.received(protocol::Abort{failure}, k_t0 + 1ms);
        m.start_due(k_t0 + 1ms);
        m.connection_lost("connection closed", k_t0 + 2ms);
        (void)m.take_actions();
        REQUIRE(m.result());
        CHECK(m.result()->exit_status == 12);
        CHECK(m.result()->message == line);
        CHECK(m.result()->announce == (rank == 2));
    }
}

namespace {

/// settings(rank) with `preflight`; `probe` as given (the plan's ports 23000 to 23003).
LauncherSettings preflight_settings(std::uint32_t rank, Probe probe) {
    LauncherSettings s = settings(rank);
    s.run.preflight = true;
    s.run.probe = probe;
    s.ports = {23000, 23001, 23002, 23003};
    return s;
}

} // namespace

TEST_CASE("launcher: preflight: the node's lowest rank checks it, every rank waits for go",
          "[launcher][preflight]") {
    SECTION("a node leader checks, reports, and starts on go") {
        for (const std::uint32_t rank : {0U, 2U}) {
            INFO("rank " << rank);
            play(preflight_settings(rank, Probe::off),
                 {
                     {0, "welcome", {"arm heartbeat 1000", "arm watch 250", "check node"}},
                     {40, "go", k_nothing}, // not before its own report (never sent so)
                     {50, "node ok", {"send probed 0 failed"}},
                     {50, "written", k_nothing},
                     {60, "go", {"schedule start"}},
                     {60, "start due", {"start trainer"}},
                 });
        }
    }
    SECTION("the node's other ranks check nothing: ready at once") {
        for (const std::uint32_t rank : {1U, 3U}) {
            INFO("rank " << rank);
            play(
                preflight_settings(rank, Probe::off),
                {
                    {0, "welcome", {"arm heartbeat 1000", "arm watch 250", "send probed 0 failed"}},
                    {0, "written", k_nothing},
                    {60, "go", {"schedule start"}},
                });
        }
    }
    SECTION("a --preflight-command alone turns the checks on") {
        LauncherSettings s = settings(2);
        s.run.preflight_command = "true";
        play(s, {{0, "welcome", {"arm heartbeat 1000", "arm watch 250", "check node"}}});
    }
    SECTION("with the probe: one barrier, the checks first, then the probe, one report") {
        play(preflight_settings(2, Probe::on),
             {
                 {0, "welcome", {"arm heartbeat 1000", "arm watch 250", "check node"}},
                 {50, "node fail", {"probe n1:23000 n1:23001 n2:23003"}},
                 {900, "probe ok", {"send probed 0 failed + preflight command"}},
                 {900, "written", k_nothing},
             });
        play(preflight_settings(3, Probe::on),
             {
                 {0,
                  "welcome",
                  {"arm heartbeat 1000", "arm watch 250", "probe n1:23000 n1:23001 n2:23002"}},
                 {900, "probe fail", {"send probed 1 failed"}},
             });
    }
    SECTION("an interrupt while checking: never started; the late result and go start nothing") {
        play(preflight_settings(2, Probe::on),
             {
                 {0, "welcome", {"arm heartbeat 1000", "arm watch 250", "check node"}},
                 {10,
                  "signal 15",
                  {"send interrupt 15", "send exit was killed by signal 15 (Terminated)"}},
                 {20, "node ok", k_nothing},
                 {30, "go", k_nothing},
                 {30, "start due", k_nothing},
             });
    }
    SECTION("a verdict while checking: never started, a late result is dropped") {
        const std::string line = "aborting: rank 3 (worker:2) on n2 exited with status 3";
        play(preflight_settings(2, Probe::off),
             {
                 {0, "welcome", {"arm heartbeat 1000", "arm watch 250", "check node"}},
                 {10, "abort", {"schedule start"}},
                 {10, "start due", {"half-close", "arm close 2010"}},
                 {20, "node fail", k_nothing},
                 {25, "eof", {"disconnect", "finish aborted 3 3 quiet " + line}},
             });
    }
}

TEST_CASE("launcher: preflight: rank 0's launcher shows the abort line, every rank exits 13",
          "[launcher][preflight]") {
    // Rank 0's, not the sick node's: a node's fault is told where the requeue without that node
    // is decided (as for a lost launcher).
    const protocol::Failure failure = failure_of(2,
                                                 protocol::FailureCause::preflight,
                                                 k_status_preflight,
                                                 R"(command: "false" exited with status 1)");
    const std::string line =
        R"(aborting: preflight failed on n2 (rank 2, worker:1): command: "false" exited with status 1)";
    for (const std::uint32_t rank : {0U, 1U, 2U, 3U}) {
        INFO("rank " << rank);
        LauncherMachine m(preflight_settings(rank, Probe::off));
        m.registered({}, k_t0);
        m.preflight_finished(std::nullopt, k_t0);
        m.received(protocol::Abort{failure}, k_t0 + 1ms);
        m.start_due(k_t0 + 1ms);
        m.connection_lost("connection closed", k_t0 + 2ms);
        m.server_finished(k_t0 + 2ms);
        const auto actions = render(m.take_actions());
        CHECK(std::find(actions.begin(), actions.end(), "start trainer") == actions.end());
        REQUIRE(m.result());
        CHECK(m.result()->exit_status == k_status_preflight);
        CHECK(m.result()->outcome == Outcome::aborted);
        CHECK(m.result()->message == line);
        CHECK(m.result()->announce == (rank == 0));
    }
}
