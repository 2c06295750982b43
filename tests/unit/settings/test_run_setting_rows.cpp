// SPDX-License-Identifier: MIT
// The registry's rows of `tfslurm run` (src/settings/run_setting_rows.cpp): each row's default, the
// field it writes in one RunSettings, and its parser's error, which names the setting key.
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
using tfslurm::Errc;
using tfslurm::Millis;
using tfslurm::Origin;
using tfslurm::RunSettings;
using tfslurm::SettingValue;
using tfslurm::test::require_error;
using tfslurm::test::resolve_run;

} // namespace

TEST_CASE("run_settings: defaults when nothing is given", "[run_settings]") {
    const RunSettings run = resolve_run({});
    CHECK(run.until == tfslurm::Until::workers);
    CHECK(run.grace == 10s);
    CHECK(run.heartbeat == 1s);
    CHECK(run.heartbeat_timeout == 10s);
    CHECK_FALSE(run.connect_timeout.has_value()); // connect_timeout_for(): 60 s + 20 ms a node
    CHECK_FALSE(run.stall_timeout);
    CHECK(run.stall_signal == SIGABRT);
    CHECK(run.stall_grace == 5s);
    CHECK(run.probe == tfslurm::Probe::off);
    CHECK(run.probe_timeout == 30s);
    CHECK(run.restarts.per_rank == 0);
    CHECK_FALSE(run.restarts.total);
    CHECK(run.restarts.roles == std::vector<tfslurm::Role>{tfslurm::Role::worker});
    CHECK(run.restarts.delay == 1s);
    CHECK_FALSE(run.checkpoint_before);
    CHECK(run.checkpoint_signal == SIGUSR1);
    CHECK_FALSE(run.requeue);
    CHECK(run.max_requeues == 3);
    CHECK(run.auth == tfslurm::protocol::AuthMethod::automatic);
    CHECK(run.port_range.first == 20000);
    CHECK(run.port_range.last == 31999);
    CHECK(run.contain == tfslurm::Containment::keeper);
    CHECK_FALSE(run.label);
    CHECK_FALSE(run.preflight);
    CHECK(run.preflight_command.empty());
    CHECK(run.on_failure_check.empty());
    CHECK(run.on_failure_check_timeout == 60s);
    CHECK_FALSE(run.metrics);
    CHECK(run.metrics_ranks == tfslurm::MetricsRanks::automatic);
    CHECK_FALSE(tfslurm::failure_checked(run, tfslurm::protocol::FailureCause::trainer));
    CHECK_FALSE(tfslurm::preflight_enabled(run));
    CHECK_FALSE(tfslurm::has_start_barrier(run));
}

TEST_CASE("run_settings: each launcher row writes its field", "[run_settings]") {
    const RunSettings run = resolve_run({
        {"until", "chief", Origin::option},
        {"grace", "2.5", Origin::option},
        {"heartbeat", "0.5", Origin::environment},
        {"heartbeat_timeout", "3", Origin::option},
        {"connect_timeout", "7", Origin::option},
        {"stall_timeout", "120", Origin::option},
        {"stall_signal", "sigusr2", Origin::option},
        {"stall_grace", "0.001", Origin::option},
        {"probe", "", Origin::option},
        {"probe_timeout", "4", Origin::option},
        {"max_restarts", "2", Origin::option},
        {"max_total_restarts", "5", Origin::option},
        {"restart_roles", "worker,chief", Origin::option},
        {"restart_delay", "0.25", Origin::option},
        {"checkpoint_before", "600", Origin::option},
        {"checkpoint_signal", "12", Origin::option},
        {"requeue", "yes", Origin::option},
        {"max_requeues", "0", Origin::option},
        {"auth", "secret", Origin::option},
        {"port_range", "40000-40999", Origin::option},
        {"contain", "on", Origin::option},
        {"label", "1", Origin::option},
        {"preflight", "yes", Origin::option},
        {"preflight_command", "test -e /dev/nvidia0", Origin::environment},
        {"on_failure_check", "nvidia-smi -L", Origin::option},
        {"on_failure_check_timeout", "2.5", Origin::environment},
        {"metrics", "127.0.0.1:9400", Origin::option},
        {"metrics_ranks", "no", Origin::environment},
    });
    CHECK(run.until == tfslurm::Until::chief);
    CHECK(run.grace == 2500ms);
    CHECK(run.heartbeat == 500ms);
    CHECK(run.heartbeat_timeout == 3s);
    CHECK(run.connect_timeout == Millis{7s});
    CHECK(run.stall_timeout == Millis{120000});
    CHECK(run.stall_signal == SIGUSR2);
    CHECK(run.stall_grace == 1ms);
    CHECK(run.probe == tfslurm::Probe::on);
    CHECK(run.probe_timeout == 4s);
    CHECK(run.restarts.per_rank == 2);
    CHECK(run.restarts.total == 5U);
    CHECK(run.restarts.roles ==
          std::vector<tfslurm::Role>{tfslurm::Role::worker, tfslurm::Role::chief});
    CHECK(run.restarts.delay == 250ms);
    CHECK(run.checkpoint_before == Millis{600000});
    CHECK(run.checkpoint_signal == 12);
    CHECK(run.requeue);
    CHECK(run.max_requeues == 0);
    CHECK(run.auth == tfslurm::protocol::AuthMethod::secret);
    CHECK(run.port_range.first == 40000);
    CHECK(run.port_range.last == 40999);
    CHECK(run.contain == tfslurm::Containment::pid_namespace);
    CHECK(run.label);
    CHECK(run.preflight);
    CHECK(run.preflight_command == "test -e /dev/nvidia0");
    CHECK(run.on_failure_check == "nvidia-smi -L");
    CHECK(run.on_failure_check_timeout == 2500ms);
    CHECK(run.metrics == tfslurm::MetricsEndpoint{"127.0.0.1", 9400});
    CHECK(run.metrics_ranks == tfslurm::MetricsRanks::no);
    using tfslurm::protocol::FailureCause;
    CHECK(tfslurm::failure_checked(run, FailureCause::trainer));
    CHECK(tfslurm::failure_checked(run, FailureCause::stalled));
    CHECK_FALSE(tfslurm::failure_checked(run, FailureCause::start));
    CHECK_FALSE(tfslurm::failure_checked(run, FailureCause::lost));
    CHECK_FALSE(tfslurm::failure_checked(run, FailureCause::preflight));
}

TEST_CASE("run_settings: bad values name the setting key", "[run_settings]") {
    const auto row = GENERATE(table<std::string, std::string, std::string>({
        {"grace", "x", R"(grace: expected a number of seconds from 0.001 to 86400: "x")"},
        {"heartbeat",
         "0.0001",
         R"(heartbeat: expected a number of seconds from 0.001 to 86400: "0.0001")"},
        {"stall_timeout",
         "86401",
         R"(stall_timeout: expected a number of seconds from 0.001 to 86400: "86401")"},
        {"stall_signal", "BOGUS", R"(stall_signal: expected a signal name or number: "BOGUS")"},
        {"checkpoint_signal", "65", R"(checkpoint_signal: expected a signal name or number: "65")"},
        {"requeue", "maybe", R"(requeue: expected yes/no, true/false, on/off or 1/0: "maybe")"},
        {"max_restarts", "10001", R"(max_restarts: expected an integer from 0 to 10000: "10001")"},
        {"max_requeues", "-1", R"(max_requeues: expected an integer from 0 to 1000: "-1")"},
        {"until", "all", R"(until: expected workers or chief: "all")"},
        {"preflight", "maybe", R"(preflight: expected yes/no, true/false, on/off or 1/0: "maybe")"},
        {"preflight_command", "", R"(preflight_command: empty (expected a shell command): "")"},
        {"on_failure_check", "", R"(on_failure_check: empty (expected a shell command): "")"},
        {"on_failure_check_timeout",
         "0",
         R"(on_failure_check_timeout: expected a number of seconds from 0.001 to 86400: "0")"},
        {"metrics",
         "n1:9400",
         R"(metrics: expected [ADDR:]PORT with an IPv4 or IPv6 address: "n1:9400")"},
        {"metrics_ranks", "all", R"(metrics_ranks: expected auto, yes or no: "all")"},
    }));
    const std::string key = std::get<0>(row);
    const std::string value = std::get<1>(row);
    CAPTURE(key, value);
    require_error(
        [&] {
            (void)resolve_run({{key, value, Origin::option}});
        },
        Errc::invalid_argument,
        std::get<2>(row));
}
