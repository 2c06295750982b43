// SPDX-License-Identifier: MIT
// The pure parts of `tfslurm run --local`: the task environments and the launchers' command
// lines. The runs of the real CLI are integration tests: tests/cli/test_run_local.cpp.
#include <tfslurm/env.hpp>
#include <tfslurm/local_run.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace tfslurm;

TEST_CASE("run: local task environments look like one Slurm node", "[run]") {
    const Environment base{{"PATH", "/bin"},
                           {"SLURM_JOB_ID", "7"},
                           {"SLURMD_NODENAME", "n9"},
                           {"SLURM_STEP_RESV_PORTS", "1-2"},
                           {"TFSLURM_HOST_PATTERN", "{host}-ib0"}};
    const Environment env = local_task_environment(base, 3, 2, 4242);
    CHECK(env.get("PATH") == "/bin");
    CHECK(env.get("SLURM_JOB_ID") == "4242");
    CHECK(env.get("SLURM_STEP_ID") == "0");
    CHECK(env.get("SLURM_STEP_NODELIST") == "localhost");
    CHECK(env.get("SLURM_STEP_TASKS_PER_NODE") == "3");
    CHECK(env.get("SLURM_STEP_NUM_TASKS") == "3");
    CHECK(env.get("SLURM_PROCID") == "2");
    CHECK(env.get("SLURM_LOCALID") == "2");
    CHECK(env.get("SLURM_NODEID") == "0");
    CHECK(env.get("SLURM_GTIDS") == "0,1,2");
    CHECK(env.get("SLURMD_NODENAME") == "localhost");
    CHECK(env.get("TFSLURM_ADDRESS") == "ip");
    CHECK_FALSE(env.contains("SLURM_STEP_RESV_PORTS"));
    CHECK_FALSE(env.contains("TFSLURM_HOST_PATTERN"));
    // An explicit address mode is kept.
    CHECK(local_task_environment(Environment{{"TFSLURM_ADDRESS", "name"}}, 1, 0, 1)
              .get("TFSLURM_ADDRESS") == "name");
}

TEST_CASE("run: local launchers get the parent's command line minus --local", "[run]") {
    CHECK(local_launcher_argv(
              {"tfslurm", "-v", "run", "--local", "4", "--ps=1", "--", "cmd", "--local", "2"},
              "/usr/bin/tfslurm") ==
          std::vector<std::string>{
              "/usr/bin/tfslurm", "-v", "run", "--ps=1", "--", "cmd", "--local", "2"});
    CHECK(local_launcher_argv({"tfslurm", "run", "--local=2", "--job-id", "5", "--job-id=6", "x"},
                              "/t") == std::vector<std::string>{"/t", "run", "x"});
}
