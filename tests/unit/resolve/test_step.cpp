// SPDX-License-Identifier: MIT
// Unit tests of the step snapshot (include/tfslurm/resolve/step.hpp): read_step(), the batch
// script's fallback, every variable's error, parse_distribution(), preview_step().
#include "fixtures.hpp"
#include "log_capture.hpp"
#include "topology_conf.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/step.hpp>

#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

using tfslurm::Distribution;
using tfslurm::Environment;
using tfslurm::Errc;
using tfslurm::Error;
using tfslurm::Scope;
using tfslurm::test::layout_of;
using tfslurm::test::require_error;

TEST_CASE("step: read_step reads a real srun task environment", "[step]") {
    const auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    const auto step = tfslurm::read_step(env);
    CHECK(step.scope == Scope::step);
    CHECK(step.nodelist_variable == "SLURM_STEP_NODELIST");
    CHECK(step.hosts == std::vector<std::string>{"n1", "n2", "n3"});
    CHECK(step.tasks_variable == "SLURM_STEP_TASKS_PER_NODE");
    CHECK(step.tasks_per_node == std::vector<std::uint32_t>{2, 2, 2});
    CHECK(step.ntasks == 6);
    CHECK(step.job_id == 5U);
    CHECK(step.step_id == 0U);
    REQUIRE(step.self);
    CHECK(step.self->rank == 3);
    CHECK(step.self->local_id == 1U);
    CHECK(step.self->node_id == 1U);
    CHECK(step.self->gtids == std::vector<std::uint32_t>{2, 3});
    CHECK(step.self->node_name == "n2");
    CHECK(step.distribution.kind == Distribution::block);
    CHECK_FALSE(step.gpus.visible);
    const auto allocation = tfslurm::resolve_allocation(step);
    CHECK(layout_of(allocation) == "n1:0,1 n2:2,3 n3:4,5");
}

TEST_CASE("step: a batch script falls back to the job's variables", "[step]") {
    auto env = tfslurm::test::load_env_dump("slurm-env/sbatch-N3-ntpn2-gpn2-output.txt");
    // The file holds the batch script's variables, then "3: ..." lines of a step task.
    const auto step = tfslurm::read_step(env);
    CHECK(step.scope == Scope::job);
    CHECK(step.nodelist_variable == "SLURM_JOB_NODELIST");
    CHECK(step.tasks_variable == "SLURM_TASKS_PER_NODE");
    CHECK(step.ntasks == 6);
    CHECK_FALSE(step.step_id);
    REQUIRE(step.self);
    CHECK(step.self->gtids == std::vector<std::uint32_t>{0}); // only the batch shell itself
    const auto allocation = tfslurm::resolve_allocation(step);
    CHECK(layout_of(allocation) == "n1:0,1 n2:2,3 n3:4,5");

    const auto task = tfslurm::test::load_env_dump("slurm-env/sbatch-N3-ntpn2-gpn2-output.txt", 3);
    const auto inner = tfslurm::read_step(task);
    CHECK(inner.scope == Scope::step);
    CHECK(inner.distribution.kind == Distribution::block);
    CHECK(inner.gpus.visible == std::vector<std::string>{"0", "1"});
    CHECK(inner.gpus.job_gpus == std::vector<std::string>{"0", "1"});
    CHECK(inner.gpus.gpus_on_node == 2U);
    CHECK(layout_of(tfslurm::resolve_allocation(inner)) == "n1:0,1 n2:2,3 n3:4,5");
}

TEST_CASE("step: missing and malformed variables name the variable", "[step]") {
    SECTION("nothing set") {
        try {
            (void)tfslurm::read_step(Environment{});
            FAIL("no exception");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::missing_env);
            CHECK(std::string{e.what()} == "SLURM_STEP_NODELIST: not set");
            CHECK(e.hint().rfind("not inside a Slurm job or step?", 0) == 0);
        }
    }
    SECTION("no tasks per node") {
        require_error(
            [] {
                (void)tfslurm::read_step(Environment{{"SLURM_STEP_NODELIST", "n1"}});
            },
            Errc::missing_env,
            "SLURM_STEP_TASKS_PER_NODE: not set");
    }
    SECTION("count mismatch") {
        require_error(
            [] {
                (void)tfslurm::read_step(Environment{{"SLURM_STEP_NODELIST", "n[1-3]"},
                                                     {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"}});
            },
            Errc::inconsistent_allocation,
            "SLURM_STEP_TASKS_PER_NODE: gives counts for 2 nodes but SLURM_STEP_NODELIST lists 3: "
            "\"2(x2)\"");
    }
    SECTION("ntasks disagrees") {
        require_error(
            [] {
                (void)tfslurm::read_step(Environment{{"SLURM_STEP_NODELIST", "n[1-3]"},
                                                     {"SLURM_STEP_TASKS_PER_NODE", "2(x3)"},
                                                     {"SLURM_STEP_NUM_TASKS", "5"}});
            },
            Errc::inconsistent_allocation,
            "SLURM_STEP_NUM_TASKS: disagrees with SLURM_STEP_TASKS_PER_NODE=2(x3) (6 tasks): "
            "\"5\"");
    }
    SECTION("bad rank") {
        require_error(
            [] {
                (void)tfslurm::read_step(Environment{{"SLURM_STEP_NODELIST", "n1"},
                                                     {"SLURM_STEP_TASKS_PER_NODE", "1"},
                                                     {"SLURM_PROCID", "-1"}});
            },
            Errc::invalid_argument,
            "SLURM_PROCID: expected an integer from 0 to 4294967295: \"-1\"");
    }
    SECTION("rank outside the step") {
        require_error(
            [] {
                (void)tfslurm::resolve_allocation(
                    tfslurm::read_step(Environment{{"SLURM_STEP_NODELIST", "n1"},
                                                   {"SLURM_STEP_TASKS_PER_NODE", "2"},
                                                   {"SLURM_PROCID", "2"}}));
            },
            Errc::inconsistent_allocation,
            "SLURM_PROCID: rank is outside the step's 2 tasks (SLURM_STEP_TASKS_PER_NODE=2): "
            "\"2\"");
    }
    SECTION("plane without a size") {
        require_error(
            [] {
                (void)tfslurm::read_step(Environment{{"SLURM_STEP_NODELIST", "n1"},
                                                     {"SLURM_STEP_TASKS_PER_NODE", "1"},
                                                     {"SLURM_DISTRIBUTION", "plane"}});
            },
            Errc::missing_env,
            "SLURM_DIST_PLANESIZE: not set");
    }
    SECTION("bad nodelist names its variable") {
        require_error(
            [] {
                (void)tfslurm::read_step(
                    Environment{{"SLURM_JOB_NODELIST", "n[1-"}, {"SLURM_TASKS_PER_NODE", "1"}});
            },
            Errc::invalid_hostlist,
            "SLURM_JOB_NODELIST: unterminated '[' at offset 1: \"n[1-\"");
    }
}

TEST_CASE("step: parse_distribution accepts Slurm's forms", "[step]") {
    CHECK(tfslurm::parse_distribution("block", "d").kind == Distribution::block);
    CHECK(tfslurm::parse_distribution("cyclic:block,pack", "d").kind == Distribution::cyclic);
    CHECK(tfslurm::parse_distribution("*:cyclic", "d").kind == Distribution::block);
    const auto plane = tfslurm::parse_distribution("plane=4", "d");
    CHECK(plane.kind == Distribution::plane);
    CHECK(plane.plane_size == 4);
    require_error(
        [] { (void)tfslurm::parse_distribution("zigzag", "SLURM_DISTRIBUTION"); },
        Errc::invalid_argument,
        "SLURM_DISTRIBUTION: expected block, cyclic, plane=N or arbitrary (optionally ':' "
        "and more levels): \"zigzag\"");
    require_error([] { (void)tfslurm::parse_distribution("cyclic=2", "--distribution"); },
                  Errc::invalid_argument,
                  "--distribution: a size is only valid as plane=N with N >= 1: \"cyclic=2\"");
    require_error(
        [] { (void)tfslurm::place_tasks({"n1"}, {1}, Distribution::arbitrary); },
        Errc::invalid_argument,
        "distribution: an arbitrary distribution needs the host of every rank (a hostfile): "
        "\"arbitrary\"");
}

TEST_CASE("step: preview_step describes allocations like srun", "[step]") {
    tfslurm::StepOverrides preview;
    preview.nodelist = "n[1-3]";
    preview.ntasks = 7;
    auto step = tfslurm::preview_step(preview);
    CHECK(step.scope == Scope::preview);
    CHECK(step.tasks_per_node == std::vector<std::uint32_t>{3, 2, 2});
    preview.ntasks.reset();
    preview.tasks_per_node = "2";
    step = tfslurm::preview_step(preview);
    CHECK(step.tasks_per_node == std::vector<std::uint32_t>{2, 2, 2});
    preview.tasks_per_node = "2(x2)";
    require_error([&] { (void)tfslurm::preview_step(preview); },
                  Errc::invalid_argument,
                  "tasks_per_node: gives counts for 2 nodes but nodelist has 3: \"2(x2)\"");
    preview.tasks_per_node = "1";
    preview.rank = 3;
    require_error([&] { (void)tfslurm::preview_step(preview); },
                  Errc::invalid_argument,
                  "rank: the step has only 3 tasks: \"3\"");
    preview.rank.reset();
    preview.tasks_per_node = "1,0,1";
    require_error([&] { (void)tfslurm::preview_step(preview); },
                  Errc::invalid_argument,
                  "tasks_per_node: every node of a step runs at least one task: \"1,0,1\"");
    preview.tasks_per_node.clear();
    preview.ntasks = 100000000;
    require_error([&] { (void)tfslurm::preview_step(preview); },
                  Errc::too_large,
                  "ntasks: 100000000 tasks exceed tfslurm's limit of 4194304");
}

namespace {

/// A FileReader over `files` (path -> text); any other path cannot be opened.
using tfslurm::test::reader_of;

} // namespace

TEST_CASE("tasks: the environments of Slurm 24.11 and 26.05 resolve like 22.05's", "[tasks]") {
    const auto no_files = reader_of({});
    for (const auto* release : {"24.11", "26.05"}) {
        INFO(release);
        const auto env = tfslurm::test::load_env_dump(std::string{"slurm-env/srun-N3-n6-task3-"} +
                                                      release + ".txt");
        const auto step = tfslurm::read_step(env, no_files);
        CHECK(step.hosts == std::vector<std::string>{"n1", "n2", "n3"});
        CHECK(step.tasks_per_node == std::vector<std::uint32_t>{2, 2, 2});
        REQUIRE(step.self);
        CHECK(step.self->rank == 3);
        CHECK(step.self->gtids == std::vector<std::uint32_t>{2, 3});
        CHECK(step.topology_order.empty());
        CHECK(layout_of(tfslurm::resolve_allocation(step)) == "n1:0,1 n2:2,3 n3:4,5");
        // --gpus-per-task=1: Slurm binds one GPU per task (the task sees only its own).
        const auto gpus = tfslurm::test::load_env_dump(
            std::string{"slurm-env/srun-N3-n6-gpus-per-task1-task3-"} + release + ".txt");
        const auto gpu_step = tfslurm::read_step(gpus, no_files);
        CHECK(gpu_step.gpus.visible == std::vector<std::string>{"1"});
    }
}

TEST_CASE("tasks: a block step that Slurm may lay out in topology order is refused, whatever "
          "the task's own identity says",
          "[tasks]") {
    // Task 3 of `srun -N3 -n6` on Slurm 26.05 (SLURM_JOB_SLUID): n2, local 1, GTIDS 2,3 agree
    // with the nodelist's order. With a tree topology Slurm could have put ranks 0,1 on n3 and
    // 2,3 on n1 instead, and this task cannot tell: the other nodes' ranks are unknown.
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-task3-26.05.txt");
    env.set("SLURM_CONF", "/c/slurm.conf");
    const auto tree = reader_of({{"/c/slurm.conf", "TopologyPlugin=topology/tree\n"}});
    auto step = tfslurm::read_step(env, tree);
    CHECK(step.topology_order == "TopologyPlugin=topology/tree in /c/slurm.conf");
    require_error([&] { (void)tfslurm::resolve_allocation(step); },
                  Errc::inconsistent_allocation,
                  "placement: Slurm lays a block distribution over several nodes out in the "
                  "order of the network topology (TopologyPlugin=topology/tree in "
                  "/c/slurm.conf), which no task's environment shows: \"block\"");
    // Cyclic keeps name order under a topology, and so does a release before 25.11.
    env.set("SLURM_DISTRIBUTION", "cyclic");
    step = tfslurm::read_step(env, tree);
    CHECK(step.topology_order.empty());
    env.unset("SLURM_DISTRIBUTION");
    auto older = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-task3-24.11.txt");
    older.set("SLURM_CONF", "/c/slurm.conf");
    step = tfslurm::read_step(older, tree);
    CHECK(step.topology_order.empty());
    CHECK(layout_of(tfslurm::resolve_allocation(step)) == "n1:0,1 n2:2,3 n3:4,5");
}

TEST_CASE("tasks: every task of a real 26.05 step laid out in topology order refuses it",
          "[tasks]") {
    // `srun -l -p topo -N3 -n6 env` on the test cluster of 26.05, whose partition topo follows
    // a tree (n3 | n1 n2): ranks 0,1 ran on n3, 2,3 on n1, 4,5 on n2, while the nodelist,
    // SLURM_NODEID and the counts are in name order.
    const auto files = reader_of(tfslurm::test::topology_conf_files());
    const std::vector<std::string> ran_on{"n3", "n3", "n1", "n1", "n2", "n2"};
    for (int rank = 0; rank < 6; ++rank) {
        INFO(rank);
        const auto env =
            tfslurm::test::load_env_dump("slurm-env/srun-topo-N3-n6-all-tasks-26.05.txt", rank);
        CHECK(*env.get("SLURMD_NODENAME") == ran_on[static_cast<std::size_t>(rank)]);
        const auto step = tfslurm::read_step(env, files);
        CHECK(step.nodelist == "n[1-3]");
        require_error([&] { (void)tfslurm::resolve_allocation(step); },
                      Errc::inconsistent_allocation,
                      "placement: Slurm lays a block distribution over several nodes out in the "
                      "order of the network topology (topology \"tree\" (tree) of partition topo "
                      "in /run/tfslurm-tc/etc/topology.yaml), which no task's environment shows: "
                      "\"block\"");
        // The same task on 24.11 or earlier (no SLURM_JOB_SLUID) would have been cross-checked
        // only, and rejected by its own SLURM_NODEID: today's check alone.
        auto older = env;
        older.unset("SLURM_JOB_SLUID");
        const auto older_step = tfslurm::read_step(older, files);
        CHECK(older_step.topology_order.empty());
        CHECK_THROWS_AS(tfslurm::resolve_allocation(older_step), Error);
    }
}

TEST_CASE("step: GPU lists read as their readers read them", "[step]") {
    const tfslurm::test::LogCapture log(spdlog::level::debug);
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    SECTION("NoDevFiles: GPUs allocated without device files are no GPU") {
        env.set("CUDA_VISIBLE_DEVICES", "NoDevFiles");
        env.set("SLURM_STEP_GPUS", "NoDevFiles");
        const auto step = tfslurm::read_step(env);
        REQUIRE(step.gpus.visible);
        CHECK(step.gpus.visible->empty());
        REQUIRE(step.gpus.step_gpus);
        CHECK(step.gpus.step_gpus->empty());
        CHECK_THAT(log.text(),
                   Catch::Contains("debug: CUDA_VISIBLE_DEVICES=NoDevFiles: Slurm allocated GPUs "
                                   "without device files: no GPU\n"));
    }
    SECTION("an empty item ends CUDA_VISIBLE_DEVICES, as it does for CUDA") {
        env.set("CUDA_VISIBLE_DEVICES", "0,,1");
        const auto step = tfslurm::read_step(env);
        CHECK(step.gpus.visible == std::vector<std::string>{"0"});
        CHECK_THAT(log.text(),
                   Catch::Contains("warning: CUDA_VISIBLE_DEVICES: item 2 is empty, and CUDA "
                                   "reads no further: \"0,,1\" means \"0\" (remove the empty item "
                                   "to make the others visible)\n"));
    }
    SECTION("a leading empty item: no GPU") {
        env.set("CUDA_VISIBLE_DEVICES", ",0");
        const auto step = tfslurm::read_step(env);
        CHECK(step.gpus.visible == std::vector<std::string>{});
        CHECK_THAT(log.text(),
                   Catch::Contains("warning: CUDA_VISIBLE_DEVICES: item 1 is empty, and CUDA "
                                   "reads no further: \",0\" means no GPU (remove the empty "
                                   "item)\n"));
    }
    SECTION("Slurm's own lists skip an empty item, and an empty value is no GPU, quietly") {
        env.set("SLURM_STEP_GPUS", "0,,1");
        env.set("CUDA_VISIBLE_DEVICES", "");
        const auto step = tfslurm::read_step(env);
        CHECK(step.gpus.step_gpus == std::vector<std::string>{"0", "1"});
        CHECK(step.gpus.visible == std::vector<std::string>{});
        CHECK(log.text().find("warning") == std::string::npos);
    }
}
