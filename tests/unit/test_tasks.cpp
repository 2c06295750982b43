// SPDX-License-Identifier: MIT
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
using tfslurm::test::require_error;

namespace {

/// Ranks on each node, as a readable string: "n1:0,1 n2:2,3".
std::string layout_of(const tfslurm::Allocation& allocation) {
    std::string out;
    for (std::size_t node = 0; node < allocation.hosts.size(); ++node) {
        if (!out.empty()) {
            out += ' ';
        }
        out += allocation.hosts[node] + ':';
        for (std::size_t i = 0; i < allocation.node_ranks[node].size(); ++i) {
            out += (i ? "," : "") + std::to_string(allocation.node_ranks[node][i]);
        }
    }
    return out;
}

} // namespace

TEST_CASE("tasks: read_step reads a real srun task environment", "[tasks]") {
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

TEST_CASE("tasks: every task of a real step resolves to where Slurm ran it", "[tasks]") {
    for (int rank = 0; rank < 6; ++rank) {
        const auto env =
            tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-all-tasks.txt", rank);
        const auto step = tfslurm::read_step(env);
        const auto allocation = tfslurm::resolve_allocation(step);
        const auto& place = allocation.places.at(static_cast<std::size_t>(rank));
        CHECK(allocation.hosts[place.node] == *env.get("SLURMD_NODENAME"));
    }
}

TEST_CASE("tasks: placement matches Slurm for 11 real srun shapes", "[tasks]") {
    const auto sections = tfslurm::test::load_sections("slurm-env/srun-layout-variants.txt");
    REQUIRE(sections.size() == 11);
    for (const auto& section : sections) {
        INFO(section.title);
        for (const auto& [label, env] : section.tasks) {
            INFO("rank " << label);
            const auto step = tfslurm::read_step(env);
            const auto allocation = tfslurm::resolve_allocation(step); // cross-checks identity
            const auto& place = allocation.places.at(static_cast<std::size_t>(label));
            CHECK(allocation.hosts[place.node] == *env.get("SLURMD_NODENAME"));
            CHECK(std::to_string(place.node) == *env.get("SLURM_NODEID"));
            CHECK(std::to_string(place.local) == *env.get("SLURM_LOCALID"));
        }
    }
}

TEST_CASE("tasks: a heterogeneous step with disjoint components is one step", "[tasks]") {
    // `srun -n1 -w n1 : -n2 -w n2,n3`: Slurm 22.05 presents one nodelist and one rank space.
    for (int task = 0; task < 3; ++task) {
        INFO("task " << task);
        const auto env = tfslurm::test::load_env_dump("slurm-env/srun-het-disjoint.txt", task);
        REQUIRE(env.get("SLURM_HET_SIZE").value_or("") == "2");
        const auto step = tfslurm::read_step(env);
        const auto allocation = tfslurm::resolve_allocation(step); // cross-checks identity
        CHECK(layout_of(allocation) == "n1:0 n2:1 n3:2");
        REQUIRE(step.self);
        CHECK(step.self->rank == static_cast<std::uint32_t>(task));
    }
}

TEST_CASE("tasks: layouts of block, cyclic, plane and uneven steps", "[tasks]") {
    using V = std::vector<std::uint32_t>;
    const std::vector<std::string> three{"n1", "n2", "n3"};
    auto [counts, distribution, plane, expected] =
        GENERATE_COPY(table<V, Distribution, std::uint32_t, std::string>({
            {V{2, 2, 2}, Distribution::block, 0, "n1:0,1 n2:2,3 n3:4,5"},
            {V{2, 1, 1}, Distribution::block, 0, "n1:0,1 n2:2 n3:3"},
            {V{3, 2, 2}, Distribution::block, 0, "n1:0,1,2 n2:3,4 n3:5,6"},
            {V{2, 2, 2}, Distribution::cyclic, 0, "n1:0,3 n2:1,4 n3:2,5"},
            {V{3, 1, 2}, Distribution::cyclic, 0, "n1:0,3,5 n2:1 n3:2,4"},
            {V{4, 4, 4}, Distribution::plane, 2, "n1:0,1,6,7 n2:2,3,8,9 n3:4,5,10,11"},
            {V{3, 2, 1}, Distribution::plane, 2, "n1:0,1,5 n2:2,3 n3:4"},
        }));
    const auto allocation = tfslurm::place_tasks(three, counts, distribution, plane);
    CHECK(layout_of(allocation) == expected);
    CHECK(allocation.max_tasks_per_node() == *std::max_element(counts.begin(), counts.end()));
}

TEST_CASE("tasks: a cyclic step without SLURM_DISTRIBUTION is caught, not guessed", "[tasks]") {
    const auto sections = tfslurm::test::load_sections("slurm-env/srun-layout-variants.txt");
    const auto& cyclic = sections.at(4);
    REQUIRE(cyclic.title == "srun -N3 -n6 -m cyclic");
    auto env = cyclic.tasks.at(1).second;
    env.unset("SLURM_DISTRIBUTION");
    const auto step = tfslurm::read_step(env);
    try {
        (void)tfslurm::resolve_allocation(step);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::inconsistent_allocation);
        CHECK(std::string{e.what()} ==
              "SLURM_NODEID: disagrees with the computed placement: block distribution of "
              "SLURM_STEP_TASKS_PER_NODE=2(x3) over SLURM_STEP_NODELIST=n[1-3] puts rank 1 on "
              "node 0 (n1) as local task 1: \"1\"");
        CHECK(e.hint().find("SLURM_HOSTFILE") != std::string::npos);
    }
}

TEST_CASE("tasks: SLURM_GTIDS that disagree are reported", "[tasks]") {
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    env.set("SLURM_GTIDS", "3,2,4");
    require_error([&] { (void)tfslurm::resolve_allocation(tfslurm::read_step(env)); },
                  Errc::inconsistent_allocation,
                  "SLURM_GTIDS: lists other ranks than the computed placement (2,3): block "
                  "distribution of SLURM_STEP_TASKS_PER_NODE=2(x3) over SLURM_STEP_NODELIST=n[1-3] "
                  "puts rank 3 on node 1 (n2) as local task 1: \"3,2,4\"");
    env.set("SLURM_GTIDS", "2,3");
    env.set("SLURMD_NODENAME", "n3");
    require_error([&] { (void)tfslurm::resolve_allocation(tfslurm::read_step(env)); },
                  Errc::inconsistent_allocation,
                  "SLURMD_NODENAME: disagrees with the computed placement: block distribution of "
                  "SLURM_STEP_TASKS_PER_NODE=2(x3) over SLURM_STEP_NODELIST=n[1-3] puts rank 3 on "
                  "node 1 (n2) as local task 1: \"n3\"");
}

TEST_CASE("tasks: a batch script falls back to the job's variables", "[tasks]") {
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

TEST_CASE("tasks: missing and malformed variables name the variable", "[tasks]") {
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

TEST_CASE("tasks: parse_distribution accepts Slurm's forms", "[tasks]") {
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

TEST_CASE("tasks: preview_step describes allocations like srun", "[tasks]") {
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
