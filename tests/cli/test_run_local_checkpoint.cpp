// SPDX-License-Identifier: MIT
// `tfslurm run --local` before a job's end: the checkpoint signal and the requeue options.
#include "run_local_cli.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::test;

// --- checkpoint and requeue ----------------------------------------------------------------------

namespace {

/// SLURM_JOB_END_TIME `seconds` from now.
std::pair<std::string, std::string> job_ends_in(int seconds) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return {
        "SLURM_JOB_END_TIME",
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count() + seconds)};
}

} // namespace

TEST_CASE("run: the checkpoint signal reaches every trainer ahead of the job's end, status 10",
          "[run][checkpoint]") {
    // The contract: the handler sets a flag, the saving happens outside it.
    const std::string script = "saved=0; trap 'saved=1' USR1; "
                               "while [ $saved = 0 ]; do sleep 0.05; done; "
                               "echo \"rank $TFSLURM_RANK saved\"";
    // --requeue without a Slurm job is ignored: the step still says it was checkpointed.
    // The signal comes 1 to 2 s after the start (the end time is in whole seconds): the trap is
    // set by then.
    const Ran ran = run_to_end(
        local(2, 45, {"--checkpoint-before", "2", "--requeue", "--", "sh", "-c", script}),
        {job_ends_in(4)});
    INFO(ran.output);
    CHECK(ran.status == k_status_checkpointed);
    CHECK(count(ran.output, "rank 0 saved\n") == 1);
    CHECK(count(ran.output, "rank 1 saved\n") == 1);
    CHECK(count(ran.output,
                "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal "
                "1) before the job's time limit (--checkpoint-before 2)\n") == 1);
    CHECK(count(ran.output, "tfslurm: warning") == 1);
}

TEST_CASE("run: a trainer that starts after the checkpoint moment gets no signal",
          "[run][checkpoint]") {
    // USR1 at its start would kill it (its default action) and fail the step.
    const Ran ran = run_to_end(
        local(1, 48, {"--checkpoint-before", "50", "--", "sh", "-c", "sleep 0.5; echo done"}),
        {job_ends_in(30)});
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "done\n") == 1);
    // However slow the machine, the job ends in under 50 s (30 s after the test started).
    CHECK_THAT(ran.output,
               Catch::Matches("tfslurm: warning: rank 0 \\(worker:0\\): the job ends in "
                              "[1-4]?[0-9](\\.[0-9]+)? s, sooner than --checkpoint-before 50 "
                              "after the trainer started: no checkpoint signal\n"
                              "done\n"));
}

TEST_CASE("run: --checkpoint-signal picks the signal, and without an end time there is none",
          "[run][checkpoint]") {
    const std::string script = "trap 'echo \"rank $TFSLURM_RANK got USR2\"; exit 0' USR2; "
                               "while :; do sleep 0.05; done";
    const Ran ran = run_to_end(local(1,
                                     46,
                                     {"--checkpoint-before",
                                      "58",
                                      "--checkpoint-signal",
                                      "SIGUSR2",
                                      "--",
                                      "sh",
                                      "-c",
                                      script}),
                               {job_ends_in(60)});
    INFO(ran.output);
    CHECK(ran.status == k_status_checkpointed);
    CHECK(count(ran.output, "rank 0 got USR2\n") == 1);
    // No SLURM_JOB_END_TIME under --local: a warning, and the step runs as without the option.
    const Ran unknown = run_to_end(local(1, 47, {"--checkpoint-before", "10", "--", "true"}));
    INFO(unknown.output);
    CHECK(unknown.status == 0);
    CHECK(count(unknown.output,
                "tfslurm: warning: --checkpoint-before: cannot read the job's end time: not in a "
                "Slurm job and SLURM_JOB_END_TIME is not set; no checkpoint signal\n") == 1);
    CHECK(count(unknown.output, "tfslurm: warning") == 1);
}

TEST_CASE("run: the checkpoint and requeue options are checked", "[run][checkpoint]") {
    const auto error = [](std::vector<std::string> args,
                          const std::vector<std::pair<std::string, std::string>>& env = {}) {
        std::vector<std::string> argv{"run", "--local", "1"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--", "true"});
        const Ran ran = run_to_end(argv, env);
        INFO(ran.output);
        CHECK(ran.status == exit_status(Errc::invalid_argument));
        return ran.output;
    };
    CHECK(error({"--checkpoint-before", "0"}) ==
          "tfslurm: error: --checkpoint-before: expected a number of seconds from 0.001 to "
          "86400: \"0\"\ntfslurm: hint: e.g. 10 or 0.5\n");
    // Less than a millisecond would be a 0 ms timer: a heartbeat of 0 ms spun forever.
    CHECK(error({"--heartbeat", "0.0001"}) ==
          "tfslurm: error: --heartbeat: expected a number of seconds from 0.001 to 86400: "
          "\"0.0001\"\ntfslurm: hint: e.g. 10 or 0.5\n");
    CHECK(error({"--checkpoint-signal", "BOGUS"}) ==
          "tfslurm: error: --checkpoint-signal: expected a signal name or number: "
          "\"BOGUS\"\ntfslurm: hint: e.g. ABRT, USR1 or 10\n");
    CHECK(error({"--max-requeues", "-1"}) ==
          "tfslurm: error: --max-requeues: expected an integer from 0 to 1000: \"-1\"\n");
    CHECK(error({}, {{"TFSLURM_REQUEUE", "maybe"}}) ==
          "tfslurm: error: TFSLURM_REQUEUE: expected yes/no, true/false, on/off or 1/0: "
          "\"maybe\"\n");
    CHECK(error({"--checkpoint-before", "1"}, {{"SLURM_JOB_END_TIME", "soon"}}) ==
          "tfslurm: error: SLURM_JOB_END_TIME: expected an integer from 0 to "
          "9223372036854775807: \"soon\"\n");
}
