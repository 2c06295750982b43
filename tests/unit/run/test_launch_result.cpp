// SPDX-License-Identifier: MIT
// What a launcher's machine ends with (src/run/launcher/launch_result.cpp): the exit status, the
// outcome, who shows the line, the step to cancel and the job to requeue.
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
    LauncherMachine m = running_machine(settings(2));
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
    const protocol::Failure failure = failure_of(3, cause, step_status);
    INFO(protocol::describe(failure) << " / rank " << rank);
    LauncherMachine m = running_machine(settings(rank));
    // Stopped by the abort, this trainer dies of SIGTERM: the launcher still exits with the
    // step's status (srun reports the highest task status).
    const LaunchResult r = result_after_abort(m, failure, rank);
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
            // Ranks that did not register: their node may hang before their tasks start.
            Row{protocol::FailureCause::unregistered, 0, true},
            Row{protocol::FailureCause::unregistered, 1, false},
            // Failures Slurm sees by itself (a task exited, or its launcher ends it): nobody.
            Row{protocol::FailureCause::trainer, 0, false},
            Row{protocol::FailureCause::trainer, 3, false},
            Row{protocol::FailureCause::start, 0, false},
            Row{protocol::FailureCause::stalled, 0, false},
            Row{protocol::FailureCause::unreachable, 0, false},
            Row{protocol::FailureCause::preflight, 0, false},
        }));
    const protocol::Failure failure = failure_of(3, cause, k_status_lost);
    INFO(protocol::describe(failure) << " / rank " << rank);
    for (const bool under_slurm : {true, false}) {
        LauncherSettings s = settings(rank);
        if (under_slurm) {
            s.slurm_step = StepRef{12, 0};
        }
        LauncherMachine m = running_machine(s);
        // Rank 0 cancels, if at all, once its coordinator is finished (result_after_abort).
        const LaunchResult r = result_after_abort(m, failure, rank);
        INFO("under Slurm: " << under_slurm);
        CHECK(r.cancel.has_value() == (cancels && under_slurm));
        if (r.cancel) {
            CHECK(*r.cancel == StepRef{12, 0});
            CHECK(r.announce);
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
    const protocol::Failure failure = failure_of(3, cause, k_status_lost);
    INFO(protocol::describe(failure) << " / rank " << rank << " / restarts " << restarts);
    LauncherSettings s = checkpoint_settings(rank, restarts);
    s.slurm_step = StepRef{12, 0};
    LauncherMachine m = running_machine(s);
    const LaunchResult r = result_after_abort(m, failure, rank);
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

TEST_CASE("launcher: rank 0 requeues without the few nodes whose ranks did not register",
          "[launcher][requeue]") {
    // The table's four ranks (n1, n2) and four more on n3..n6: rank 3's node n2 is one of six.
    LauncherSettings s = checkpoint_settings(0);
    s.slurm_step = StepRef{12, 0};
    for (std::uint32_t node = 3; node <= 6; ++node) {
        s.ranks.push_back({Role::worker, node + 1, "n" + std::to_string(node)});
    }
    protocol::Failure failure =
        failure_of(3, protocol::FailureCause::unregistered, k_status_unregistered, "60.12 s");
    failure.missing = 1;
    LauncherMachine m = running_machine(s);
    const LaunchResult r = result_after_abort(m, failure, 0);
    CHECK(r.message == "aborting: rank 3 (worker:2) on n2 did not register within 60.12 s; "
                       "requeueing job 12 without n2 (requeue 1 of 2)");
    REQUIRE(r.requeue.has_value());
    CHECK(r.requeue->exclusion ==
          std::optional<NodeExclusion>(NodeExclusion{{"n2"}, "rank 3 did not register", 1}));
    CHECK(r.exit_status == k_status_requeued);
}

TEST_CASE("launcher: a launcher that lost the coordinator cancels the step after its trainer's "
          "grace",
          "[launcher]") {
    LauncherSettings s = settings(2);
    s.slurm_step = StepRef{12, 3};
    const auto m =
        play(s,
             running({
                 {500, "eof", {"disconnect", "signal 15", "arm grace 10500"}},
                 {10500, "timer grace", {"signal 9"}},
                 {10600,
                  "killed 9",
                  {"cancel grace",
                   "finish coordinator_lost 8 8 announce aborting: coordinator at n1:29000 lost "
                   "(connection closed) + cancel 12.3"}},
             }));
    REQUIRE(m.result());
    CHECK(m.result()->cancel == std::optional<StepRef>(StepRef{12, 3}));
}

namespace {

/// Seven ranks on five nodes, each launcher with `--requeue` (job 12, run 1 of at most 2
/// requeues) in Slurm step 12.0: n1 {0, 1} (the coordinator's), n2 {2, 3}, n3 {4}, n4 {5},
/// n5 {6}.
LauncherSettings takeover_settings(std::uint32_t rank, std::uint32_t restart = 0) {
    LauncherSettings s = checkpoint_settings(rank, restart);
    s.job_end.reset();
    s.run.checkpoint_before.reset();
    s.slurm_step = StepRef{12, 0};
    s.ranks = {{Role::worker, 0, "n1"},
               {Role::worker, 1, "n1"},
               {Role::worker, 2, "n2"},
               {Role::worker, 3, "n2"},
               {Role::worker, 4, "n3"},
               {Role::worker, 5, "n4"},
               {Role::worker, 6, "n5"}};
    return s;
}

/// The result of a launcher whose trainer runs when the coordinator is lost (`loss`), after
/// its trainer died of the SIGTERM that followed.
LaunchResult result_after_loss(const LauncherSettings& s, CoordinatorLoss loss) {
    LauncherMachine m = running_machine(s);
    if (loss == CoordinatorLoss::silent) {
        m.timer_fired(LauncherTimer::watch, k_t0 + s.run.heartbeat_timeout + 1s);
    } else {
        m.connection_lost(
            loss == CoordinatorLoss::closed ? "connection closed" : "bad frame", k_t0, loss);
    }
    m.trainer_exited(ExitStatus::signaled(SIGTERM), k_t0 + 20s);
    (void)m.take_actions();
    REQUIRE(m.result());
    return *m.result();
}

} // namespace

TEST_CASE("launcher: rank 0 lost, the leaders of the next three nodes requeue in its stead in "
          "turn",
          "[launcher][requeue]") {
    // This launcher's rank, how the coordinator was lost, and its turn and wait (0: none).
    using Row = std::tuple<std::uint32_t, CoordinatorLoss, std::uint32_t, Millis>;
    const auto [rank, loss, turn, wait] =
        GENERATE(table<std::uint32_t, CoordinatorLoss, std::uint32_t, Millis>({
            // A closed connection is a fact: the first turn at once, the others 5 s apart.
            Row{2, CoordinatorLoss::closed, 1, 0s},
            Row{4, CoordinatorLoss::closed, 2, 5s},
            Row{5, CoordinatorLoss::closed, 3, 10s},
            // Silence may be a partition: rank 0's side requeues first if it holds a majority
            // (grace 10 s + heartbeat timeout 10 s + 2 s + 10 s).
            Row{2, CoordinatorLoss::silent, 1, 32s},
            Row{5, CoordinatorLoss::silent, 3, 42s},
            // Not a turn: a follower, rank 0's own node, a node past the third.
            Row{3, CoordinatorLoss::closed, 0, 0s},
            Row{1, CoordinatorLoss::closed, 0, 0s},
            Row{6, CoordinatorLoss::closed, 0, 0s},
        }));
    INFO("rank " << rank << " turn " << turn);
    const LaunchResult r = result_after_loss(takeover_settings(rank), loss);
    CHECK(r.outcome == Outcome::coordinator_lost);
    CHECK(r.announce);
    const std::string lost =
        std::string("aborting: coordinator at n1:29000 lost (") +
        (loss == CoordinatorLoss::silent ? "no heartbeat for 10 s" : "connection closed") + ")";
    if (turn == 0) {
        // It leaves the step to the turns: a cancel would kill them while they wait.
        CHECK(r.message == lost);
        CHECK_FALSE(r.requeue);
        CHECK_FALSE(r.cancel);
        CHECK(r.exit_status == k_status_lost);
        return;
    }
    CHECK(r.message == lost + "; requeueing job 12 without n1 in rank 0's stead (requeue 1 of 2)");
    REQUIRE(r.requeue);
    CHECK(r.requeue->job == 12);
    CHECK(r.requeue->restart == 1);
    CHECK(r.requeue->status_if_refused == k_status_lost);
    CHECK(r.requeue->exclusion ==
          std::optional<NodeExclusion>(NodeExclusion{{"n1"}, "rank 0 launcher lost", 1}));
    CHECK_FALSE(r.requeue->progress); // rank 0 knew how far the run got; nobody else does
    CHECK(r.requeue->takeover == std::optional<Takeover>(Takeover{turn, wait, lost}));
    CHECK(r.exit_status == k_status_requeued);
    // Refused (or taken by another turn): the step is cancelled as without --requeue.
    CHECK(r.cancel == std::optional<StepRef>(StepRef{12, 0}));
}

TEST_CASE("launcher: no takeover without a requeue to make", "[launcher][requeue]") {
    SECTION("the requeues are spent") {
        const LaunchResult r = result_after_loss(takeover_settings(2, 2), CoordinatorLoss::closed);
        CHECK_FALSE(r.requeue);
        CHECK(r.cancel == std::optional<StepRef>(StepRef{12, 0}));
    }
    SECTION("a protocol error is nobody's node") {
        const LaunchResult r = result_after_loss(takeover_settings(2), CoordinatorLoss::other);
        CHECK_FALSE(r.requeue);
        CHECK(r.cancel == std::optional<StepRef>(StepRef{12, 0}));
    }
    SECTION("without --requeue") {
        LauncherSettings s = takeover_settings(2);
        s.requeue.reset();
        const LaunchResult r = result_after_loss(s, CoordinatorLoss::closed);
        CHECK_FALSE(r.requeue);
        CHECK(r.cancel == std::optional<StepRef>(StepRef{12, 0}));
    }
    SECTION("a signal came first: Slurm is ending the step") {
        LauncherMachine m = running_machine(takeover_settings(2));
        m.signal_received(SIGTERM, k_t0, SignalOrigin::step);
        m.connection_lost("connection closed", k_t0 + 1s, CoordinatorLoss::closed);
        m.trainer_exited(ExitStatus::signaled(SIGTERM), k_t0 + 2s);
        (void)m.take_actions();
        REQUIRE(m.result());
        CHECK_FALSE(m.result()->requeue);
    }
}

TEST_CASE("launcher: rank 0 without a majority lets the other side requeue first",
          "[launcher][requeue]") {
    // How many nodes rank 0 still heard from (0: the launcher's connection closed), and the
    // turn's wait (0: rank 0 requeues at once).
    using Row = std::tuple<std::uint32_t, Millis>;
    const auto [answering, wait] = GENERATE(table<std::uint32_t, Millis>({
        Row{0, 0s},
        Row{3, 0s}, // 3 of 5: a strict majority
        // 2 of 5, or a tie: after the other side's last turn (2 × 32 s + 3 × 5 s).
        Row{2, 79s},
        Row{1, 79s},
    }));
    INFO("answering " << answering);
    protocol::Failure failure = failure_of(0, protocol::FailureCause::lost, k_status_lost);
    failure.rank = 4;
    failure.host = "n3";
    failure.detail = answering == 0 ? "connection closed" : "no heartbeat for 10 s";
    failure.answering = answering;
    LauncherMachine m = running_machine(takeover_settings(0));
    const LaunchResult r = result_after_abort(m, failure, 0);
    REQUIRE(r.requeue);
    CHECK(r.requeue->exclusion ==
          std::optional<NodeExclusion>(NodeExclusion{{"n3"}, "rank 4 launcher lost", 1}));
    const std::string line = "aborting: " + protocol::describe(failure);
    if (wait == 0s) {
        CHECK_FALSE(r.requeue->takeover);
        CHECK(r.message == line + "; requeueing job 12 without n3 (requeue 1 of 2)");
        return;
    }
    CHECK(r.requeue->takeover == std::optional<Takeover>(Takeover{0, wait, line}));
    CHECK(r.message == line + fmt::format("; requeueing job 12 without n3 (requeue 1 of 2), as "
                                          "rank 0 hears from {} of the 5 nodes and no launcher "
                                          "of the others requeued it",
                                          answering));
    CHECK(r.cancel == std::optional<StepRef>(StepRef{12, 0}));
}
