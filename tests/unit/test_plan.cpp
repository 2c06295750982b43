// SPDX-License-Identifier: MIT
// Unit tests of the native plan (include/tfslurm/plan.hpp): roles, ports, addresses, GPUs.
#include "fixtures.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>
#include <tfslurm/placement.hpp>
#include <tfslurm/plan.hpp>
#include <tfslurm/plan_settings.hpp>
#include <tfslurm/step.hpp>
#include <tfslurm/tf_config.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

using tfslurm::Environment;
using tfslurm::Errc;
using tfslurm::Error;
using tfslurm::PlanOptions;
using tfslurm::Role;
using tfslurm::test::Built;
using tfslurm::test::gpus_of;
using tfslurm::test::require_error;
using tfslurm::test::tf_case;
using tfslurm::test::with;

namespace {

Built build(const Environment& env, const PlanOptions& options = {}) {
    Built built;
    built.step = tfslurm::read_step(env);
    built.allocation = tfslurm::resolve_allocation(built.step);
    built.plan = tfslurm::make_plan(built.step, built.allocation, options);
    return built;
}

Built preview(const std::string& nodelist,
              const std::string& tasks,
              const PlanOptions& options = {},
              std::uint64_t job = 1234) {
    tfslurm::StepOverrides overrides;
    overrides.nodelist = nodelist;
    overrides.tasks_per_node = tasks;
    overrides.job_id = job;
    overrides.step_id = 0;
    Built built;
    built.step = tfslurm::preview_step(overrides);
    built.allocation = tfslurm::resolve_allocation(built.step);
    built.plan = tfslurm::make_plan(built.step, built.allocation, options);
    return built;
}

std::string roles_of(const tfslurm::Plan& plan) {
    std::string out;
    for (const auto& rank : plan.ranks) {
        out += (out.empty() ? "" : " ") + std::string{tfslurm::to_string(rank.role)} + ":" +
               std::to_string(rank.index);
    }
    return out;
}

} // namespace

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

TEST_CASE("plan: derived ports keep concurrent jobs apart", "[plan]") {
    using tfslurm::derive_port_base;
    CHECK(derive_port_base(1234, 0, 3) == 21863);
    CHECK(derive_port_base(0, 0, 3) == 29165);
    // The old window (job * 16 + step modulo the window count) gave these pairs one window:
    // jobs 250 apart with two tasks per node, job 21 step 0 and job 128 step 2 with six, steps 16
    // apart.
    CHECK(derive_port_base(21, 0, 3) == 27512);
    CHECK(derive_port_base(271, 0, 3) == 24320);
    CHECK(derive_port_base(21, 16, 3) == 31592);
    CHECK(derive_port_base(21, 0, 7) != derive_port_base(128, 2, 7));
    CHECK(derive_port_base(21, 0, 7) != derive_port_base(21, 16, 7));
    // Hashed, no id pattern collides systematically: among 1000 consecutive jobs (two tasks per
    // node: 4000 windows) 127 pairs share a window, as chance predicts (1000 * 999 / 2 / 4000 =
    // 124.9); the old scheme gave 750 pairs (every job and the one 250 later). Steps of one job
    // alike (133 pairs among 1000 steps).
    const auto sharing_pairs = [](auto&& base_of) {
        std::map<std::uint16_t, std::size_t> count;
        std::size_t pairs = 0;
        for (std::uint64_t i = 0; i < 1000; ++i) {
            const auto base = base_of(i);
            CHECK(base >= 20000);
            CHECK(base + 3 <= 32000);
            pairs += count[base]++;
        }
        return pairs;
    };
    CHECK(sharing_pairs([](std::uint64_t i) { return derive_port_base(1 + i, 0, 3); }) == 127);
    CHECK(sharing_pairs([](std::uint64_t i) { return derive_port_base(1, i, 3); }) == 133);
    // Every window lies inside the range, up to the last one.
    for (std::uint64_t job = 0; job < 2000; ++job) {
        const auto base = derive_port_base(job, job % 5, 9);
        CHECK((base - 20000) % 9 == 0);
        CHECK(base + 9 <= 32000);
    }
    const auto built = preview("n[1-3]", "2", {}, 1234);
    CHECK(built.plan.port_source == tfslurm::PortSource::derived);
    CHECK(built.plan.endpoint(0) == "n1:21863");
    CHECK(built.plan.endpoint(1) == "n1:21864");
    CHECK(built.plan.endpoint(2) == "n2:21863");
    CHECK(built.plan.control_address == "n1");
    CHECK(built.plan.control_port == 21865);
}

TEST_CASE("control_port_candidates: the control port, then 7 fallbacks every launcher agrees on",
          "[plan]") {
    const auto built = preview("n[1-3]", "2", {}, 1234);
    CHECK(tfslurm::control_port_candidates(built.plan) ==
          std::vector<std::uint16_t>{21865, 32448, 32088, 32643, 32036, 32069, 32557, 32255});
    // Another step: other fallbacks. None is ever a trainer port of the plan, even when an
    // explicit base puts the trainers in the fallback range.
    auto plan = built.plan;
    plan.step_id = 1;
    const auto other = tfslurm::control_port_candidates(plan);
    CHECK(other.front() == 21865);
    CHECK(other != tfslurm::control_port_candidates(built.plan));
    for (std::uint16_t first = 32000; first < 32768; first += 2) {
        for (auto& rank : plan.ranks) {
            rank.port = static_cast<std::uint16_t>(first + rank.local);
        }
        plan.control_port = static_cast<std::uint16_t>(first + 2);
        const auto candidates = tfslurm::control_port_candidates(plan);
        REQUIRE(candidates.size() == 8);
        CHECK(candidates.front() == plan.control_port);
        CHECK(std::set<std::uint16_t>(candidates.begin(), candidates.end()).size() == 8);
        for (const auto port : candidates) {
            CHECK(port != first);
            CHECK(port != first + 1);
        }
    }
}

TEST_CASE("plan: reserved and explicit ports", "[plan]") {
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    env.set("SLURM_STEP_RESV_PORTS", "12000,12005-12006");
    auto built = build(env);
    CHECK(built.plan.port_source == tfslurm::PortSource::reserved);
    CHECK(built.plan.endpoint(0) == "n1:12000");
    CHECK(built.plan.endpoint(1) == "n1:12005");
    CHECK(built.plan.control_port == 12006);

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

TEST_CASE("plan: addresses from a host pattern and a resolver", "[plan]") {
    auto options = with({{"host_pattern", "{host}-ib0"}});
    auto built = preview("n[1-2]", "1", options);
    CHECK(built.plan.endpoint(1).rfind("n2-ib0:", 0) == 0);
    CHECK(built.plan.ranks[1].host == "n2");

    options.address = tfslurm::AddressMode::ip;
    tfslurm::StepOverrides overrides;
    overrides.nodelist = "n[1-2]";
    overrides.job_id = 1;
    const auto step = tfslurm::preview_step(overrides);
    const auto allocation = tfslurm::resolve_allocation(step);
    std::vector<std::string> asked;
    const auto plan = tfslurm::make_plan(step, allocation, options, [&](const std::string& name) {
        asked.push_back(name);
        return name == "n1-ib0" ? std::string{"10.1.0.1"} : std::string{"10.1.0.2"};
    });
    CHECK(asked == std::vector<std::string>{"n1-ib0", "n2-ib0"});
    CHECK(plan.ranks[0].address == "10.1.0.1");
    CHECK(plan.ranks[1].address == "10.1.0.2");
    CHECK(plan.control_address == "10.1.0.1");

    require_error(
        [] {
            (void)with({{"host_pattern", "{node}-ib0"}});
        },
        Errc::invalid_argument,
        "host_pattern: unknown placeholder at offset 0 (only {host} is known): "
        "\"{node}-ib0\"");
}

TEST_CASE("plan: the system resolver resolves localhost and reports failures", "[plan]") {
    const auto resolve = tfslurm::system_address_resolver();
    CHECK(resolve("localhost") == "127.0.0.1");
    try {
        (void)resolve("no-such-host.invalid");
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::io);
        CHECK(std::string{e.what()}.rfind(
                  "address=ip: cannot resolve \"no-such-host.invalid\" to an IPv4 address (", 0) ==
              0);
    }
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
