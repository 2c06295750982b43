// SPDX-License-Identifier: MIT
// Unit tests of the TF_CONFIG file (src/resolve/tf_config_file.cpp): the way out for a TF_CONFIG
// too long for the environment, the file name's templates, and its private, atomic write and
// removal.
#include "fixtures.hpp"
#include "temp_dir.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/resolve/tf_config_file.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

using tfslurm::Environment;
using tfslurm::Errc;
using tfslurm::test::file_text;
using tfslurm::test::path_exists;
using tfslurm::test::require_error;
using tfslurm::test::value_of;

namespace {

/// `nodes` nodes with `per_node` tasks each, job 77, step 1, seen from `rank`.
tfslurm::Plan synthetic_plan(std::uint32_t nodes, std::uint32_t per_node, std::uint32_t rank) {
    return tfslurm::test::plan_of_preview(tfslurm::test::preview_overrides(
        "n[00001-" + std::to_string(nodes) + "]", std::to_string(per_node), 77, 1, rank));
}

} // namespace

TEST_CASE("tf_config_file: an 80,000-task TF_CONFIG goes through a file", "[tf_config_file]") {
    const auto plan = synthetic_plan(10000, 8, 12345);
    const auto tf_config = tfslurm::tf_config_json(plan, 12345);
    CHECK(tf_config.size() > tfslurm::k_max_env_string);

    SECTION("without the setting: the error names the size, the limit and the setting") {
        tfslurm::OutputSelection selection;
        selection.servers = false;
        try {
            (void)tfslurm::task_environment(plan, 12345, selection);
            FAIL("no exception");
        } catch (const tfslurm::Error& e) {
            CHECK(e.code() == Errc::too_large);
            CHECK(std::string{e.what()} ==
                  "TF_CONFIG: " + std::to_string(tf_config.size() + 11) +
                      " bytes for 80000 tasks do not fit in one environment variable (Linux "
                      "allows 131072 bytes per NAME=value string)");
            CHECK(e.hint() == "write it to a file on the node that Python trainers load into "
                              "TF_CONFIG: tf_config_file=auto");
        }
    }
    SECTION("both too large: one error names both, with one way out for the two") {
        try {
            (void)tfslurm::task_environment(plan, 12345, {});
            FAIL("no exception");
        } catch (const tfslurm::Error& e) {
            CHECK(e.code() == Errc::too_large);
            const std::string message = e.what();
            CHECK(message.rfind("TF_CONFIG, TFSLURM_SERVERS: " +
                                    std::to_string(tf_config.size() + 11) + " and ",
                                0) == 0);
            CHECK_THAT(message,
                       Catch::EndsWith(" bytes for 80000 tasks do not fit in one environment "
                                       "variable each (Linux allows 131072 bytes per NAME=value "
                                       "string)"));
            CHECK(e.hint() == "write TF_CONFIG to a file on the node that Python trainers load, "
                              "and leave the tf4slurm dictionary out: tf_config_file=auto "
                              "only=tf,torch,gpus");
        }
    }
    SECTION("the dictionary of tf4slurm is as large: its own hint, keeping the groups") {
        try {
            // TF_CONFIG in a file: `only` still has tf.
            (void)tfslurm::task_environment(plan, 12345, {}, tfslurm::TfConfigPlace::file);
            FAIL("no exception");
        } catch (const tfslurm::Error& e) {
            CHECK(std::string{e.what()}.rfind("TFSLURM_SERVERS: ", 0) == 0);
            CHECK(e.hint() == "leave the tf4slurm dictionary out: only=tf,torch,gpus");
        }
        tfslurm::OutputSelection no_tf;
        no_tf.tf_config = false;
        try {
            (void)tfslurm::task_environment(plan, 12345, no_tf);
            FAIL("no exception");
        } catch (const tfslurm::Error& e) {
            CHECK(e.hint() == "leave the tf4slurm dictionary out: only=torch,gpus");
        }
    }
    SECTION("with the setting: the variables fit and name the file and the shim") {
        tfslurm::OutputSelection selection;
        selection.servers = false;
        const Environment env{{"TMPDIR", "/tmp/job77"}, {"PYTHONPATH", "/opt/lib:/x"}};
        const auto out = tfslurm::file_task_environment(plan, 12345, selection, "auto", env);
        CHECK(out.tf_config == tf_config);
        CHECK(out.file.path == "/tmp/job77/tfslurm-77.1.12345.tf_config.json");
        CHECK(out.file.shim_dir == "/tmp/job77/tfslurm-77.1.12345.tf_config.json.site");
        REQUIRE(out.vars.size() >= 2);
        CHECK(out.vars[0].first == "TFSLURM_TF_CONFIG_FILE");
        CHECK(out.vars[0].second == out.file.path);
        CHECK(out.vars[1].first == "PYTHONPATH");
        CHECK(out.vars[1].second == out.file.shim_dir + ":/opt/lib:/x");
        CHECK(value_of(out.vars, "TF_CONFIG") == "<unset>");
        CHECK(value_of(out.vars, "RANK") == "12345");
        CHECK(value_of(out.vars, "WORLD_SIZE") == "80000");
        const auto parsed = nlohmann::json::parse(out.tf_config);
        CHECK(parsed["cluster"]["worker"].size() == 80000);
        CHECK(parsed["task"] == nlohmann::json{{"type", "worker"}, {"index", 12345}});
    }
}

TEST_CASE("tf_config_file: templates", "[tf_config_file]") {
    const auto plan = synthetic_plan(3, 2, 4);
    const Environment none;
    CHECK(tfslurm::tf_config_file_for("auto", plan, 4, none).path ==
          "/tmp/tfslurm-77.1.4.tf_config.json");
    CHECK(tfslurm::tf_config_file_for("auto", plan, 4, Environment{{"TMPDIR", "relative"}}).path ==
          "/tmp/tfslurm-77.1.4.tf_config.json");
    CHECK(tfslurm::tf_config_file_for("/s/{job}/{step}-{rank}.json", plan, 4, none).path ==
          "/s/77/1-4.json");
    CHECK(tfslurm::tf_config_file_for("{tmpdir}/x{rank}", plan, 4, Environment{{"TMPDIR", "/t"}})
              .shim_dir == "/t/x4.site");
    // One task per node: no other task of the step writes on this node.
    CHECK(tfslurm::tf_config_file_for("/s/tf.json", synthetic_plan(3, 1, 2), 2, none).path ==
          "/s/tf.json");
    require_error([&] { (void)tfslurm::tf_config_file_for("/s/tf.json", plan, 4, none); },
                  Errc::invalid_argument,
                  "tf_config_file: 2 tasks of the step on n00003 would write the same file: "
                  "\"/s/tf.json\"");
    using Row = std::tuple<std::string, std::string>;
    const auto [value, message] = GENERATE(table<std::string, std::string>({
        Row{"", "tf_config_file: expected auto or a path: \"\""},
        Row{"tf.json", "tf_config_file: expected an absolute path (or {tmpdir}/...): \"tf.json\""},
        Row{"/s/", "tf_config_file: expected a file name, not a directory: \"/s/\""},
        Row{"/s/{host}.json",
            "tf_config_file: unknown placeholder at offset 3 (known: {tmpdir}, {job}, {step}, "
            "{rank}): \"/s/{host}.json\""},
        Row{"/a:b/{rank}",
            "tf_config_file: expected printable ASCII without ':': byte 0x3a at offset 2: "
            "\"/a:b/{rank}\""},
    }));
    CAPTURE(value);
    // A named copy: C++17 lambdas cannot capture structured bindings (clang refuses).
    const std::string text = value;
    require_error(
        [&] { tfslurm::validate_tf_config_template(text); }, Errc::invalid_argument, message);
    tfslurm::SettingValues values;
    require_error([&] { tfslurm::apply_setting(values, "tf_config_file", text); },
                  Errc::invalid_argument,
                  message);
}

TEST_CASE("tf_config_file: written atomically, private, and removed", "[tf_config_file]") {
    const tfslurm::test::TempDir dir{"tfconfig"};
    const tfslurm::TfConfigFile file{dir.path + "/tf.json", dir.path + "/tf.json.site"};
    tfslurm::write_tf_config_file(file, R"({"cluster":{}})");
    CHECK(file_text(file.path) == R"({"cluster":{}})");
    CHECK(file_text(file.shim_dir + "/sitecustomize.py") == tfslurm::sitecustomize_shim());
    struct stat info {};
    REQUIRE(::stat(file.path.c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0600);
    REQUIRE(::stat(file.shim_dir.c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0700);
    CHECK_FALSE(path_exists(file.path + ".tmp." + std::to_string(::getpid())));

    // Written again (a second `tfslurm env` in the same task): replaced as a whole.
    tfslurm::write_tf_config_file(file, "{}");
    CHECK(file_text(file.path) == "{}");

    // What Python caches of the shim goes too.
    REQUIRE(::mkdir((file.shim_dir + "/__pycache__").c_str(), 0755) == 0);
    static_cast<void>(dir.write("tf.json.site/__pycache__/sitecustomize.cpython-311.pyc", "x"));
    CHECK(tfslurm::remove_tf_config_file(file));
    CHECK_FALSE(path_exists(file.path));
    CHECK_FALSE(path_exists(file.shim_dir));
    CHECK(tfslurm::remove_tf_config_file(file)); // already gone: fine

    // Somebody else's directory (here: one others may write to) is never used.
    REQUIRE(::mkdir(file.shim_dir.c_str(), 0777) == 0);
    REQUIRE(::chmod(file.shim_dir.c_str(), 0777) == 0);
    require_error([&] { tfslurm::write_tf_config_file(file, "{}"); },
                  Errc::io,
                  dir.path + "/tf.json.site: exists but is not a private directory of this user");
    CHECK_FALSE(path_exists(file.path));
}
