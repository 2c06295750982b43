// SPDX-License-Identifier: MIT
// Unit tests of the settings registry, the layering of setting values and setting references
// in error messages (include/tfslurm/settings/plan_settings.hpp, include/tfslurm/common/error.hpp).
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <cctype>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace {

using tfslurm::Environment;
using tfslurm::Errc;
using tfslurm::Error;
using tfslurm::Face;
using tfslurm::Origin;
using tfslurm::setting_ref;
using tfslurm::SettingGroup;
using tfslurm::SettingKind;
using tfslurm::SettingValue;
using tfslurm::test::require_error;

std::string upper(std::string_view key) {
    std::string out;
    for (const char c : key) {
        out.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    return out;
}

std::string kebab(std::string_view key) {
    std::string out{key};
    for (auto& c : out) {
        c = c == '_' ? '-' : c;
    }
    return out;
}

} // namespace

TEST_CASE("plan_settings: every registry row follows the naming rules", "[plan_settings]") {
    std::set<std::string_view> keys;
    for (const auto& spec : tfslurm::setting_registry()) {
        CAPTURE(spec.key);
        CHECK(keys.insert(spec.key).second);
        if (spec.option.empty()) {
            CHECK(spec.plugin_key == spec.key); // the plugin's own (run): no CLI option
        } else {
            CHECK(spec.option == "--" + kebab(spec.key));
        }
        CHECK_FALSE(spec.help.empty());
        if (!spec.variable.empty()) {
            CHECK(spec.variable == "TFSLURM_" + upper(spec.key));
        }
        if (!spec.plugin_key.empty()) {
            CHECK(spec.plugin_key == spec.key);
            CHECK(spec.apply != nullptr);
        }
        // Only preview fields are parsed outside the registry (launcher rows write RunSettings).
        const bool parsed_elsewhere = spec.group == SettingGroup::preview;
        CHECK((spec.apply == nullptr) == parsed_elsewhere);
        CHECK(spec.variable.empty() == (spec.group == SettingGroup::preview));
        CHECK(tfslurm::find_setting(spec.key) == &spec);
    }
    CHECK(tfslurm::find_setting("bogus") == nullptr);
    CHECK(tfslurm::find_setting("roles")->kind == SettingKind::list);
    CHECK(tfslurm::find_setting("only")->kind == SettingKind::list);
    CHECK(tfslurm::find_setting("chief")->kind == SettingKind::flag);
    CHECK(tfslurm::find_setting("evaluator")->kind == SettingKind::flag);
}

TEST_CASE("plan_settings: the keys each face accepts", "[plan_settings]") {
    CHECK(tfslurm::known_setting_keys(Face::plugin) ==
          "ps, chief, evaluator, roles, roles_by_component, ps_placement, layout, port_base, "
          "address, host_pattern, "
          "exchange, gpus_per_task, gpu_bind, gpus_per_node, rpc_layer, only, run");
    CHECK(tfslurm::known_setting_keys(Face::cli) ==
          "ps, chief, evaluator, roles, roles_by_component, ps_placement, layout, port_base, "
          "address, host_pattern, "
          "iface, network, exchange, gpus_per_task, gpu_bind, gpus_per_node, rpc_layer, format, "
          "only, "
          "tf_config_file");
}

TEST_CASE("plan_settings: bad values name the setting key", "[plan_settings]") {
    const auto row = GENERATE(table<std::string, std::string, std::string>({
        {"ps", "x", R"(ps: expected an integer from 0 to 4194304: "x")"},
        {"chief", "maybe", R"(chief: expected yes/no, true/false, on/off or 1/0: "maybe")"},
        {"roles", "ps,boss", R"(roles: expected a role: ps, worker, chief or evaluator: "boss")"},
        {"layout", "tf", R"(layout: expected native or tf-compat: "tf")"},
        {"gpus_per_task", "x", R"(gpus_per_task: expected an integer from 0 to 65536: "x")"},
        {"format", "xml", R"(format: expected export, env, json or task-prolog: "xml")"},
        {"exchange", "mpi", R"(exchange: expected auto, env, pmi2 or coordinator: "mpi")"},
        {"host_pattern",
         "{host}\xff",
         R"(host_pattern: expected printable ASCII: byte 0xff at offset 6: "{host}\xff")"},
        {"rpc_layer",
         "grpc\n",
         R"(rpc_layer: expected printable ASCII: byte 0x0a at offset 4: "grpc\n")"},
        {"only",
         "tf,bogus",
         R"(only: expected all, or a comma list of tf, servers, torch, gpus: "tf,bogus")"},
        {"tf_config_file",
         "tf.json",
         R"(tf_config_file: expected an absolute path (or {tmpdir}/...): "tf.json")"},
        {"until",
         "x",
         "setting: unknown setting (known: ps, chief, evaluator, roles, roles_by_component, "
         "ps_placement, layout, "
         "port_base, address, host_pattern, iface, network, exchange, gpus_per_task, gpu_bind, "
         "gpus_per_node, rpc_layer, format, only, run, tf_config_file): \"until\""},
    }));
    // Named copies: C++17 lambdas cannot capture structured bindings.
    const std::string key = std::get<0>(row);
    const std::string value = std::get<1>(row);
    const std::string message = std::get<2>(row);
    CAPTURE(key, value);
    tfslurm::SettingValues values;
    require_error(
        [&] { tfslurm::apply_setting(values, key, value); }, Errc::invalid_argument, message);
    try {
        tfslurm::apply_setting(values, key, value);
    } catch (const Error& e) {
        CHECK(e.setting() == (key == "until" ? "" : key));
    }
}

TEST_CASE("plan_settings: apply_plan_setting knows only plan settings", "[plan_settings]") {
    tfslurm::PlanOptions options;
    tfslurm::apply_plan_setting(options, "ps", "2");
    CHECK(options.counts.ps == 2);
    require_error([&] { tfslurm::apply_plan_setting(options, "only", "tf"); },
                  Errc::invalid_argument,
                  "setting: unknown setting (known: ps, chief, evaluator, roles, "
                  "roles_by_component, ps_placement, "
                  "layout, port_base, address, host_pattern, iface, network, exchange, "
                  "gpus_per_task, gpu_bind, gpus_per_node, "
                  "rpc_layer): \"only\"");
}

TEST_CASE("plan_settings: option > TFSLURM_* > plugstack.conf > default", "[plan_settings]") {
    using tfslurm::resolve_settings;
    const std::vector<SettingValue> given{
        {"ps", "3", Origin::option},
        {"ps", "1", Origin::plugstack},
        {"ps", "2", Origin::environment},
        {"layout", "tf-compat", Origin::environment},
        {"layout", "native", Origin::plugstack},
        {"only", "tf", Origin::plugstack},
        {"until", "chief", Origin::environment},
    };
    const auto resolved = resolve_settings(given);
    CHECK(resolved.values.plan.counts.ps == 3);
    CHECK(resolved.values.plan.layout == tfslurm::Layout::tf_compat);
    CHECK(resolved.values.outputs.tf_config);
    CHECK_FALSE(resolved.values.outputs.torch);
    const tfslurm::SettingOrigins expected{{"ps", Origin::option},
                                           {"layout", Origin::environment},
                                           {"only", Origin::plugstack},
                                           {"until", Origin::environment}};
    CHECK(resolved.origins == expected);

    SECTION("defaults without values") {
        const auto none = resolve_settings({});
        CHECK(none.values.plan.counts.ps == 0);
        CHECK(none.values.format == tfslurm::EnvFormat::export_lines);
        CHECK(none.origins.empty());
    }
    SECTION("among equals the last wins") {
        CHECK(resolve_settings({{"ps", "1", Origin::option}, {"ps", "2", Origin::option}})
                  .values.plan.counts.ps == 2);
    }
    SECTION("a bad value loses to a higher layer and is not parsed") {
        CHECK(resolve_settings({{"ps", "x", Origin::environment}, {"ps", "1", Origin::option}})
                  .values.plan.counts.ps == 1);
    }
    SECTION("an empty roles= from above clears roles from below") {
        const auto cleared = resolve_settings(
            {{"roles", "ps,worker", Origin::plugstack}, {"roles", "", Origin::option}});
        CHECK(cleared.values.plan.role_list.empty());
    }
}

TEST_CASE("plan_settings: environment_settings reads each face's variables", "[plan_settings]") {
    const Environment env{{"TFSLURM_PS", "2"},
                          {"TFSLURM_CHIEF", ""},
                          {"TFSLURM_FORMAT", "json"},
                          {"TFSLURM_UNTIL", "chief"},
                          {"TFSLURM_ONLY", "tf"}};
    const std::vector<SettingValue> plugin{{"ps", "2", Origin::environment},
                                           {"only", "tf", Origin::environment}};
    CHECK(tfslurm::environment_settings(env, Face::plugin) == plugin);
    const std::vector<SettingValue> cli{{"ps", "2", Origin::environment},
                                        {"format", "json", Origin::environment},
                                        {"only", "tf", Origin::environment},
                                        {"until", "chief", Origin::environment}};
    CHECK(tfslurm::environment_settings(env, Face::cli) == cli);
}

TEST_CASE("error: setting references are rendered by each face", "[error]") {
    const Error error{Errc::invalid_argument,
                      setting_ref("gpus_per_node") + ": applies to " +
                          setting_ref("layout", "tf-compat") + " only: \"2\"",
                      "or drop " + setting_ref("gpus_per_node")};

    SECTION("neutral: the key, or key=value") {
        CHECK(std::string{error.what()} ==
              R"(gpus_per_node: applies to layout=tf-compat only: "2")");
        CHECK(error.hint() == "or drop gpus_per_node");
        CHECK(error.setting() == "gpus_per_node");
    }
    SECTION("a face's namer") {
        const auto shown = error.rendered([](std::string_view key, std::string_view value) {
            return "<" + std::string{key} + (value.empty() ? "" : "|" + std::string{value}) + ">";
        });
        CHECK(std::string{shown.what()} ==
              R"(<gpus_per_node>: applies to <layout|tf-compat> only: "2")");
        CHECK(shown.hint() == "or drop <gpus_per_node>");
        CHECK(shown.setting() == "gpus_per_node");
        CHECK(shown.code() == Errc::invalid_argument);
    }
    SECTION("user input cannot forge a reference") {
        const auto forged = tfslurm::errors::invalid_setting("ps", "bad", setting_ref("layout"));
        CHECK(std::string{forged.what()} == R"(ps: bad: "\x02layout\x03")");
    }
    SECTION("messages without references are unchanged") {
        const Error plain{Errc::io, "SLURM_PROCID: not set", "hint"};
        CHECK(plain.setting().empty());
        CHECK(std::string{plain.rendered(tfslurm::neutral_setting_name).what()} ==
              "SLURM_PROCID: not set");
    }
}

TEST_CASE("plan_settings: --help shows each default from the code, never from the help text",
          "[plan_settings]") {
    SECTION("no row writes its default by hand") {
        for (const auto& spec : tfslurm::setting_registry()) {
            CAPTURE(spec.key);
            CHECK(spec.help.find("default") == std::string_view::npos);
        }
    }
    SECTION("the default follows the help: a value as typed, or a phrase after a colon") {
        const auto help = [](std::string_view key) {
            return tfslurm::setting_help(*tfslurm::find_setting(key));
        };
        CHECK(help("grace") ==
              "Seconds between SIGTERM and SIGKILL when a trainer is stopped (default 10)");
        CHECK(help("stall_timeout").substr(help("stall_timeout").size() - 15) == "(default never)");
        CHECK(help("checkpoint_signal") == "Signal that asks the trainers to save a checkpoint; "
                                           "the same signal from Slurm's own --signal counts "
                                           "too (default USR1)");
        CHECK(help("gpus_per_task") ==
              "GPUs per task (default: split the visible GPUs among the node's tasks)");
        CHECK(help("stall_progress").substr(help("stall_progress").size() - 18) ==
              "(default cpu,file)");
        CHECK(help("distribution") ==
              "block, cyclic, plane=N or arbitrary (with --hostfile) (default block)");
        CHECK(help("only") == "all or a comma list of tf, servers, torch, gpus (default all)");
        CHECK(help("chief") == std::string{tfslurm::find_setting("chief")->help}); // a flag
    }
    SECTION("a default shown as one word is one the setting's parser reads back to itself") {
        int checked = 0;
        for (const auto& spec : tfslurm::setting_registry()) {
            if (spec.shown_default == nullptr || spec.apply == nullptr) {
                continue;
            }
            const std::string shown = spec.shown_default(tfslurm::SettingValues{});
            CAPTURE(spec.key, shown);
            if (shown.find(' ') != std::string::npos || shown == "never") {
                continue; // what happens without a value, not a value
            }
            tfslurm::SettingValues given;
            spec.apply(given, shown);
            CHECK(spec.shown_default(given) == shown);
            ++checked;
        }
        CHECK(checked >= 25);
    }
}
