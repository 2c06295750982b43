// SPDX-License-Identifier: MIT
// Unit tests of the SPANK plugin's pure half (plugins/spank/options.cpp): plugstack.conf
// arguments, the --tfslurm value, TFSLURM_* variables, precedence and the per-task variables.
#include "fixtures.hpp"
#include "options.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"
#include "topology_conf.hpp"

#include <tfslurm/common/error.hpp>

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using tfslurm::Environment;
using tfslurm::Errc;
using tfslurm::Error;
using tfslurm::Origin;
using tfslurm::spank::Activation;
using tfslurm::spank::check_run_supported;
using tfslurm::spank::describe;
using tfslurm::spank::environment_settings;
using tfslurm::spank::launcher_variables;
using tfslurm::spank::OptionSpec;
using tfslurm::spank::parse_option_spec;
using tfslurm::spank::parse_plugstack_args;
using tfslurm::spank::plugin_setting_name;
using tfslurm::spank::Release;
using tfslurm::spank::release_mismatch;
using tfslurm::spank::release_of_version_number;
using tfslurm::spank::resolve_settings;
using tfslurm::spank::Setting;
using tfslurm::spank::SiteConfig;
using tfslurm::spank::task_variables;
using tfslurm::test::require_error;
using tfslurm::test::value_of;

std::vector<std::string> names_of(const tfslurm::EnvVars& vars) {
    std::vector<std::string> names;
    for (const auto& var : vars) {
        names.push_back(var.first);
    }
    return names;
}

const std::string k_known = "ps, chief, evaluator, roles, roles_by_component, ps_placement, "
                            "layout, port_base, address, host_pattern, "
                            "exchange, gpus_per_task, gpu_bind, gpus_per_node, rpc_layer, only, "
                            "run";

} // namespace

TEST_CASE("parse_option_spec: accepted forms", "[spank]") {
    SECTION("bare --tfslurm: the defaults") {
        const auto spec = parse_option_spec("");
        CHECK_FALSE(spec.off);
        CHECK(spec.settings.empty());
    }
    SECTION("bare sbatch/salloc --tfslurm, as Slurm hands it to the job's steps: the defaults") {
        const auto spec = parse_option_spec("(null)");
        CHECK_FALSE(spec.off);
        CHECK(spec.settings.empty());
    }
    SECTION("off") {
        const auto spec = parse_option_spec("off");
        CHECK(spec.off);
        CHECK(spec.settings.empty());
    }
    SECTION("one setting per form") {
        const auto [input, key, value] = GENERATE(table<std::string, std::string, std::string>({
            {"ps=2", "ps", "2"},
            {"ps=0", "ps", "0"},
            {"chief", "chief", "1"},
            {"chief=0", "chief", "0"},
            {"chief=no", "chief", "no"},
            {"chief=", "chief", ""},
            {"evaluator", "evaluator", "1"},
            {"roles=ps+worker*3", "roles", "ps,worker*3"},
            {"roles=ps:worker:chief", "roles", "ps,worker,chief"},
            {"roles=worker", "roles", "worker"},
            {"roles=", "roles", ""},
            {"ps_placement=spread", "ps_placement", "spread"},
            {"ps-placement=first", "ps_placement", "first"},
            {"layout=tf-compat", "layout", "tf-compat"},
            {"layout=native", "layout", "native"},
            {"port_base=20000", "port_base", "20000"},
            {"port-base=65535", "port_base", "65535"},
            {"address=ip", "address", "ip"},
            {"host_pattern={host}-ib0", "host_pattern", "{host}-ib0"},
            {"gpus_per_task=1", "gpus_per_task", "1"},
            {"gpus_per_node=4", "gpus_per_node", "4"},
            {"rpc_layer=grpc", "rpc_layer", "grpc"},
            {"rpc_layer=grpc+verbs", "rpc_layer", "grpc+verbs"},
            {"only=tf", "only", "tf"},
            {"only=tf+torch", "only", "tf,torch"},
            {"only=servers:gpus", "only", "servers,gpus"},
            {"only=all", "only", "all"},
            {"exchange=auto", "exchange", "auto"},
            {"exchange=env", "exchange", "env"},
        }));
        CAPTURE(input);
        const auto spec = parse_option_spec(input);
        CHECK_FALSE(spec.off);
        REQUIRE(spec.settings.size() == 1);
        CHECK(spec.settings[0] == Setting{key, value, Origin::option});
    }
    SECTION("several settings keep their order") {
        const auto spec = parse_option_spec("ps=2,chief,roles=ps+worker*3,only=tf+servers");
        const std::vector<Setting> expected{
            {"ps", "2", Origin::option},
            {"chief", "1", Origin::option},
            {"roles", "ps,worker*3", Origin::option},
            {"only", "tf,servers", Origin::option},
        };
        CHECK(spec.settings == expected);
    }
}

TEST_CASE("parse_option_spec: rejections", "[spank]") {
    const auto row = GENERATE_REF(table<std::string, std::string>({
        {"ps=x", R"(--tfslurm ps: expected an integer from 0 to 4194304: "x")"},
        {"ps=-1", R"(--tfslurm ps: expected an integer from 0 to 4194304: "-1")"},
        {"ps=", R"(--tfslurm ps: expected an integer from 0 to 4194304: "")"},
        {"ps", R"(--tfslurm: setting needs a value (write ps=...): "ps")"},
        {"roles", R"(--tfslurm: setting needs a value (write roles=...): "roles")"},
        {"foo=1", "--tfslurm: unknown setting (known: " + k_known + "): \"foo\""},
        {"ps=1,foo", "--tfslurm: unknown setting (known: " + k_known + "): \"foo\""},
        {"PS=1", "--tfslurm: unknown setting (known: " + k_known + "): \"PS\""},
        {" ps=1", "--tfslurm: unknown setting (known: " + k_known + "): \" ps\""},
        {"=1", "--tfslurm: unknown setting (known: " + k_known + "): \"\""},
        {"enabled=always", "--tfslurm: unknown setting (known: " + k_known + "): \"enabled\""},
        // PMI2 cannot be used safely inside the task before exec; the plugin has no coordinator.
        {"exchange=pmi2",
         "--tfslurm exchange: the plugin cannot use PMI2 safely: it would take the task's PMI2 "
         "connection before the program starts, and a fence hangs the step when one task does "
         "not take part: \"pmi2\""},
        {"exchange=coordinator",
         R"(--tfslurm exchange: only tfslurm run has a coordinator: "coordinator")"},
        {"exchange=mpi", R"(--tfslurm exchange: expected auto, env, pmi2 or coordinator: "mpi")"},
        {"ps=1,,chief", R"(--tfslurm: empty setting at offset 5: "ps=1,,chief")"},
        {"ps=1,", R"(--tfslurm: empty setting at offset 5: "ps=1,")"},
        {",ps=1", R"(--tfslurm: empty setting at offset 0: ",ps=1")"},
        {",", R"(--tfslurm: empty setting at offset 0: ",")"},
        {"ps=1,ps=2", R"(--tfslurm: setting given twice: "ps")"},
        {"ps_placement=first,ps-placement=spread",
         R"(--tfslurm: setting given twice: "ps_placement")"},
        {"off,ps=1", R"(--tfslurm: off cannot be combined with settings: "off,ps=1")"},
        {"ps=1,off", R"(--tfslurm: off cannot be combined with settings: "ps=1,off")"},
        {"chief=maybe", R"(--tfslurm chief: expected yes/no, true/false, on/off or 1/0: "maybe")"},
        {"roles=ps+boss",
         R"(--tfslurm roles: expected a role: ps, worker, chief or evaluator: "boss")"},
        {"roles=ps,worker", "--tfslurm: unknown setting (known: " + k_known + "): \"worker\""},
        {"roles=worker*0",
         R"(--tfslurm roles: bad repetition in 'worker*0' (expected ROLE*N with N from 1 to 4194304): "worker*0")"},
        {"roles=ps++worker",
         R"(--tfslurm roles: expected a role: ps, worker, chief or evaluator: "")"},
        {"only=tf+bogus",
         R"(--tfslurm only: expected all, or a comma list of tf, servers, torch, gpus: "bogus")"},
        {"only=all+tf",
         R"(--tfslurm only: expected all, or a comma list of tf, servers, torch, gpus: "all,tf")"},
        {"ps_placement=last", R"(--tfslurm ps_placement: expected first or spread: "last")"},
        {"layout=tf", R"(--tfslurm layout: expected native or tf-compat: "tf")"},
        {"port_base=0", R"(--tfslurm port_base: expected an integer from 1 to 65535: "0")"},
        {"port_base=70000", R"(--tfslurm port_base: expected an integer from 1 to 65535: "70000")"},
        {"address=dns", R"(--tfslurm address: expected name or ip: "dns")"},
        {"host_pattern={name}",
         R"(--tfslurm host_pattern: unknown placeholder at offset 0 (only {host} is known): "{name}")"},
        {"gpus_per_task=x", R"(--tfslurm gpus_per_task: expected an integer from 0 to 65536: "x")"},
        {"rpc_layer=a\"b", R"(--tfslurm rpc_layer: expected a protocol name such as grpc: "a\"b")"},
    }));
    // Named copies: C++17 lambdas cannot capture structured bindings.
    const std::string input = std::get<0>(row);
    CAPTURE(input);
    require_error(
        [&] { (void)parse_option_spec(input); }, Errc::invalid_argument, std::get<1>(row));
}

TEST_CASE("parse_option_spec: structural errors carry a hint", "[spank]") {
    try {
        (void)tfslurm::spank::parse_option_spec("ps=1,,chief");
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.hint() ==
              "separate settings with one comma; inside roles= and only= use + between items");
        CHECK(tfslurm::spank::describe(e) ==
              "--tfslurm: empty setting at offset 5: \"ps=1,,chief\" (separate settings with one "
              "comma; inside roles= and only= use + between items)");
    }
}

TEST_CASE("parse_plugstack_args: accepted forms", "[spank]") {
    SECTION("no arguments: only with --tfslurm, library defaults") {
        const auto site = parse_plugstack_args({});
        CHECK(site.activation == Activation::option);
        CHECK(site.settings.empty());
    }
    SECTION("every kind of argument") {
        const auto site = parse_plugstack_args({"ps=1",
                                                "only=tf,servers",
                                                "roles=ps+worker*2",
                                                "rpc_layer=grpc+verbs",
                                                "host_pattern={host}-ib0",
                                                "enabled=always"});
        CHECK(site.activation == Activation::always);
        const std::vector<Setting> expected{
            {"ps", "1", Origin::plugstack},
            {"only", "tf,servers", Origin::plugstack},
            {"roles", "ps,worker*2", Origin::plugstack},
            {"rpc_layer", "grpc+verbs", Origin::plugstack},
            {"host_pattern", "{host}-ib0", Origin::plugstack},
        };
        CHECK(site.settings == expected);
    }
    SECTION("run and the tfslurm it starts tasks under") {
        const auto site = parse_plugstack_args({"run=yes", "tfslurm=/opt/tfslurm/bin/tfslurm"});
        CHECK(site.tfslurm == "/opt/tfslurm/bin/tfslurm");
        CHECK(site.settings == std::vector<Setting>{{"run", "yes", Origin::plugstack}});
        CHECK(parse_plugstack_args({}).tfslurm.empty());
    }
    SECTION("enabled=option is the default, spelled out") {
        CHECK(parse_plugstack_args({"enabled=option"}).activation == Activation::option);
    }
}

TEST_CASE("parse_plugstack_args: rejections", "[spank]") {
    const auto row = GENERATE_REF(table<std::vector<std::string>, std::string>({
        {{"ps"}, R"(plugstack.conf: expected key=value: "ps")"},
        {{"=1"}, R"(plugstack.conf: expected key=value: "=1")"},
        {{"bogus=1"},
         "plugstack.conf: unknown setting (known: " + k_known + ", enabled, tfslurm): \"bogus\""},
        {{"ps-placement=first"},
         "plugstack.conf: unknown setting (known: " + k_known +
             ", enabled, tfslurm): \"ps-placement\""},
        {{"enabled=sometimes"},
         R"(plugstack.conf enabled: expected option or always: "sometimes")"},
        {{"enabled=always", "enabled=option"}, R"(plugstack.conf: setting given twice: "enabled")"},
        {{"ps=1", "ps=2"}, R"(plugstack.conf: setting given twice: "ps")"},
        {{"ps=x"}, R"(plugstack.conf ps: expected an integer from 0 to 4194304: "x")"},
        {{"roles=ps,boss"},
         R"(plugstack.conf roles: expected a role: ps, worker, chief or evaluator: "boss")"},
        {{"only=tf,nope"},
         R"(plugstack.conf only: expected all, or a comma list of tf, servers, torch, gpus: "nope")"},
        {{"layout=compat"}, R"(plugstack.conf layout: expected native or tf-compat: "compat")"},
        {{"run=maybe"},
         R"(plugstack.conf run: expected yes/no, true/false, on/off or 1/0: "maybe")"},
        {{"tfslurm=bin/tfslurm"},
         R"(plugstack.conf tfslurm: expected the absolute path of the tfslurm command on the nodes: "bin/tfslurm")"},
        {{"tfslurm="},
         R"(plugstack.conf tfslurm: expected the absolute path of the tfslurm command on the nodes: "")"},
        {{"tfslurm=/a", "tfslurm=/b"}, R"(plugstack.conf: setting given twice: "tfslurm")"},
    }));
    const std::vector<std::string> args = std::get<0>(row);
    CAPTURE(args);
    require_error(
        [&] { (void)parse_plugstack_args(args); }, Errc::invalid_argument, std::get<1>(row));
}

TEST_CASE("environment_settings: TFSLURM_* variables as the CLI reads them", "[spank]") {
    SECTION("set variables become settings, in key order; empty and unrelated ones are ignored") {
        const Environment env{{"TFSLURM_ONLY", "tf,torch"},
                              {"TFSLURM_PS", "2"},
                              {"TFSLURM_CHIEF", ""},
                              {"TFSLURM_RANK", "3"},
                              {"TFSLURM_LAYOUT", "tf-compat"},
                              {"SLURM_PROCID", "3"}};
        const std::vector<Setting> expected{
            {"ps", "2", Origin::environment},
            {"layout", "tf-compat", Origin::environment},
            {"only", "tf,torch", Origin::environment},
        };
        CHECK(environment_settings(env) == expected);
    }
    SECTION("no variables") {
        CHECK(environment_settings(Environment{}).empty());
    }
    SECTION("a bad value names the variable") {
        const auto [name, value, message] = GENERATE(table<std::string, std::string, std::string>({
            {"TFSLURM_PS", "x", R"(TFSLURM_PS: expected an integer from 0 to 4194304: "x")"},
            {"TFSLURM_ONLY",
             "tf+torch",
             R"(TFSLURM_ONLY: expected all, or a comma list of tf, servers, torch, gpus: "tf+torch")"},
            {"TFSLURM_ADDRESS", "dns", R"(TFSLURM_ADDRESS: expected name or ip: "dns")"},
        }));
        const Environment env{{name, value}};
        require_error([&] { (void)environment_settings(env); }, Errc::invalid_argument, message);
    }
}

TEST_CASE("resolve_settings: option > TFSLURM_* > plugstack.conf > defaults", "[spank]") {
    const auto site = parse_plugstack_args({"ps=1", "only=tf", "layout=tf-compat"});
    const auto env = environment_settings(Environment{{"TFSLURM_PS", "2"}});
    const auto option = parse_option_spec("ps=3,only=torch+gpus");

    SECTION("defaults") {
        const auto resolved = resolve_settings(SiteConfig{}, {}, OptionSpec{});
        CHECK(resolved.values.plan.counts.ps == 0);
        CHECK(resolved.values.plan.layout == tfslurm::Layout::native);
        CHECK(resolved.values.outputs.tf_config);
        CHECK(resolved.values.outputs.servers);
        CHECK(resolved.values.outputs.torch);
        CHECK(resolved.values.outputs.gpus);
    }
    SECTION("plugstack.conf over defaults") {
        const auto resolved = resolve_settings(site, {}, OptionSpec{});
        CHECK(resolved.values.plan.counts.ps == 1);
        CHECK(resolved.values.plan.layout == tfslurm::Layout::tf_compat);
        CHECK(resolved.values.outputs.tf_config);
        CHECK_FALSE(resolved.values.outputs.torch);
    }
    SECTION("environment over plugstack.conf") {
        const auto resolved = resolve_settings(site, env, OptionSpec{});
        CHECK(resolved.values.plan.counts.ps == 2);
        CHECK(resolved.values.plan.layout == tfslurm::Layout::tf_compat);
    }
    SECTION("option over environment; keys it does not set come from below") {
        const auto resolved = resolve_settings(site, env, option);
        CHECK(resolved.values.plan.counts.ps == 3);
        CHECK(resolved.values.plan.layout == tfslurm::Layout::tf_compat);
        CHECK_FALSE(resolved.values.outputs.tf_config);
        CHECK_FALSE(resolved.values.outputs.servers);
        CHECK(resolved.values.outputs.torch);
        CHECK(resolved.values.outputs.gpus);
    }
    SECTION("a bare --tfslurm keeps the lower layers") {
        const auto resolved = resolve_settings(site, env, parse_option_spec(""));
        CHECK(resolved.values.plan.counts.ps == 2);
    }
    SECTION("roles=: a list from any layer, cleared by an empty value above") {
        const auto with_roles = parse_plugstack_args({"roles=ps,worker"});
        CHECK(resolve_settings(with_roles, {}, OptionSpec{}).values.plan.role_list.size() == 2);
        CHECK(resolve_settings(with_roles, {}, parse_option_spec("roles="))
                  .values.plan.role_list.empty());
    }
}

TEST_CASE("task_variables: the variables of one task of a real step", "[spank]") {
    // Task 3 of `srun -N3 -n6` (job 5, step 0): rank 3 runs on n2.
    const auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");

    SECTION("ps=1: rank 3 is worker 2; every output by default") {
        const auto settings = resolve_settings(SiteConfig{}, {}, parse_option_spec("ps=1"));
        const auto vars = task_variables(settings, env);
        const auto tf_config = value_of(vars, "TF_CONFIG");
        CHECK(tf_config.find(R"("task":{"type":"worker","index":2})") != std::string::npos);
        CHECK(tf_config.find(R"("ps":["n1:)") != std::string::npos);
        CHECK(value_of(vars, "TFSLURM_RANK") == "3");
        CHECK(value_of(vars, "TFSLURM_ROLE") == "worker");
        CHECK(value_of(vars, "TFSLURM_TASK_TYPE") == "worker");
        CHECK(value_of(vars, "TFSLURM_TASK_INDEX") == "2");
        CHECK(value_of(vars, "RANK") == "3");
        CHECK(value_of(vars, "WORLD_SIZE") == "6");
        CHECK(value_of(vars, "MASTER_ADDR") == "n1");
    }
    SECTION("the rank Slurm gives wins over nothing; a rank outside the step is an error") {
        const auto settings = resolve_settings(SiteConfig{}, {}, OptionSpec{});
        CHECK(value_of(task_variables(settings, env, 3U), "TFSLURM_RANK") == "3");
        require_error([&] { (void)task_variables(settings, env, 6U); },
                      Errc::inconsistent_allocation,
                      R"(SLURM_PROCID: rank outside the step's 6 tasks: "6")");
    }
    SECTION("only=tf: TF_CONFIG and the variables task_environment always writes") {
        const auto settings = resolve_settings(SiteConfig{}, {}, parse_option_spec("only=tf"));
        const auto names = names_of(task_variables(settings, env));
        CHECK(std::find(names.begin(), names.end(), "TF_CONFIG") != names.end());
        CHECK(std::find(names.begin(), names.end(), "MASTER_ADDR") == names.end());
        CHECK(std::find(names.begin(), names.end(), "TFSLURM_SERVERS") == names.end());
    }
    SECTION("an impossible plan is the library's error") {
        const auto settings = resolve_settings(SiteConfig{}, {}, parse_option_spec("ps=7"));
        CHECK_THROWS_AS(task_variables(settings, env), Error);
    }
    SECTION("outside a step: the library's missing_env error") {
        const auto settings = resolve_settings(SiteConfig{}, {}, OptionSpec{});
        try {
            (void)task_variables(settings, Environment{{"SLURM_PROCID", "0"}});
            FAIL("no exception");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::missing_env);
        }
    }
}

TEST_CASE("task_variables: a block step in topology order takes the controller's layout",
          "[spank]") {
    // Task 2 of `srun -p topo -N3 -n6` on 26.05 (on n1), with a stand-in sattach in its PATH
    // that prints what 26.05's printed for that step: ranks 0,1 on n3, 2,3 on n1, 4,5 on n2.
    const tfslurm::test::TempDir dir("spank-topo");
    const std::string conf = tfslurm::test::write_topology_conf(dir);
    const std::string bin = dir.path + "/bin";
    REQUIRE(::mkdir(bin.c_str(), 0755) == 0);
    auto env = tfslurm::test::load_env_dump("slurm-env/srun-topo-N3-n6-all-tasks-26.05.txt", 2);
    env.set("SLURM_CONF", conf);
    env.set("PATH", bin);
    const auto settings = resolve_settings(SiteConfig{}, {}, parse_option_spec("ps=1"));

    SECTION("the answer places every rank where Slurm ran it") {
        const std::string layout =
            dir.write("layout.txt",
                      tfslurm::test::file_text(std::string{tfslurm::test::paths::test_data_dir} +
                                               "/slurm-env/sattach-layout-topo-N3-n6-26.05.txt"));
        // Only `sattach --layout 6.0` answers: the step id comes from the task's variables.
        static_cast<void>(dir.write(
            "bin/sattach",
            "#!/bin/sh\n[ \"$*\" = \"--layout 6.0\" ] || exit 9\nexec /bin/cat " + layout + "\n",
            0755));
        const auto vars = task_variables(settings, env, 2U);
        CHECK(value_of(vars, "TF_CONFIG") ==
              R"({"cluster":{"ps":["n3:12012"],"worker":["n3:12013","n1:12012","n1:12013",)"
              R"("n2:12012","n2:12013"]},"task":{"type":"worker","index":1}})");
        CHECK(value_of(vars, "MASTER_ADDR") == "n3");
    }
    SECTION("no sattach in the task's PATH: the refusal says why") {
        try {
            (void)task_variables(settings, env, 2U);
            FAIL("no exception");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::inconsistent_allocation);
            CHECK_THAT(e.what(), Catch::StartsWith("placement: Slurm lays a block distribution"));
            CHECK_THAT(e.hint(),
                       Catch::StartsWith("the controller's layout could not be read (sattach "
                                         "--layout 6.0: sattach not found in PATH); "));
        }
    }
}

TEST_CASE("describe: one line with the hint in parentheses", "[spank]") {
    CHECK(describe(Error{Errc::invalid_argument, "a: b: \"c\"", "do d"}) == "a: b: \"c\" (do d)");
    CHECK(describe(Error{Errc::invalid_argument, "a: b: \"c\""}) == "a: b: \"c\"");
    CHECK(describe(std::runtime_error{"plain"}) == "plain");
}

TEST_CASE("spank: a bad value is named as the plugin user typed it", "[spank]") {
    const std::string problem = R"(expected an integer from 0 to 65536: "8x")";
    require_error([] { (void)parse_option_spec("gpus_per_task=8x"); },
                  Errc::invalid_argument,
                  "--tfslurm gpus_per_task: " + problem);
    require_error([] { (void)parse_option_spec("gpus-per-task=8x"); },
                  Errc::invalid_argument,
                  "--tfslurm gpus_per_task: " + problem);
    require_error([] { (void)parse_plugstack_args({"gpus_per_task=8x"}); },
                  Errc::invalid_argument,
                  "plugstack.conf gpus_per_task: " + problem);
    require_error(
        [] {
            (void)environment_settings(Environment{{"TFSLURM_GPUS_PER_TASK", "8x"}});
        },
        Errc::invalid_argument,
        "TFSLURM_GPUS_PER_TASK: " + problem);
}

TEST_CASE("spank: plan errors in a task name the setting where it was given", "[spank]") {
    // Task 3 of `srun -N3 -n6`: no GPU is visible.
    const auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
    const std::string problem =
        R"(no GPU is visible to this task (CUDA_VISIBLE_DEVICES is unset or empty): "1")";
    const auto [site_args, variables, spec, subject] =
        GENERATE(table<std::vector<std::string>, Environment, std::string, std::string>({
            {{}, Environment{}, "gpus_per_task=1", "--tfslurm gpus_per_task"},
            {{"gpus_per_task=1"}, Environment{}, "", "plugstack.conf gpus_per_task"},
            {{"gpus_per_task=2"},
             Environment{{"TFSLURM_GPUS_PER_TASK", "1"}},
             "",
             "TFSLURM_GPUS_PER_TASK"},
        }));
    const auto settings = resolve_settings(
        parse_plugstack_args(site_args), environment_settings(variables), parse_option_spec(spec));
    try {
        (void)task_variables(settings, env);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(std::string{e.what()} == subject + ": " + problem);
        CHECK(e.hint() ==
              "request GPUs from Slurm (srun --gpus-per-node, --gres=gpu:N) or drop " + subject);
        CHECK(e.setting() == "gpus_per_task");
    }
}

TEST_CASE("spank: references to settings not given read as keys", "[spank]") {
    using tfslurm::SettingOrigins;
    const SettingOrigins origins{{"layout", Origin::plugstack}, {"ps", Origin::environment}};
    CHECK(plugin_setting_name("layout", "tf-compat", origins) == "plugstack.conf layout=tf-compat");
    CHECK(plugin_setting_name("ps", "", origins) == "TFSLURM_PS");
    CHECK(plugin_setting_name("gpus_per_node", "", origins) == "gpus_per_node");
    CHECK(plugin_setting_name("layout", "", {{"layout", Origin::option}}) == "--tfslurm layout");
}

TEST_CASE("spank: a TF_CONFIG too large for the environment points to tfslurm run", "[spank]") {
    // Task 0 of an 80,000-task step: 10,000 nodes, 8 tasks each.
    const Environment env{{"SLURM_JOB_ID", "9"},
                          {"SLURM_STEP_ID", "0"},
                          {"SLURM_STEP_NODELIST", "n[00001-10000]"},
                          {"SLURM_STEP_NUM_TASKS", "80000"},
                          {"SLURM_STEP_TASKS_PER_NODE", "8(x10000)"},
                          {"SLURM_PROCID", "0"}};
    const auto settings = resolve_settings(SiteConfig{}, {}, OptionSpec{});
    try {
        (void)task_variables(settings, env);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::too_large);
        CHECK_THAT(e.what(), Catch::StartsWith("TF_CONFIG, TFSLURM_SERVERS: "));
        CHECK(e.hint() == "the plugin cannot write TF_CONFIG to a file: run the trainer with "
                          "'tfslurm run --tf-config-file auto --only tf,torch,gpus' and without "
                          "--tfslurm (tfslurm(1), LARGE JOBS)");
    }
}

TEST_CASE("release_of_version_number: SLURM_VERSION_NUMBER as major.minor", "[spank]") {
    CHECK(release_of_version_number(0x160508).text() == "22.05");
    CHECK(release_of_version_number(0x180b05).text() == "24.11");
    CHECK(release_of_version_number(0x1a0505).text() == "26.05");
    CHECK_FALSE(release_of_version_number(0x160508).can_prepend_task_argv());
    CHECK_FALSE(release_of_version_number(0x170200).can_prepend_task_argv());
    CHECK(release_of_version_number(0x170b00).can_prepend_task_argv());
    CHECK(release_of_version_number(0x180b05).can_prepend_task_argv());
}

TEST_CASE("release_mismatch: one line naming both releases", "[spank]") {
    // slurm_api_version(): API_CURRENT << 16 | API_REVISION << 8 | API_AGE.
    CHECK_FALSE(release_mismatch(Release{22, 5}, 0x260000).has_value());
    CHECK_FALSE(release_mismatch(Release{24, 11}, 0x2a0000).has_value());
    CHECK_FALSE(release_mismatch(Release{26, 5}, 0x2d0000).has_value());
    CHECK(release_mismatch(Release{22, 5}, 0x2a0000) ==
          "spank_tfslurm.so is built for Slurm 22.05 and cannot run in Slurm 24.11 (API 42): "
          "install the tfslurm-spank package built for Slurm 24.11, or build the plugin against "
          "its "
          "slurm/spank.h (spank_tfslurm(8), BUILDING)");
    CHECK(release_mismatch(Release{26, 5}, 0x260000) ==
          "spank_tfslurm.so is built for Slurm 26.05 and cannot run in Slurm 22.05 (API 38): "
          "install the tfslurm-spank package built for Slurm 22.05, or build the plugin against "
          "its "
          "slurm/spank.h (spank_tfslurm(8), BUILDING)");
    CHECK(release_mismatch(Release{26, 5}, 0x2e0000) ==
          "spank_tfslurm.so is built for Slurm 26.05 and cannot run in Slurm API 46: install the "
          "tfslurm-spank package built for that release, or build the plugin against its "
          "slurm/spank.h (spank_tfslurm(8), BUILDING)");
}

TEST_CASE("check_run_supported: run needs Slurm 23.11, named as the user gave it", "[spank]") {
    const std::string why = "needs Slurm 23.11 or later (spank_prepend_task_argv), and this "
                            "plugin is built for Slurm 22.05";
    const Release old_release{22, 5};

    require_error([&] { check_run_supported(parse_option_spec("run,ps=1").settings, old_release); },
                  Errc::invalid_argument,
                  "--tfslurm run: " + why + ": \"1\"");
    require_error(
        [&] { check_run_supported(parse_plugstack_args({"run=yes"}).settings, old_release); },
        Errc::invalid_argument,
        "plugstack.conf run: " + why + ": \"yes\"");
    require_error(
        [&] {
            check_run_supported(environment_settings(Environment{{"TFSLURM_RUN", "1"}}),
                                old_release);
        },
        Errc::invalid_argument,
        "TFSLURM_RUN: " + why + ": \"1\"");
    try {
        check_run_supported(parse_option_spec("run").settings, old_release);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.hint() == "start the trainer as 'srun tfslurm run ...' instead, or install the "
                          "plugin built for a newer Slurm");
    }
    // Off, or another release: nothing to refuse.
    CHECK_NOTHROW(check_run_supported(parse_option_spec("run=0,ps=1").settings, old_release));
    CHECK_NOTHROW(check_run_supported(parse_option_spec("ps=1").settings, old_release));
    CHECK_NOTHROW(check_run_supported(parse_option_spec("run").settings, Release{23, 11}));
    CHECK_NOTHROW(check_run_supported(parse_option_spec("run").settings, Release{26, 5}));
}

TEST_CASE("launcher_variables: the step's settings for tfslurm run", "[spank]") {
    const auto site = parse_plugstack_args({"ps=1", "only=tf+servers", "run=1"});
    const auto env = environment_settings(Environment{{"TFSLURM_LAYOUT", "tf-compat"}});
    const auto option = parse_option_spec("run,ps=2,chief,roles=");
    const tfslurm::EnvVars expected{{"TFSLURM_PS", "2"},
                                    {"TFSLURM_CHIEF", "1"},
                                    {"TFSLURM_ROLES", ""},
                                    {"TFSLURM_LAYOUT", "tf-compat"},
                                    {"TFSLURM_ONLY", "tf,servers"}};
    CHECK(launcher_variables(site, env, option) == expected);
    CHECK(launcher_variables(SiteConfig{}, {}, parse_option_spec("run")).empty());
    CHECK(resolve_settings(site, env, option).values.plugin_run);
    CHECK(resolve_settings(SiteConfig{}, {}, parse_option_spec("run")).values.plugin_run);
    CHECK_FALSE(resolve_settings(site, env, parse_option_spec("run=no")).values.plugin_run);
    CHECK_FALSE(resolve_settings(SiteConfig{}, {}, parse_option_spec("ps=1")).values.plugin_run);
}
