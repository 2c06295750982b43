// SPDX-License-Identifier: MIT
// The launcher machine's stall and straggler rules (tfslurm/run/launcher.hpp): which samples are
// progress (--stall-progress), which ranks are judged (--stall-roles), when a trainer is stuck,
// and how often its progress' age is reported to the coordinator for the straggler rule.
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/launcher.hpp>

#include <algorithm>
#include <chrono>

namespace tfslurm {

Millis stall_sample_interval(Millis stall_timeout) {
    return std::clamp(stall_timeout / 10, Millis{100}, Millis{10000});
}

bool progressed(const ProgressSample& before,
                const ProgressSample& after,
                const std::vector<ProgressSource>& sources) noexcept {
    return std::any_of(sources.begin(), sources.end(), [&](ProgressSource source) {
        switch (source) {
        case ProgressSource::cpu:
            return before.cpu_ticks != after.cpu_ticks;
        case ProgressSource::file:
            return before.file_mtime_ns != after.file_mtime_ns;
        case ProgressSource::output:
            return before.output_bytes != after.output_bytes;
        }
        return false;
    });
}

Millis straggler_report_interval(Millis stall_timeout, std::size_t ranks) {
    // ~1,000 reports a second at most reach the coordinator: a few per millisecond of its one
    // thread, whatever the step's size.
    const Millis spread{static_cast<Millis::rep>(ranks)};
    return std::max(std::clamp(stall_timeout / 10, Millis{1000}, Millis{60000}), spread);
}

void LauncherMachine::progress_sampled(const ProgressSample& sample, Clock::time_point now) {
    if (!watching_progress()) {
        return;
    }
    if (!m_sample || progressed(*m_sample, sample, m_settings.run.stall_progress)) {
        m_sample = sample;
        m_last_progress = now;
    }
    const Millis silent = std::chrono::duration_cast<Millis>(now - m_last_progress);
    if (silent < *m_settings.run.stall_timeout) {
        m_actions.emplace_back(launcher_action::ArmTimer{
            LauncherTimer::stall, now + stall_sample_interval(*m_settings.run.stall_timeout)});
        return;
    }
    // The stall timeout it went past, not the silence measured: that one is only known to a
    // sampling interval (later on a loaded node), and the line naming the rank must not vary.
    m_stall = Stall::stuck;
    logger().warn("{}: no progress for {}: the trainer is stuck; asking for its stack traces "
                  "(signal {} ({})), aborting the step {} later",
                  label(),
                  format_seconds(*m_settings.run.stall_timeout),
                  m_settings.run.stall_signal,
                  signal_description(m_settings.run.stall_signal),
                  format_seconds(m_settings.run.stall_grace));
    m_actions.emplace_back(launcher_action::SignalTrainer{m_settings.run.stall_signal, true});
    m_actions.emplace_back(
        launcher_action::ArmTimer{LauncherTimer::stall, now + m_settings.run.stall_grace});
}

void LauncherMachine::progress_file_sampled(std::optional<WallClock::time_point> touched,
                                            std::optional<std::uint64_t> step,
                                            Clock::time_point now) {
    if (!m_settings.up) {
        return;
    }
    if (touched && !m_startup[StartupPhase::progress]) {
        // The file's time, but never before its trainer started: a file's time is the kernel's
        // coarse clock, up to a tick behind the launcher's.
        const auto& started = m_startup[StartupPhase::started];
        m_startup[StartupPhase::progress] = started ? std::max(*touched, *started) : *touched;
        logger().debug("{}: the trainer reported its first progress", label());
    }
    if (step) {
        m_progress_step = step;
    }
    if (trainer_running() && !m_startup[StartupPhase::progress]) {
        m_actions.emplace_back(
            launcher_action::ArmTimer{LauncherTimer::first_progress, now + k_first_progress_poll});
    }
}

bool LauncherMachine::watching_progress() const noexcept {
    return m_settings.run.stall_timeout && judged_for_stalls() && trainer_running() &&
           m_stall == Stall::none && !m_verdict && !m_lost && m_stopping == Stopping::no &&
           !m_interrupt;
}

bool LauncherMachine::judged_for_stalls() const noexcept {
    const auto& roles = m_settings.run.stall_roles;
    // Without the plan's members (a machine tested alone), every trainer is judged.
    return m_settings.rank >= m_settings.ranks.size() ||
           std::find(roles.begin(), roles.end(), m_settings.ranks[m_settings.rank].role) !=
               roles.end();
}

bool LauncherMachine::counts_output() const noexcept {
    const auto& sources = m_settings.run.stall_progress;
    return m_settings.run.stall_timeout && judged_for_stalls() &&
           std::find(sources.begin(), sources.end(), ProgressSource::output) != sources.end();
}

Millis LauncherMachine::report_interval() const {
    return straggler_report_interval(m_settings.run.stall_timeout.value_or(Millis{0}),
                                     m_settings.ranks.size());
}

void LauncherMachine::report_stall() {
    if (m_stall == Stall::reported) {
        return;
    }
    m_stall = Stall::reported;
    m_actions.emplace_back(launcher_action::CancelTimer{LauncherTimer::stall});
    if (m_verdict || m_lost) {
        return; // the step ends anyway
    }
    send(protocol::Stall{static_cast<std::uint64_t>(m_settings.run.stall_timeout->count())});
}

} // namespace tfslurm
