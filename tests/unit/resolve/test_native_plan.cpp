// SPDX-License-Identifier: MIT
// The native layout (src/resolve/plan/native_plan.cpp): roles from counts, reserved and explicit
// ports, and the GPU split.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

using tfslurm::Errc;
using tfslurm::Error;
using tfslurm::test::build;
using tfslurm::test::gpus_of;
using tfslurm::test::preview;
using tfslurm::test::require_error;
using tfslurm::test::roles_of;
using tfslurm::test::tf_case;
using tfslurm::test::with;

TEST_CASE("plan: roles from counts, ps first or spread", "[plan]") {
    CHECK(roles_of(preview("n[1-3]", "2").plan) ==
          "worker:0 worker:1 worker:2 worker:3 worker:4 worker:5");
    CHECK(roles_of(preview("n[1-3]", "2", with({{"ps", "2"}})).plan) ==
          "ps:0 ps:1 worker:0 worker:1 worker:2 worker:3");
    CHECK(roles_of(preview("n[1-3]", "2", with({{"ps", "2"}, {"ps_placement", "spread"}})).plan) ==
          "ps:0 worker:0 ps:1 worker:1 worker:2 worker:3");
    CHECK(roles_of(preview("n[1-3]", "2", with({{"ps", "1"}, {"chief", "yes"}, {"evaluator", "1"}}))
                       .plan) == "ps:0 chief:0 worker:0 worker:1 worker:2 evaluator:0");
    // More ps than nodes: spread wraps to the second task of each node.
    CHECK(roles_of(preview("n[1-2]", "3", with({{"ps", "3"}, {"ps_placement", "spread"}})).plan) ==
          "ps:0 ps:1 worker:0 ps:2 worker:1 worker:2");
    CHECK(roles_of(preview("n[1-2]", "2", with({{"roles", "ps,worker*2,chief"}})).plan) ==
          "ps:0 worker:0 worker:1 chief:0");
}

TEST_CASE("plan: impossible role requests are errors", "[plan]") {
    require_error(
        [] {
            (void)preview("n[1-2]", "1", with({{"ps", "2"}}));
        },
        Errc::invalid_argument,
        "roles: 2 ps leave no rank for a worker in a step of 2 tasks: "
        "\"ps=2,chief=0,evaluator=0\"");
    require_error(
        [] {
            (void)preview("n[1-2]", "1", with({{"roles", "ps*3"}}));
        },
        Errc::invalid_argument,
        "roles: gives 3 roles for a step of 2 tasks: \"ps,ps,ps\"");
    require_error(
        [] {
            (void)preview("n[1-2]", "1", with({{"roles", "chief,chief"}}));
        },
        Errc::invalid_argument,
        "roles: at most one chief and one evaluator: \"chief,chief\"");
    require_error(
        [] {
            (void)with({{"roles", "ps,master"}});
        },
        Errc::invalid_argument,
        "roles: expected a role: ps, worker, chief or evaluator: \"master\"");
    require_error(
        [] {
            (void)with({{"roles", "ps*0"}});
        },
        Errc::invalid_argument,
        "roles: bad repetition in 'ps*0' (expected ROLE*N with N from 1 to 4194304): "
        "\"ps*0\"");
    require_error(
        [] {
            (void)with({{"colour", "red"}});
        },
        Errc::invalid_argument,
        "setting: unknown setting (known: ps, chief, evaluator, roles, roles_by_component, "
        "ps_placement, "
        "layout, port_base, address, host_pattern, iface, network, exchange, gpus_per_task, "
        "gpu_bind, "
        "gpus_per_node, "
        "rpc_layer): \"colour\"");
    require_error(
        [] {
            (void)with({{"chief", "maybe"}});
        },
        Errc::invalid_argument,
        "chief: expected yes/no, true/false, on/off or 1/0: \"maybe\"");
}

TEST_CASE("plan: reserved and explicit ports", "[plan]") {
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    env.set("SLURM_STEP_RESV_PORTS", "12000,12005-12006");
    auto built = build(env);
    CHECK(built.plan.port_source == tfslurm::PortSource::reserved);
    CHECK(built.plan.endpoint(0) == "n1:12000");
    CHECK(built.plan.endpoint(1) == "n1:12005");
    CHECK(built.plan.control_port == 12006);
    CHECK(built.plan.control_port_source == tfslurm::PortSource::reserved);
    CHECK(built.plan.control_port_note.empty());

    // One port per task on a node and none to spare: the control port is derived (outside the
    // reservation), and the plan says so rather than "reserved" alone.
    env.set("SLURM_STEP_RESV_PORTS", "12000,12005");
    built = build(env);
    CHECK(built.plan.port_source == tfslurm::PortSource::reserved);
    CHECK(built.plan.endpoint(1) == "n1:12005");
    CHECK(built.plan.control_port_source == tfslurm::PortSource::derived);
    CHECK(built.plan.control_port_note ==
          "derived, outside SLURM_STEP_RESV_PORTS \"12000,12005\": it reserves 2 ports for 2 "
          "tasks on a node and none for the launcher; srun --resv-ports=3 reserves one");
    CHECK(built.plan.control_port != 12000);
    CHECK(built.plan.control_port != 12005);

    env.set("SLURM_STEP_RESV_PORTS", "12000");
    require_error([&] { (void)build(env); },
                  Errc::invalid_argument,
                  "SLURM_STEP_RESV_PORTS: reserves 1 ports but a node runs 2 tasks: \"12000\"");
    try {
        (void)build(env);
    } catch (const Error& e) {
        // The hint recommends srun --resv-ports, and what it needs from slurm.conf.
        CHECK(e.hint() == "use srun --resv-ports=3 (one per task on a node, plus one for the "
                          "launcher; it needs MpiParams=ports=LOW-HIGH in slurm.conf; Slurm then "
                          "sets SLURM_STEP_RESV_PORTS in every task)");
    }
    try {
        (void)tfslurm::derive_port_base(1, 0, 20000);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(std::string{e.what()} ==
              "ports: 20000 ports per node do not fit in the derived range 20000-31999: \"20000\"");
        CHECK(e.hint() == "use srun --resv-ports (it needs MpiParams=ports=LOW-HIGH in slurm.conf; "
                          "Slurm then sets SLURM_STEP_RESV_PORTS in every task) or port_base");
    }

    built = build(env, with({{"port_base", "40000"}}));
    CHECK(built.plan.port_source == tfslurm::PortSource::explicit_base);
    CHECK(built.plan.endpoint(5) == "n3:40001");
    CHECK(built.plan.control_port == 40002);
    require_error(
        [&] {
            (void)build(env, with({{"port_base", "65535"}}));
        },
        Errc::invalid_argument,
        "port_base: 2 tasks per node and a control port do not fit below 65536: "
        "\"65535\"");
    require_error(
        [] {
            (void)with({{"port_base", "0"}});
        },
        Errc::invalid_argument,
        "port_base: expected an integer from 1 to 65535: \"0\"");
}

TEST_CASE("plan: GPUs come from the visible set of every real GRES request", "[plan]") {
    // Layout of each request (the GRES dump lists only the GPU variables), and the GPUs each
    // rank must get: the visible devices split among the node's tasks, or kept when Slurm
    // already bound them per task.
    struct Case {
        std::string nodelist;
        std::string tasks;
        std::vector<std::string> expected; ///< by rank, "" = no GPU
    };
    const std::map<std::string, Case> cases{
        {"srun -N3 -n6", {"n[1-3]", "2(x3)", {"", "", "", "", "", ""}}},
        {"srun -N3 -n6 --gpus-per-node=2", {"n[1-3]", "2(x3)", {"0", "1", "0", "1", "0", "1"}}},
        {"srun -N3 -n6 --gres=gpu:2", {"n[1-3]", "2(x3)", {"0", "1", "0", "1", "0", "1"}}},
        {"srun -N3 -n6 --gres=gpu:4",
         {"n[1-3]", "2(x3)", {"0,1", "2,3", "0,1", "2,3", "0,1", "2,3"}}},
        {"srun -N2 -n4 --gpus=4", {"n[1-2]", "2(x2)", {"0", "1", "0", "0"}}},
        {"srun -N3 -n6 --gpus-per-task=1", {"n[1-3]", "2(x3)", {"0", "1", "0", "1", "0", "1"}}},
        {"srun -N3 -n6 --gpus-per-task=2",
         {"n[1-3]", "2(x3)", {"0,1", "2,3", "0,1", "2,3", "0,1", "2,3"}}},
        {"srun -N3 -n6 --gpus-per-node=2 --gpu-bind=single:1",
         {"n[1-3]", "2(x3)", {"0", "1", "0", "1", "0", "1"}}},
        {"srun -N3 -n6 --gpus-per-node=2 --gpus-per-task=1",
         {"n[1-3]", "2(x3)", {"0", "1", "0", "1", "0", "1"}}},
        {"srun -N1 -n2 --gres=gpu:1", {"n1", "2", {"0", "0"}}},
        {"srun -N1 -n1 --gpus-per-node=3", {"n1", "1", {"0,1,2"}}},
    };
    const auto sections = tfslurm::test::load_sections("slurm-env/gres-variants.txt");
    REQUIRE(sections.size() == cases.size());
    for (const auto& section : sections) {
        INFO(section.title);
        const auto& expected = cases.at(section.title);
        for (auto [rank, env] : section.tasks) {
            INFO("rank " << rank);
            env.set("SLURM_STEP_NODELIST", expected.nodelist);
            env.set("SLURM_STEP_TASKS_PER_NODE", expected.tasks);
            env.set("SLURM_PROCID", std::to_string(rank));
            const auto built = build(env);
            const auto& self = built.plan.ranks.at(static_cast<std::size_t>(rank));
            CHECK(gpus_of(self) == expected.expected.at(static_cast<std::size_t>(rank)));
            const auto vars = tfslurm::task_environment(built.plan, self.rank, {});
            const bool has_cvd = std::any_of(vars.begin(), vars.end(), [](const auto& var) {
                return var.first == "CUDA_VISIBLE_DEVICES";
            });
            CHECK(has_cvd == !self.gpus.empty());
        }
    }
}

TEST_CASE("plan: --gpus-per-task and zero GPUs", "[plan]") {
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-gpus-per-node2-env-task3.txt");
    CHECK(gpus_of(build(env).plan.ranks[3]) == "1");
    require_error(
        [&] {
            (void)build(env, with({{"gpus_per_task", "2"}}));
        },
        Errc::invalid_argument,
        "gpus_per_task: 2 tasks on node n1 need 4 GPUs but 2 are visible (0,1): \"2\"");
    CHECK(gpus_of(build(env, with({{"gpus_per_task", "0"}})).plan.ranks[3]).empty());
    env.unset("CUDA_VISIBLE_DEVICES");
    CHECK(gpus_of(build(env).plan.ranks[3]).empty()); // CPU-only: normal, not an error
    require_error(
        [&] {
            (void)build(env, with({{"gpus_per_task", "1"}}));
        },
        Errc::invalid_argument,
        "gpus_per_task: no GPU is visible to this task (CUDA_VISIBLE_DEVICES is unset "
        "or empty): \"1\"");
}

TEST_CASE("plan: GpuDetail::self_only fills the calling task's GPUs only", "[plan]") {
    const auto env =
        tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-gpus-per-node2-env-task3.txt");
    const auto step = tfslurm::read_step(env);
    const auto allocation = tfslurm::resolve_allocation(step);
    for (const auto bind : {"task", "node"}) {
        CAPTURE(bind);
        const auto options = with({{"gpu_bind", bind}});
        const auto every = tfslurm::make_plan(step, allocation, options);
        const auto self =
            tfslurm::make_plan(step, allocation, options, {}, tfslurm::GpuDetail::self_only);
        REQUIRE(self.ranks.size() == 6);
        CHECK_FALSE(self.ranks[3].gpus.empty());
        CHECK(self.ranks[3].gpus == every.ranks[3].gpus);
        for (const std::size_t rank : {0U, 1U, 2U, 4U, 5U}) {
            CHECK_FALSE(every.ranks[rank].gpus.empty());
            CHECK(self.ranks[rank].gpus.empty());
        }
    }
    // Requests are still checked against every node.
    require_error(
        [&] {
            (void)tfslurm::make_plan(step,
                                     allocation,
                                     with({{"gpus_per_task", "2"}}),
                                     {},
                                     tfslurm::GpuDetail::self_only);
        },
        Errc::invalid_argument,
        "gpus_per_task: 2 tasks on node n1 need 4 GPUs but 2 are visible (0,1): \"2\"");
}

TEST_CASE("plan: GPU-<uuid> and MIG-<uuid> entries are split as they are", "[plan]") {
    // Slurm 26.05 writes UUIDs into CUDA_VISIBLE_DEVICES: they are names, never numbers.
    const std::string gpu_a = "GPU-6f3a1c2e-8b4d-4e5f-9a7b-0c1d2e3f4a5b";
    const std::string gpu_b = "GPU-0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d";
    const std::string mig_a = "MIG-1b2c3d4e-5f60-5718-9a0b-c1d2e3f4a5b6";
    const std::string mig_b = "MIG-2c3d4e5f-6071-5829-ab1c-d2e3f4a5b6c7";
    const std::string mig_c = "MIG-3d4e5f60-7182-593a-bc2d-e3f4a5b6c7d8";
    const std::string mig_d = "MIG-4e5f6071-8293-5a4b-cd3e-f4a5b6c7d8e9";
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-gpus-per-node2-env-task3.txt");

    SECTION("two GPU UUIDs, two tasks per node: one each") {
        env.set("CUDA_VISIBLE_DEVICES", gpu_a + "," + gpu_b);
        const auto built = build(env);
        CHECK(gpus_of(built.plan.ranks[2]) == gpu_a);
        CHECK(gpus_of(built.plan.ranks[3]) == gpu_b);
        const auto vars = tfslurm::task_environment(built.plan, 3, {});
        CHECK(std::find(vars.begin(),
                        vars.end(),
                        std::pair<std::string, std::string>{"CUDA_VISIBLE_DEVICES", gpu_b}) !=
              vars.end());
        require_error(
            [&] {
                (void)build(env, with({{"gpus_per_task", "2"}}));
            },
            Errc::invalid_argument,
            "gpus_per_task: 2 tasks on node n1 need 4 GPUs but 2 are visible (" + gpu_a + "," +
                gpu_b + "): \"2\"");
    }
    SECTION("four MIG slices, two tasks per node: two each, in order") {
        env.set("CUDA_VISIBLE_DEVICES", mig_a + "," + mig_b + "," + mig_c + "," + mig_d);
        env.set("SLURM_GPUS_ON_NODE", "4");
        const auto built = build(env);
        CHECK(gpus_of(built.plan.ranks[2]) == mig_a + "," + mig_b);
        CHECK(gpus_of(built.plan.ranks[3]) == mig_c + "," + mig_d);
        CHECK(gpus_of(build(env, with({{"gpus_per_task", "1"}})).plan.ranks[3]) == mig_b);
        CHECK(gpus_of(build(env, with({{"gpu_bind", "node"}})).plan.ranks[3]) ==
              mig_a + "," + mig_b + "," + mig_c + "," + mig_d);
    }
    SECTION("bound per task by Slurm: kept as they are") {
        env.set("CUDA_VISIBLE_DEVICES", mig_b);
        CHECK(gpus_of(build(env).plan.ranks[3]) == mig_b);
    }
    SECTION("fewer slices than tasks: shared round robin") {
        const auto built = tf_case("n1", {3}, 2, {}, std::vector<std::string>{mig_a, mig_b});
        CHECK(gpus_of(built.plan.ranks[0]) == mig_a);
        CHECK(gpus_of(built.plan.ranks[1]) == mig_b);
        CHECK(gpus_of(built.plan.ranks[2]) == mig_a);
    }
    SECTION("indices and UUIDs mixed, as a --gpus preview") {
        const auto built = preview("n1", "2", {}, 1234);
        CHECK(built.plan.ranks[0].gpus.empty());
        tfslurm::StepOverrides overrides;
        overrides.nodelist = "n1";
        overrides.tasks_per_node = "2";
        overrides.job_id = 1;
        overrides.gpus = "0," + gpu_a;
        const auto step = tfslurm::preview_step(overrides);
        const auto plan = tfslurm::make_plan(step, tfslurm::resolve_allocation(step), {});
        CHECK(gpus_of(plan.ranks[0]) == "0");
        CHECK(gpus_of(plan.ranks[1]) == gpu_a);
    }
}
