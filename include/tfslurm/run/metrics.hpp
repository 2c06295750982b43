// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The metrics endpoint of `tfslurm run --metrics` (rank 0): what a scrape returns, in the
/// Prometheus text format (version 0.0.4, which `promtool check metrics` checks), and the few
/// HTTP rules of the endpoint. Pure: the coordinator's snapshot in, text out; the server that
/// listens is metrics_server.hpp.
///
/// Series (every name with HELP and TYPE; per-rank ones carry `rank`, `role`, `host`; the
/// list in tfslurm(1), METRICS):
/// - the step's: `tfslurm_step_info{job,step,run_id}` (gauge, 1), `tfslurm_step_ranks{state}`
///   (gauge, the ranks in each RankActivity), `tfslurm_step_restarts_total` (counter),
///   `tfslurm_step_verdict{verdict}` (gauge, 1 for the verdict, `none` while it runs),
///   `tfslurm_step_startup_phase_seconds{phase,stat}` (gauge, median and max of each start-up
///   phase, from the ranks that reported it);
/// - each rank's: `tfslurm_rank_up` (gauge: connected, trainer not ended), `tfslurm_rank_state
///   {state}` (gauge, 1), `tfslurm_rank_restarts_total` (counter), `tfslurm_rank_cpu_seconds_total`
///   (counter) and `tfslurm_rank_memory_bytes` (gauge) of its trainer's process tree (from the
///   heartbeats), `tfslurm_rank_progress_age_seconds` (gauge, with a stall timeout while it
///   runs).

#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/run.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm {

/// Up to this many ranks, `metrics_ranks=auto` returns the per-rank series: a step of 100,000
/// ranks would otherwise bring 400,000 series to the site's Prometheus.
inline constexpr std::size_t k_metrics_ranks_auto_limit = 1000;

/// Whether the per-rank series are returned for a step of `ranks` ranks.
[[nodiscard]] bool per_rank_metrics(MetricsRanks setting, std::size_t ranks) noexcept;

/// The step's identity in `tfslurm_step_info`.
struct MetricsStep {
    std::string job;
    std::string step;
    std::string run_id;
};

/// The text of one scrape: the coordinator's snapshot at `now` (its start-up phases come with
/// the ranks' exits). Label values are escaped as the format wants (`\\`, `\"`, `\n`).
[[nodiscard]] std::string render_metrics(const Coordinator& coordinator,
                                         Clock::time_point now,
                                         const MetricsStep& step,
                                         bool per_rank);

/// The content type of render_metrics()' text.
inline constexpr std::string_view k_metrics_content_type =
    "text/plain; version=0.0.4; charset=utf-8";

/// The most bytes of a request's head the endpoint reads; past it: 431.
inline constexpr std::size_t k_max_request_head = 8192;

/// The answer to one request head (up to its blank line): `GET /metrics` (or `HEAD`): 200 with
/// `body()`'s text; another path: 404; another method: 405; a head that is no HTTP/1.x request:
/// 400. Always `Connection: close`. `body` is only called for a 200.
/// Input: `GET /metrics HTTP/1.1\r\nHost: n1\r\n\r\n`. Output: `HTTP/1.1 200 OK\r\n...`.
template <typename Body>
[[nodiscard]] std::string http_response(std::string_view head, Body&& body);

/// The status line and headers of an answer with `body` (its length counted; none sent for a
/// HEAD). Input: 404, `text/plain`, `not found\n`, false. Output: `HTTP/1.1 404 Not Found\r\n...`.
[[nodiscard]] std::string
http_answer(int status, std::string_view content_type, const std::string& body, bool head_only);

/// The method and target of a request head's first line; nullopt when it is no
/// `METHOD TARGET HTTP/1.x` line. Input: `GET /metrics HTTP/1.1\r\n...`. Output: {GET, /metrics}.
struct RequestLine {
    std::string method;
    std::string target;
};
[[nodiscard]] std::optional<RequestLine> parse_request_line(std::string_view head);

template <typename Body> std::string http_response(std::string_view head, Body&& body) {
    const auto line = parse_request_line(head);
    if (!line) {
        return http_answer(400, "text/plain", "bad request\n", false);
    }
    const bool head_only = line->method == "HEAD";
    if (line->method != "GET" && !head_only) {
        return http_answer(405, "text/plain", "only GET\n", head_only);
    }
    const std::string_view path =
        std::string_view(line->target)
            .substr(0, std::min(line->target.size(), line->target.find('?')));
    if (path != "/metrics") {
        return http_answer(404, "text/plain", "not found: try /metrics\n", head_only);
    }
    return http_answer(200, k_metrics_content_type, body(), head_only);
}

} // namespace tfslurm
