// SPDX-License-Identifier: MIT
// `tfslurm env --tf-config-file` for one task of an 80,000-task step (a synthetic task
// environment: 10,000 nodes, 8 tasks each), and the sitecustomize shim under Debian's real
// Python: TF_CONFIG as Python sees it equals what the variable would have been.
#include "process.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

using tfslurm::test::file_text;
using tfslurm::test::path_exists;
using tfslurm::test::Result;
using tfslurm::test::TempDir;

namespace {

const std::string k_python = "/usr/bin/python3";

Result run(std::vector<std::string> argv, const std::vector<std::string>& env) {
    Result result = tfslurm::test::run({std::move(argv), env});
    if (result.timed_out) {
        throw std::runtime_error("timeout");
    }
    return result;
}

/// Task 12345 (node 1543, local 1) of an 80,000-task step on n[00001-10000], 8 tasks a node.
std::vector<std::string> big_step(const std::string& tmpdir) {
    auto env = tfslurm::test::environment_without({"SLURM_", "TFSLURM_", "TMPDIR", "PYTHONPATH"});
    const std::vector<std::string> slurm{
        "SLURM_JOB_ID=4242",
        "SLURM_STEP_ID=3",
        "SLURM_JOB_NODELIST=n[00001-10000]",
        "SLURM_STEP_NODELIST=n[00001-10000]",
        "SLURM_STEP_NUM_NODES=10000",
        "SLURM_STEP_NUM_TASKS=80000",
        "SLURM_NTASKS=80000",
        "SLURM_STEP_TASKS_PER_NODE=8(x10000)",
        "SLURM_TASKS_PER_NODE=8(x10000)",
        "SLURM_PROCID=12345",
        "SLURM_NODEID=1543",
        "SLURM_LOCALID=1",
        "SLURM_GTIDS=12344,12345,12346,12347,12348,12349,12350,12351",
        "SLURMD_NODENAME=n01544",
        "TMPDIR=" + tmpdir,
    };
    env.insert(env.end(), slurm.begin(), slurm.end());
    return env;
}

/// TF_CONFIG of task 12345 as the library computes it: what the variable would have been.
std::string expected_tf_config() {
    tfslurm::StepOverrides overrides;
    overrides.nodelist = "n[00001-10000]";
    overrides.tasks_per_node = "8";
    overrides.job_id = 4242;
    overrides.step_id = 3;
    overrides.rank = 12345;
    const auto step = tfslurm::preview_step(overrides);
    const auto plan = tfslurm::make_plan(step, tfslurm::resolve_allocation(step), {});
    return tfslurm::tf_config_json(plan, 12345);
}

} // namespace

TEST_CASE("cli: env of an 80,000-task step explains --tf-config-file", "[cli]") {
    const TempDir tmp{"tfconfig-cli"};
    const auto size = expected_tf_config().size() + std::string{"TF_CONFIG=\n"}.size();
    // TF_CONFIG alone (no tf4slurm dictionary asked for): its own way out.
    const auto r =
        run({tfslurm::test::paths::cli, "env", "--only", "tf,torch,gpus"}, big_step(tmp.path));
    CHECK(r.status == 6);
    CHECK(r.out.empty());
    CHECK(r.err == "tfslurm: error: TF_CONFIG: " + std::to_string(size) +
                       " bytes for 80000 tasks do not fit in one environment variable (Linux "
                       "allows 131072 bytes per NAME=value string)\n"
                       "tfslurm: hint: write it to a file on the node that Python trainers load "
                       "into TF_CONFIG: --tf-config-file auto\n");
    // Both by default: one error for the two, with one way out.
    const auto both = run({tfslurm::test::paths::cli, "env"}, big_step(tmp.path));
    CHECK(both.status == 6);
    CHECK_THAT(both.err, Catch::StartsWith("tfslurm: error: TF_CONFIG, TFSLURM_SERVERS: "));
    CHECK_THAT(both.err, Catch::EndsWith("--tf-config-file auto --only tf,torch,gpus\n"));
    const auto servers =
        run({tfslurm::test::paths::cli, "env", "--tf-config-file", "auto"}, big_step(tmp.path));
    CHECK(servers.status == 6);
    CHECK_THAT(servers.err, Catch::StartsWith("tfslurm: error: TFSLURM_SERVERS: "));
    CHECK_THAT(servers.err,
               Catch::EndsWith("tfslurm: hint: leave the tf4slurm dictionary out: --only "
                               "tf,torch,gpus\n"));
    CHECK_FALSE(path_exists(tmp.path + "/tfslurm-4242.3.12345.tf_config.json"));
}

TEST_CASE("cli: env --tf-config-file writes the file and every format names it", "[cli]") {
    const TempDir tmp{"tfconfig-cli"};
    const std::string file = tmp.path + "/tfslurm-4242.3.12345.tf_config.json";
    const std::string shim = file + ".site";
    const std::vector<std::string> base{
        tfslurm::test::paths::cli, "env", "--only", "tf,torch", "--tf-config-file", "auto"};
    const std::string torch = "MASTER_ADDR=n00001\n";
    SECTION("env") {
        auto args = base;
        args.insert(args.end(), {"--format", "env"});
        const auto r = run(args, big_step(tmp.path));
        REQUIRE(r.status == 0);
        CHECK(r.err.empty());
        CHECK_THAT(r.out,
                   Catch::StartsWith("TFSLURM_TF_CONFIG_FILE=" + file + "\nPYTHONPATH=" + shim +
                                     "\nMASTER_ADDR=n00001\nMASTER_PORT="));
    }
    SECTION("export") {
        const auto r = run(base, big_step(tmp.path));
        REQUIRE(r.status == 0);
        CHECK_THAT(r.out,
                   Catch::StartsWith("export TFSLURM_TF_CONFIG_FILE='" + file +
                                     "'\nexport PYTHONPATH='" + shim + "'\n"));
    }
    SECTION("task-prolog") {
        auto args = base;
        args.insert(args.end(), {"--format", "task-prolog"});
        const auto r = run(args, big_step(tmp.path));
        REQUIRE(r.status == 0);
        CHECK_THAT(r.out,
                   Catch::StartsWith("export TFSLURM_TF_CONFIG_FILE=" + file +
                                     "\nexport PYTHONPATH=" + shim + "\n"));
    }
    SECTION("json, and an existing PYTHONPATH is kept after the shim") {
        auto args = base;
        args.insert(args.end(), {"--format", "json"});
        auto env = big_step(tmp.path);
        env.emplace_back("PYTHONPATH=/opt/site");
        const auto r = run(args, env);
        REQUIRE(r.status == 0);
        const auto vars = nlohmann::json::parse(r.out);
        CHECK(vars["TFSLURM_TF_CONFIG_FILE"] == file);
        CHECK(vars["PYTHONPATH"] == shim + ":/opt/site");
        CHECK_FALSE(vars.contains("TF_CONFIG"));
        CHECK(vars["WORLD_SIZE"] == "80000");
    }
    CHECK(file_text(file) == expected_tf_config());
    CHECK(path_exists(shim + "/sitecustomize.py"));
}

TEST_CASE("cli: the sitecustomize shim gives Python the TF_CONFIG of the variable", "[cli]") {
    const TempDir tmp{"tfconfig-py"};
    const std::string file = tmp.path + "/tfslurm-4242.3.12345.tf_config.json";
    const auto r =
        run({tfslurm::test::paths::cli, "env", "--only", "tf", "--tf-config-file", "auto"},
            big_step(tmp.path));
    REQUIRE(r.status == 0);
    // The expectation in a file of its own: 1.4 MB fit in no argument either.
    const std::string expected = tmp.write("expected.json", expected_tf_config());
    // Another sitecustomize later on the path: the shim runs it after loading TF_CONFIG.
    const TempDir other{"tfconfig-site"};
    static_cast<void>(other.write("sitecustomize.py",
                                  "import os\nprint('chained:', len(os.environ['TF_CONFIG']))\n"));
    const std::string check = "import json, os, sys\n"
                              "seen = json.loads(os.environ['TF_CONFIG'])\n"
                              "want = json.load(open(sys.argv[1]))\n"
                              "print('equal' if seen == want else 'different', seen['task'])\n";
    auto env = tfslurm::test::environment_without({"SLURM_", "TFSLURM_", "TF_CONFIG", "PYTHON"});
    env.push_back("TFSLURM_TF_CONFIG_FILE=" + file);
    const std::string shim = "PYTHONPATH=" + file + ".site";
    const std::string size = std::to_string(expected_tf_config().size());
    SECTION("alone") {
        auto with = env;
        with.push_back(shim);
        const auto py = run({k_python, "-c", check, expected}, with);
        CHECK(py.err.empty());
        CHECK(py.out == "equal {'type': 'worker', 'index': 12345}\n");
        CHECK(py.status == 0);
    }
    SECTION("chained to the next sitecustomize on the path") {
        auto with = env;
        with.push_back(shim + ":" + other.path);
        const auto py = run({k_python, "-c", check, expected}, with);
        CHECK(py.err.empty());
        CHECK(py.out == "chained: " + size + "\nequal {'type': 'worker', 'index': 12345}\n");
        CHECK(py.status == 0);
    }
    SECTION("a missing file stops Python with a clear message") {
        REQUIRE(::unlink(file.c_str()) == 0);
        auto with = env;
        with.push_back(shim);
        const auto py = run({k_python, "-c", "print('trainer ran')"}, with);
        CHECK(py.status == 1);
        CHECK(py.out.empty());
        CHECK(py.err == "tfslurm: TFSLURM_TF_CONFIG_FILE: cannot read TF_CONFIG from '" + file +
                            "': No such file or directory (the file is written by tfslurm on the "
                            "task's node and removed when 'tfslurm run' ends)\n");
    }
}

TEST_CASE("cli: env --iface --tf-config-file: the file holds the interface's addresses and the "
          "socket variables follow",
          "[cli]") {
    const TempDir tmp{"tfconfig-cli"};
    const std::string file = tmp.path + "/tf.1.json";
    const auto r = run({tfslurm::test::paths::cli,
                        "env",
                        "--nodelist",
                        "n1",
                        "--tasks-per-node",
                        "2",
                        "--rank",
                        "1",
                        "--port-base",
                        "2222",
                        "--iface",
                        "lo",
                        "--only",
                        "tf",
                        "--format",
                        "env",
                        "--tf-config-file",
                        tmp.path + "/tf.{rank}.json"},
                       tfslurm::test::environment_without(
                           {"SLURM_", "TFSLURM_", "PYTHONPATH", "GLOO_", "NCCL_", "TP_"}));
    REQUIRE(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out == "TFSLURM_TF_CONFIG_FILE=" + file + "\nPYTHONPATH=" + file +
                       ".site\nTFSLURM_RANK=1\nTFSLURM_ROLE=worker\nTFSLURM_CONTROL=n1:2224\n"
                       "GLOO_SOCKET_IFNAME=lo\nNCCL_SOCKET_IFNAME=lo\nTP_SOCKET_IFNAME=lo\n");
    CHECK(file_text(file) == R"({"cluster":{"worker":["127.0.0.1:2222","127.0.0.1:2223"]},)"
                             R"("task":{"type":"worker","index":1}})");
}
