// SPDX-License-Identifier: MIT
// `tfslurm env` in a step that only the controller can place (cli/controller_layout.cpp): a real
// 26.05 task environment of a block step in topology order, its slurm.conf and topology.yaml,
// and a stand-in `sattach` in PATH that prints the layout 26.05's sattach printed for that step
// (or fails as sattach does). Exact stdout, stderr and exit status for each answer.
#include "process.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"
#include "topology_conf.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

using tfslurm::test::Result;
using tfslurm::test::TempDir;

namespace {

/// Task 2 of `srun -l -p topo -N3 -n6 env` on 26.05 (it ran on n1, local 0), its SLURM*
/// variables, with SLURM_CONF naming `conf` and PATH `path`.
std::vector<std::string> topo_task2_env(const std::string& conf, const std::string& path) {
    std::ifstream in{std::string{tfslurm::test::paths::test_data_dir} +
                     "/slurm-env/srun-topo-N3-n6-all-tasks-26.05.txt"};
    std::vector<std::string> vars{"PATH=" + path, "SLURM_CONF=" + conf};
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("2: SLURM", 0) == 0 && line.rfind("2: SLURM_CONF=", 0) != 0) {
            vars.push_back(line.substr(3));
        }
    }
    return vars;
}

std::string layout_data() {
    return tfslurm::test::file_text(std::string{tfslurm::test::paths::test_data_dir} +
                                    "/slurm-env/sattach-layout-topo-N3-n6-26.05.txt");
}

Result layout_cli(const std::vector<std::string>& env) {
    std::vector<std::string> args{tfslurm::test::paths::cli, "env", "--ps", "1", "--only", "tf"};
    Result result = tfslurm::test::run({args, env, ""});
    if (result.timed_out) {
        throw std::runtime_error("timeout waiting for " + args.front());
    }
    return result;
}

} // namespace

TEST_CASE("cli: env places a topology-ordered block step by the controller's layout", "[cli]") {
    const TempDir dir("topo");
    const std::string conf = tfslurm::test::write_topology_conf(dir);
    const std::string bin = dir.path + "/bin";
    const std::string layout = dir.write("layout.txt", layout_data());
    const std::string refusal =
        "tfslurm: error: placement: Slurm lays a block distribution over several nodes out in "
        "the order of the network topology (topology \"tree\" (tree) of partition topo in " +
        dir.path +
        "/topology.yaml), which no task's environment shows: \"block\"\n"
        "tfslurm: hint: the controller's layout could not be read (sattach --layout 6.0: ";
    const std::string advice = "); run the step with srun -m cyclic, or -m arbitrary with "
                               "SLURM_HOSTFILE, or have the site set "
                               "SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK\n";
    REQUIRE(::mkdir(bin.c_str(), 0755) == 0);
    const auto sattach = [&](const std::string& body) {
        static_cast<void>(dir.write("bin/sattach", "#!/bin/sh\n" + body, 0755));
    };

    SECTION("sattach never sees TFSLURM_SECRET") {
        // The task's environment holds the secret (exported before srun): sattach answers only
        // when it was kept from it.
        sattach("[ -z \"${TFSLURM_SECRET+set}\" ] || exit 9\nexec /bin/cat " + layout + "\n");
        auto env = topo_task2_env(conf, bin);
        env.push_back("TFSLURM_SECRET=" + std::string(64, '7'));
        const Result r = layout_cli(env);
        CHECK(r.err.empty());
        CHECK(r.status == 0);
    }
    SECTION("the answer places every rank where Slurm ran it") {
        // Only `sattach --layout 6.0` answers: the step id comes from the task's variables.
        sattach("[ \"$*\" = \"--layout 6.0\" ] || exit 9\nexec /bin/cat " + layout + "\n");
        const Result r = layout_cli(topo_task2_env(conf, bin));
        CHECK(r.err.empty());
        CHECK(r.status == 0);
        CHECK(r.out == "export TF_CONFIG='{\"cluster\":{\"ps\":[\"n3:12012\"],\"worker\":"
                       "[\"n3:12013\",\"n1:12012\",\"n1:12013\",\"n2:12012\",\"n2:12013\"]},"
                       "\"task\":{\"type\":\"worker\",\"index\":1}}'\n"
                       "export TFSLURM_RANK='2'\n"
                       "export TFSLURM_ROLE='worker'\n"
                       "export TFSLURM_CONTROL='n3:12014'\n");
    }
    SECTION("no sattach in PATH") {
        const Result r = layout_cli(topo_task2_env(conf, bin));
        CHECK(r.status == 5);
        CHECK(r.out.empty());
        CHECK(r.err == refusal + "sattach not found in PATH" + advice);
    }
    SECTION("sattach fails: its first line of stderr is quoted") {
        sattach("echo 'sattach: error: Could not get job step info: Invalid job id specified' "
                ">&2\nexit 1\n");
        const Result r = layout_cli(topo_task2_env(conf, bin));
        CHECK(r.status == 5);
        CHECK(r.err == refusal +
                           "sattach exited with status 1: \"sattach: error: Could not get job "
                           "step info: Invalid job id specified\"" +
                           advice);
    }
    SECTION("an answer that contradicts the task's own identity is refused") {
        // Rank 2 ran on n1 (SLURM_NODEID=0, local 0); this answer puts it on n2.
        sattach("printf '\\tNode 0 (n1), 2 task(s): 0 1 \\n\\tNode 1 (n2), 2 task(s): 2 3 \\n"
                "\\tNode 2 (n3), 2 task(s): 4 5 \\n'\n");
        const Result r = layout_cli(topo_task2_env(conf, bin));
        CHECK(r.status == 5);
        CHECK(r.err.rfind("tfslurm: error: SLURM_NODEID: disagrees with the computed placement: "
                          "block in topology order (the controller's layout) distribution of "
                          "SLURM_STEP_TASKS_PER_NODE=2(x3) over SLURM_STEP_NODELIST=n[1-3] puts "
                          "rank 2 on node 1 (n2) as local task 0: \"0\"\n",
                          0) == 0);
    }
    SECTION("a malformed answer names its line") {
        sattach("echo 'Node 0 (n1), 2 task(s): 2 x'\n");
        const Result r = layout_cli(topo_task2_env(conf, bin));
        CHECK(r.status == 5);
        CHECK(r.err == "tfslurm: error: sattach --layout: expected \"Node <index> (<name>), "
                       "<count> task(s): <ranks>\": \"Node 0 (n1), 2 task(s): 2 x\"\n");
    }
}
