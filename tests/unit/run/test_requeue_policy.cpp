// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/requeue_policy.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;
using protocol::FailureCause;

namespace {

protocol::Failure failure(FailureCause cause, std::uint32_t rank, std::string host) {
    protocol::Failure out;
    out.rank = rank;
    out.host = std::move(host);
    out.cause = cause;
    return out;
}

} // namespace

TEST_CASE("requeue_policy: only a lost launcher and a failed preflight are a node's fault",
          "[requeue_policy]") {
    using Row = std::tuple<FailureCause, bool>;
    const auto [cause, fault] = GENERATE(table<FailureCause, bool>({
        Row{FailureCause::lost, true},
        Row{FailureCause::trainer, false},
        Row{FailureCause::start, false},
        Row{FailureCause::unregistered, false},
        Row{FailureCause::stalled, false},
        Row{FailureCause::unreachable, false},
        Row{FailureCause::preflight, true},
    }));
    INFO(static_cast<int>(cause));
    CHECK(node_fault(cause) == fault);
    CHECK(node_fault_reason(cause).has_value() == fault);
    // Two nodes: neither half of the step is blamed for ranks that did not register.
    const auto exclusion = node_exclusion(failure(cause, 2, "n3"), 0, 2);
    CHECK(exclusion.has_value() == fault);
}

TEST_CASE("requeue_policy: the failed rank's node is left out, in the run that failed",
          "[requeue_policy]") {
    CHECK(node_fault_reason(FailureCause::lost) ==
          std::optional<std::string_view>("launcher lost"));
    CHECK(node_exclusion(failure(FailureCause::lost, 2, "n3"), 0, 4) ==
          std::optional<NodeExclusion>(NodeExclusion{{"n3"}, "rank 2 launcher lost", 1}));
    CHECK(node_exclusion(failure(FailureCause::lost, 5, "gpu07"), 2, 4) ==
          std::optional<NodeExclusion>(NodeExclusion{{"gpu07"}, "rank 5 launcher lost", 3}));
    CHECK(node_exclusion(failure(FailureCause::preflight, 1, "n2"), 0, 4) ==
          std::optional<NodeExclusion>(NodeExclusion{{"n2"}, "rank 1 preflight failed", 1}));
    // No host: nothing to leave out.
    CHECK_FALSE(node_exclusion(failure(FailureCause::lost, 2, ""), 0, 4));
    // The trainer's own failure on the same node: never.
    CHECK_FALSE(node_exclusion(failure(FailureCause::trainer, 2, "n3"), 0, 4));
}

TEST_CASE("requeue_policy: a failed node check after a trainer's failure leaves its node out",
          "[requeue_policy][on_failure_check]") {
    const protocol::Checked failed{
        protocol::PreflightFailure{"command", "\"x\" exited with status 1"}};
    const protocol::Checked passed{};
    using Row = std::tuple<FailureCause, std::optional<protocol::Checked>, bool>;
    const auto [cause, check, left_out] =
        GENERATE_COPY(table<FailureCause, std::optional<protocol::Checked>, bool>({
            Row{FailureCause::trainer, failed, true},
            Row{FailureCause::stalled, failed, true},
            Row{FailureCause::trainer, passed, false},
            Row{FailureCause::stalled, passed, false},
            Row{FailureCause::trainer, std::nullopt, false},
            // A check of no such failure (the coordinator keeps none): ignored.
            Row{FailureCause::start, failed, false},
            Row{FailureCause::unreachable, failed, false},
        }));
    INFO(static_cast<int>(cause));
    const auto exclusion = node_exclusion(failure(cause, 1, "n2"), 0, 3, check);
    CHECK(exclusion.has_value() == left_out);
    if (left_out) {
        CHECK(*exclusion == NodeExclusion{{"n2"}, "rank 1 node check failed", 1});
        CHECK(exclusion_record(*exclusion) ==
              "tfslurm run 1: n2 left out (rank 1 node check failed)");
        CHECK(requeued_run_line(*exclusion, 1, 2, {"n1", "n3"}) ==
              "requeued run 2 of 3: n2 left out (rank 1 node check failed in run 1)");
    }
    // A lost launcher is its node's fault whatever the check says.
    CHECK(node_exclusion(failure(FailureCause::lost, 2, "n3"), 0, 4, passed) ==
          std::optional<NodeExclusion>(NodeExclusion{{"n3"}, "rank 2 launcher lost", 1}));
}

TEST_CASE("requeue_policy: rank 0's line tells what the failed rank's node check found",
          "[requeue_policy][on_failure_check]") {
    const protocol::Failure trainer = failure(FailureCause::trainer, 1, "n2");
    CHECK(node_check_text(trainer,
                          protocol::Checked{protocol::PreflightFailure{
                              "command", R"("sleep 9" did not end within 2 s)"}}) ==
          R"(node check failed on n2: command: "sleep 9" did not end within 2 s)");
    CHECK(node_check_text(trainer, protocol::Checked{}) == "node check passed on n2");
    CHECK(node_check_text(trainer, std::nullopt) ==
          "no node check result from n2 (its launcher left without one)");
}

TEST_CASE("requeue_policy: ranks that did not register leave out their nodes, if few",
          "[requeue_policy]") {
    protocol::Failure one = failure(FailureCause::unregistered, 5, "n3");
    one.missing = 1;
    // One hung node of 2,048: that node, not the step.
    CHECK(node_exclusion(one, 0, 2048) ==
          std::optional<NodeExclusion>(NodeExclusion{{"n3"}, "rank 5 did not register", 1}));
    CHECK(node_exclusion(one, 0, 3) ==
          std::optional<NodeExclusion>(NodeExclusion{{"n3"}, "rank 5 did not register", 1}));
    // One node of two: which half is at fault, no rank can tell.
    CHECK_FALSE(node_exclusion(one, 0, 2));

    protocol::Failure several = failure(FailureCause::unregistered, 3, "n[2-3]");
    several.missing = 4;
    several.ranks = "3-5,9";
    CHECK(node_exclusion(several, 1, 8) == std::optional<NodeExclusion>(NodeExclusion{
                                               {"n2", "n3"}, "ranks 3-5,9 did not register", 2}));
    CHECK(node_exclusion(several, 1, 5) == std::optional<NodeExclusion>(NodeExclusion{
                                               {"n2", "n3"}, "ranks 3-5,9 did not register", 2}));
    // Half the step or more: a slow start or a blocked control port, not these nodes.
    CHECK_FALSE(node_exclusion(several, 1, 4));
    CHECK_FALSE(node_exclusion(several, 1, 3));
    // Hosts that are no hostlist (the coordinator writes none such): no node to leave out.
    several.host = "n[3-";
    CHECK_FALSE(node_exclusion(several, 1, 8));
}

TEST_CASE("requeue_policy: the budget counts the job's restarts", "[requeue_policy]") {
    using Row = std::tuple<std::uint32_t, std::uint32_t, bool>;
    const auto [restarts, max, allowed] = GENERATE(table<std::uint32_t, std::uint32_t, bool>({
        Row{0, 3, true},
        Row{2, 3, true},
        Row{3, 3, false},
        Row{4, 3, false},
        Row{0, 0, false},
        Row{0, 1, true},
        Row{1, 1, false},
    }));
    INFO(restarts << " of " << max);
    CHECK(requeue_allowed(restarts, max) == allowed);
}

TEST_CASE("requeue_policy: the merged ExcNodeList", "[requeue_policy]") {
    using Row = std::tuple<std::string, std::vector<std::string>, std::string>;
    const auto [existing, nodes, merged] =
        GENERATE(table<std::string, std::vector<std::string>, std::string>({
            Row{"", {"n3"}, "n3"},
            Row{"(null)", {"n3"}, "n3"},
            Row{"n[1-2]", {"n3"}, "n[1-3]"},
            Row{"n3", {"n3"}, "n3"},                          // already left out
            Row{"n[1,3]", {"n2"}, "n[1,3,2]"},                // Slurm's order kept, then ours
            Row{"login,n[01-02]", {"n03"}, "login,n[01-03]"}, // padding kept
            Row{"n1", {"n2", "n1", "m4"}, "n[1-2],m4"},
        }));
    INFO(existing);
    CHECK(merged_exclusion(existing, nodes) == merged);
}

TEST_CASE("requeue_policy: an ExcNodeList that is no hostlist is refused", "[requeue_policy]") {
    try {
        (void)merged_exclusion("n[1-", {"n3"});
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::invalid_hostlist);
        CHECK(std::string(e.what()).rfind("ExcNodeList: ", 0) == 0);
    }
}

TEST_CASE("requeue_policy: the record in the job's comment", "[requeue_policy]") {
    const NodeExclusion exclusion{{"n3"}, "rank 2 launcher lost", 1};
    const std::string record = exclusion_record(exclusion);
    CHECK(record == "tfslurm run 1: n3 left out (rank 2 launcher lost)");
    CHECK(exclusion_record({{"n3", "n4"}, "rank 2 launcher lost", 2}) ==
          "tfslurm run 2: n[3-4] left out (rank 2 launcher lost)");

    using Row = std::tuple<std::string, std::string, std::string>;
    // The comment before, after, and the user's own part.
    const auto [before, after, own] = GENERATE_REF(table<std::string, std::string, std::string>({
        Row{"", record, ""},
        Row{"nightly", "nightly; " + record, "nightly"},
        Row{"tfslurm run 3: n9 left out (rank 1 launcher lost)", record, ""},
        Row{"nightly; tfslurm run 3: n9 left out (x)", "nightly; " + record, "nightly"},
        Row{"a; b", "a; b; " + record, "a; b"},
    }));
    INFO(before);
    CHECK(comment_with_record(before, record) == after);
    CHECK(comment_without_record(before) == own);
    CHECK(record_in_comment(after) == std::optional<NodeExclusion>(exclusion));
}

TEST_CASE("requeue_policy: comments without a record of ours", "[requeue_policy]") {
    const auto text = GENERATE(as<std::string>{},
                               "",
                               "nightly",
                               "tfslurm run x: n3 left out (why)",
                               "tfslurm run 0: n3 left out (why)",
                               "tfslurm run 1: n3 left out (why",
                               "tfslurm run 1: n[3 left out (why)",
                               "tfslurm run 1:  left out (why)",
                               "tfslurm run 1 n3 left out (why)");
    INFO(text);
    CHECK_FALSE(record_in_comment(text));
}

TEST_CASE("requeue_policy: the requeued run's line", "[requeue_policy]") {
    const NodeExclusion record{{"n3"}, "rank 2 launcher lost", 1};
    CHECK(requeued_run_line(record, 1, 2, {"n1", "n2", "n4"}) ==
          std::optional<std::string>(
              "requeued run 2 of 3: n3 left out (rank 2 launcher lost in run 1)"));
    CHECK(requeued_run_line(record, 1, 2, {"n1", "n3"}) ==
          std::optional<std::string>(
              "requeued run 2 of 3: n3 should have been left out (rank 2 launcher lost in run 1) "
              "but runs this job: its ExcNodeList did not reach Slurm before the requeue ended "
              "the step"));
    // An older record: this run was requeued for another reason (a checkpoint).
    CHECK_FALSE(requeued_run_line(record, 2, 2, {"n1", "n2"}));
    CHECK_FALSE(requeued_run_line(record, 0, 2, {"n1", "n2"}));
}

TEST_CASE("requeue_policy: squeue's ExcNodeList|Comment", "[requeue_policy]") {
    using Row = std::tuple<std::string, std::string, std::string>;
    const auto [text, excluded, comment] = GENERATE(table<std::string, std::string, std::string>({
        Row{"(null)|(null)\n", "", ""},
        Row{"|\n", "", ""},
        Row{"n[2-3]|tfslurm run 1: n3 left out (x)\n", "n[2-3]", "tfslurm run 1: n3 left out (x)"},
        Row{"n2|a|b", "n2", "a|b"},
    }));
    INFO(text);
    const JobRecord record = parse_job_record(text);
    CHECK(record.excluded == excluded);
    CHECK(record.comment == comment);
    try {
        (void)parse_job_record("slurm_load_jobs error: Invalid job id specified\n");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::io);
        CHECK(std::string(e.what()) == "squeue: expected the job's ExcNodeList|Comment: "
                                       "\"slurm_load_jobs error: Invalid job id specified\"");
    }
}

TEST_CASE("requeue_policy: the job's end from SLURM_JOB_END_TIME", "[requeue_policy]") {
    using std::chrono::seconds;
    using std::chrono::system_clock;
    const system_clock::time_point now{seconds{1827232050}};
    CHECK(job_end_from_variable("1827235650", now) ==
          std::optional<system_clock::time_point>(system_clock::time_point{seconds{1827235650}}));
    // No time limit: 0, or a year ahead.
    CHECK_FALSE(job_end_from_variable("0", now));
    CHECK_FALSE(job_end_from_variable(std::to_string(1827232050 + 365 * 24 * 3600), now));
    for (const char* bad : {"soon", "-1", "", "99999999999999999999"}) {
        INFO(bad);
        try {
            (void)job_end_from_variable(bad, now);
            FAIL("no error");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::invalid_argument);
            CHECK(std::string(e.what()) ==
                  "SLURM_JOB_END_TIME: expected an integer from 0 to 9223372036854775807: \"" +
                      std::string(bad) + "\"");
        }
    }
}

TEST_CASE("requeue_policy: a run's record with how far it got", "[requeue_policy][storm]") {
    const NodeExclusion n3{{"n3"}, "rank 2 launcher lost", 1};
    const ProgressMark none{ProgressMark::Kind::none, 0};
    const ProgressMark made{ProgressMark::Kind::made, 0};
    const ProgressMark step{ProgressMark::Kind::step, 1200};
    using Row = std::tuple<RunRecord, std::string>;
    const auto [record, text] = GENERATE_REF(table<RunRecord, std::string>({
        Row{{1, n3, none}, "tfslurm run 1: n3 left out (rank 2 launcher lost); no progress"},
        Row{{1, n3, step},
            "tfslurm run 1: n3 left out (rank 2 launcher lost); progress at step 1200"},
        Row{{1, n3, std::nullopt}, "tfslurm run 1: n3 left out (rank 2 launcher lost)"},
        Row{{2, std::nullopt, made}, "tfslurm run 2: progress"},
        Row{{3, std::nullopt, step}, "tfslurm run 3: progress at step 1200"},
        Row{{1, std::nullopt, none}, "tfslurm run 1: no progress"},
    }));
    INFO(text);
    CHECK(run_record_text(record) == text);
    CHECK(run_record_in_comment("nightly; " + text) == std::optional<RunRecord>(record));
    CHECK(record_in_comment(text) == record.exclusion);
}

TEST_CASE("requeue_policy: records that are not ours, or cut", "[requeue_policy][storm]") {
    const auto text = GENERATE(as<std::string>{},
                               "tfslurm run 1: progressing",
                               "tfslurm run 1: progress at step x",
                               "tfslurm run 1: n3 left out (why); nothing",
                               "tfslurm run 1: n3 left out (why) no progress",
                               "tfslurm run 1: ");
    INFO(text);
    CHECK_FALSE(run_record_in_comment(text));
}

TEST_CASE("requeue_policy: how far a run got", "[requeue_policy][storm]") {
    using Kind = ProgressMark::Kind;
    const Millis min_run{600000};
    CHECK(progress_mark({false, false, std::nullopt}, Millis{5000}, min_run).kind == Kind::none);
    // Started, nothing reported: no progress within the window, presumed beyond it.
    CHECK(progress_mark({true, false, std::nullopt}, Millis{40000}, min_run).kind == Kind::none);
    CHECK(progress_mark({true, false, std::nullopt}, Millis{600000}, min_run).kind == Kind::made);
    CHECK(progress_mark({true, true, std::nullopt}, Millis{40}, min_run).kind == Kind::made);
    CHECK(progress_mark({true, true, 1200}, Millis{40}, min_run) == ProgressMark{Kind::step, 1200});
    // No trainer started: none, whatever the file says (a stale report is no progress).
    CHECK(progress_mark({false, true, 1200}, Millis{700000}, min_run).kind == Kind::none);
}

TEST_CASE("requeue_policy: the storm rule", "[requeue_policy][storm]") {
    using Kind = ProgressMark::Kind;
    const ProgressMark none{Kind::none, 0};
    const ProgressMark made{Kind::made, 0};
    const ProgressMark at40{Kind::step, 40};
    const ProgressMark at41{Kind::step, 41};
    CHECK(
        requeue_storm(RunRecord{1, std::nullopt, none}, none, 1) ==
        std::optional<std::string>("runs 1 and 2 both ended before any trainer's first progress"));
    CHECK(requeue_storm(RunRecord{2, std::nullopt, at40}, at40, 2) ==
          std::optional<std::string>("runs 2 and 3 both ended at step 40"));
    CHECK_FALSE(requeue_storm(RunRecord{2, std::nullopt, at40}, at41, 2));
    CHECK_FALSE(requeue_storm(RunRecord{1, std::nullopt, none}, made, 1));
    CHECK_FALSE(requeue_storm(RunRecord{1, std::nullopt, made}, none, 1));
    // Only the run just before counts; an older tfslurm's record says nothing of progress.
    CHECK_FALSE(requeue_storm(RunRecord{1, std::nullopt, none}, none, 2));
    CHECK_FALSE(requeue_storm(RunRecord{1, std::nullopt, std::nullopt}, none, 1));
    CHECK_FALSE(requeue_storm(std::nullopt, none, 1));
    CHECK_FALSE(requeue_storm(RunRecord{1, std::nullopt, none}, none, 0));
}

TEST_CASE("requeue_policy: a record without a mark (a preemption, an older tfslurm) judges "
          "nothing",
          "[requeue_policy][storm]") {
    const RunRecord preempted{1, std::nullopt, std::nullopt};
    CHECK_FALSE(requeue_storm(preempted, ProgressMark{ProgressMark::Kind::none, 0}, 1));
}

namespace {

/// Grace 10 s, heartbeat timeout 10 s: rank 0 lingers 22 s after an abort.
RunSettings takeover_run() {
    RunSettings run;
    run.grace = Millis{10000};
    run.heartbeat_timeout = Millis{10000};
    return run;
}

} // namespace

TEST_CASE("requeue_policy: the takeover's waits follow rank 0's linger", "[requeue_policy]") {
    RunSettings run = takeover_run();
    CHECK(coordinator_linger(run) == Millis{22000});
    CHECK(takeover_silence_wait(run) == Millis{32000});
    CHECK(takeover_rank0_wait(run) == Millis{79000});
    // A node check after the failure holds rank 0 longer: every wait grows with it.
    run.on_failure_check = "true";
    run.on_failure_check_timeout = Millis{60000};
    CHECK(coordinator_linger(run) == Millis{87000});
    CHECK(takeover_silence_wait(run) == Millis{97000});
}

TEST_CASE("requeue_policy: a strict majority", "[requeue_policy]") {
    using Row = std::tuple<std::uint32_t, std::size_t, bool>;
    const auto [answering, nodes, majority] = GENERATE(table<std::uint32_t, std::size_t, bool>({
        Row{1, 1, true},
        Row{1, 2, false}, // a tie goes to the side without rank 0
        Row{2, 3, true},
        Row{2, 4, false},
        Row{3, 4, true},
        Row{1025, 2048, true},
        Row{1024, 2048, false},
    }));
    CHECK(strict_majority(answering, nodes) == majority);
}

TEST_CASE("requeue_policy: the turns of a takeover", "[requeue_policy]") {
    // Hosts by rank: n1 n1 n2 n3 n3 n4 n5.
    const std::vector<Member> ranks{{Role::ps, 0, "n1"},
                                    {Role::worker, 0, "n1"},
                                    {Role::worker, 1, "n2"},
                                    {Role::worker, 2, "n3"},
                                    {Role::worker, 3, "n3"},
                                    {Role::worker, 4, "n4"},
                                    {Role::worker, 5, "n5"}};
    using Row = std::tuple<std::uint32_t, CoordinatorLoss, std::uint32_t, Millis>;
    const auto [rank, loss, turn, wait] =
        GENERATE(table<std::uint32_t, CoordinatorLoss, std::uint32_t, Millis>({
            Row{2, CoordinatorLoss::closed, 1, Millis{0}},
            Row{3, CoordinatorLoss::closed, 2, Millis{5000}},
            Row{5, CoordinatorLoss::closed, 3, Millis{10000}},
            Row{2, CoordinatorLoss::silent, 1, Millis{32000}},
            Row{3, CoordinatorLoss::silent, 2, Millis{37000}},
            Row{5, CoordinatorLoss::silent, 3, Millis{42000}},
            // None: rank 0 itself, its node's other rank, a follower, the fourth node, a
            // protocol error, a rank outside the step.
            Row{0, CoordinatorLoss::closed, 0, Millis{0}},
            Row{1, CoordinatorLoss::closed, 0, Millis{0}},
            Row{4, CoordinatorLoss::closed, 0, Millis{0}},
            Row{6, CoordinatorLoss::closed, 0, Millis{0}},
            Row{2, CoordinatorLoss::other, 0, Millis{0}},
            Row{7, CoordinatorLoss::closed, 0, Millis{0}},
        }));
    INFO("rank " << rank);
    const auto got = takeover_turn(ranks, rank, loss, takeover_run());
    if (turn == 0) {
        CHECK_FALSE(got);
    } else {
        CHECK(got == std::optional<Takeover>(Takeover{turn, wait, {}}));
    }
}

TEST_CASE("requeue_policy: a takeover requeues only a job still running as this run found it",
          "[requeue_policy]") {
    const std::string running = "JobId=12 JobName=t x UserId=u(5) JobState=RUNNING Reason=None "
                                "Requeue=1 Restarts=1 BatchFlag=1";
    CHECK_FALSE(takeover_refusal(running, 12, 1));
    CHECK(takeover_refusal(running, 12, 0) ==
          std::optional<std::string>("job 12 was requeued already (Restarts=1)"));
    CHECK(takeover_refusal("JobId=12 JobState=PENDING Restarts=2", 12, 1) ==
          std::optional<std::string>("job 12 was requeued already (Restarts=2)"));
    CHECK(takeover_refusal("JobId=12 JobState=CANCELLED Restarts=0", 12, 0) ==
          std::optional<std::string>("job 12 is \"CANCELLED\""));
    CHECK(takeover_refusal("JobId=12 JobState=COMPLETING Restarts=0", 12, 0) ==
          std::optional<std::string>("job 12 is \"COMPLETING\""));
    CHECK(takeover_refusal("JobId=12 Restarts=0", 12, 0) ==
          std::optional<std::string>("scontrol's record of job 12 has no JobState"));
    CHECK(takeover_refusal("JobId=12 JobState=RUNNING", 12, 0) ==
          std::optional<std::string>("scontrol's record of job 12 has no Restarts"));
    CHECK(takeover_refusal("JobId=12 JobState=RUNNING Restarts=x\x1b", 12, 0) ==
          std::optional<std::string>(
              "scontrol's record of job 12 has an unreadable Restarts: \"x\\x1b\""));
}
