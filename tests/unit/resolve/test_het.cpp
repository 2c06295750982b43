// SPDX-License-Identifier: MIT
// Heterogeneous steps (`srun A : B`): components read from real Slurm 22.05 environments
// (tests/data/slurm-env/srun-het-*.txt), their ranks, and roles given per component.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using tfslurm::Errc;
using tfslurm::test::require_error;

namespace {

using tfslurm::test::layout_of;

/// `host@first+ntasks` per component.
std::string components_of(const tfslurm::StepInfo& step) {
    std::string out;
    for (const auto& component : step.components) {
        out += out.empty() ? "" : " ";
        for (std::size_t i = 0; i < component.hosts.size(); ++i) {
            out += (i == 0 ? "" : ",") + component.hosts[i];
        }
        out += "@" + std::to_string(component.first_rank) + "+" + std::to_string(component.ntasks);
    }
    return out;
}

/// Every rank's role, comma-separated.
std::string role_list(const tfslurm::Plan& plan) {
    std::string out;
    for (const auto& rank : plan.ranks) {
        out += (out.empty() ? "" : ",") + std::string{tfslurm::to_string(rank.role)};
    }
    return out;
}

tfslurm::Plan plan_with(const tfslurm::Environment& env,
                        const std::vector<std::pair<std::string, std::string>>& settings) {
    tfslurm::PlanOptions options;
    for (const auto& [key, value] : settings) {
        tfslurm::apply_plan_setting(options, key, value);
    }
    const auto step = tfslurm::read_step(env);
    return tfslurm::make_plan(step, tfslurm::resolve_allocation(step), options);
}

} // namespace

TEST_CASE("het: components and ranks of real heterogeneous steps", "[het]") {
    auto [file, tasks, components, layout] =
        GENERATE(table<std::string, int, std::string, std::string>({
            // srun -n1 -w n1 : -n2 -w n2,n3
            {"slurm-env/srun-het-disjoint.txt", 3, "n1@0+1 n2,n3@1+2", "n1:0 n2:1 n3:2"},
            // srun -n1 -w n1 : -n1 -w n2 : -n2 -w n3 (SLURM_DISTRIBUTION block, cyclic, block)
            {"slurm-env/srun-het-3-components.txt", 4, "n1@0+1 n2@1+1 n3@2+2", "n1:0 n2:1 n3:2,3"},
            // srun -n2 -w n1 : -n1 -w n2 : -n1 -w n3 (every task says cyclic: ranks are not)
            {"slurm-env/srun-het-3-uneven.txt", 4, "n1@0+2 n2@2+1 n3@3+1", "n1:0,1 n2:2 n3:3"},
            // srun -n1 -w n2 : -n2 -w n1,n3: SLURM_NODEID counts component after component
            // (n2 is node 0, n1 node 1) while the nodelist and tasks per node are n[1-3]
            {"slurm-env/srun-het-reversed.txt", 3, "n2@0+1 n1,n3@1+2", "n1:1 n2:0 n3:2"},
        }));
    for (int task = 0; task < tasks; ++task) {
        INFO(file << " task " << task);
        const auto env = tfslurm::test::load_env_dump(file, task);
        const auto step = tfslurm::read_step(env);
        CHECK(components_of(step) == components);
        const auto allocation = tfslurm::resolve_allocation(step); // cross-checks identity
        CHECK(layout_of(allocation) == layout);
    }
}

TEST_CASE("het: an ordinary step has no components", "[het]") {
    const auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    CHECK(tfslurm::read_step(env).components.empty());
}

TEST_CASE("het: the variables of a heterogeneous step are read strictly", "[het]") {
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-het-disjoint.txt", 1);
    SECTION("a component without its nodelist") {
        env.unset("SLURM_JOB_NODELIST_PACK_GROUP_1");
        require_error([&] { (void)tfslurm::read_step(env); },
                      Errc::missing_env,
                      "SLURM_JOB_NODELIST_HET_GROUP_1: not set");
    }
    SECTION("the _HET_GROUP_ spelling wins over _PACK_GROUP_") {
        env.set("SLURM_JOB_NODELIST_HET_GROUP_0", "n[1-2]");
        env.set("SLURM_JOB_NODELIST_HET_GROUP_1", "n3");
        CHECK(components_of(tfslurm::read_step(env)) == "n1,n2@0+2 n3@2+1");
    }
    SECTION("two components sharing a node") {
        env.set("SLURM_JOB_NODELIST_PACK_GROUP_1", "n[1-3]");
        require_error([&] { (void)tfslurm::read_step(env); },
                      Errc::inconsistent_allocation,
                      "SLURM_JOB_NODELIST_HET_GROUP_1: shares node n1 with component 0: \"n1\"");
    }
    SECTION("a step node in no component") {
        env.set("SLURM_JOB_NODELIST_PACK_GROUP_1", "n2");
        require_error([&] { (void)tfslurm::read_step(env); },
                      Errc::inconsistent_allocation,
                      "SLURM_STEP_NODELIST: lists n3, which no component of the heterogeneous "
                      "step has: \"n[1-3]\"");
    }
    SECTION("more components than nodes") {
        env.set("SLURM_HET_SIZE", "4");
        require_error([&] { (void)tfslurm::read_step(env); },
                      Errc::inconsistent_allocation,
                      "SLURM_HET_SIZE: expected 1 to 3 components (one node each at least): \"4\"");
    }
    SECTION("cyclic inside a component where it matters") {
        // Component 1 (n2,n3) with 2 tasks per node: its cyclic order is invisible to the
        // other components, so it is refused rather than guessed.
        env.set("SLURM_STEP_TASKS_PER_NODE", "1,2(x2)");
        env.set("SLURM_STEP_NUM_TASKS", "5");
        env.set("SLURM_NTASKS", "5");
        env.set("SLURM_DISTRIBUTION", "cyclic");
        env.set("SLURM_GTIDS", "1,2");
        const auto step = tfslurm::read_step(env);
        require_error([&] { (void)tfslurm::resolve_allocation(step); },
                      Errc::invalid_argument,
                      "SLURM_DISTRIBUTION: inside a component of a heterogeneous step only "
                      "block is supported: \"cyclic\"");
        env.set("SLURM_DISTRIBUTION", "block");
        CHECK(layout_of(tfslurm::resolve_allocation(tfslurm::read_step(env))) ==
              "n1:0 n2:1,2 n3:3,4");
    }
}

TEST_CASE("het: roles by component", "[het]") {
    SECTION("ps,worker: component 0 is the ps, component 1 the workers") {
        for (int task = 0; task < 3; ++task) {
            const auto env = tfslurm::test::load_env_dump("slurm-env/srun-het-disjoint.txt", task);
            const auto plan = plan_with(env, {{"roles_by_component", "ps,worker"}});
            CHECK(role_list(plan) == "ps,worker,worker");
            CHECK(plan.self_rank == static_cast<std::uint32_t>(task));
        }
    }
    SECTION("three components, the first of two tasks") {
        const auto env = tfslurm::test::load_env_dump("slurm-env/srun-het-3-uneven.txt", 1);
        CHECK(role_list(plan_with(env, {{"roles_by_component", "ps,chief,worker"}})) ==
              "ps,ps,chief,worker");
    }
    SECTION("three components, the last of two tasks") {
        const auto env = tfslurm::test::load_env_dump("slurm-env/srun-het-3-components.txt", 3);
        CHECK(role_list(plan_with(env, {{"roles_by_component", "chief,ps,worker"}})) ==
              "chief,ps,worker,worker");
    }
}

TEST_CASE("het: roles by component are refused where they cannot apply", "[het]") {
    const auto het = tfslurm::test::load_env_dump("slurm-env/srun-het-disjoint.txt", 0);
    const auto het3 = tfslurm::test::load_env_dump("slurm-env/srun-het-3-components.txt", 0);
    const auto plain = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    const std::string subject = "roles_by_component"; // what() renders setting references plainly
    SECTION("outside a heterogeneous step") {
        require_error(
            [&] {
                (void)plan_with(plain, {{"roles_by_component", "ps,worker"}});
            },
            Errc::invalid_argument,
            subject + ": needs a heterogeneous step, and this step has one component "
                      "(SLURM_HET_SIZE is not set): \"ps,worker\"");
    }
    SECTION("fewer roles than components") {
        require_error(
            [&] {
                (void)plan_with(het3, {{"roles_by_component", "ps,worker"}});
            },
            Errc::invalid_argument,
            subject + ": gives 2 roles for a heterogeneous step of 3 components: "
                      "\"ps,worker\"");
    }
    SECTION("more roles than components") {
        require_error(
            [&] {
                (void)plan_with(het, {{"roles_by_component", "ps,worker,worker"}});
            },
            Errc::invalid_argument,
            subject + ": gives 3 roles for a heterogeneous step of 2 components: "
                      "\"ps,worker,worker\"");
    }
    SECTION("a name that is not a role") {
        tfslurm::PlanOptions options;
        try {
            tfslurm::apply_plan_setting(options, "roles_by_component", "ps,boss");
            FAIL("no exception");
        } catch (const tfslurm::Error& e) {
            CHECK(e.code() == Errc::invalid_argument);
            CHECK(std::string{e.what()}.rfind(subject + ": ", 0) == 0);
            CHECK(std::string{e.what()}.find("\"boss\"") != std::string::npos);
        }
    }
    SECTION("a chief component of two tasks") {
        require_error(
            [&] {
                (void)plan_with(het3, {{"roles_by_component", "ps,worker,chief"}});
            },
            Errc::invalid_argument,
            subject + ": at most one chief and one evaluator: \"ps,worker,chief\"");
    }
    SECTION("next to the roles given per rank") {
        require_error(
            [&] {
                (void)plan_with(het,
                                {{"roles_by_component", "ps,worker"}, {"ps", "1"}, {"chief", ""}});
            },
            Errc::invalid_argument,
            subject + ": cannot be combined with ps=1 or chief: \"ps,worker\"");
        require_error(
            [&] {
                (void)plan_with(het,
                                {{"roles_by_component", "ps,worker"}, {"roles", "ps,worker*2"}});
            },
            Errc::invalid_argument,
            subject + ": cannot be combined with roles=ps,worker,worker: \"ps,worker\"");
    }
    SECTION("the tf-compat layout") {
        require_error(
            [&] {
                (void)plan_with(het,
                                {{"roles_by_component", "ps,worker"}, {"layout", "tf-compat"}});
            },
            Errc::invalid_argument,
            subject + ": the tf-compat layout takes role counts only (ps, chief, evaluator): "
                      "\"ps,worker\"");
    }
}
