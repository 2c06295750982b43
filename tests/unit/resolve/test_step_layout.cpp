// SPDX-License-Identifier: MIT
// Unit tests of the controller's layout (include/tfslurm/resolve/step_layout.hpp): which steps need
// it, the command that asks for it, parse_step_layout() on real sattach output of Slurm 26.05 and
// on every malformed or contradicting answer, and resolve_allocation() following it.
#include "fixtures.hpp"
#include "topology_conf.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/step_layout.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

using tfslurm::Errc;
using tfslurm::test::layout_of;
using tfslurm::test::require_error;

namespace {

/// The slurm.conf and topology.yaml of the 26.05 test cluster (partition topo: n3 | n1 n2).
tfslurm::FileReader topo_cluster_files() {
    return tfslurm::test::reader_of(tfslurm::test::topology_conf_files());
}

/// Rank `rank` of `srun -l -p topo -N3 -n6` on the 26.05 test cluster, read as a task would.
tfslurm::StepInfo topo_task(int rank) {
    const auto env =
        tfslurm::test::load_env_dump("slurm-env/srun-topo-N3-n6-all-tasks-26.05.txt", rank);
    return tfslurm::read_step(env, topo_cluster_files());
}

std::string data_text(const std::string& name) {
    std::ifstream in(tfslurm::test::data_path(name));
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

const std::string k_topology = "topology \"tree\" (tree) of partition topo in "
                               "/run/tfslurm-tc/etc/topology.yaml";

} // namespace

TEST_CASE("step_layout: only a task's block step in topology order needs the controller",
          "[step_layout]") {
    auto step = topo_task(0);
    CHECK(step.topology_order == k_topology);
    CHECK(tfslurm::needs_step_layout(step));
    CHECK(tfslurm::step_layout_command(step) ==
          std::vector<std::string>{"sattach", "--layout", "6.0"});

    auto cyclic = step;
    cyclic.distribution.kind = tfslurm::Distribution::cyclic;
    CHECK_FALSE(tfslurm::needs_step_layout(cyclic));
    auto flat = step;
    flat.topology_order.clear();
    CHECK_FALSE(tfslurm::needs_step_layout(flat));
    auto one_node = step;
    one_node.hosts = {"n1"};
    CHECK_FALSE(tfslurm::needs_step_layout(one_node));
    auto preview = step;
    preview.scope = tfslurm::Scope::preview;
    CHECK_FALSE(tfslurm::needs_step_layout(preview));

    auto no_step = step;
    no_step.step_id.reset();
    require_error([&] { (void)tfslurm::step_layout_command(no_step); },
                  Errc::missing_env,
                  "SLURM_STEP_ID: not set");
}

TEST_CASE("step_layout: real sattach output of Slurm 26.05 gives each rank's host",
          "[step_layout]") {
    const auto step = topo_task(3);
    CHECK(tfslurm::parse_step_layout(data_text("slurm-env/sattach-layout-topo-N3-n6-26.05.txt"),
                                     step) ==
          std::vector<std::string>{"n3", "n3", "n1", "n1", "n2", "n2"});

    // `srun -p topo -N3 -n5`: 2,2,1 in name order, rank 0 alone on n3.
    auto uneven = step;
    uneven.tasks_per_node = {2, 2, 1};
    uneven.ntasks = 5;
    CHECK(tfslurm::parse_step_layout(data_text("slurm-env/sattach-layout-topo-N3-n5-26.05.txt"),
                                     uneven) ==
          std::vector<std::string>{"n3", "n1", "n1", "n2", "n2"});
}

TEST_CASE("step_layout: every task of the real 26.05 step is placed where Slurm ran it",
          "[step_layout]") {
    // Ranks 0,1 ran on n3, 2,3 on n1 and 4,5 on n2 (SLURMD_NODENAME of each task): with the
    // controller's layout every task gets the same, true placement, and each one's identity
    // (SLURM_NODEID, SLURM_LOCALID, SLURMD_NODENAME, SLURM_GTIDS) still checks it.
    const auto layout = data_text("slurm-env/sattach-layout-topo-N3-n6-26.05.txt");
    for (int rank = 0; rank < 6; ++rank) {
        INFO(rank);
        auto step = topo_task(rank);
        step.layout_rank_hosts = tfslurm::parse_step_layout(layout, step);
        const auto allocation = tfslurm::resolve_allocation(step);
        CHECK(layout_of(allocation) == "n1:2,3 n2:4,5 n3:0,1");
    }
}

TEST_CASE("step_layout: a layout that contradicts the task's own identity is refused",
          "[step_layout]") {
    // Rank 0 ran on n3 (SLURM_NODEID=2): a layout putting it on n1 is not believed.
    auto step = topo_task(0);
    step.layout_rank_hosts = {"n1", "n1", "n3", "n3", "n2", "n2"};
    require_error([&] { (void)tfslurm::resolve_allocation(step); },
                  Errc::inconsistent_allocation,
                  "SLURM_NODEID: disagrees with the computed placement: block in topology order "
                  "(the controller's layout) distribution of SLURM_STEP_TASKS_PER_NODE=2(x3) over "
                  "SLURM_STEP_NODELIST=n[1-3] puts rank 0 on node 0 (n1) as local task 0: \"2\"");
}

TEST_CASE("step_layout: without the controller's layout the step is refused, saying why",
          "[step_layout]") {
    auto step = topo_task(2);
    const std::string refusal =
        "placement: Slurm lays a block distribution over several nodes out in the order of the "
        "network topology (" +
        k_topology + "), which no task's environment shows: \"block\"";
    try {
        (void)tfslurm::resolve_allocation(step);
        FAIL("no exception");
    } catch (const tfslurm::Error& e) {
        CHECK(e.code() == Errc::inconsistent_allocation);
        CHECK(std::string{e.what()} == refusal);
        CHECK(e.hint() == "run the step with srun -m cyclic, or -m arbitrary with SLURM_HOSTFILE, "
                          "or have the site set SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK");
    }
    step.layout_error = "sattach --layout 6.0: sattach not found in PATH";
    try {
        (void)tfslurm::resolve_allocation(step);
        FAIL("no exception");
    } catch (const tfslurm::Error& e) {
        CHECK(std::string{e.what()} == refusal);
        CHECK(e.hint() == "the controller's layout could not be read (sattach --layout 6.0: "
                          "sattach not found in PATH); run the step with srun -m cyclic, or -m "
                          "arbitrary with SLURM_HOSTFILE, or have the site set "
                          "SelectTypeParameters=CR_NO_DIST_TOPO_BLOCK");
    }
}

TEST_CASE("step_layout: malformed or contradicting answers name the line", "[step_layout]") {
    const auto step = topo_task(0);
    const std::string head = "Job step layout:\n\t6 tasks, 3 nodes (n[1-3])\n\n";
    const std::string n2 = "\tNode 1 (n2), 2 task(s): 4 5 \n";
    const std::string n3 = "\tNode 2 (n3), 2 task(s): 0 1 \n";
    using Row = std::tuple<std::string, std::string>;
    const auto row = GENERATE_REF(table<std::string, std::string>({
        Row{head + "\tNode 0 (n1), 2 task(s): 2 x\n" + n2 + n3,
            "sattach --layout: expected \"Node <index> (<name>), <count> task(s): <ranks>\": "
            "\"Node 0 (n1), 2 task(s): 2 x\""},
        Row{head + "\tNode 0 (n1), 3 task(s): 2 3\n" + n2 + n3,
            "sattach --layout: expected \"Node <index> (<name>), <count> task(s): <ranks>\": "
            "\"Node 0 (n1), 3 task(s): 2 3\""},
        Row{head + "\tNode 0 n1, 2 task(s): 2 3\n" + n2 + n3,
            "sattach --layout: expected \"Node <index> (<name>), <count> task(s): <ranks>\": "
            "\"Node 0 n1, 2 task(s): 2 3\""},
        Row{head + "\tNode 0 (n9), 2 task(s): 2 3\n" + n2 + n3,
            "sattach --layout: n9 is not a node of the step (SLURM_STEP_NODELIST=n[1-3]): "
            "\"Node 0 (n9), 2 task(s): 2 3\""},
        Row{head + "\tNode 0 (n2), 2 task(s): 2 3\n" + n2 + n3,
            "sattach --layout: n2 is listed twice: \"Node 1 (n2), 2 task(s): 4 5\""},
        Row{head + "\tNode 0 (n1), 3 task(s): 2 3 6\n" + n2 + n3,
            "sattach --layout: n1 has 3 tasks, SLURM_STEP_TASKS_PER_NODE=2(x3) gives it 2: "
            "\"Node 0 (n1), 3 task(s): 2 3 6\""},
        Row{head + "\tNode 0 (n1), 2 task(s): 2 6\n" + n2 + n3,
            "sattach --layout: rank 6 is outside the step's 6 tasks: "
            "\"Node 0 (n1), 2 task(s): 2 6\""},
        Row{head + "\tNode 0 (n1), 2 task(s): 2 4\n" + n2 + n3,
            "sattach --layout: rank 4 is listed twice: \"Node 1 (n2), 2 task(s): 4 5\""},
        Row{head + n2 + n3,
            "sattach --layout: lists 2 of the step's 3 nodes (SLURM_STEP_NODELIST=n[1-3]): "
            "\"Job step layout:\""},
        Row{"",
            "sattach --layout: lists 0 of the step's 3 nodes (SLURM_STEP_NODELIST=n[1-3]): "
            "\"\""},
    }));
    const auto& text = std::get<0>(row);
    const auto& message = std::get<1>(row);
    INFO(text);
    require_error([&] { (void)tfslurm::parse_step_layout(text, step); },
                  Errc::inconsistent_allocation,
                  message);
}
