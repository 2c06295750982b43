// SPDX-License-Identifier: MIT
// Unit tests of the step snapshot (include/tfslurm/step.hpp): read_step(), the batch
// script's fallback, every variable's error, parse_distribution(), preview_step().
#include "fixtures.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/placement.hpp>
#include <tfslurm/step.hpp>

#include <catch2/catch.hpp>

#include <string>
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
