// SPDX-License-Identifier: MIT
// `tfslurm run --local` with --stall-timeout: a stuck trainer named, and the stall options.
#include "run_local_cli.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

using namespace tfslurm;
using namespace tfslurm::test;

TEST_CASE("run: a stuck trainer is named and the step aborts with status 9", "[run][stall]") {
    // Rank 0 (a ps) shows progress (CPU time and its progress file) and says what it was given;
    // rank 1 sleeps without a sound: stuck after 1 s, its sleep ended by the stall signal.
    const std::string script = "if [ $TFSLURM_RANK = 1 ]; then exec sleep 1000; fi; "
                               "echo \"faulthandler=$PYTHONFAULTHANDLER file=$(test -f "
                               "\"$TFSLURM_PROGRESS_FILE\" && echo yes)\"; "
                               "while :; do touch \"$TFSLURM_PROGRESS_FILE\"; sleep 0.1; done";
    const Ran ran = run_to_end(local(
        2,
        44,
        {"--ps", "1", "--stall-timeout", "1", "--stall-grace", "0.5", "--", "sh", "-c", script}));
    INFO(ran.output);
    CHECK(ran.status == k_status_stalled);
    CHECK(count(ran.output, "faulthandler=1 file=yes\n") == 1);
    CHECK(count(ran.output,
                "rank 1 (worker:0): no progress for 1 s: the trainer is stuck; asking for "
                "its stack traces (signal 6 (Aborted)), aborting the step 0.5 s later") == 1);
    CHECK(count(ran.output,
                "tfslurm: error: aborting: rank 1 (worker:0) on localhost is stuck: no progress "
                "for 1 s\n") == 1);
    CHECK(count(ran.output, "tfslurm: error") == 1);
}

TEST_CASE("run: an idle ps is not judged by --stall-timeout unless --stall-roles names it",
          "[run][stall]") {
    // Rank 0, a ps, sits idle (no CPU time, no progress file) like one between requests; rank
    // 1, a worker, touches its progress file every 0.1 s: for 4 s, or for ever.
    const auto script = [](const std::string& worker_loop) {
        return "if [ $TFSLURM_RANK = 0 ]; then exec sleep 1000; fi; " + worker_loop;
    };
    SECTION("by default the ps is left alone and the worker's end ends the step") {
        const Ran ran = run_to_end(
            local(2,
                  80,
                  {"--ps",
                   "1",
                   "--stall-timeout",
                   "2",
                   "--",
                   "sh",
                   "-c",
                   script("i=0; while [ $i -lt 40 ]; do touch \"$TFSLURM_PROGRESS_FILE\"; "
                          "sleep 0.1; i=$((i+1)); done")}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "stuck") == 0);
        CHECK(count(ran.output, "tfslurm: error") == 0);
    }
    SECTION("--stall-roles all judges the ps too") {
        const Ran ran = run_to_end(
            local(2,
                  81,
                  {"--ps",
                   "1",
                   "--stall-timeout",
                   "2",
                   "--stall-grace",
                   "0.5",
                   "--stall-roles",
                   "all",
                   "--",
                   "sh",
                   "-c",
                   script("while :; do touch \"$TFSLURM_PROGRESS_FILE\"; sleep 0.1; done")}));
        INFO(ran.output);
        CHECK(ran.status == k_status_stalled);
        CHECK(count(ran.output,
                    "tfslurm: error: aborting: rank 0 (ps:0) on localhost is stuck: no progress "
                    "for 2 s\n") == 1);
    }
}

TEST_CASE("run: --stall-roles takes roles or all", "[run][stall]") {
    const Ran ran =
        run_to_end({"run", "--local", "1", "--stall-roles", "worker,boss", "--", "true"});
    INFO(ran.output);
    CHECK(ran.status == exit_status(Errc::invalid_argument));
    CHECK(ran.output == "tfslurm: error: --stall-roles: expected a role: ps, worker, chief or "
                        "evaluator: \"boss\"\n");
}

TEST_CASE("run: --stall-progress takes cpu, file, output or all", "[run][stall]") {
    const std::string value = GENERATE(as<std::string>{}, "cpu,disk", "output,", "all,cpu");
    const Ran ran = run_to_end({"run", "--local", "1", "--stall-progress", value, "--", "true"});
    INFO(ran.output);
    CHECK(ran.status == exit_status(Errc::invalid_argument));
    CHECK(ran.output == "tfslurm: error: --stall-progress: expected a comma list of cpu, file "
                        "and output, or all: \"" +
                            value + "\"\ntfslurm: hint: e.g. cpu,file,output\n");
}

TEST_CASE("run: --stall-signal takes a signal name or number", "[run][stall]") {
    const Ran ran = run_to_end({"run", "--local", "1", "--stall-signal", "BOGUS", "--", "true"});
    INFO(ran.output);
    CHECK(ran.status == exit_status(Errc::invalid_argument));
    CHECK(ran.output == "tfslurm: error: --stall-signal: expected a signal name or number: "
                        "\"BOGUS\"\ntfslurm: hint: e.g. ABRT, USR1 or 10\n");
}
