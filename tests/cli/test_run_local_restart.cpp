// SPDX-License-Identifier: MIT
// `tfslurm run --local` with --max-restarts: a failed worker started again.
#include "run_local_cli.hpp"

#include <tfslurm/common/error.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::test;

TEST_CASE("run: --local restarts a failed worker with the same environment", "[run][restart]") {
    // Rank 1 (worker:0) fails its first run; its second run sees the restart count.
    TempDir scratch;
    const std::string script =
        "echo \"rank $TFSLURM_RANK run $TFSLURM_RESTART_COUNT \"; "
        "if [ $TFSLURM_RANK = 1 ] && [ ! -e " +
        scratch.path + "/ran ]; then touch " + scratch.path +
        "/ran; exit 3; fi; if [ $TFSLURM_ROLE = ps ]; then exec sleep 1000; fi";
    SECTION("within the budget: the step succeeds") {
        const Ran ran = run_to_end(
            local(3, 70, {"--ps", "1", "--max-restarts", "1", "--", "sh", "-c", script}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output,
                    "tfslurm: warning: restarting rank 1 (worker:0) on localhost (restart 1 of "
                    "1): exited with status 3\n") == 1);
        CHECK(count(ran.output, "rank 1 run 0 ") == 1);
        CHECK(count(ran.output, "rank 1 run 1 ") == 1);
        CHECK(count(ran.output, "rank 0 run 0 ") == 1); // the ps kept running
        CHECK(count(ran.output, "tfslurm: error") == 0);
    }
    SECTION("--restart-delay: the restart waits that long") {
        const Ran ran = run_to_end(local(3,
                                         74,
                                         {"--ps",
                                          "1",
                                          "--max-restarts",
                                          "1",
                                          "--restart-delay",
                                          "0.2",
                                          "--",
                                          "sh",
                                          "-c",
                                          script}),
                                   {{"TFSLURM_LOG_LEVEL", "debug"}});
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output,
                    "tfslurm: debug: rank 1 (worker:0): restarting the trainer (restart 1 of 1) "
                    "in 0.2 s\n") == 1);
        CHECK(count(ran.output, "rank 1 run 1 ") == 1);
    }
    SECTION("restarts off (the default): the step aborts") {
        const Ran ran = run_to_end(local(3, 71, {"--ps", "1", "--", "sh", "-c", script}));
        INFO(ran.output);
        CHECK(ran.status == 3);
        CHECK(count(ran.output,
                    "tfslurm: error: aborting: rank 1 (worker:0) on localhost exited with status "
                    "3\n") == 1);
        CHECK(count(ran.output, "restarting") == 0);
    }
}

TEST_CASE("run: restart settings are checked", "[run][restart]") {
    using Row = std::tuple<std::vector<std::string>, std::string>;
    const auto [args, message] = GENERATE(table<std::vector<std::string>, std::string>({
        Row{{"--max-restarts", "-1"},
            "tfslurm: error: --max-restarts: expected an integer from 0 to 10000: \"-1\"\n"},
        Row{{"--max-total-restarts", "x"},
            "tfslurm: error: --max-total-restarts: expected an integer from 0 to 10000: \"x\"\n"},
        Row{{"--restart-delay", "0"},
            "tfslurm: error: --restart-delay: expected a number of seconds from 0.001 to 86400: "
            "\"0\"\ntfslurm: hint: e.g. 10 or 0.5\n"},
        Row{{"--restart-roles", "worker,ps"},
            "tfslurm: error: --restart-roles: a parameter server cannot be restarted: "
            "\"worker,ps\"\ntfslurm: hint: its state (the model's variables) is gone when it "
            "fails: the step aborts\n"},
    }));
    std::vector<std::string> argv{"run", "--local", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--", "true"});
    const Ran ran = run_to_end(argv);
    INFO(ran.output);
    CHECK(ran.status == exit_status(Errc::invalid_argument));
    CHECK(ran.output == message);
}
