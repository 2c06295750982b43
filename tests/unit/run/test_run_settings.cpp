// SPDX-License-Identifier: MIT
// The rules between the settings of `tfslurm run` (src/run/run_settings.cpp): one barrier, the
// heartbeat timeout against the heartbeat, the one silent-too-long rule. The registry's rows
// that write them: test_run_setting_rows.cpp.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run_settings.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <csignal>
#include <string>
#include <tuple>
#include <vector>

namespace {

using namespace std::chrono_literals;
using tfslurm::connect_timeout_for;
using tfslurm::Errc;
using tfslurm::Millis;
using tfslurm::Origin;
using tfslurm::RunSettings;
using tfslurm::SettingValue;
using tfslurm::test::require_error;
using tfslurm::test::resolve_run;

} // namespace

TEST_CASE("run_settings: one barrier before start, for the probe or the health checks",
          "[run_settings][preflight]") {
    CHECK(tfslurm::has_start_barrier(resolve_run({{"probe", "", Origin::option}})));
    const RunSettings checked = resolve_run({{"preflight", "", Origin::option}});
    CHECK(tfslurm::preflight_enabled(checked));
    CHECK(tfslurm::has_start_barrier(checked));
    // A site command alone turns the checks on: it would never run otherwise.
    const RunSettings command = resolve_run({{"preflight_command", "true", Origin::environment}});
    CHECK_FALSE(command.preflight);
    CHECK(tfslurm::preflight_enabled(command));
    CHECK(tfslurm::has_start_barrier(command));
}

TEST_CASE("run_settings: the registration deadline grows with the step's nodes unless set",
          "[run_settings]") {
    RunSettings settings;
    CHECK(connect_timeout_for(settings, 1) == Millis{60020});
    CHECK(connect_timeout_for(settings, 10) == Millis{60200});
    CHECK(connect_timeout_for(settings, 2048) == Millis{100960});
    CHECK(connect_timeout_for(settings, 5000) == Millis{160000});
    settings.connect_timeout = Millis{7000};
    CHECK(connect_timeout_for(settings, 5000) == Millis{7000});
}

TEST_CASE("run_settings: heartbeat_timeout must be longer than heartbeat", "[run_settings]") {
    // The value as given is quoted; without one, its default as a user would write it.
    require_error(
        [] {
            (void)resolve_run({{"heartbeat_timeout", "1.0", Origin::option}});
        },
        Errc::invalid_argument,
        R"(heartbeat_timeout: must be longer than heartbeat: "1.0")");
    require_error(
        [] {
            (void)resolve_run({{"heartbeat", "10", Origin::option}});
        },
        Errc::invalid_argument,
        R"(heartbeat_timeout: must be longer than heartbeat: "10")");
    RunSettings run;
    run.heartbeat = 2s;
    run.heartbeat_timeout = 1500ms;
    require_error([&] { tfslurm::check_run_settings(run, ""); },
                  Errc::invalid_argument,
                  R"(heartbeat_timeout: must be longer than heartbeat: "1.5")");
    run.heartbeat_timeout = 2001ms;
    tfslurm::check_run_settings(run, "");
}

TEST_CASE("run_settings: the one silent-too-long rule", "[run_settings]") {
    const tfslurm::Clock::time_point t0{};
    CHECK_FALSE(tfslurm::silent_too_long(t0, t0 + 10s, 10s));
    CHECK(tfslurm::silent_too_long(t0, t0 + 10001ms, 10s));
    CHECK(tfslurm::no_heartbeat(10s) == "no heartbeat for 10 s");
    CHECK(tfslurm::no_heartbeat(500ms) == "no heartbeat for 0.5 s");
}
