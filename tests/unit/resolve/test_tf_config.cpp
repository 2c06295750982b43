// SPDX-License-Identifier: MIT
#include "fixtures.hpp"
#include "process.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

using tfslurm::Errc;
using tfslurm::Error;
using tfslurm::PlanOptions;
using tfslurm::test::require_error;
using tfslurm::test::value_of;

namespace {

tfslurm::Plan preview_plan(const std::string& nodelist,
                           const std::string& tasks,
                           const PlanOptions& options,
                           const std::string& ports = "",
                           std::optional<std::uint32_t> rank = std::nullopt) {
    auto overrides = tfslurm::test::preview_overrides(nodelist, tasks, 77, 1, rank);
    overrides.resv_ports = ports;
    return tfslurm::test::plan_of_preview(overrides, options);
}

PlanOptions roles(const std::string& list) {
    PlanOptions options;
    tfslurm::apply_plan_setting(options, "roles", list);
    return options;
}

} // namespace

TEST_CASE("tf_config: tf4slurm server dictionaries (V12), uneven layouts fixed", "[tf_config]") {
    const std::string ips = "10.0.0.1,10.0.0.2";
    SECTION("TF4-a: ps, worker, worker, worker") {
        const auto plan = preview_plan(ips, "2", roles("ps,worker*3"), "12000-12001");
        CHECK(
            tfslurm::server_dictionary_json(plan) ==
            R"({"ps":["10.0.0.1:12000"],"worker":["10.0.0.1:12001","10.0.0.2:12000","10.0.0.2:12001"]})");
        CHECK(plan.ranks[3].index == 2);
    }
    SECTION("TF4-c: ps interleaved") {
        const auto plan = preview_plan(ips, "2", roles("ps,worker,ps,worker"), "12000-12001");
        CHECK(
            tfslurm::server_dictionary_json(plan) ==
            R"({"ps":["10.0.0.1:12000","10.0.0.2:12000"],"worker":["10.0.0.1:12001","10.0.0.2:12001"]})");
    }
    SECTION("TF4-b: 1,2 layout, where tf4slurm crashed") {
        const auto plan = preview_plan(ips, "1,2", roles("ps,worker,worker"), "12000-12001");
        CHECK(tfslurm::server_dictionary_json(plan) ==
              R"({"ps":["10.0.0.1:12000"],"worker":["10.0.0.2:12000","10.0.0.2:12001"]})");
    }
    SECTION("TF4-d: non-contiguous reserved ports") {
        const auto plan = preview_plan(ips, "2", roles("ps,worker*3"), "12000,12005");
        CHECK(
            tfslurm::server_dictionary_json(plan) ==
            R"({"ps":["10.0.0.1:12000"],"worker":["10.0.0.1:12005","10.0.0.2:12000","10.0.0.2:12005"]})");
    }
    SECTION("no ps: both keys are still there") {
        const auto plan = preview_plan(ips, "1", {}, "12000-12001");
        CHECK(tfslurm::server_dictionary_json(plan) ==
              R"({"ps":[],"worker":["10.0.0.1:12000","10.0.0.2:12000"]})");
    }
}

TEST_CASE("tf_config: TF_CONFIG of every role, the evaluator is outside the cluster",
          "[tf_config]") {
    PlanOptions options;
    tfslurm::apply_plan_setting(options, "ps", "1");
    tfslurm::apply_plan_setting(options, "chief", "1");
    tfslurm::apply_plan_setting(options, "evaluator", "1");
    tfslurm::apply_plan_setting(options, "port_base", "2222");
    tfslurm::apply_plan_setting(options, "rpc_layer", "grpc");
    const auto plan = preview_plan("a,b", "2", options);
    const std::string cluster =
        R"({"cluster":{"chief":["a:2223"],"ps":["a:2222"],"worker":["b:2222"]},)";
    CHECK(tfslurm::tf_config_json(plan, 0) ==
          cluster + R"("task":{"type":"ps","index":0},"rpc_layer":"grpc"})");
    CHECK(tfslurm::tf_config_json(plan, 1) ==
          cluster + R"("task":{"type":"chief","index":0},"rpc_layer":"grpc"})");
    CHECK(tfslurm::tf_config_json(plan, 2) ==
          cluster + R"("task":{"type":"worker","index":0},"rpc_layer":"grpc"})");
    CHECK(tfslurm::tf_config_json(plan, 3) ==
          cluster + R"("task":{"type":"evaluator","index":0},"rpc_layer":"grpc"})");
    // Valid JSON that TensorFlow's TFConfigClusterResolver reads.
    const auto parsed = nlohmann::json::parse(tfslurm::tf_config_json(plan, 2));
    CHECK(parsed["cluster"]["worker"][0] == "b:2222");
}

TEST_CASE("tf_config: task_environment of a real task", "[tf_config]") {
    const auto env =
        tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-gpus-per-node2-env-task3.txt");
    const auto step = tfslurm::read_step(env);
    PlanOptions options;
    tfslurm::apply_plan_setting(options, "ps", "1");
    tfslurm::apply_plan_setting(options, "gpu_bind", "task");
    const auto plan = tfslurm::make_plan(step, tfslurm::resolve_allocation(step), options);
    const auto vars = tfslurm::task_environment(plan, 3, {});
    std::vector<std::string> names;
    for (const auto& [name, value] : vars) {
        names.push_back(name);
    }
    CHECK(names == std::vector<std::string>{"TF_CONFIG",
                                            "TFSLURM_SERVERS",
                                            "TFSLURM_TASK_TYPE",
                                            "TFSLURM_TASK_INDEX",
                                            "MASTER_ADDR",
                                            "MASTER_PORT",
                                            "RANK",
                                            "WORLD_SIZE",
                                            "LOCAL_RANK",
                                            "LOCAL_WORLD_SIZE",
                                            "NODE_RANK",
                                            "CUDA_VISIBLE_DEVICES",
                                            "TFSLURM_RANK",
                                            "TFSLURM_ROLE",
                                            "TFSLURM_CONTROL"});
    const auto base = tfslurm::derive_port_base(*step.job_id, *step.step_id, 3);
    CHECK(
        value_of(vars, "TF_CONFIG") ==
        fmt::format(
            R"({{"cluster":{{"ps":["n1:{0}"],"worker":["n1:{1}","n2:{0}","n2:{1}","n3:{0}","n3:{1}"]}},"task":{{"type":"worker","index":2}}}})",
            base,
            base + 1));
    CHECK(value_of(vars, "MASTER_ADDR") == "n1");
    CHECK(value_of(vars, "MASTER_PORT") == std::to_string(base));
    CHECK(value_of(vars, "RANK") == "3");
    CHECK(value_of(vars, "WORLD_SIZE") == "6");
    CHECK(value_of(vars, "LOCAL_RANK") == "1");
    CHECK(value_of(vars, "LOCAL_WORLD_SIZE") == "2");
    CHECK(value_of(vars, "NODE_RANK") == "1");
    CHECK(value_of(vars, "CUDA_VISIBLE_DEVICES") == "1");
    CHECK(value_of(vars, "TFSLURM_TASK_TYPE") == "worker");
    CHECK(value_of(vars, "TFSLURM_TASK_INDEX") == "2");
    CHECK(value_of(vars, "TFSLURM_CONTROL") == fmt::format("n1:{}", base + 2));

    const auto only_torch =
        tfslurm::task_environment(plan, 3, tfslurm::parse_output_selection("torch", "--only"));
    CHECK(only_torch.size() == 10);
    CHECK(value_of(only_torch, "TF_CONFIG") == "<unset>");
}

namespace {

/// The variables of `rank` in a real task environment, settings layered like both faces do.
tfslurm::EnvVars resolved_task_vars(tfslurm::Environment env,
                                    const std::string& nodelist,
                                    const std::string& tasks,
                                    int rank,
                                    const std::vector<tfslurm::SettingValue>& given) {
    env.set("SLURM_STEP_NODELIST", nodelist);
    env.set("SLURM_STEP_TASKS_PER_NODE", tasks);
    env.set("SLURM_PROCID", std::to_string(rank));
    const auto settings = tfslurm::resolve_settings(given).values;
    const auto step = tfslurm::read_step(env);
    const auto plan = tfslurm::make_plan(step, tfslurm::resolve_allocation(step), settings.plan);
    return tfslurm::task_environment(plan, static_cast<std::uint32_t>(rank), settings.outputs);
}

std::size_t device_count(const std::string& visible) {
    return visible == "<unset>"
               ? 0
               : static_cast<std::size_t>(std::count(visible.begin(), visible.end(), ',')) + 1;
}

} // namespace

TEST_CASE("tf_config: cuda:LOCAL_RANK is a device of the task whenever torch variables are output",
          "[tf_config]") {
    // Real GRES environments where every task of a node can have a GPU of its own and Slurm did
    // not bind them per task. Inside a process CUDA numbers CUDA_VISIBLE_DEVICES from 0, so
    // torch.cuda.set_device(LOCAL_RANK) needs LOCAL_RANK < the number of visible devices.
    const std::map<std::string, std::pair<std::string, std::string>> layouts{
        {"srun -N3 -n6 --gpus-per-node=2", {"n[1-3]", "2(x3)"}},
        {"srun -N3 -n6 --gres=gpu:2", {"n[1-3]", "2(x3)"}},
        {"srun -N3 -n6 --gres=gpu:4", {"n[1-3]", "2(x3)"}},
        {"srun -N1 -n1 --gpus-per-node=3", {"n1", "1"}},
    };
    std::size_t checked = 0;
    for (const auto& section : tfslurm::test::load_sections("slurm-env/gres-variants.txt")) {
        const auto layout = layouts.find(section.title);
        if (layout == layouts.end()) {
            continue;
        }
        for (const auto& [rank, env] : section.tasks) {
            INFO(section.title << ", rank " << rank);
            const std::string node_gpus{env.get("CUDA_VISIBLE_DEVICES").value_or("")};
            const auto& [nodelist, tasks] = layout->second;
            // Defaults (only=all): torch's convention, the node's GPUs.
            const auto vars = resolved_task_vars(env, nodelist, tasks, rank, {});
            const auto local = std::stoul(value_of(vars, "LOCAL_RANK"));
            CHECK(local < device_count(value_of(vars, "CUDA_VISIBLE_DEVICES")));
            CHECK(value_of(vars, "CUDA_VISIBLE_DEVICES") == node_gpus);
            // torch without the gpus group: Slurm's CUDA_VISIBLE_DEVICES stays, also valid.
            const auto torch_only = resolved_task_vars(
                env, nodelist, tasks, rank, {{"only", "torch", tfslurm::Origin::option}});
            CHECK(value_of(torch_only, "CUDA_VISIBLE_DEVICES") == "<unset>");
            CHECK(local < device_count(node_gpus));
            // The gpus group alone holds what it holds next to the torch variables: evaluated
            // separately, LOCAL_RANK still names one of the task's devices.
            const auto gpus_only = resolved_task_vars(
                env, nodelist, tasks, rank, {{"only", "gpus", tfslurm::Origin::option}});
            CHECK(value_of(gpus_only, "CUDA_VISIBLE_DEVICES") == node_gpus);
            // TensorFlow: gpu_bind=task gives each task its own share, cuda:0 inside it.
            const auto tf = resolved_task_vars(env,
                                               nodelist,
                                               tasks,
                                               rank,
                                               {{"only", "tf,gpus", tfslurm::Origin::option},
                                                {"gpu_bind", "task", tfslurm::Origin::option}});
            CHECK(device_count(value_of(tf, "CUDA_VISIBLE_DEVICES")) ==
                  device_count(node_gpus) / std::stoul(tasks.substr(0, 1)));
            // The same share with every group printed.
            const auto split = resolved_task_vars(
                env, nodelist, tasks, rank, {{"gpu_bind", "task", tfslurm::Origin::environment}});
            CHECK(value_of(split, "CUDA_VISIBLE_DEVICES") == value_of(tf, "CUDA_VISIBLE_DEVICES"));
            ++checked;
        }
    }
    CHECK(checked == 19);
}

TEST_CASE("tf_config: gpu_bind settings", "[tf_config]") {
    using tfslurm::GpuBind;
    using tfslurm::Origin;
    const auto bind = [](const std::vector<tfslurm::SettingValue>& given) {
        return tfslurm::resolve_settings(given).values.plan.gpu_bind;
    };
    CHECK(bind({}) == GpuBind::node);
    // `only` never changes a value: the tf4slurm groups alone bind like all of them.
    CHECK(bind({{"only", "tf,servers,gpus", Origin::option}}) == GpuBind::node);
    CHECK(bind({{"only", "gpus", Origin::environment}}) == GpuBind::node);
    CHECK(bind({{"gpus_per_task", "1", Origin::option}}) == GpuBind::task);
    CHECK(bind({{"gpu_bind", "task", Origin::plugstack}}) == GpuBind::task);
    CHECK(bind({{"gpu_bind", "node", Origin::option}, {"only", "tf", Origin::option}}) ==
          GpuBind::node);
    CHECK(bind({{"gpu_bind", "auto", Origin::option}, {"only", "torch", Origin::option}}) ==
          GpuBind::node);
    tfslurm::test::require_error(
        [&] {
            (void)bind({{"gpu_bind", "single:1", Origin::option}});
        },
        Errc::invalid_argument,
        "gpu_bind: expected auto, task or node: \"single:1\"");
    auto options = tfslurm::resolve_settings({{"gpu_bind", "node", Origin::option},
                                              {"gpus_per_task", "1", Origin::option}})
                       .values.plan;
    const auto step = tfslurm::read_step(
        tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-gpus-per-node2-env-task3.txt"));
    tfslurm::test::require_error(
        [&] { (void)tfslurm::make_plan(step, tfslurm::resolve_allocation(step), options); },
        Errc::invalid_argument,
        "gpu_bind: every task sees the node's GPUs, so there is no per-task share to size: "
        "\"node\"");
}

TEST_CASE("tf_config: export lines survive eval in a real shell", "[tf_config]") {
    const std::vector<std::string> nasty{"plain",
                                         "it's",
                                         "a 'b' \"c\"",
                                         "$(touch /x)",
                                         "`id`; $HOME",
                                         "back\\slash\nnewline",
                                         "",
                                         "*?[a]~"};
    tfslurm::EnvVars vars;
    for (std::size_t i = 0; i < nasty.size(); ++i) {
        vars.emplace_back("V" + std::to_string(i), nasty[i]);
    }
    char path[] = "/tmp/tfslurm-test-export-XXXXXX";
    const int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    ::close(fd);
    {
        std::ofstream out{path};
        out << tfslurm::render_env(vars, tfslurm::EnvFormat::export_lines);
        for (std::size_t i = 0; i < nasty.size(); ++i) {
            out << "printf '%s\\0' \"$V" << i << "\"\n";
        }
    }
    const auto result = tfslurm::test::run({{"/bin/sh", path}, {"PATH=/usr/bin:/bin"}});
    CHECK(result.status == 0);
    const std::string& output = result.out;
    ::unlink(path);
    std::string expected;
    for (const auto& value : nasty) {
        expected += value;
        expected.push_back('\0');
    }
    CHECK(output == expected);
    CHECK(tfslurm::shell_quote("it's") == R"('it'\''s')");
}

TEST_CASE("tf_config: env and json formats", "[tf_config]") {
    const tfslurm::EnvVars vars{{"A", "1"}, {"TF_CONFIG", R"({"x":"y"})"}};
    CHECK(tfslurm::render_env(vars, tfslurm::EnvFormat::key_value) ==
          "A=1\nTF_CONFIG={\"x\":\"y\"}\n");
    CHECK(tfslurm::render_env(vars, tfslurm::EnvFormat::json) ==
          "{\n  \"A\": \"1\",\n  \"TF_CONFIG\": \"{\\\"x\\\":\\\"y\\\"}\"\n}\n");
    // Text that is not UTF-8 cannot be JSON: an error naming the variable, not type_error 316.
    require_error(
        [] {
            (void)tfslurm::render_env({{"A", "1"}, {"CUDA_VISIBLE_DEVICES", "0,\xff"}},
                                      tfslurm::EnvFormat::json);
        },
        Errc::invalid_argument,
        R"(CUDA_VISIBLE_DEVICES: not valid UTF-8, cannot be JSON: "0,\xff")");
    CHECK(tfslurm::parse_env_format("export", "--format") == tfslurm::EnvFormat::export_lines);
    try {
        (void)tfslurm::parse_env_format("yaml", "--format");
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::invalid_argument);
        CHECK(std::string{e.what()} ==
              "--format: expected export, env, json or task-prolog: \"yaml\"");
    }
    try {
        (void)tfslurm::parse_output_selection("tf,pytorch", "--only");
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(std::string{e.what()} ==
              "--only: expected all, or a comma list of tf, servers, torch, gpus: \"tf,pytorch\"");
    }
}

TEST_CASE("tf_config: task-prolog format, what Slurm's TaskProlog reads", "[tf_config]") {
    CHECK(tfslurm::parse_env_format("task-prolog", "format") == tfslurm::EnvFormat::task_prolog);
    // slurmstepd sets NAME to the rest of the line, verbatim: no quotes, spaces kept.
    const tfslurm::EnvVars vars{
        {"TF_CONFIG", R"({"cluster":{"worker":["n1:2000"]},"task":{"type":"worker","index":0}})"},
        {"A", " it's $HOME "},
        {"EMPTY", ""}};
    CHECK(tfslurm::render_env(vars, tfslurm::EnvFormat::task_prolog) ==
          "export TF_CONFIG={\"cluster\":{\"worker\":[\"n1:2000\"]},\"task\":{\"type\":"
          "\"worker\",\"index\":0}}\n"
          "export A= it's $HOME \n"
          "export EMPTY=\n");
    tfslurm::test::require_error(
        [] {
            (void)tfslurm::render_env({{"OK", "1"}, {"MASTER_ADDR", "n1\nprint hi"}},
                                      tfslurm::EnvFormat::task_prolog);
        },
        Errc::invalid_argument,
        "MASTER_ADDR: a newline in the value cannot be written for Slurm's TaskProlog (it reads "
        "one 'export NAME=value' line per variable, verbatim): \"n1\\nprint hi\"");
}

TEST_CASE("tf_config: a TF_CONFIG too large for the environment is a clear error", "[tf_config]") {
    const auto plan = preview_plan("a-rather-long-node-name-[00001-04000]", "2", {}, "", 0U);
    CHECK(tfslurm::tf_config_json(plan, 0).size() > tfslurm::k_max_env_string);
    tfslurm::OutputSelection selection;
    selection.servers = false; // the tf4slurm dictionary is as large: both, in their own test
    try {
        (void)tfslurm::task_environment(plan, 0, selection);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::too_large);
        const std::string message = e.what();
        CHECK(message.rfind("TF_CONFIG: ", 0) == 0);
        CHECK(message.find(" bytes for 8000 tasks do not fit in one environment variable (Linux "
                           "allows 131072 bytes per NAME=value string)") != std::string::npos);
        CHECK(e.hint() == "write it to a file on the node that Python trainers load into "
                          "TF_CONFIG: tf_config_file=auto");
    }
}

TEST_CASE("tf_config: plan table and JSON", "[tf_config]") {
    PlanOptions options;
    tfslurm::apply_plan_setting(options, "ps", "1");
    auto overrides = tfslurm::test::preview_overrides("n[1-2]", "2,1", 1234);
    overrides.gpus = "0,1";
    const auto plan = tfslurm::test::plan_of_preview(overrides, options);
    CHECK(tfslurm::plan_table(plan) ==
          "# job 1234, step 0: 3 tasks on 2 nodes (n[1-2]), native layout\n"
          "# ports: derived; launcher control endpoint n1:21865\n"
          "RANK  ROLE      HOST  ADDRESS  PORT   GPUS\n"
          "0     ps:0      n1    n1       21863  0\n"
          "1     worker:0  n1    n1       21864  1\n"
          "2     worker:1  n2    n2       21863  0,1\n");
    const auto json = nlohmann::json::parse(tfslurm::plan_json(plan));
    CHECK(json["job_id"] == 1234);
    CHECK(json["cluster"]["ps"] == nlohmann::json::array({"n1:21863"}));
    CHECK(json["cluster"]["worker"] == nlohmann::json::array({"n1:21864", "n2:21863"}));
    CHECK(json["control"]["port"] == 21865);
    CHECK(json["control"]["port_source"] == "derived");
    CHECK(json["ranks"][2]["gpus"] == nlohmann::json::array({"0", "1"}));
    CHECK(json["self_rank"].is_null());

    SECTION("a control port outside the reserved ports is named so in the header and the JSON") {
        const auto reserved = preview_plan("n[1-2]", "2,1", options, "23000-23001");
        const std::string table = tfslurm::plan_table(reserved);
        CHECK(table.substr(table.find('\n') + 1, table.find("RANK") - table.find('\n') - 1) ==
              "# ports: reserved; launcher control endpoint n1:" +
                  std::to_string(reserved.control_port) +
                  " (derived, outside SLURM_STEP_RESV_PORTS \"23000-23001\": it reserves 2 "
                  "ports for 2 tasks on a node and none for the launcher; srun --resv-ports=3 "
                  "reserves one)\n");
        const auto parsed = nlohmann::json::parse(tfslurm::plan_json(reserved));
        CHECK(parsed["port_source"] == "reserved");
        CHECK(parsed["control"]["port_source"] == "derived");
        const auto spare = preview_plan("n[1-2]", "2,1", options, "23000-23002");
        CHECK(tfslurm::plan_table(spare).find(
                  "# ports: reserved; launcher control endpoint n1:23002\n") != std::string::npos);
    }
}
