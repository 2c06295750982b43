// SPDX-License-Identifier: MIT
// The launcher machine's table tests' shared parts (launcher_table.hpp).
#include "launcher_table.hpp"

#include <tfslurm/common/exit_status.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <csignal>
#include <optional>
#include <sstream>
#include <utility>
#include <variant>

using namespace std::chrono_literals;

namespace tfslurm::test {

namespace {

/// Parse `exited N` / `killed N` from words.
ExitStatus status_of(const std::string& kind, int value) {
    return kind == "killed" ? ExitStatus::signaled(value) : ExitStatus::exited(value);
}

} // namespace

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

LauncherSettings stall_settings(std::uint32_t rank) {
    LauncherSettings s = settings(rank);
    s.run.stall_timeout = 10s;
    s.run.stall_signal = SIGABRT;
    s.run.stall_grace = 5s;
    return s;
}

LauncherSettings exchange_settings(std::uint32_t rank) {
    LauncherSettings s = settings(rank);
    s.exchange = AddressExchange::coordinator;
    return s;
}

LauncherSettings startup_settings(std::uint32_t rank, bool exchange) {
    LauncherSettings s = exchange ? exchange_settings(rank) : settings(rank);
    s.task_start = k_wall0 - 50ms;
    s.up = WallAnchor{k_t0, k_wall0};
    return s;
}

LauncherSettings checkpoint_settings(std::uint32_t rank, std::uint32_t restart) {
    LauncherSettings s = settings(rank);
    s.job_end = k_t0 + 60s;
    s.run.checkpoint_before = 50s;
    s.run.checkpoint_signal = SIGUSR1;
    s.requeue = RequeuePolicy{12, restart, std::nullopt};
    s.run.max_requeues = 2;
    return s;
}

protocol::Failure failure_of(std::uint32_t rank,
                             protocol::FailureCause cause,
                             int step_status,
                             const std::string& detail) {
    const Member member = settings(rank).ranks.at(rank);
    protocol::Failure failure;
    failure.rank = rank;
    failure.role = member.role;
    failure.index = member.index;
    failure.host = member.host;
    failure.cause = cause;
    if (cause == protocol::FailureCause::trainer || cause == protocol::FailureCause::start) {
        failure.status = ExitStatus::exited(step_status);
    }
    failure.detail = detail;
    failure.step_status = step_status;
    return failure;
}

protocol::Abort abort_rank3() {
    return {failure_of(3, protocol::FailureCause::trainer, 3)};
}

protocol::Abort abort_stall_rank2() {
    return {failure_of(2, protocol::FailureCause::stalled, k_status_stalled, "10 s")};
}

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
    } else if (word == "progress") {
        // `progress file none|<ms after k_wall0> [<step>]`
        std::string touched;
        in >> text >> touched;
        long long step = -1;
        in >> step;
        m.progress_file_sampled(touched == "none" ? std::nullopt
                                                  : std::optional<WallClock::time_point>(
                                                        k_wall0 + Millis{std::stoll(touched)}),
                                step < 0 ? std::nullopt : std::optional<std::uint64_t>(step),
                                now);
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
        const auto timer = text == "heartbeat"        ? LauncherTimer::heartbeat
                           : text == "watch"          ? LauncherTimer::watch
                           : text == "grace"          ? LauncherTimer::grace
                           : text == "settle"         ? LauncherTimer::settle
                           : text == "stall"          ? LauncherTimer::stall
                           : text == "restart"        ? LauncherTimer::restart
                           : text == "checkpoint"     ? LauncherTimer::checkpoint
                           : text == "report"         ? LauncherTimer::report
                           : text == "first-progress" ? LauncherTimer::first_progress
                                                      : LauncherTimer::close;
        m.timer_fired(timer, now);
    } else if (word == "server") {
        // `server finished [started] [reported] [step N]`: how far the step's trainers got.
        in >> text;
        RunProgress progress;
        std::optional<protocol::Checked> check;
        while (in >> text) {
            if (text == "started") {
                progress.started = true;
            } else if (text == "reported") {
                progress.reported = true;
            } else if (text == "step") {
                in >> a;
                progress.step = static_cast<std::uint64_t>(a);
            } else if (text == "check-ok") {
                check = protocol::Checked{};
            } else if (text == "check-fail") {
                check = protocol::Checked{
                    protocol::PreflightFailure{"command", "\"false\" exited with status 1"}};
            }
        }
        m.server_finished(now, progress, check);
    } else if (word == "go") {
        m.received(protocol::Go{}, now);
    } else if (word == "probe") {
        in >> text;
        std::vector<protocol::ProbeFailure> failures;
        if (text == "fail") {
            failures.push_back({0, "10.1.0.1:23000", "Connection timed out"});
        }
        m.probe_finished(failures, now);
    } else if (word == "node" || word == "checked") {
        in >> text;
        std::optional<protocol::PreflightFailure> failure;
        if (text == "fail") {
            failure = protocol::PreflightFailure{"command", "\"false\" exited with status 1"};
        }
        if (word == "node") {
            m.preflight_finished(failure, now);
        } else {
            m.node_checked(failure, now);
        }
    } else {
        FAIL("unknown event in the table: " << event);
    }
}

namespace {

/// Start-up phases as the tables write them: ` [task -50 up 0 registered 0]`, each in
/// milliseconds from k_wall0; empty without any.
std::string phases_text(const StartupTimes& times) {
    if (times.empty()) {
        return {};
    }
    std::string out;
    const char* separator = " [";
    for (std::size_t i = 0; i < k_startup_phases; ++i) {
        if (const auto& time = times.at.at(i)) {
            out += fmt::format("{}{} {}",
                               separator,
                               to_string(static_cast<StartupPhase>(i)),
                               std::chrono::duration_cast<Millis>(*time - k_wall0).count());
            separator = " ";
        }
    }
    return out + "]";
}

} // namespace

std::vector<std::string> render(const std::vector<LauncherAction>& actions) {
    std::vector<std::string> out;
    for (const auto& action : actions) {
        const auto* send = std::get_if<launcher_action::Send>(&action);
        if (send == nullptr) {
            out.push_back(describe(action, k_t0));
        } else if (const auto* exit = std::get_if<protocol::Exit>(&send->message)) {
            std::string line = "send exit " + describe(exit->status) +
                               (exit->error.empty() ? "" : ": " + exit->error);
            line += phases_text(exit->startup);
            if (exit->progress_step) {
                line += fmt::format(" step {}", *exit->progress_step);
            }
            out.push_back(line);
        } else if (const auto* stall = std::get_if<protocol::Stall>(&send->message)) {
            out.push_back("send stall " + std::to_string(stall->silent_ms));
        } else if (const auto* beat = std::get_if<protocol::Heartbeat>(&send->message);
                   beat != nullptr && !beat->startup.empty()) {
            out.push_back("send heartbeat" + phases_text(beat->startup));
        } else if (const auto* probed = std::get_if<protocol::Probed>(&send->message)) {
            out.push_back(fmt::format("send probed {} failed{}",
                                      probed->failures.size(),
                                      probed->preflight ? " + preflight " + probed->preflight->check
                                                        : std::string()));
        } else if (const auto* checked = std::get_if<protocol::Checked>(&send->message)) {
            out.push_back(checked->failure ? "send checked failed " + checked->failure->check
                                           : std::string("send checked passed"));
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

std::vector<Step> running(std::vector<Step> rest) {
    std::vector<Step> steps{
        {0, "welcome", k_registered},
        {0, "start due", {"start trainer"}},
        {0, "started", k_nothing},
    };
    steps.insert(steps.end(), rest.begin(), rest.end());
    return steps;
}

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

LauncherMachine running_machine(const LauncherSettings& launcher_settings) {
    LauncherMachine m(launcher_settings);
    m.registered("n1:29000", k_t0);
    m.start_due(k_t0);
    m.trainer_started(k_t0);
    (void)m.take_actions();
    return m;
}

LaunchResult
result_after_abort(LauncherMachine& m, const protocol::Failure& failure, std::uint32_t rank) {
    m.received(protocol::Abort{failure}, k_t0);
    // Stopped by the abort, the trainer dies of SIGTERM.
    m.trainer_exited(ExitStatus::signaled(SIGTERM), k_t0);
    m.written(k_t0);
    m.connection_lost("connection closed", k_t0);
    if (rank == 0) {
        // Rank 0 finishes only once the coordinator is finished: every surviving launcher left
        // after its trainer's grace, or the linger time ran out.
        REQUIRE_FALSE(m.result());
        m.server_finished(k_t0);
    }
    (void)m.take_actions();
    REQUIRE(m.result());
    return *m.result();
}

} // namespace tfslurm::test
