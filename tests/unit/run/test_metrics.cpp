// SPDX-License-Identifier: MIT
// The metrics endpoint's rules (tfslurm/run/metrics.hpp): the scrape's exact text from a
// coordinator's state, the endpoint setting, and the HTTP answers.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/metrics.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <tuple>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

using tfslurm::test::k_t0;

/// ps 0 on n1, workers 0 and 1 on n2 and `n"3` (a host name that must be escaped), a stall
/// timeout and one restart each; keeping the start-up phases.
CoordinatorSettings metrics_settings() {
    CoordinatorSettings s;
    s.ranks = {{Role::ps, 0, "n1"}, {Role::worker, 0, "n2"}, {Role::worker, 1, "n\"3"}};
    s.run.heartbeat_timeout = 10s;
    s.run.connect_timeout = 60s;
    s.run.stall_timeout = 60s;
    s.run.restarts.per_rank = 1;
    s.run.restarts.roles = {Role::worker};
    return s;
}

/// An exit with the phases task 0, up +10 ms, registered +30 ms, started +50 ms after `wall`.
protocol::Exit exit_with_phases(ExitStatus status, WallClock::time_point wall) {
    protocol::Exit exit{status};
    exit.startup[StartupPhase::task] = wall;
    exit.startup[StartupPhase::up] = wall + 10ms;
    exit.startup[StartupPhase::registered] = wall + 30ms;
    exit.startup[StartupPhase::started] = wall + 50ms;
    return exit;
}

} // namespace

TEST_CASE("metrics: a scrape is the coordinator's state in the Prometheus text format",
          "[metrics]") {
    Coordinator c(metrics_settings(), k_t0);
    c.registered(0, k_t0);
    c.registered(1, k_t0);
    // Rank 1's trainer fails once and is restarted; it then reports progress 2.5 s old.
    c.exited(1, exit_with_phases(ExitStatus::exited(3), WallClock::time_point{} + 1s), k_t0 + 1s);
    c.progressed(1, 2500ms, k_t0 + 4s);
    // Rank 1's usage from its heartbeat: 1.25 s of CPU time, 50 MiB.
    c.usage_reported(1, protocol::Usage{1250, 52428800, {}}, k_t0);
    c.usage_reported(2, protocol::Usage{1, 1, {}}, k_t0); // not registered: ignored
    const MetricsStep step{"94", "0", "clu-94-0"};
    const std::string text = render_metrics(c, k_t0 + 5s, step, true);
    CHECK(text == R"(# HELP tfslurm_step_info The step of tfslurm run that rank 0 coordinates.
# TYPE tfslurm_step_info gauge
tfslurm_step_info{job="94",step="0",run_id="clu-94-0"} 1
# HELP tfslurm_step_ranks Ranks of the step in each state.
# TYPE tfslurm_step_ranks gauge
tfslurm_step_ranks{state="waiting"} 1
tfslurm_step_ranks{state="running"} 2
tfslurm_step_ranks{state="straggling"} 0
tfslurm_step_ranks{state="stuck"} 0
tfslurm_step_ranks{state="restarting"} 0
tfslurm_step_ranks{state="exited"} 0
tfslurm_step_ranks{state="failed"} 0
tfslurm_step_ranks{state="lost"} 0
# HELP tfslurm_step_restarts_total Trainer restarts granted in the step (--max-restarts).
# TYPE tfslurm_step_restarts_total counter
tfslurm_step_restarts_total 1
# HELP tfslurm_step_verdict 1 for the step's verdict: none while it runs, then done, interrupted or aborted.
# TYPE tfslurm_step_verdict gauge
tfslurm_step_verdict{verdict="none"} 1
tfslurm_step_verdict{verdict="done"} 0
tfslurm_step_verdict{verdict="interrupted"} 0
tfslurm_step_verdict{verdict="aborted"} 0
# HELP tfslurm_step_startup_phase_seconds Median and maximum time the ranks took to reach each start-up phase from the one before (the tasks' start: from the step's first task), as their launchers report them on their heartbeats and exits.
# TYPE tfslurm_step_startup_phase_seconds gauge
tfslurm_step_startup_phase_seconds{phase="task",stat="median"} 0.000
tfslurm_step_startup_phase_seconds{phase="task",stat="max"} 0.000
tfslurm_step_startup_phase_seconds{phase="up",stat="median"} 0.010
tfslurm_step_startup_phase_seconds{phase="up",stat="max"} 0.010
tfslurm_step_startup_phase_seconds{phase="registered",stat="median"} 0.020
tfslurm_step_startup_phase_seconds{phase="registered",stat="max"} 0.020
tfslurm_step_startup_phase_seconds{phase="started",stat="median"} 0.020
tfslurm_step_startup_phase_seconds{phase="started",stat="max"} 0.020
# HELP tfslurm_rank_up 1 while the rank's launcher is connected and its trainer has not ended.
# TYPE tfslurm_rank_up gauge
tfslurm_rank_up{rank="0",role="ps",host="n1"} 1
tfslurm_rank_up{rank="1",role="worker",host="n2"} 1
tfslurm_rank_up{rank="2",role="worker",host="n\"3"} 0
# HELP tfslurm_rank_state 1 for the rank's state.
# TYPE tfslurm_rank_state gauge
tfslurm_rank_state{rank="0",role="ps",host="n1",state="running"} 1
tfslurm_rank_state{rank="1",role="worker",host="n2",state="running"} 1
tfslurm_rank_state{rank="2",role="worker",host="n\"3",state="waiting"} 1
# HELP tfslurm_rank_restarts_total Restarts of the rank's trainer (--max-restarts).
# TYPE tfslurm_rank_restarts_total counter
tfslurm_rank_restarts_total{rank="0",role="ps",host="n1"} 0
tfslurm_rank_restarts_total{rank="1",role="worker",host="n2"} 1
tfslurm_rank_restarts_total{rank="2",role="worker",host="n\"3"} 0
# HELP tfslurm_rank_cpu_seconds_total CPU time of the rank's trainer, its whole process tree, as its launcher last reported it.
# TYPE tfslurm_rank_cpu_seconds_total counter
tfslurm_rank_cpu_seconds_total{rank="1",role="worker",host="n2"} 1.250
# HELP tfslurm_rank_memory_bytes Resident memory of the rank's trainer, summed over its process tree, as its launcher last reported it.
# TYPE tfslurm_rank_memory_bytes gauge
tfslurm_rank_memory_bytes{rank="1",role="worker",host="n2"} 52428800
# HELP tfslurm_rank_progress_age_seconds Seconds since the rank's trainer last made progress (with --stall-timeout, while it runs).
# TYPE tfslurm_rank_progress_age_seconds gauge
tfslurm_rank_progress_age_seconds{rank="1",role="worker",host="n2"} 3.500
)");
    // Only the step's series: the text up to the first per-rank family.
    const std::string step_only = render_metrics(c, k_t0 + 5s, step, false);
    CHECK(step_only == text.substr(0, text.find("# HELP tfslurm_rank_up")));
}

TEST_CASE("metrics: each rank's state as the step goes", "[metrics]") {
    Coordinator c(metrics_settings(), k_t0);
    c.registered(0, k_t0);
    c.registered(1, k_t0);
    c.registered(2, k_t0);
    c.exited(2, protocol::Exit{ExitStatus::exited(0)}, k_t0 + 1s);
    CHECK(c.rank_view(2, k_t0 + 1s).activity == RankActivity::exited);
    c.connection_lost(1, k_t0 + 2s);
    CHECK(c.rank_view(1, k_t0 + 2s).activity == RankActivity::lost);
    CHECK(c.verdict() == Verdict::aborted);
    c.exited(0, protocol::Exit{ExitStatus::signaled(15)}, k_t0 + 3s);
    CHECK(c.rank_view(0, k_t0 + 3s).activity == RankActivity::failed);
    const std::string text = render_metrics(c, k_t0 + 3s, {"94", "0", "r"}, false);
    CHECK(text.find("tfslurm_step_verdict{verdict=\"aborted\"} 1\n") != std::string::npos);
    CHECK(text.find("tfslurm_step_ranks{state=\"lost\"} 1\n") != std::string::npos);
}

TEST_CASE("metrics: the per-rank series up to 1000 ranks unless told", "[metrics]") {
    CHECK(per_rank_metrics(MetricsRanks::automatic, 1000));
    CHECK_FALSE(per_rank_metrics(MetricsRanks::automatic, 1001));
    CHECK(per_rank_metrics(MetricsRanks::yes, 100000));
    CHECK_FALSE(per_rank_metrics(MetricsRanks::no, 2));
}

TEST_CASE("metrics: the endpoint setting is [ADDR:]PORT", "[metrics]") {
    CHECK(parse_metrics_endpoint("9400", "metrics") == MetricsEndpoint{"", 9400});
    CHECK(parse_metrics_endpoint("127.0.0.1:9400", "metrics") ==
          MetricsEndpoint{"127.0.0.1", 9400});
    CHECK(parse_metrics_endpoint("[::1]:9400", "metrics") == MetricsEndpoint{"::1", 9400});
    using Row = std::tuple<std::string, std::string>;
    const auto [text, problem] = GENERATE(table<std::string, std::string>({
        Row{"", "a port from 1 to 65535"},
        Row{"0", "a port from 1 to 65535"},
        Row{"65536", "a port from 1 to 65535"},
        Row{"n1:9400", "with an IPv4 or IPv6 address"},
        Row{"::1:9400", "an IPv6 address in brackets"},
        Row{"[127.0.0.1]:9400", "brackets only around an IPv6 address"},
        Row{"127.0.0.1:", "a port from 1 to 65535"},
    }));
    INFO(text);
    CHECK_THROWS_WITH(parse_metrics_endpoint(text, "metrics"),
                      Catch::Contains(problem) && Catch::Contains(quote(text)) &&
                          Catch::StartsWith("metrics: expected [ADDR:]PORT"));
}

TEST_CASE("metrics: the endpoint answers GET /metrics and nothing else", "[metrics]") {
    const auto body = [] { return std::string("x 1\n"); };
    CHECK(http_response("GET /metrics HTTP/1.1\r\nHost: n1\r\n\r\n", body) ==
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
          "Content-Length: 4\r\nConnection: close\r\n\r\nx 1\n");
    CHECK(http_response("GET /metrics?x=1 HTTP/1.0\r\n\r\n", body).rfind("HTTP/1.1 200 OK", 0) ==
          0);
    CHECK(http_response("HEAD /metrics HTTP/1.1\r\n\r\n", body) ==
          "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
          "Content-Length: 4\r\nConnection: close\r\n\r\n");
    using Row = std::tuple<std::string, std::string>;
    const auto [head, status] = GENERATE(table<std::string, std::string>({
        Row{"GET / HTTP/1.1\r\n\r\n", "404 Not Found"},
        Row{"GET /metricsx HTTP/1.1\r\n\r\n", "404 Not Found"},
        Row{"POST /metrics HTTP/1.1\r\n\r\n", "405 Method Not Allowed"},
        Row{"GET /metrics HTTP/2\r\n\r\n", "400 Bad Request"},
        Row{"GET  /metrics HTTP/1.1\r\n\r\n", "400 Bad Request"},
        Row{"GET metrics HTTP/1.1\r\n\r\n", "400 Bad Request"},
        Row{"\x16\x03\x01 binary\r\n\r\n", "400 Bad Request"},
        Row{"", "400 Bad Request"},
    }));
    INFO(head);
    bool rendered = false;
    const std::string answer = http_response(head, [&rendered] {
        rendered = true;
        return std::string();
    });
    CHECK(answer.rfind("HTTP/1.1 " + status + "\r\n", 0) == 0);
    CHECK(answer.find("Connection: close\r\n") != std::string::npos);
    CHECK_FALSE(rendered); // the snapshot is only made for a scrape
}
