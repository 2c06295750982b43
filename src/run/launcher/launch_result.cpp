// SPDX-License-Identifier: MIT
// What a launcher's state machine ends with (LauncherMachine::compute_result(), launcher.hpp):
// the exit status, the outcome, the line for the user and who shows it, the step to cancel and
// the job to requeue, from what the machine saw.
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/requeue_policy.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <string>

namespace tfslurm {

namespace {

/// Whether a failure's rank may be on a node whose tasks never end by themselves: a lost
/// launcher's node may be dead or cut off, and a launcher that never registered may be on a node
/// that hangs (in its prolog, on a file system) before its task starts. Slurm sees the other
/// failures by itself: the task exited, or its launcher ends it.
bool may_hold_the_step(protocol::FailureCause cause) noexcept {
    // A switch without default: a new cause does not build until it is sorted here.
    switch (cause) {
    case protocol::FailureCause::lost:
    case protocol::FailureCause::unregistered:
        return true;
    case protocol::FailureCause::trainer:
    case protocol::FailureCause::start:
    case protocol::FailureCause::stalled:
    case protocol::FailureCause::unreachable:
    case protocol::FailureCause::preflight:
        return false;
    }
    return false;
}

} // namespace

/// The result from what the machine saw, in one place so that every way out (done, aborted,
/// interrupted, checkpointed, the coordinator lost) sets the status, the line and who shows it
/// by the same rules; add_requeue() and add_node_requeue() add what rank 0 asks of Slurm.
LaunchResult LauncherMachine::compute_result() const {
    LaunchResult out;
    if (m_trainer == TrainerState::abandoned) {
        const int signo = m_interrupt ? m_interrupt->signo : 0;
        out.outcome = Outcome::interrupted;
        out.exit_status = 128 + signo;
        out.step_status = out.exit_status;
        out.announce = true;
        out.message = fmt::format("stopping: {} received signal {} ({}) before its trainer started",
                                  label(),
                                  signo,
                                  signal_description(signo));
        return out;
    }
    const ExitStatus status = m_status.value_or(ExitStatus::exited(k_status_lost));
    const int trainer_status = status.shell_status();
    if (!m_verdict) {
        // No step status: a trainer that failed by itself keeps its status (it is the likely
        // culprit); the others say that they lost the coordinator.
        out.outcome = Outcome::coordinator_lost;
        out.exit_status =
            !status.success() && m_stopping == Stopping::no ? trainer_status : k_status_lost;
        out.step_status = out.exit_status;
        out.announce = true; // each launcher's own observation (the reason may differ)
        out.message = fmt::format(
            "aborting: coordinator at {} lost ({})", m_settings.control, m_lost.value_or("?"));
        // Rank 0's node may be the one gone: nobody else would end the step, and srun would
        // wait for its tasks forever.
        out.cancel = m_settings.slurm_step;
        add_takeover(out);
        return out;
    }
    if (const auto* abort = std::get_if<protocol::Abort>(&*m_verdict)) {
        const protocol::Failure& failure = abort->failure;
        out.outcome = Outcome::aborted;
        // Every launcher exits with the culprit's status: srun reports the highest one.
        out.exit_status = failure.step_status;
        out.step_status = failure.step_status;
        // A failed preflight is the node's, not its launcher's: rank 0's launcher tells it, as
        // it tells a lost one, since it is the one that may requeue the job without that node
        // (the line then says so).
        const bool by_itself = failure.cause == protocol::FailureCause::trainer ||
                               failure.cause == protocol::FailureCause::start ||
                               failure.cause == protocol::FailureCause::stalled ||
                               failure.cause == protocol::FailureCause::unreachable;
        // With a node check after the failure, rank 0's launcher tells the whole story: the
        // failure, what the check found, and the requeue without the node if it failed.
        const bool checked = failure_checked(m_settings.run, failure.cause);
        out.announce = by_itself && !checked ? failure.rank == m_settings.rank
                                             : m_settings.host == CoordinatorHost::here;
        out.message = "aborting: " + protocol::describe(failure);
        if (checked && m_settings.host == CoordinatorHost::here) {
            out.message += "; " + node_check_text(failure, m_node_check);
        }
        if (may_hold_the_step(failure.cause) && m_settings.host == CoordinatorHost::here) {
            // srun would wait for those tasks until someone runs scancel. We finish only once
            // every other launcher left (or after the linger time), so the surviving trainers
            // had their grace before Slurm kills the step.
            out.cancel = m_settings.slurm_step;
        }
        if (const auto exclusion = m_settings.requeue
                                       ? node_exclusion(failure,
                                                        m_settings.requeue->restart_count,
                                                        node_count(m_settings.ranks),
                                                        m_node_check)
                                       : std::nullopt) {
            add_node_requeue(out, *exclusion);
        }
        return out;
    }
    const auto& stop = std::get<protocol::Stop>(*m_verdict);
    if (stop.reason == protocol::StopReason::done && m_checkpoint) {
        // The trainers saved and exited because the job's end is near: not the work's end.
        out.outcome = Outcome::checkpointed;
        out.exit_status = k_status_checkpointed;
        out.step_status = k_status_checkpointed;
        out.announce = m_settings.host == CoordinatorHost::here;
        out.message = "checkpointed: " + *m_checkpoint;
        add_requeue(out);
        return out;
    }
    if (stop.reason == protocol::StopReason::done) {
        out.outcome = Outcome::done;
        // A trainer stopped because the work is done succeeded, whatever its status.
        out.exit_status = m_stopping != Stopping::no ? 0 : trainer_status;
        out.step_status = 0;
        return out;
    }
    out.outcome = Outcome::interrupted;
    out.exit_status = m_trainer == TrainerState::never_started ? 128 + stop.signal : trainer_status;
    out.step_status = trainer_status;
    out.announce = stop.rank == m_settings.rank;
    const Member who = stop.rank < m_settings.ranks.size() ? m_settings.ranks[stop.rank] : Member{};
    out.message = fmt::format("stopping: {} received signal {} ({})",
                              rank_label(stop.rank, who),
                              stop.signal,
                              signal_description(stop.signal));
    if (stop.whole_step || m_checkpoint) {
        // slurmstepd's SIGTERM reached the whole step (a preemption), or it came after the
        // checkpoint signal: the trainers saved their state. A preemption is no fault of the
        // job's: it is not judged by the storm rule, nor is its run held against the next.
        add_requeue(out, m_checkpoint ? Judged::yes : Judged::no);
    }
    return out;
}

void LauncherMachine::add_node_requeue(LaunchResult& out, const NodeExclusion& exclusion) const {
    if (m_settings.host != CoordinatorHost::here) {
        return;
    }
    const RequeuePolicy& policy = *m_settings.requeue;
    const std::string nodes = [&exclusion] {
        try {
            return compress_hostlist(exclusion.nodes);
        } catch (const Error&) {
            return fmt::format("{}", fmt::join(exclusion.nodes, ","));
        }
    }();
    if (!requeue_allowed(policy.restart_count, m_settings.run.max_requeues)) {
        out.message +=
            fmt::format("; not requeueing job {} without {}: it was requeued {} times already ({})",
                        policy.job,
                        nodes,
                        policy.restart_count,
                        setting_ref("max_requeues", std::to_string(m_settings.run.max_requeues)));
        return;
    }
    if (storm_stops(out, " without " + nodes)) {
        return;
    }
    // The step's status if Slurm refuses; the step is then cancelled (`cancel` stays set).
    out.requeue = RequeueRequest{
        policy.job, policy.restart_count + 1, out.exit_status, exclusion, run_mark(), {}};
    out.exit_status = k_status_requeued;
    const std::string fallback = out.message;
    out.message += fmt::format("; requeueing job {} without {} (requeue {} of {})",
                               policy.job,
                               nodes,
                               policy.restart_count + 1,
                               m_settings.run.max_requeues);
    const protocol::Failure& failure = std::get<protocol::Abort>(*m_verdict).failure;
    const std::size_t step_nodes = node_count(m_settings.ranks);
    if (failure.cause == protocol::FailureCause::lost && failure.answering != 0 &&
        !strict_majority(failure.answering, step_nodes)) {
        // Lost by silence, and rank 0 hears from no more than half of the nodes: a partition,
        // perhaps, whose other side requeues the job without rank 0's node. A tie goes to
        // that side: rank 0 requeues only after every turn of it had its chance.
        out.requeue->takeover = Takeover{0, takeover_rank0_wait(m_settings.run), fallback};
        out.message += fmt::format(", as rank 0 hears from {} of the {} nodes and no launcher "
                                   "of the others requeued it",
                                   failure.answering,
                                   step_nodes);
    }
}

void LauncherMachine::add_takeover(LaunchResult& out) const {
    if (!m_settings.requeue || !m_settings.slurm_step || m_settings.host == CoordinatorHost::here ||
        m_interrupt || m_loss == CoordinatorLoss::other || node_count(m_settings.ranks) < 2 ||
        !requeue_allowed(m_settings.requeue->restart_count, m_settings.run.max_requeues)) {
        return; // as without --requeue: every launcher that lost the coordinator cancels
    }
    const RequeuePolicy& policy = *m_settings.requeue;
    auto takeover = takeover_turn(m_settings.ranks, m_settings.rank, m_loss, m_settings.run);
    if (!takeover) {
        // A turn requeues the job or, refused, cancels the step; a cancel from here would
        // kill that turn's launcher while it waits.
        out.cancel.reset();
        return;
    }
    const std::string node = m_settings.ranks[0].host;
    takeover->fallback = out.message;
    // Rank 0's launcher knew how far the run got; this one does not: no progress mark, so
    // the next run does not judge this one by the storm rule.
    out.requeue =
        RequeueRequest{policy.job,
                       policy.restart_count + 1,
                       out.exit_status,
                       NodeExclusion{{node}, "rank 0 launcher lost", policy.restart_count + 1},
                       std::nullopt,
                       std::move(takeover)};
    out.exit_status = k_status_requeued;
    out.message +=
        fmt::format("; requeueing job {} without {} in rank 0's stead (requeue {} of {})",
                    policy.job,
                    node,
                    policy.restart_count + 1,
                    m_settings.run.max_requeues);
}

void LauncherMachine::add_requeue(LaunchResult& out, Judged judged) const {
    if (!m_settings.requeue || m_settings.host != CoordinatorHost::here) {
        return;
    }
    const RequeuePolicy& policy = *m_settings.requeue;
    if (!requeue_allowed(policy.restart_count, m_settings.run.max_requeues)) {
        out.announce = true;
        out.message +=
            fmt::format("; not requeueing job {}: it was requeued {} times already ({})",
                        policy.job,
                        policy.restart_count,
                        setting_ref("max_requeues", std::to_string(m_settings.run.max_requeues)));
        return;
    }
    if (judged == Judged::yes && storm_stops(out, {})) {
        out.announce = true;
        return;
    }
    out.requeue = RequeueRequest{policy.job,
                                 policy.restart_count + 1,
                                 out.exit_status,
                                 {},
                                 judged == Judged::yes ? std::optional(run_mark()) : std::nullopt,
                                 {}};
    out.exit_status = k_status_requeued;
    out.announce = true;
    out.message += fmt::format("; requeueing job {} (requeue {} of {})",
                               policy.job,
                               policy.restart_count + 1,
                               m_settings.run.max_requeues);
}

ProgressMark LauncherMachine::run_mark() const {
    return progress_mark(m_run_progress, m_ran, m_settings.run.requeue_min_run);
}

bool LauncherMachine::storm_stops(LaunchResult& out, const std::string& without) const {
    const RequeuePolicy& policy = *m_settings.requeue;
    const auto storm = requeue_storm(policy.previous, run_mark(), policy.restart_count);
    if (!storm) {
        return false;
    }
    out.message += fmt::format("; not requeueing job {}{}: {}: another run would likely end the "
                               "same way",
                               policy.job,
                               without,
                               *storm);
    return true;
}

} // namespace tfslurm
