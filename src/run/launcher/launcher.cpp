// SPDX-License-Identifier: MIT
// The launcher's state machine: every decision of a launcher after its registration, without
// I/O, so that each path is table-tested (tests/unit/test_launcher*.cpp). The shell that
// performs its actions is src/shell/launcher/launcher_shell.cpp.
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/launcher.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <utility>

namespace tfslurm {

namespace action = launcher_action;

/// How long a launcher waits for the coordinator's EOF after its half-close.
constexpr Millis k_close_timeout{2000};

LauncherMachine::LauncherMachine(LauncherSettings settings)
    : m_settings(std::move(settings)),
      m_self(m_settings.rank < m_settings.ranks.size() ? m_settings.ranks[m_settings.rank]
                                                       : Member{}),
      m_server(m_settings.host == CoordinatorHost::here ? Server::serving : Server::elsewhere) {
    if (m_settings.up) {
        m_startup[StartupPhase::task] = m_settings.task_start;
        m_startup[StartupPhase::up] = m_settings.up->wall;
    }
}

bool LauncherMachine::not_started() const noexcept {
    switch (m_trainer) {
    case TrainerState::starting:
    case TrainerState::awaiting_addresses:
    case TrainerState::checking_node:
    case TrainerState::awaiting_go:
    case TrainerState::restart_backoff:
        return true;
    case TrainerState::running:
    case TrainerState::exit_held:
    case TrainerState::ended:
    case TrainerState::never_started:
    case TrainerState::abandoned:
        return false;
    }
    return false;
}

std::string LauncherMachine::label() const {
    return fmt::format("rank {} ({}:{})", m_settings.rank, to_string(m_self.role), m_self.index);
}

bool LauncherMachine::done_verdict() const noexcept {
    const auto* stop = m_verdict ? std::get_if<protocol::Stop>(&*m_verdict) : nullptr;
    return stop != nullptr && stop->reason == protocol::StopReason::done;
}

std::vector<LauncherAction> LauncherMachine::take_actions() {
    std::vector<LauncherAction> out;
    out.swap(m_actions);
    return out;
}

void LauncherMachine::send(protocol::Message message) {
    if (m_phase != Phase::registered) {
        return;
    }
    ++m_unwritten;
    m_actions.emplace_back(action::Send{std::move(message)});
}

void LauncherMachine::report_exit(ExitStatus status, std::string error) {
    protocol::Exit exit{status, std::move(error)};
    exit.startup = m_startup;
    exit.progress_step = m_progress_step;
    send(std::move(exit));
}

WallClock::time_point LauncherMachine::wall(Clock::time_point now) const {
    return m_settings.up->wall +
           std::chrono::duration_cast<WallClock::duration>(now - m_settings.up->steady);
}

void LauncherMachine::reach(StartupPhase phase, Clock::time_point now) {
    if (m_settings.up && !m_startup[phase]) {
        m_startup[phase] = wall(now);
    }
}

void LauncherMachine::release_exit() {
    if (m_trainer != TrainerState::exit_held) {
        return;
    }
    m_trainer = TrainerState::ended;
    m_actions.emplace_back(action::CancelTimer{LauncherTimer::settle});
    report_exit(*m_status);
}

// --- events --------------------------------------------------------------------------------------

void LauncherMachine::registered(const std::string& control, Clock::time_point now) {
    if (!control.empty()) {
        m_settings.control = control;
    }
    m_phase = Phase::registered;
    m_last_heard = now;
    reach(StartupPhase::registered, now);
    logger().debug("{}: registered with {}", label(), m_settings.control);
    m_actions.emplace_back(
        action::ArmTimer{LauncherTimer::heartbeat, now + m_settings.run.heartbeat});
    m_actions.emplace_back(action::ArmTimer{LauncherTimer::watch,
                                            now + tick_interval(m_settings.run.heartbeat_timeout)});
    if (m_status) {
        // Interrupted while connecting: tell the coordinator, start nothing.
        const Interrupt interrupt = m_interrupt.value_or(Interrupt{});
        send(protocol::Interrupt{interrupt.signo, interrupt.origin == SignalOrigin::step});
        report_exit(*m_status);
        return;
    }
    if (m_settings.exchange == AddressExchange::coordinator) {
        // The trainer's environment needs every node's address.
        m_trainer = TrainerState::awaiting_addresses;
        return;
    }
    begin_start();
}

void LauncherMachine::begin_start() {
    if (!has_start_barrier(m_settings.run)) {
        m_actions.emplace_back(action::ScheduleStart{});
        return;
    }
    m_trainer = TrainerState::awaiting_go;
    if (checks_node()) {
        m_trainer = TrainerState::checking_node;
        m_actions.emplace_back(action::CheckNode{});
        return;
    }
    after_checks();
}

bool LauncherMachine::checks_node() const {
    if (!preflight_enabled(m_settings.run)) {
        return false;
    }
    if (m_settings.rank >= m_settings.ranks.size()) {
        return true; // a machine tested without the plan's members: alone on its node
    }
    return node_leaders(m_settings.ranks)[m_settings.rank] == m_settings.rank;
}

void LauncherMachine::after_checks() {
    if (m_settings.run.probe == Probe::on) {
        m_actions.emplace_back(action::ProbePeers{
            probe_targets(m_settings.rank, m_settings.ranks, m_settings.ports, m_cluster)});
        return;
    }
    send(protocol::Probed{{}, m_preflight});
}

void LauncherMachine::preflight_finished(std::optional<protocol::PreflightFailure> failure,
                                         Clock::time_point /*now*/) {
    if (m_trainer != TrainerState::checking_node) {
        return; // a verdict, a loss or an interrupt came first: nobody waits for it
    }
    m_trainer = TrainerState::awaiting_go;
    if (failure) {
        logger().debug("{}: preflight failed: {}: {}", label(), failure->check, failure->detail);
    } else {
        logger().debug("{}: preflight passed", label());
    }
    m_preflight = std::move(failure);
    // The probe runs even after a failed check: the node's peers probe its listener, and the
    // coordinator names the failed check rather than the peers that could not reach it.
    after_checks();
}

bool LauncherMachine::checks_after_failure() const {
    const auto* abort = m_verdict ? std::get_if<protocol::Abort>(&*m_verdict) : nullptr;
    return abort != nullptr && abort->failure.rank == m_settings.rank &&
           failure_checked(m_settings.run, abort->failure.cause);
}

void LauncherMachine::node_checked(std::optional<protocol::PreflightFailure> failure,
                                   Clock::time_point now) {
    if (m_after_check != AfterCheck::running) {
        return; // a signal or the coordinator's loss came first: nobody waits for it
    }
    m_after_check = AfterCheck::over;
    if (failure) {
        logger().debug("{}: node check failed: {}: {}", label(), failure->check, failure->detail);
    } else {
        logger().debug("{}: node check passed", label());
    }
    send(protocol::Checked{std::move(failure)});
    maybe_finish(now);
}

void LauncherMachine::release_start() {
    if (m_trainer == TrainerState::awaiting_addresses || m_trainer == TrainerState::checking_node ||
        m_trainer == TrainerState::awaiting_go) {
        m_trainer = TrainerState::starting;
        m_actions.emplace_back(action::ScheduleStart{});
    }
}

void LauncherMachine::probe_finished(std::vector<protocol::ProbeFailure> failures,
                                     Clock::time_point /*now*/) {
    if (m_trainer != TrainerState::awaiting_go && m_trainer != TrainerState::checking_node) {
        return; // a verdict, a loss or an interrupt came first: nobody waits for it
    }
    if (failures.size() > protocol::k_max_probe_failures) {
        failures.resize(protocol::k_max_probe_failures);
    }
    logger().debug("{}: probe over: {} peers not reached", label(), failures.size());
    send(protocol::Probed{std::move(failures), m_preflight});
}

void LauncherMachine::received(const protocol::Message& message, Clock::time_point now) {
    m_last_heard = now;
    if (std::holds_alternative<protocol::Heartbeat>(message)) {
        return;
    }
    if (std::holds_alternative<protocol::Stop>(message) ||
        std::holds_alternative<protocol::Abort>(message)) {
        on_verdict(message, now);
        return;
    }
    if (const auto* cluster = std::get_if<protocol::Cluster>(&message);
        cluster != nullptr && m_trainer == TrainerState::awaiting_addresses) {
        logger().debug(
            "{}: received the addresses of {} nodes", label(), cluster->addresses.size());
        m_cluster = *cluster;
        reach(StartupPhase::cluster, now);
        m_trainer = TrainerState::starting;
        begin_start();
        return;
    }
    if (std::holds_alternative<protocol::Go>(message) && has_start_barrier(m_settings.run)) {
        if (m_trainer == TrainerState::awaiting_go) {
            logger().debug("{}: every rank is ready: starting", label());
            release_start();
        }
        return;
    }
    if (const auto* restart = std::get_if<protocol::Restart>(&message)) {
        on_restart(*restart, now);
        return;
    }
    coordinator_lost(fmt::format("unexpected {} message", protocol::type_name(message)),
                     now,
                     CoordinatorLoss::other);
}

void LauncherMachine::connection_lost(const std::string& reason,
                                      Clock::time_point now,
                                      CoordinatorLoss loss) {
    if (m_phase == Phase::closing) {
        disconnect(now); // the EOF we were waiting for
        return;
    }
    coordinator_lost(reason, now, loss);
}

void LauncherMachine::written(Clock::time_point now) {
    if (m_unwritten > 0) {
        --m_unwritten;
    }
    if (m_unwritten == 0) {
        maybe_finish(now);
    }
}

void LauncherMachine::start_due(Clock::time_point now) {
    if (!not_started()) {
        return;
    }
    if (m_verdict || m_lost) {
        logger().debug("{}: the step ended before the trainer started: not starting it", label());
        m_trainer = TrainerState::never_started;
        m_status = ExitStatus::exited(0);
        maybe_finish(now);
        return;
    }
    m_actions.emplace_back(action::StartTrainer{m_restarts});
}

void LauncherMachine::trainer_started(Clock::time_point now) {
    m_trainer = TrainerState::running;
    m_last_progress = now;
    reach(StartupPhase::started, now);
    if (m_verdict || m_lost) {
        stop_trainer(0, now);
        maybe_finish(now);
        return;
    }
    if (m_settings.up && !m_startup[StartupPhase::progress]) {
        m_actions.emplace_back(
            action::ArmTimer{LauncherTimer::first_progress, now + k_first_progress_poll});
    }
    if (m_settings.run.stall_timeout && judged_for_stalls()) {
        m_actions.emplace_back(action::ArmTimer{
            LauncherTimer::stall, now + stall_sample_interval(*m_settings.run.stall_timeout)});
        m_actions.emplace_back(action::ArmTimer{LauncherTimer::report, now + report_interval()});
    }
    if (m_settings.job_end && m_settings.run.checkpoint_before) {
        arm_checkpoint(now);
    }
    maybe_finish(now);
}

void LauncherMachine::arm_checkpoint(Clock::time_point now) {
    const Clock::time_point at = *m_settings.job_end - *m_settings.run.checkpoint_before;
    if (at > now) {
        m_actions.emplace_back(action::ArmTimer{LauncherTimer::checkpoint, at});
        return;
    }
    // The moment passed before the trainer started (a job script that spent its time before
    // srun, a restart late in the job): a trainer that has just started has nothing to save
    // and has probably not installed its handler yet, so the signal would kill it.
    logger().log(m_settings.rank == 0 ? LogLevel::warn : LogLevel::debug,
                 "{}: the job ends in {}, sooner than {} after the trainer started: no "
                 "checkpoint signal",
                 label(),
                 format_seconds(time_left(now)),
                 checkpoint_before_ref());
}

Millis LauncherMachine::time_left(Clock::time_point now) const {
    return std::max(Millis{0}, std::chrono::duration_cast<Millis>(*m_settings.job_end - now));
}

std::string LauncherMachine::checkpoint_before_ref() const {
    const auto before = m_settings.run.checkpoint_before.value_or(Millis{0});
    return setting_ref("checkpoint_before", seconds_text(before));
}

void LauncherMachine::trainer_failed(ExitStatus status,
                                     const std::string& error,
                                     Clock::time_point now) {
    m_trainer = TrainerState::ended;
    m_status = status;
    report_exit(status, error);
    maybe_finish(now);
}

void LauncherMachine::trainer_exited(ExitStatus status, Clock::time_point now) {
    if (!trainer_running()) {
        return;
    }
    m_trainer = TrainerState::ended;
    m_status = status;
    m_actions.emplace_back(action::CancelTimer{LauncherTimer::grace});
    if (m_stall != Stall::none) {
        report_stall(); // before the exit: the step fails because the trainer was stuck
    }
    const bool stopped_by_us = m_stopping != Stopping::no;
    if (stopped_by_us && done_verdict()) {
        logger().info("{}: trainer stopped ({})", label(), describe(status));
    } else if (stopped_by_us) {
        logger().debug("{}: trainer stopped ({})", label(), describe(status));
    } else {
        logger().debug("{}: trainer {}", label(), describe(status));
    }
    const bool interrupt_signal = status.kind == ExitStatus::Kind::signaled &&
                                  (status.value == SIGTERM || status.value == SIGINT);
    if (interrupt_signal && !stopped_by_us && !m_verdict && !m_lost) {
        // Perhaps the step's cancel, which reached the trainer before us: hold the report until
        // our own copy of the signal (sent as `interrupt` first) or the settle window's end.
        m_trainer = TrainerState::exit_held;
        m_actions.emplace_back(action::ArmTimer{LauncherTimer::settle, now + k_settle_window});
        return;
    }
    report_exit(status);
    maybe_finish(now);
}

void LauncherMachine::signal_received(int signo, Clock::time_point now, SignalOrigin origin) {
    if (trainer_running() && slurms_checkpoint_signal(signo, origin) && !m_checkpoint) {
        // Slurm's own --signal (or scancel --signal) reached the whole step: the trainer saves
        // now, and our own checkpoint signal would be a second one.
        m_checkpoint = fmt::format(
            "the trainers got signal {} ({}) from Slurm", signo, signal_description(signo));
        logger().info("{}: the trainer received the checkpoint signal {} ({}) from Slurm",
                      label(),
                      signo,
                      signal_description(signo));
        if (m_settings.job_end && m_settings.run.checkpoint_before) {
            m_actions.emplace_back(action::CancelTimer{LauncherTimer::checkpoint});
        }
    }
    if (trainer_running() && origin == SignalOrigin::step) {
        logger().debug("{}: signal {} from slurmstepd reached the trainer too: not forwarding it",
                       label(),
                       signo);
        note_delivered(signo);
    } else if (trainer_running()) {
        logger().debug("{}: forwarding signal {} to the trainer", label(), signo);
        m_actions.emplace_back(action::SignalTrainer{signo});
        note_delivered(signo);
    } else if (signo != SIGTERM && signo != SIGINT && not_started()) {
        signal_before_start(signo, origin);
    }
    if (signo != SIGTERM && signo != SIGINT) {
        return;
    }
    if (!m_interrupt) {
        m_interrupt = Interrupt{signo, origin};
        logger().info("{}: received signal {} ({}): stopping the step",
                      label(),
                      signo,
                      signal_description(signo));
        if (m_phase == Phase::registered && !m_verdict) {
            send(protocol::Interrupt{signo, origin == SignalOrigin::step});
        }
    }
    if (trainer_running()) {
        stop_trainer(0, now); // already forwarded: only start counting the grace period
    } else if (not_started()) {
        // Not started yet (or waiting for its restart): never start it.
        if (m_trainer == TrainerState::restart_backoff) {
            m_actions.emplace_back(action::CancelTimer{LauncherTimer::restart});
        }
        m_status = ExitStatus::signaled(signo);
        if (m_phase != Phase::registered) {
            m_trainer = TrainerState::abandoned;
            finish(now);
            return;
        }
        m_trainer = TrainerState::ended;
        report_exit(*m_status);
    }
    release_exit(); // a trainer that died of this signal: part of the interrupt
    maybe_finish(now);
}

bool LauncherMachine::slurms_checkpoint_signal(int signo, SignalOrigin origin) const noexcept {
    const bool checkpointing = m_settings.run.checkpoint_before || m_settings.requeue;
    return origin == SignalOrigin::step && signo == m_settings.run.checkpoint_signal &&
           checkpointing;
}

void LauncherMachine::signal_before_start(int signo, SignalOrigin origin) {
    if (slurms_checkpoint_signal(signo, origin)) {
        // As arm_checkpoint() when the moment passed before the start: a trainer that starts
        // now has nothing to save and has probably not installed its handler yet, so the
        // signal would kill it. Not a checkpoint either: no trainer saved.
        logger().log(m_settings.rank == 0 ? LogLevel::warn : LogLevel::debug,
                     "{}: Slurm's checkpoint signal {} ({}) came before the trainer started: not "
                     "passed on (a trainer that has just started has nothing to save)",
                     label(),
                     signo,
                     signal_description(signo));
        return;
    }
    logger().debug("{}: signal {} came before the trainer started: not passed on", label(), signo);
}

// One case per LauncherTimer (~65 lines): each timer's firing is a short rule of its own, and
// the switch shows them side by side with the timers the machine arms.
void LauncherMachine::timer_fired(LauncherTimer timer, Clock::time_point now) {
    switch (timer) {
    case LauncherTimer::heartbeat:
        if (m_phase == Phase::registered) {
            // With the start-up phases reached since the last one (the shell adds the usage).
            protocol::Heartbeat beat;
            if (!(m_startup == m_startup_sent)) {
                beat.startup = m_startup;
                m_startup_sent = m_startup;
            }
            send(std::move(beat));
            m_actions.emplace_back(
                action::ArmTimer{LauncherTimer::heartbeat, now + m_settings.run.heartbeat});
        }
        return;
    case LauncherTimer::watch:
        if (m_phase != Phase::registered) {
            return;
        }
        if (!m_verdict && silent_too_long(m_last_heard, now, m_settings.run.heartbeat_timeout)) {
            coordinator_lost(
                no_heartbeat(m_settings.run.heartbeat_timeout), now, CoordinatorLoss::silent);
            return;
        }
        m_actions.emplace_back(action::ArmTimer{
            LauncherTimer::watch, now + tick_interval(m_settings.run.heartbeat_timeout)});
        return;
    case LauncherTimer::grace:
        if (!trainer_running()) {
            return;
        }
        logger().warn("{}: the trainer did not stop within {}: killing it (SIGKILL)",
                      label(),
                      format_seconds(m_settings.run.grace));
        m_stopping = Stopping::killed;
        m_actions.emplace_back(action::SignalTrainer{SIGKILL});
        return;
    case LauncherTimer::close:
        disconnect(now);
        return;
    case LauncherTimer::settle:
        if (m_trainer == TrainerState::exit_held) {
            logger().debug("{}: no signal came within {}: the trainer was killed by itself or "
                           "by someone else",
                           label(),
                           format_seconds(k_settle_window));
        }
        release_exit();
        maybe_finish(now);
        return;
    case LauncherTimer::restart:
        if (m_trainer == TrainerState::restart_backoff) {
            m_trainer = TrainerState::starting;
            start_due(now);
        }
        return;
    case LauncherTimer::stall:
        if (m_stall != Stall::none) {
            report_stall(); // the stall grace is over
        } else if (watching_progress()) {
            m_actions.emplace_back(action::SampleProgress{});
        }
        return;
    case LauncherTimer::checkpoint:
        send_checkpoint(now);
        return;
    case LauncherTimer::first_progress:
        if (trainer_running() && !m_startup[StartupPhase::progress]) {
            m_actions.emplace_back(action::SampleProgressFile{});
        }
        return;
    case LauncherTimer::report:
        if (watching_progress()) {
            const auto idle = std::chrono::duration_cast<Millis>(now - m_last_progress);
            send(protocol::Progress{
                static_cast<std::uint64_t>(std::max(idle.count(), Millis::rep{0}))});
            m_actions.emplace_back(
                action::ArmTimer{LauncherTimer::report, now + report_interval()});
        }
        return;
    }
}

void LauncherMachine::send_checkpoint(Clock::time_point now) {
    if (!trainer_running() || m_checkpoint || m_verdict || m_lost || m_stopping != Stopping::no ||
        m_interrupt || !m_settings.job_end) {
        return; // the step is ending anyway, or Slurm's --signal came first
    }
    const int signo = m_settings.run.checkpoint_signal;
    m_checkpoint = fmt::format("the trainers got signal {} ({}) before the job's time limit ({})",
                               signo,
                               signal_description(signo),
                               checkpoint_before_ref());
    // Every launcher does this at the same moment: rank 0 says it for the step, the others
    // only at debug level (one line, not one per task, at 100,000 tasks).
    logger().log(m_settings.rank == 0 ? LogLevel::info : LogLevel::debug,
                 "{}: the job ends in {}: asking the trainer to save a checkpoint (signal {} "
                 "({}))",
                 label(),
                 format_seconds(time_left(now)),
                 signo,
                 signal_description(signo));
    m_actions.emplace_back(action::SignalTrainer{signo});
}

void LauncherMachine::server_finished(Clock::time_point now,
                                      const RunProgress& progress,
                                      const std::optional<protocol::Checked>& check) {
    m_server = Server::finished;
    m_run_progress = progress;
    m_node_check = check;
    if (m_settings.up) {
        m_ran = std::chrono::duration_cast<Millis>(now - m_settings.up->steady);
    }
    maybe_finish(now);
}

// --- decisions -----------------------------------------------------------------------------------

void LauncherMachine::on_restart(const protocol::Restart& restart, Clock::time_point now) {
    if (m_trainer != TrainerState::ended || !m_status || m_status->success() || m_verdict ||
        m_lost || m_interrupt || m_stall != Stall::none) {
        // Only a trainer that failed by itself and was reported is restarted; anything else
        // (a restart crossing our interrupt, say) is ignored: the step's verdict follows.
        logger().debug(
            "{}: ignoring restart {}: the trainer is not waiting for one", label(), restart.count);
        return;
    }
    // Debug only: the coordinator's line names the restart once for the whole step.
    logger().debug("{}: restarting the trainer (restart {} of {}) in {}",
                   label(),
                   restart.count,
                   restart.limit,
                   format_seconds(m_settings.run.restarts.delay));
    m_restarts = restart.count;
    // A fresh trainer: nothing of the failed one's supervision carries over.
    m_trainer = TrainerState::restart_backoff;
    m_status.reset();
    m_stopping = Stopping::no;
    m_term = TermSignal::not_delivered;
    m_grace_deadline.reset();
    m_sample.reset();
    m_actions.emplace_back(
        action::ArmTimer{LauncherTimer::restart, now + m_settings.run.restarts.delay});
}

void LauncherMachine::cancel_restart(Clock::time_point now) {
    if (m_trainer != TrainerState::restart_backoff) {
        return;
    }
    m_trainer = TrainerState::starting;
    m_actions.emplace_back(action::CancelTimer{LauncherTimer::restart});
    start_due(now); // records that the trainer never started again (a verdict or a loss came)
}

void LauncherMachine::on_verdict(const protocol::Message& verdict, Clock::time_point now) {
    if (m_verdict) {
        return;
    }
    m_verdict = verdict;
    release_exit();
    release_start(); // start_due() then records that the trainer never started
    cancel_restart(now);
    if (trainer_running()) {
        if (done_verdict()) {
            logger().info("{}: the work is done: stopping the trainer", label());
        }
        const auto* stop = std::get_if<protocol::Stop>(&verdict);
        // A cancel from slurmstepd reached every trainer already: only count the grace.
        stop_trainer(stop != nullptr && stop->whole_step ? 0 : SIGTERM, now);
    }
    maybe_finish(now);
}

void LauncherMachine::coordinator_lost(const std::string& reason,
                                       Clock::time_point now,
                                       CoordinatorLoss loss) {
    if (m_verdict || m_lost) {
        disconnect(now);
        return;
    }
    m_lost = reason;
    m_loss = loss;
    logger().debug("{}: coordinator {} lost: {}", label(), m_settings.control, reason);
    release_start(); // start_due() then records that the trainer never started
    disconnect(now);
    cancel_restart(now); // after the disconnect: nothing left to half-close
    release_exit();      // nobody to tell any more
    if (trainer_running()) {
        stop_trainer(SIGTERM, now);
    }
    maybe_finish(now);
}

void LauncherMachine::stop_trainer(int signo, Clock::time_point now) {
    if (!trainer_running()) {
        return;
    }
    if (m_stopping == Stopping::no) {
        m_stopping = Stopping::grace;
    }
    if (signo == SIGTERM && m_term == TermSignal::delivered) {
        signo = 0; // its SIGTERM handler (a checkpoint) must run once
    }
    if (signo != 0) {
        m_actions.emplace_back(action::SignalTrainer{signo});
        note_delivered(signo);
    }
    if (m_grace_deadline && *m_grace_deadline > now) {
        return; // already counting
    }
    m_grace_deadline = now + m_settings.run.grace;
    m_actions.emplace_back(action::ArmTimer{LauncherTimer::grace, *m_grace_deadline});
}

void LauncherMachine::note_delivered(int signo) noexcept {
    if (signo == SIGTERM) {
        m_term = TermSignal::delivered;
    }
}

void LauncherMachine::disconnect(Clock::time_point now) {
    if (m_phase == Phase::closed) {
        return;
    }
    m_phase = Phase::closed;
    m_unwritten = 0;
    m_actions.emplace_back(action::Disconnect{});
    maybe_finish(now);
}

void LauncherMachine::maybe_finish(Clock::time_point now) {
    if (m_result || !m_status || m_trainer == TrainerState::exit_held || (!m_verdict && !m_lost)) {
        return;
    }
    if (m_phase == Phase::registered) {
        if (m_after_check == AfterCheck::none && checks_after_failure()) {
            // The abort names our rank: its node is checked before we leave (the trainer has
            // ended), and the coordinator waits for the result.
            m_after_check = AfterCheck::running;
            m_actions.emplace_back(action::CheckNode{action::NodeCheckTime::after_failure});
        }
        if (m_after_check == AfterCheck::running || m_unwritten > 0) {
            return; // the check runs, or the exit report (or `checked`) is on its way
        }
        // Half-close and wait for the coordinator's EOF, so that nothing we sent is lost to a
        // reset; bounded in case the coordinator is gone.
        m_phase = Phase::closing;
        m_actions.emplace_back(action::HalfClose{});
        m_actions.emplace_back(action::ArmTimer{LauncherTimer::close, now + k_close_timeout});
        return;
    }
    if (m_phase == Phase::unregistered) {
        disconnect(now);
        return;
    }
    if (m_phase == Phase::closing || m_server == Server::serving) {
        return;
    }
    finish(now);
}

void LauncherMachine::finish(Clock::time_point /*now*/) {
    m_result = compute_result();
    if (m_stopping == Stopping::killed && m_result->outcome == Outcome::done) {
        logger().warn("{}: stopped with SIGKILL after the grace period", label());
    }
    m_actions.emplace_back(action::Finish{*m_result});
}

// One decision table from the launcher's state to its result (~85 lines): every outcome
// (abandoned, verdict, checkpoint, own failure, lost coordinator) with its status and line side by
// side, so that the exit statuses of man tfslurm(1) can be checked in one place.
} // namespace tfslurm
