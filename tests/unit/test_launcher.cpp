// SPDX-License-Identifier: MIT
// The launcher's state machine, table-driven: each scenario is a list of events (with the time)
// and the actions each one must produce, the last one being the launcher's result.
#include "log_capture.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/exit_status.hpp>
#include <tfslurm/launcher.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/protocol.hpp>
#include <tfslurm/run.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

const Clock::time_point k_t0{};

/// rank 0 ps:0 on n1, rank 1 worker:0 on n1, rank 2 worker:1 on n2, rank 3 worker:2 on n2.
LauncherSettings settings(std::uint32_t rank) {
    LauncherSettings s;
    s.rank = rank;
    s.ranks = {{Role::ps, 0, "n1"},
               {Role::worker, 0, "n1"},
               {Role::worker, 1, "n2"},
               {Role::worker, 2, "n2"}};
    s.control = "n1:29000";
    s.host = rank == 0 ? CoordinatorHost::here : CoordinatorHost::elsewhere;
    s.run.heartbeat = 1s;
    s.run.heartbeat_timeout = 10s;
    s.run.grace = 10s;
    return s;
}

/// The abort the coordinator sends when rank 3 (worker:2 on n2) exited 3.
protocol::Abort abort_rank3() {
    protocol::Failure failure;
    failure.rank = 3;
    failure.role = Role::worker;
    failure.index = 2;
    failure.host = "n2";
    failure.cause = protocol::FailureCause::trainer;
    failure.status = ExitStatus::exited(3);
    failure.step_status = 3;
    return {failure};
}

/// The abort the coordinator sends when rank 2 (worker:1 on n2) made no progress for 10 s.
protocol::Abort abort_stall_rank2() {
    protocol::Failure failure;
    failure.rank = 2;
    failure.role = Role::worker;
    failure.index = 1;
    failure.host = "n2";
    failure.cause = protocol::FailureCause::stalled;
    failure.detail = "10 s";
    failure.step_status = k_status_stalled;
    return {failure};
}

/// Parse `exited N` / `killed N` from words.
ExitStatus status_of(const std::string& kind, int value) {
    return kind == "killed" ? ExitStatus::signaled(value) : ExitStatus::exited(value);
}

/// Feed one event, written as in the tables: `welcome [<address>:<port>]`, `start due`, `started`,
/// `failed 7 <error>`, `exited N`, `killed N`, `heartbeat`, `stop done`, `stop signal R S [whole]`,
/// `abort` (rank 3 exited 3), `abort stall` (rank 2 stuck), `sample <cpu> <mtime> [<output>]` (a
/// progress sample; output bytes 0 unless given), `unexpected welcome`, `eof`, `lost <reason>`,
/// `written`, `signal N` (sent to the launcher alone), `step signal N` (from slurmstepd, to every
/// process of the step), `cluster` (n1 and n2's addresses), `restart N LIMIT`, `timer
/// heartbeat|watch|grace|close|settle|stall|restart|checkpoint|report`, `server finished`, `go`,
/// `probe ok|fail` (the probe's end; fail: rank 0 at 10.1.0.1:23000 timed out), `node ok|fail`
/// (the node's checks; fail: its command exited 1).
void feed(LauncherMachine& m, const std::string& event, Clock::time_point now) {
    std::istringstream in(event);
    std::string word;
    in >> word;
    int a = 0;
    int b = 0;
    std::string text;
    if (word == "welcome") {
        in >> text; // the endpoint that answered, when not the first candidate
        m.registered(text, now);
    } else if (word == "start") {
        m.start_due(now);
    } else if (word == "started") {
        m.trainer_started(now);
    } else if (word == "failed") {
        in >> a;
        std::getline(in >> std::ws, text);
        m.trainer_failed(ExitStatus::exited(a), text, now);
    } else if (word == "exited" || word == "killed") {
        in >> a;
        m.trainer_exited(status_of(word, a), now);
    } else if (word == "heartbeat") {
        m.received(protocol::Heartbeat{}, now);
    } else if (word == "stop") {
        std::string whole;
        in >> text >> a >> b >> whole;
        m.received(text == "done" ? protocol::Stop{}
                                  : protocol::Stop{protocol::StopReason::signal,
                                                   static_cast<std::uint32_t>(a),
                                                   b,
                                                   whole == "whole"},
                   now);
    } else if (word == "abort") {
        in >> text;
        m.received(text == "stall" ? abort_stall_rank2() : abort_rank3(), now);
    } else if (word == "restart") {
        in >> a >> b;
        m.received(protocol::Restart{static_cast<std::uint32_t>(a), static_cast<std::uint32_t>(b)},
                   now);
    } else if (word == "cluster") {
        m.received(protocol::Cluster{{{"n1", "10.1.0.1"}, {"n2", "10.1.0.2"}}, {}}, now);
    } else if (word == "sample") {
        long long cpu = 0;
        long long mtime = 0;
        long long output = 0;
        in >> cpu >> mtime >> output;
        m.progress_sampled(
            {static_cast<std::uint64_t>(cpu), mtime, static_cast<std::uint64_t>(output)}, now);
    } else if (word == "unexpected") {
        m.received(protocol::Welcome{4, {}}, now);
    } else if (word == "eof") {
        m.connection_lost("connection closed", now);
    } else if (word == "lost") {
        std::getline(in >> std::ws, text);
        m.connection_lost(text, now);
    } else if (word == "written") {
        m.written(now);
    } else if (word == "signal") {
        in >> a;
        m.signal_received(a, now);
    } else if (word == "step") {
        in >> text >> a;
        m.signal_received(a, now, SignalOrigin::step);
    } else if (word == "timer") {
        in >> text;
        const auto timer = text == "heartbeat"    ? LauncherTimer::heartbeat
                           : text == "watch"      ? LauncherTimer::watch
                           : text == "grace"      ? LauncherTimer::grace
                           : text == "settle"     ? LauncherTimer::settle
                           : text == "stall"      ? LauncherTimer::stall
                           : text == "restart"    ? LauncherTimer::restart
                           : text == "checkpoint" ? LauncherTimer::checkpoint
                           : text == "report"     ? LauncherTimer::report
                                                  : LauncherTimer::close;
        m.timer_fired(timer, now);
    } else if (word == "server") {
        m.server_finished(now);
    } else if (word == "go") {
        m.received(protocol::Go{}, now);
    } else if (word == "probe") {
        in >> text;
        std::vector<protocol::ProbeFailure> failures;
        if (text == "fail") {
            failures.push_back({0, "10.1.0.1:23000", "Connection timed out"});
        }
        m.probe_finished(failures, now);
    } else if (word == "node") {
        in >> text;
        std::optional<protocol::PreflightFailure> failure;
        if (text == "fail") {
            failure = protocol::PreflightFailure{"command", "\"false\" exited with status 1"};
        }
        m.preflight_finished(failure, now);
    } else {
        FAIL("unknown event in the table: " << event);
    }
}

/// Actions in one line each; a Send is shortened to `send <type> [details]`.
std::vector<std::string> render(const std::vector<LauncherAction>& actions) {
    std::vector<std::string> out;
    for (const auto& action : actions) {
        const auto* send = std::get_if<launcher_action::Send>(&action);
        if (send == nullptr) {
            out.push_back(describe(action, k_t0));
        } else if (const auto* exit = std::get_if<protocol::Exit>(&send->message)) {
            out.push_back("send exit " + describe(exit->status) +
                          (exit->error.empty() ? "" : ": " + exit->error));
        } else if (const auto* stall = std::get_if<protocol::Stall>(&send->message)) {
            out.push_back("send stall " + std::to_string(stall->silent_ms));
        } else if (const auto* probed = std::get_if<protocol::Probed>(&send->message)) {
            out.push_back(fmt::format("send probed {} failed{}",
                                      probed->failures.size(),
                                      probed->preflight ? " + preflight " + probed->preflight->check
                                                        : std::string()));
        } else if (const auto* progress = std::get_if<protocol::Progress>(&send->message)) {
            out.push_back(fmt::format("send progress {}", progress->idle_ms));
        } else if (const auto* interrupt = std::get_if<protocol::Interrupt>(&send->message)) {
            out.push_back("send interrupt " + std::to_string(interrupt->signal) +
                          (interrupt->whole_step ? " whole step" : ""));
        } else {
            out.push_back("send " + std::string(protocol::type_name(send->message)));
        }
    }
    return out;
}

struct Step {
    int at_ms = 0;
    std::string event;
    std::vector<std::string> actions;
};

/// Run a scenario; every step's actions must match exactly.
LauncherMachine play(const LauncherSettings& launcher_settings, const std::vector<Step>& steps) {
    LauncherMachine m(launcher_settings);
    for (const auto& step : steps) {
        INFO("at " << step.at_ms << " ms: " << step.event);
        feed(m, step.event, k_t0 + Millis{step.at_ms});
        CHECK(render(m.take_actions()) == step.actions);
    }
    return m;
}

LauncherMachine play(std::uint32_t rank, const std::vector<Step>& steps) {
    return play(settings(rank), steps);
}

/// settings(rank) with a 10 s stall timeout, the stall signal 6 and a 5 s stall grace.
LauncherSettings stall_settings(std::uint32_t rank) {
    LauncherSettings s = settings(rank);
    s.run.stall_timeout = 10s;
    s.run.stall_signal = SIGABRT;
    s.run.stall_grace = 5s;
    return s;
}

/// settings(rank) of a launcher that waits for the coordinator's `cluster` (`iface`/`network`).
LauncherSettings exchange_settings(std::uint32_t rank) {
    LauncherSettings s = settings(rank);
    s.exchange = AddressExchange::coordinator;
    return s;
}

/// settings(rank) of job 12 that ends 60 s after k_t0, with the checkpoint signal (SIGUSR1) 50 s
/// before it and `--requeue` (run `restart` of at most 2 requeues).
LauncherSettings checkpoint_settings(std::uint32_t rank, std::uint32_t restart = 0) {
    LauncherSettings s = settings(rank);
    s.job_end = k_t0 + 60s;
    s.run.checkpoint_before = 50s;
    s.run.checkpoint_signal = SIGUSR1;
    s.requeue = RequeuePolicy{12, restart};
    s.run.max_requeues = 2;
    return s;
}

using Actions = std::vector<std::string>;
const Actions k_nothing;
const Actions k_registered{"arm heartbeat 1000", "arm watch 250", "schedule start"};
const std::string k_abort_line = "aborting: rank 3 (worker:2) on n2 exited with status 3";

} // namespace

TEST_CASE("launcher: done: a ps is stopped with SIGTERM, reports, and rank 0 waits for its "
          "coordinator",
          "[launcher]") {
    const auto m = play(
        0,
        {
            {0, "welcome", k_registered},
            {0, "start due", {"start trainer"}},
            {0, "started", k_nothing},
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
        });
    REQUIRE(m.result());
    CHECK(m.result()->outcome == Outcome::done);
    CHECK(m.result()->exit_status == 0);
    CHECK(m.result()->message.empty());
}

TEST_CASE("launcher: abort while running stops the trainer and names the failure", "[launcher]") {
    const auto m = play(
        2,
        {
            {0, "welcome", k_registered},
            {0, "start due", {"start trainer"}},
            {0, "started", k_nothing},
            {500, "abort", {"signal 15", "arm grace 10500"}},
            {600, "abort", k_nothing}, // a second verdict is ignored
            {700, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {700, "written", {"half-close", "arm close 2700"}},
            {800, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
        });
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
        {
            {0, "welcome", k_registered},
            {0, "start due", {"start trainer"}},
            {0, "started", k_nothing},
            {100, "signal 15", {"signal 15", "send interrupt 15", "arm grace 10100"}},
            {100, "written", k_nothing},
            // A second SIGTERM is forwarded; the grace period is already counting.
            {200, "signal 15", {"signal 15"}},
            // The trainer already received SIGTERM: the verdict sends no other.
            {300, "stop signal 1 15", k_nothing},
            {400, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
            {400, "written", {"half-close", "arm close 2400"}},
            {500, "eof", {"disconnect", "finish interrupted 143 143 quiet " + stopping}},
        });
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
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
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
         });
}

TEST_CASE("launcher: a held exit is reported when the settle window ends or a verdict comes",
          "[launcher]") {
    // Killed by someone else's SIGTERM: no signal comes, the exit is reported (a failure).
    play(2,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {100, "killed 15", {"cancel grace", "arm settle 1100"}},
             {1100,
              "timer settle",
              {"cancel settle", "send exit was killed by signal 15 (Terminated)"}},
             {1100, "written", k_nothing},
             {1200, "abort", {"half-close", "arm close 3200"}},
             {1300, "eof", {"disconnect", "finish aborted 3 3 quiet " + k_abort_line}},
         });
    // Another launcher's interrupt won: the verdict releases the report.
    play(2,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
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
         });
    // Other deaths are reported at once.
    play(2,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {100, "killed 9", {"cancel grace", "send exit was killed by signal 9 (Killed)"}},
         });
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
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {10, "step signal 10", k_nothing}, // scancel -s USR1: no second SIGUSR1
             {20, "signal 10", {"signal 10"}},  // kill -USR1 of the launcher alone
             {30, "step signal 15", {"send interrupt 15 whole step", "arm grace 10030"}},
             {30, "written", k_nothing},
             {40, "stop signal 2 15", k_nothing}, // no second SIGTERM from the verdict
             {50, "killed 15", {"cancel grace", "send exit was killed by signal 15 (Terminated)"}},
             {50, "written", {"half-close", "arm close 2050"}},
             {60, "eof", {"disconnect", "finish interrupted 143 143 announce " + stopping}},
         });
    // SIGINT from slurmstepd: the verdict's SIGTERM is another signal, still sent once.
    play(2,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {30, "step signal 2", {"send interrupt 2 whole step", "arm grace 10030"}},
             {40, "stop signal 2 2", {"signal 15"}},
             {50, "abort", k_nothing},
         });
    // The stop for another launcher's slurmstepd SIGTERM comes before this launcher's own copy:
    // every trainer has it already, none is signalled again.
    play(1,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {20, "stop signal 2 15 whole", {"arm grace 10020"}},
             {30, "step signal 15", k_nothing},
         });
    // A verdict's SIGTERM is not repeated by a later slurmstepd SIGTERM or verdict.
    play(2,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {30, "abort", {"signal 15", "arm grace 10030"}},
             {40, "step signal 15", k_nothing},
         });
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
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {3000, event, {"disconnect", "signal 15", "arm grace 13000"}},
             {3000, "timer heartbeat", k_nothing}, // disconnected: no more heartbeats
             {3500,
              "killed 15",
              {"cancel grace",
               "finish coordinator_lost 8 8 announce aborting: coordinator at n1:29000 lost (" +
                   why + ")"}},
         });
}

TEST_CASE("launcher: no message from the coordinator for the heartbeat timeout", "[launcher]") {
    play(2,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {5000, "heartbeat", k_nothing},
             {15000, "timer watch", {"arm watch 15250"}},
             {15001, "timer watch", {"disconnect", "signal 15", "arm grace 25001"}},
             {16000,
              "exited 0",
              {"cancel grace",
               "finish coordinator_lost 8 8 announce aborting: coordinator at n1:29000 lost (no "
               "heartbeat "
               "for 10 s)"}},
         });
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
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {1000, "stop done", {"signal 15", "arm grace 11000"}},
             {11000, "timer grace", {"signal 9"}},
             {11010, "killed 9", {"cancel grace", "send exit was killed by signal 9 (Killed)"}},
             {11010, "written", {"half-close", "arm close 13010"}},
             // The coordinator never closes: the close timer gives up.
             {13010, "timer close", {"disconnect", "finish done 0 0"}},
             {13020, "timer grace", k_nothing},
         });
}

TEST_CASE("launcher: a trainer's own exit is reported before the verdict", "[launcher]") {
    play(2,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
             {100, "exited 0", {"cancel grace", "send exit exited with status 0"}},
             {100, "written", k_nothing},
             {200, "stop done", {"half-close", "arm close 2200"}},
             {300, "eof", {"disconnect", "finish done 0 0"}},
         });
}

TEST_CASE("launcher: a trainer that cannot start is reported with its error", "[launcher]") {
    protocol::Failure failure;
    failure.rank = 2;
    failure.role = Role::worker;
    failure.index = 1;
    failure.host = "n2";
    failure.cause = protocol::FailureCause::start;
    failure.status = ExitStatus::exited(7);
    failure.detail = "trainer: port 2222 is already in use";
    failure.step_status = 7;
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

TEST_CASE("launcher: exit statuses of the result", "[launcher]") {
    // verdict, how the trainer ended (before or after the verdict), expected finish.
    using Row = std::tuple<std::string, std::string, bool, std::string>;
    const auto [verdict,
                trainer,
                stopped,
                finish] = GENERATE(table<std::string, std::string, bool, std::string>({
        Row{"stop done", "exited 0", false, "finish done 0 0"},
        Row{"stop done", "exited 3", false, "finish done 3 0"},
        Row{"stop done", "killed 15", true, "finish done 0 0"},
        Row{"stop done", "exited 143", true, "finish done 0 0"},
        Row{"abort", "exited 3", false, "finish aborted 3 3 quiet " + k_abort_line},
        Row{"abort", "exited 0", false, "finish aborted 3 3 quiet " + k_abort_line},
        Row{"abort", "killed 15", true, "finish aborted 3 3 quiet " + k_abort_line},
        Row{"abort", "killed 9", true, "finish aborted 3 3 quiet " + k_abort_line},
        Row{"abort", "exited 0", true, "finish aborted 3 3 quiet " + k_abort_line},
        Row{"stop signal 1 15",
            "killed 15",
            true,
            "finish interrupted 143 143 quiet stopping: rank 1 (worker:0) on n1 received signal "
            "15 "
            "(Terminated)"},
        Row{"stop signal 3 2",
            "exited 0",
            true,
            "finish interrupted 0 0 quiet stopping: rank 3 (worker:2) on n2 received signal 2 "
            "(Interrupt)"},
    }));
    INFO(verdict << " / " << trainer << (stopped ? " after" : " before"));
    LauncherMachine m(settings(2));
    m.registered("n1:29000", k_t0);
    m.start_due(k_t0);
    m.trainer_started(k_t0);
    if (!stopped) {
        feed(m, trainer, k_t0);
        m.written(k_t0);
    }
    feed(m, verdict, k_t0);
    if (stopped) {
        feed(m, trainer, k_t0);
        m.written(k_t0);
    }
    m.connection_lost("connection closed", k_t0);
    const auto actions = render(m.take_actions());
    REQUIRE_FALSE(actions.empty());
    CHECK(actions.back() == finish);
}

TEST_CASE("launcher: actions are described in one line", "[launcher]") {
    CHECK(describe(launcher_action::Send{protocol::Interrupt{15}}, k_t0) ==
          R"(send {"signal":15,"type":"interrupt","v":5})");
    CHECK(describe(launcher_action::ArmTimer{LauncherTimer::grace, k_t0 + 10s}, k_t0) ==
          "arm grace 10000");
    CHECK(describe(launcher_action::CancelTimer{LauncherTimer::close}, k_t0) == "cancel close");
    CHECK(describe(launcher_action::SignalTrainer{9}, k_t0) == "signal 9");
}

TEST_CASE("launcher: every launcher exits with the step's status, one of them shows the line",
          "[launcher]") {
    // The failure's cause and status, this launcher's rank, and its finish.
    using Row = std::tuple<protocol::FailureCause, int, std::uint32_t, std::string>;
    const auto [cause, step_status, rank, finish] =
        GENERATE(table<protocol::FailureCause, int, std::uint32_t, std::string>({
            // A trainer that failed by itself: its own launcher shows the line.
            Row{protocol::FailureCause::trainer, 1, 3, "finish aborted 1 1 announce"},
            Row{protocol::FailureCause::trainer, 1, 0, "finish aborted 1 1 quiet"},
            Row{protocol::FailureCause::trainer, 139, 2, "finish aborted 139 139 quiet"},
            Row{protocol::FailureCause::start, 127, 3, "finish aborted 127 127 announce"},
            // A lost or missing launcher cannot: rank 0, the coordinator's host, does.
            Row{protocol::FailureCause::lost, k_status_lost, 0, "finish aborted 8 8 announce"},
            Row{protocol::FailureCause::lost, k_status_lost, 2, "finish aborted 8 8 quiet"},
            Row{protocol::FailureCause::unregistered,
                k_status_unregistered,
                0,
                "finish aborted 124 124 announce"},
            Row{protocol::FailureCause::unregistered,
                k_status_unregistered,
                1,
                "finish aborted 124 124 quiet"},
        }));
    protocol::Failure failure;
    failure.rank = 3;
    failure.role = Role::worker;
    failure.index = 2;
    failure.host = "n2";
    failure.cause = cause;
    failure.status = ExitStatus::exited(step_status);
    failure.step_status = step_status;
    INFO(protocol::describe(failure) << " / rank " << rank);
    LauncherMachine m(settings(rank));
    m.registered("n1:29000", k_t0);
    m.start_due(k_t0);
    m.trainer_started(k_t0);
    m.received(protocol::Abort{failure}, k_t0);
    // Stopped by the abort, this trainer dies of SIGTERM: the launcher still exits with the
    // step's status (srun reports the highest task status).
    m.trainer_exited(ExitStatus::signaled(SIGTERM), k_t0);
    m.written(k_t0);
    m.connection_lost("connection closed", k_t0);
    if (rank == 0) {
        m.server_finished(k_t0);
    }
    (void)m.take_actions();
    REQUIRE(m.result());
    const LaunchResult& r = *m.result();
    CHECK(fmt::format("finish {} {} {} {}",
                      to_string(r.outcome),
                      r.exit_status,
                      r.step_status,
                      r.announce ? "announce" : "quiet") == finish);
    CHECK(r.message == "aborting: " + protocol::describe(failure));
}

TEST_CASE("launcher: who cancels the Slurm step when a node may be lost", "[launcher]") {
    // The failure's cause, this launcher's rank, and whether it cancels step 12.0.
    using Row = std::tuple<protocol::FailureCause, std::uint32_t, bool>;
    const auto [cause, rank, cancels] =
        GENERATE(table<protocol::FailureCause, std::uint32_t, bool>({
            // A lost launcher: only rank 0 (the coordinator's host), once it may finish.
            Row{protocol::FailureCause::lost, 0, true},
            Row{protocol::FailureCause::lost, 1, false},
            Row{protocol::FailureCause::lost, 3, false},
            // Failures Slurm sees by itself (a task exited): nobody.
            Row{protocol::FailureCause::trainer, 0, false},
            Row{protocol::FailureCause::trainer, 3, false},
            Row{protocol::FailureCause::start, 0, false},
            Row{protocol::FailureCause::unregistered, 0, false},
        }));
    protocol::Failure failure;
    failure.rank = 3;
    failure.role = Role::worker;
    failure.index = 2;
    failure.host = "n2";
    failure.cause = cause;
    failure.step_status = k_status_lost;
    INFO(protocol::describe(failure) << " / rank " << rank);
    for (const bool under_slurm : {true, false}) {
        LauncherSettings s = settings(rank);
        if (under_slurm) {
            s.slurm_step = StepRef{12, 0};
        }
        LauncherMachine m(s);
        m.registered("n1:29000", k_t0);
        m.start_due(k_t0);
        m.trainer_started(k_t0);
        m.received(protocol::Abort{failure}, k_t0);
        m.trainer_exited(ExitStatus::signaled(SIGTERM), k_t0);
        m.written(k_t0);
        m.connection_lost("connection closed", k_t0);
        if (rank == 0) {
            // Rank 0 finishes (and cancels) only once the coordinator is finished: every
            // surviving launcher left after its trainer's grace, or the linger time ran out.
            REQUIRE_FALSE(m.result());
            m.server_finished(k_t0);
        }
        (void)m.take_actions();
        REQUIRE(m.result());
        INFO("under Slurm: " << under_slurm);
        CHECK(m.result()->cancel.has_value() == (cancels && under_slurm));
        if (m.result()->cancel) {
            CHECK(*m.result()->cancel == StepRef{12, 0});
            CHECK(m.result()->announce);
        }
    }
}

TEST_CASE("launcher: with requeue, rank 0 requeues the job without a lost launcher's node",
          "[launcher][checkpoint]") {
    // The failure's cause, this launcher's rank, the job's restarts (of at most 2), and the
    // line's end (empty: no requeue asked).
    using Row = std::tuple<protocol::FailureCause, std::uint32_t, std::uint32_t, std::string>;
    const auto [cause, rank, restarts, tail] =
        GENERATE(table<protocol::FailureCause, std::uint32_t, std::uint32_t, std::string>({
            Row{protocol::FailureCause::lost,
                0,
                0,
                "; requeueing job 12 without n2 (requeue 1 of 2)"},
            Row{protocol::FailureCause::lost,
                0,
                1,
                "; requeueing job 12 without n2 (requeue 2 of 2)"},
            Row{protocol::FailureCause::lost,
                0,
                2,
                "; not requeueing job 12 without n2: it was requeued 2 times already (" +
                    setting_ref("max_requeues", "2") + ")"},
            // Only rank 0 requeues.
            Row{protocol::FailureCause::lost, 1, 0, ""},
            // The trainer's own failures never.
            Row{protocol::FailureCause::trainer, 0, 0, ""},
            Row{protocol::FailureCause::start, 0, 0, ""},
            Row{protocol::FailureCause::stalled, 0, 0, ""},
            Row{protocol::FailureCause::unreachable, 0, 0, ""},
            Row{protocol::FailureCause::unregistered, 0, 0, ""},
        }));
    protocol::Failure failure;
    failure.rank = 3;
    failure.role = Role::worker;
    failure.index = 2;
    failure.host = "n2";
    failure.cause = cause;
    failure.step_status = k_status_lost;
    INFO(protocol::describe(failure) << " / rank " << rank << " / restarts " << restarts);
    LauncherSettings s = checkpoint_settings(rank, restarts);
    s.slurm_step = StepRef{12, 0};
    LauncherMachine m(s);
    m.registered("n1:29000", k_t0);
    m.start_due(k_t0);
    m.trainer_started(k_t0);
    m.received(protocol::Abort{failure}, k_t0);
    m.trainer_exited(ExitStatus::signaled(SIGTERM), k_t0);
    m.written(k_t0);
    m.connection_lost("connection closed", k_t0);
    if (rank == 0) {
        m.server_finished(k_t0);
    }
    (void)m.take_actions();
    REQUIRE(m.result());
    const LaunchResult& r = *m.result();
    CHECK(r.message == "aborting: " + protocol::describe(failure) + tail);
    const bool requeues = tail.rfind("; requeueing", 0) == 0;
    REQUIRE(r.requeue.has_value() == requeues);
    if (requeues) {
        CHECK(r.requeue->job == 12);
        CHECK(r.requeue->restart == restarts + 1);
        CHECK(r.requeue->status_if_refused == k_status_lost);
        CHECK(r.requeue->exclusion == std::optional<NodeExclusion>(NodeExclusion{
                                          {"n2"}, "rank 3 launcher lost", restarts + 1}));
        CHECK(r.exit_status == k_status_requeued);
        // Kept for a requeue that Slurm refuses: the node may still be gone.
        CHECK(r.cancel == std::optional<StepRef>(StepRef{12, 0}));
    } else {
        CHECK(r.exit_status == k_status_lost);
    }
}

TEST_CASE("launcher: a launcher that lost the coordinator cancels the step after its trainer's "
          "grace",
          "[launcher]") {
    LauncherSettings s = settings(2);
    s.slurm_step = StepRef{12, 3};
    LauncherMachine m(s);
    const std::vector<Step> steps{
        {0, "welcome", k_registered},
        {0, "start due", {"start trainer"}},
        {0, "started", k_nothing},
        {500, "eof", {"disconnect", "signal 15", "arm grace 10500"}},
        {10500, "timer grace", {"signal 9"}},
        {10600,
         "killed 9",
         {"cancel grace",
          "finish coordinator_lost 8 8 announce aborting: coordinator at n1:29000 lost "
          "(connection closed) + cancel 12.3"}},
    };
    for (const auto& step : steps) {
        INFO("at " << step.at_ms << " ms: " << step.event);
        feed(m, step.event, k_t0 + Millis{step.at_ms});
        CHECK(render(m.take_actions()) == step.actions);
    }
    REQUIRE(m.result());
    CHECK(m.result()->cancel == std::optional<StepRef>(StepRef{12, 3}));
}

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
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", k_nothing},
                 {60000, "timer stall", k_nothing},
                 {60000, "sample 1 0", k_nothing},
             });
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

// --- restarts
// -------------------------------------------------------------------------------------

TEST_CASE("launcher: restart: a failed trainer is started again after the back-off",
          "[launcher][restart]") {
    const auto m =
        play(2,
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", k_nothing},
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
             });
    CHECK(m.restarts() == 1);
}

TEST_CASE("launcher: restart: a verdict, a loss or an interrupt during the back-off",
          "[launcher][restart]") {
    const std::vector<Step> failed{
        {0, "welcome", k_registered},
        {0, "start due", {"start trainer"}},
        {0, "started", k_nothing},
        {500, "exited 3", {"cancel grace", "send exit exited with status 3"}},
        {500, "written", k_nothing},
        {600, "restart 1 2", {"arm restart 1600"}},
    };
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
               {
                   {0, "welcome", k_registered},
                   {0, "start due", {"start trainer"}},
                   {0, "started", k_nothing},
                   {100, "restart 1 2", k_nothing}, // still running
                   {500, "exited 0", {"cancel grace", "send exit exited with status 0"}},
                   {500, "written", k_nothing},
                   {600, "restart 1 2", k_nothing}, // it succeeded
                   {700, "stop done", {"half-close", "arm close 2700"}},
               });
}

// --- checkpoint and requeue ----------------------------------------------------------------------

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
    play(unlimited,
         {
             {0, "welcome", k_registered},
             {0, "start due", {"start trainer"}},
             {0, "started", k_nothing},
         });
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
             {
                 {0, "welcome", k_registered},
                 {0, "start due", {"start trainer"}},
                 {0, "started", k_nothing},
                 {5000, "step signal 10", k_nothing},
                 {6000, "exited 0", {"cancel grace", "send exit exited with status 0"}},
                 {6000, "written", k_nothing},
                 {6100, "stop done", {"half-close", "arm close 8100"}},
                 {6200, "eof", {"disconnect", "finish checkpointed 10 10 quiet " + k_slurms}},
             });
    CHECK(m.result()->outcome == Outcome::checkpointed);
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

// --- the reachability probe
// ----------------------------------------------------------------------------

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
    protocol::Failure failure;
    failure.rank = 2;
    failure.role = Role::worker;
    failure.index = 1;
    failure.host = "n2";
    failure.cause = protocol::FailureCause::unreachable;
    failure.detail = "rank 0 (ps:0) at 10.1.0.1:23000: Connection timed out";
    failure.step_status = k_status_unreachable;
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

TEST_CASE("probe_targets: every other rank up to 64, else every ps and the chief and a sample",
          "[launcher][probe]") {
    const std::vector<Member> small{
        {Role::ps, 0, "n1"}, {Role::worker, 0, "n2"}, {Role::worker, 1, "n3"}};
    protocol::Cluster cluster{{{"n1", "10.0.0.1"}, {"n3", "fd78::3"}}, {0, 0, 23007}};
    const std::vector<std::uint16_t> ports{23000, 23001, 23002};
    CHECK(probe_targets(1, small, ports, cluster) ==
          std::vector<ProbeTarget>{{0, "10.0.0.1", 23000}, {2, "fd78::3", 23007}});
    CHECK(probe_targets(0, small, ports, {}) ==
          std::vector<ProbeTarget>{{1, "n2", 23001}, {2, "n3", 23002}});
    CHECK(endpoint({2, "fd78::3", 23007}) == "[fd78::3]:23007");
    CHECK(endpoint({2, "n3", 23002}) == "n3:23002");

    // 170 ranks: ps on rank 0, the chief on rank 1, workers after; stride 170 / 17 = 10.
    std::vector<Member> large{{Role::ps, 0, "n0"}, {Role::chief, 0, "n0"}};
    for (std::uint32_t i = 0; i < 168; ++i) {
        large.push_back({Role::worker, i, fmt::format("n{}", (i + 2) / 8)});
    }
    const std::vector<std::uint16_t> no_ports(large.size(), 23000);
    std::vector<std::uint32_t> ranks;
    for (const auto& target : probe_targets(5, large, no_ports, {})) {
        ranks.push_back(target.rank);
    }
    CHECK(ranks ==
          std::vector<std::uint32_t>{
              0, 1, 15, 25, 35, 45, 55, 65, 75, 85, 95, 105, 115, 125, 135, 145, 155, 165});
    // Rank 165: the strides wrap around; rank 5 + 160 = 165 is itself, never a target.
    ranks.clear();
    for (const auto& target : probe_targets(165, large, no_ports, {})) {
        ranks.push_back(target.rank);
    }
    CHECK(ranks == std::vector<std::uint32_t>{
                       0, 1, 5, 15, 25, 35, 45, 55, 65, 75, 85, 95, 105, 115, 125, 135, 145, 155});
}

// --- the health checks (preflight), behind the probe's barrier
// ----------------------------------------------------------------------------

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
    protocol::Failure failure;
    failure.rank = 2;
    failure.role = Role::worker;
    failure.index = 1;
    failure.host = "n2";
    failure.cause = protocol::FailureCause::preflight;
    failure.detail = R"(command: "false" exited with status 1)";
    failure.step_status = k_status_preflight;
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
