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
            // Failures Slurm sees by itself (a task exited): nobody.
            Row{protocol::FailureCause::trainer, 0, false},
            Row{protocol::FailureCause::trainer, 3, false},
            Row{protocol::FailureCause::start, 0, false},
            Row{protocol::FailureCause::unregistered, 0, false},
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
