// SPDX-License-Identifier: MIT
// The launcher machine's actions and timers as text (include/tfslurm/run/launcher.hpp): the lines
// of its debug log and of its table tests (tests/unit/launcher_table.hpp).
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/run/launcher.hpp>

#include <fmt/format.h>

#include <chrono>
#include <string>
#include <variant>

namespace tfslurm {

namespace action = launcher_action;

std::string_view to_string(LauncherTimer timer) noexcept {
    switch (timer) {
    case LauncherTimer::heartbeat:
        return "heartbeat";
    case LauncherTimer::watch:
        return "watch";
    case LauncherTimer::grace:
        return "grace";
    case LauncherTimer::close:
        return "close";
    case LauncherTimer::settle:
        return "settle";
    case LauncherTimer::stall:
        return "stall";
    case LauncherTimer::restart:
        return "restart";
    case LauncherTimer::checkpoint:
        return "checkpoint";
    case LauncherTimer::report:
        return "report";
    case LauncherTimer::first_progress:
        return "first-progress";
    }
    return "heartbeat";
}

namespace {

struct Describer {
    Clock::time_point epoch;

    [[nodiscard]] long long since_epoch(Clock::time_point at) const {
        return std::chrono::duration_cast<Millis>(at - epoch).count();
    }
    std::string operator()(const action::Send& send) const {
        return "send " + protocol::encode_payload(send.message);
    }
    std::string operator()(const action::SignalTrainer& signal) const {
        return fmt::format("signal {}", signal.signo);
    }
    std::string operator()(const action::ArmTimer& arm) const {
        return fmt::format("arm {} {}", to_string(arm.timer), since_epoch(arm.at));
    }
    std::string operator()(const action::CancelTimer& cancel) const {
        return fmt::format("cancel {}", to_string(cancel.timer));
    }
    std::string operator()(const action::ScheduleStart& /*unused*/) const {
        return "schedule start";
    }
    std::string operator()(const action::StartTrainer& start) const {
        return start.restart == 0 ? "start trainer"
                                  : fmt::format("start trainer (restart {})", start.restart);
    }
    std::string operator()(const action::ProbePeers& probe) const {
        std::string out = "probe";
        for (const auto& target : probe.targets) {
            out += " " + endpoint(target);
        }
        return out;
    }
    std::string operator()(const action::SampleProgress& /*unused*/) const {
        return "sample progress";
    }
    std::string operator()(const action::SampleProgressFile& /*unused*/) const {
        return "sample progress file";
    }
    std::string operator()(const action::CheckNode& check) const {
        return check.when == action::NodeCheckTime::after_failure ? "check node after failure"
                                                                  : "check node";
    }
    std::string operator()(const action::HalfClose& /*unused*/) const { return "half-close"; }
    std::string operator()(const action::Disconnect& /*unused*/) const { return "disconnect"; }
    std::string operator()(const action::Finish& finish) const {
        const LaunchResult& r = finish.result;
        std::string cancel = r.cancel ? " + cancel " + to_string(*r.cancel) : "";
        if (r.requeue) {
            cancel += fmt::format(
                " + requeue {} ({} if refused)", r.requeue->job, r.requeue->status_if_refused);
            if (const auto& turn = r.requeue->takeover) {
                cancel += fmt::format(" turn {} after {} ms", turn->turn, turn->wait.count());
            }
        }
        if (r.message.empty()) {
            return fmt::format(
                "finish {} {} {}{}", to_string(r.outcome), r.exit_status, r.step_status, cancel);
        }
        return fmt::format("finish {} {} {} {} {}{}",
                           to_string(r.outcome),
                           r.exit_status,
                           r.step_status,
                           r.announce ? "announce" : "quiet",
                           r.message,
                           cancel);
    }
};

} // namespace

std::string describe(const LauncherAction& action, Clock::time_point epoch) {
    return std::visit(Describer{epoch}, action);
}

} // namespace tfslurm
