// SPDX-License-Identifier: MIT
// Unit tests of placement (include/tfslurm/resolve/placement.hpp): where Slurm runs every rank of
// real and synthetic steps, and the identity cross-check.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/step.hpp>

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

TEST_CASE("placement: every task of a real step resolves to where Slurm ran it", "[placement]") {
    for (int rank = 0; rank < 6; ++rank) {
        const auto env =
            tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-all-tasks.txt", rank);
        const auto step = tfslurm::read_step(env);
        const auto allocation = tfslurm::resolve_allocation(step);
        const auto& place = allocation.places.at(static_cast<std::size_t>(rank));
        CHECK(allocation.hosts[place.node] == *env.get("SLURMD_NODENAME"));
    }
}

TEST_CASE("placement: placement matches Slurm for 11 real srun shapes", "[placement]") {
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

TEST_CASE("placement: a heterogeneous step with disjoint components is one step", "[placement]") {
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

TEST_CASE("placement: layouts of block, cyclic, plane and uneven steps", "[placement]") {
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

TEST_CASE("placement: a cyclic step without SLURM_DISTRIBUTION is caught, not guessed",
          "[placement]") {
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

TEST_CASE("placement: SLURM_GTIDS that disagree are reported", "[placement]") {
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
