// SPDX-License-Identifier: MIT
#include "temp_dir.hpp"
#include "test_paths.hpp"

#include <tfslurm/os/preflight.hpp>

#include <catch2/catch.hpp>

#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

using namespace tfslurm;

namespace {

using Result = PreflightCheck::Result;

/// Only the check called `name` of a run with `settings`.
PreflightCheck only(const PreflightSettings& settings, const std::string& name) {
    for (auto& check : run_preflight(settings)) {
        if (check.name == name) {
            return check;
        }
    }
    FAIL("no check " << name);
    return {};
}

/// FAKE_NVML for the fake NVML library while it lives.
class FakeNvml {
  public:
    explicit FakeNvml(const std::string& shape) { ::setenv("FAKE_NVML", shape.c_str(), 1); }
    ~FakeNvml() { ::unsetenv("FAKE_NVML"); }
    FakeNvml(const FakeNvml&) = delete;
    FakeNvml& operator=(const FakeNvml&) = delete;
    FakeNvml(FakeNvml&&) = delete;
    FakeNvml& operator=(FakeNvml&&) = delete;
};

PreflightSettings gpu_settings(std::vector<std::string> gpus) {
    PreflightSettings settings;
    settings.gpus = std::move(gpus);
    settings.nvml_names = {tfslurm::test::paths::fake_nvml};
    return settings;
}

} // namespace

TEST_CASE("preflight: nothing asked, nothing but the temporary directory is checked",
          "[preflight]") {
    test::TempDir dir("preflight");
    PreflightSettings settings;
    settings.tmpdir = dir.path;
    settings.tmp_free_bytes = 1;
    const auto checks = run_preflight(settings);
    REQUIRE(checks.size() == 4);
    CHECK(checks[0].name == "interface");
    CHECK(checks[0].result == Result::skipped);
    CHECK(checks[1].name == "tmpdir");
    CHECK(checks[1].result == Result::passed);
    CHECK(checks[2].result == Result::skipped);
    CHECK(checks[2].detail == "no visible GPUs");
    CHECK(checks[3].result == Result::skipped);
    CHECK(first_failure(checks) == nullptr);
}

TEST_CASE("preflight: the chosen interface must be up and still have its address", "[preflight]") {
    PreflightSettings settings;
    settings.address = InterfaceAddress{"lo", "127.0.0.1", IpFamily::v4};
    auto check = only(settings, "interface");
    CHECK(check.result == Result::passed);
    CHECK(check.detail == "lo is up with 127.0.0.1");

    settings.address = InterfaceAddress{"lo", "10.99.99.99", IpFamily::v4};
    check = only(settings, "interface");
    CHECK(check.result == Result::failed);
    CHECK(describe(check) == R"(interface: "lo" no longer has 10.99.99.99)");

    settings.address = InterfaceAddress{"tfslurm-none0", "10.1.0.1", IpFamily::v4};
    check = only(settings, "interface");
    CHECK(check.result == Result::failed);
    CHECK(describe(check) == R"(interface: "tfslurm-none0" is gone)");
}

TEST_CASE("preflight: the temporary directory must be writable and have the space asked for",
          "[preflight]") {
    test::TempDir dir("preflight");
    PreflightSettings settings;
    settings.tmpdir = dir.path + "/missing";
    auto check = only(settings, "tmpdir");
    CHECK(check.result == Result::failed);
    CHECK(describe(check) ==
          "tmpdir: \"" + dir.path + "/missing\" is not writable: No such file or directory");

    settings.tmpdir = dir.path;
    settings.tmp_free_bytes = std::uint64_t{1} << 62U; // 4 EiB
    check = only(settings, "tmpdir");
    CHECK(check.result == Result::failed);
    CHECK_THAT(check.detail, Catch::StartsWith("\"" + dir.path + "\" has "));
    CHECK_THAT(check.detail, Catch::EndsWith(" MiB free (at least 4398046511104 MiB needed)"));
}

TEST_CASE("preflight: every visible GPU must answer NVML, by index or UUID", "[preflight]") {
    SECTION("they answer") {
        FakeNvml nvml("gpus=2");
        const auto check = only(gpu_settings({"0", "1", "GPU-good"}), "gpus");
        CHECK(check.result == Result::passed);
        CHECK(check.detail == "3 GPUs answer");
    }
    SECTION("one is lost") {
        FakeNvml nvml("gpus=2 lost=1");
        const auto check = only(gpu_settings({"0", "1"}), "gpus");
        CHECK(check.result == Result::failed);
        CHECK(describe(check) == R"(gpus: GPU "1" does not answer: GPU is lost)");
    }
    SECTION("one is not there") {
        FakeNvml nvml("gpus=2");
        CHECK(describe(only(gpu_settings({"2"}), "gpus")) ==
              R"(gpus: GPU "2" does not answer: Invalid Argument)");
        CHECK(describe(only(gpu_settings({"GPU-gone"}), "gpus")) ==
              R"(gpus: GPU "GPU-gone" does not answer: Not Found)");
    }
    SECTION("the driver is not loaded") {
        FakeNvml nvml("init=9");
        CHECK(describe(only(gpu_settings({"0"}), "gpus")) ==
              "gpus: NVML does not start: Driver Not Loaded");
    }
    SECTION("a node without NVML skips the check and says so") {
        auto settings = gpu_settings({"0"});
        settings.nvml_names = {"/nonexistent/libnvidia-ml.so.1"};
        const auto check = only(settings, "gpus");
        CHECK(check.result == Result::skipped);
        CHECK_THAT(check.detail,
                   Catch::StartsWith("no NVML on this node (NVML: cannot load any of "
                                     "/nonexistent/libnvidia-ml.so.1: "));
    }
}

TEST_CASE("preflight: a site's command must exit 0 in time, and nothing of it is left",
          "[preflight]") {
    test::TempDir dir("preflight");
    PreflightSettings settings;
    settings.command = "true";
    CHECK(only(settings, "command").detail == R"("true" exited with status 0)");

    settings.command = "echo checking >&2; exit 3";
    auto check = only(settings, "command");
    CHECK(check.result == Result::failed);
    CHECK(describe(check) == R"(command: "echo checking >&2; exit 3" exited with status 3)");

    settings.command = "kill -USR1 $$";
    CHECK(describe(only(settings, "command")) ==
          R"(command: "kill -USR1 $$" was killed by signal 10 (User defined signal 1))");

    // Past its time the whole group goes, including what it started in the background.
    const std::string pid_file = dir.path + "/background.pid";
    settings.command = "sleep 300 & echo $! > " + pid_file + "; wait";
    settings.command_timeout = Millis{300};
    check = only(settings, "command");
    CHECK(describe(check) == "command: \"" + settings.command + "\" did not end within 0.3 s");
    int background = 0;
    std::ifstream(pid_file) >> background;
    REQUIRE(background > 0);
    // SIGKILL was sent to the group before the check returned: the process is gone or a
    // zombie waiting for its new parent (bounded wait, never a timing assertion).
    bool gone = false;
    for (int i = 0; i < 1000 && !gone; ++i) {
        std::ifstream stat("/proc/" + std::to_string(background) + "/stat");
        std::string pid;
        std::string comm;
        std::string state;
        gone = !(stat >> pid >> comm >> state) || state == "Z";
        if (!gone) {
            std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
    }
    CHECK(gone);
}
