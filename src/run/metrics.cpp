// SPDX-License-Identifier: MIT
// The metrics endpoint's text and HTTP rules (tfslurm/run/metrics.hpp): pure.
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/run/metrics.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

namespace tfslurm {

namespace {

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
std::string label_value(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (const char c : text) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

/// Seconds with millisecond precision, as the format's floats.
std::string seconds_value(Millis millis) {
    return fmt::format("{}.{:03}", millis.count() / 1000, millis.count() % 1000);
}

/// The metric's HELP and TYPE lines.
void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

constexpr std::array<Verdict, 4> k_verdicts{
    Verdict::none, Verdict::done, Verdict::interrupted, Verdict::aborted};

} // namespace

MetricsEndpoint parse_metrics_endpoint(std::string_view text, std::string_view key) {
    const auto bad = [&](std::string_view problem) {
        return errors::invalid_setting(key, problem, text, "e.g. 9400 or 127.0.0.1:9400");
    };
    MetricsEndpoint out;
    std::string_view port = text;
    if (const auto colon = text.rfind(':'); colon != std::string_view::npos) {
        std::string_view address = text.substr(0, colon);
        port = text.substr(colon + 1);
        if (address.size() >= 2 && address.front() == '[' && address.back() == ']') {
            address = address.substr(1, address.size() - 2);
            if (address.find(':') == std::string_view::npos) {
                throw bad("expected [ADDR:]PORT, brackets only around an IPv6 address");
            }
        } else if (address.find(':') != std::string_view::npos) {
            throw bad("expected [ADDR:]PORT, an IPv6 address in brackets");
        }
        if (!is_ip_address(address)) {
            throw bad("expected [ADDR:]PORT with an IPv4 or IPv6 address");
        }
        out.address = std::string(address);
    }
    const auto number = detail::parse_decimal(port);
    if (!number || *number < 1 || *number > 65535) {
        throw bad("expected [ADDR:]PORT with a port from 1 to 65535");
    }
    out.port = static_cast<std::uint16_t>(*number);
    return out;
}

bool per_rank_metrics(MetricsRanks setting, std::size_t ranks) noexcept {
    switch (setting) {
    case MetricsRanks::yes:
        return true;
    case MetricsRanks::no:
        return false;
    case MetricsRanks::automatic:
        return ranks <= k_metrics_ranks_auto_limit;
    }
    return false;
}

// One family after the other (~95 lines), in the order of the table in metrics.hpp.
std::string render_metrics(const Coordinator& coordinator,
                           Clock::time_point now,
                           const MetricsStep& step,
                           bool per_rank) {
    std::string out;
    const std::vector<Member>& members = coordinator.settings().ranks;
    std::vector<RankView> views;
    views.reserve(coordinator.size());
    std::array<std::size_t, k_rank_activities> counts{};
    for (std::uint32_t rank = 0; rank < coordinator.size(); ++rank) {
        views.push_back(coordinator.rank_view(rank, now));
        ++counts.at(static_cast<std::size_t>(views.back().activity));
    }
    family(out, "tfslurm_step_info", "gauge", "The step of tfslurm run that rank 0 coordinates.");
    out += fmt::format("tfslurm_step_info{{job=\"{}\",step=\"{}\",run_id=\"{}\"}} 1\n",
                       label_value(step.job),
                       label_value(step.step),
                       label_value(step.run_id));
    family(out, "tfslurm_step_ranks", "gauge", "Ranks of the step in each state.");
    for (std::size_t i = 0; i < k_rank_activities; ++i) {
        out += fmt::format("tfslurm_step_ranks{{state=\"{}\"}} {}\n",
                           to_string(static_cast<RankActivity>(i)),
                           counts.at(i));
    }
    family(out,
           "tfslurm_step_restarts_total",
           "counter",
           "Trainer restarts granted in the step (--max-restarts).");
    out += fmt::format("tfslurm_step_restarts_total {}\n", coordinator.restarts());
    family(out,
           "tfslurm_step_verdict",
           "gauge",
           "1 for the step's verdict: none while it runs, then done, interrupted or aborted.");
    for (const Verdict verdict : k_verdicts) {
        out += fmt::format("tfslurm_step_verdict{{verdict=\"{}\"}} {}\n",
                           to_string(verdict),
                           coordinator.verdict() == verdict ? 1 : 0);
    }
    family(out,
           "tfslurm_step_startup_phase_seconds",
           "gauge",
           "Median and maximum time the ranks took to reach each start-up phase from the one "
           "before (the tasks' start: from the step's first task), as their launchers report "
           "them on their heartbeats and exits.");
    for (const PhaseFigures& figures : coordinator.startup_summary().phases) {
        const std::string_view phase = to_string(figures.phase);
        out +=
            fmt::format("tfslurm_step_startup_phase_seconds{{phase=\"{}\",stat=\"median\"}} {}\n",
                        phase,
                        seconds_value(figures.median));
        out += fmt::format("tfslurm_step_startup_phase_seconds{{phase=\"{}\",stat=\"max\"}} {}\n",
                           phase,
                           seconds_value(figures.max));
    }
    if (!per_rank) {
        return out;
    }
    const auto labels = [&members](std::uint32_t rank) {
        const Member& member = members.at(rank);
        return fmt::format(R"(rank="{}",role="{}",host="{}")",
                           rank,
                           to_string(member.role),
                           label_value(member.host));
    };
    family(out,
           "tfslurm_rank_up",
           "gauge",
           "1 while the rank's launcher is connected and its trainer has not ended.");
    for (std::uint32_t rank = 0; rank < views.size(); ++rank) {
        const RankActivity activity = views[rank].activity;
        const bool up = activity == RankActivity::running || activity == RankActivity::straggling ||
                        activity == RankActivity::stuck;
        out += fmt::format("tfslurm_rank_up{{{}}} {}\n", labels(rank), up ? 1 : 0);
    }
    family(out, "tfslurm_rank_state", "gauge", "1 for the rank's state.");
    for (std::uint32_t rank = 0; rank < views.size(); ++rank) {
        out += fmt::format("tfslurm_rank_state{{{},state=\"{}\"}} 1\n",
                           labels(rank),
                           to_string(views[rank].activity));
    }
    family(out,
           "tfslurm_rank_restarts_total",
           "counter",
           "Restarts of the rank's trainer (--max-restarts).");
    for (std::uint32_t rank = 0; rank < views.size(); ++rank) {
        out += fmt::format(
            "tfslurm_rank_restarts_total{{{}}} {}\n", labels(rank), views[rank].restarts);
    }
    family(out,
           "tfslurm_rank_cpu_seconds_total",
           "counter",
           "CPU time of the rank's trainer, its whole process tree, as its launcher last reported "
           "it.");
    for (std::uint32_t rank = 0; rank < views.size(); ++rank) {
        if (const auto& usage = views[rank].usage) {
            out += fmt::format("tfslurm_rank_cpu_seconds_total{{{}}} {}\n",
                               labels(rank),
                               seconds_value(Millis{static_cast<Millis::rep>(usage->cpu_ms)}));
        }
    }
    family(out,
           "tfslurm_rank_memory_bytes",
           "gauge",
           "Resident memory of the rank's trainer, summed over its process tree, as its launcher "
           "last reported it.");
    for (std::uint32_t rank = 0; rank < views.size(); ++rank) {
        if (const auto& usage = views[rank].usage) {
            out +=
                fmt::format("tfslurm_rank_memory_bytes{{{}}} {}\n", labels(rank), usage->rss_bytes);
        }
    }
    family(out,
           "tfslurm_rank_progress_age_seconds",
           "gauge",
           "Seconds since the rank's trainer last made progress (with --stall-timeout, while it "
           "runs).");
    for (std::uint32_t rank = 0; rank < views.size(); ++rank) {
        if (const auto& age = views[rank].progress_age) {
            out += fmt::format(
                "tfslurm_rank_progress_age_seconds{{{}}} {}\n", labels(rank), seconds_value(*age));
        }
    }
    return out;
}

std::optional<RequestLine> parse_request_line(std::string_view head) {
    const auto end = head.find("\r\n");
    const std::string_view line = head.substr(0, end);
    const auto first = line.find(' ');
    const auto second = first == std::string_view::npos ? first : line.find(' ', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos || first == 0 ||
        second == first + 1) {
        return std::nullopt;
    }
    const std::string_view version = line.substr(second + 1);
    if (version != "HTTP/1.0" && version != "HTTP/1.1") {
        return std::nullopt;
    }
    const std::string_view method = line.substr(0, first);
    const std::string_view target = line.substr(first + 1, second - first - 1);
    const auto plain = [](std::string_view text) {
        return std::all_of(text.begin(), text.end(), [](char c) {
            return static_cast<unsigned char>(c) > 0x20 && static_cast<unsigned char>(c) < 0x7f;
        });
    };
    if (!plain(method) || !plain(target) || target.front() != '/') {
        return std::nullopt;
    }
    return RequestLine{std::string(method), std::string(target)};
}

std::string
http_answer(int status, std::string_view content_type, const std::string& body, bool head_only) {
    const std::string_view reason = status == 200   ? "OK"
                                    : status == 400 ? "Bad Request"
                                    : status == 404 ? "Not Found"
                                    : status == 405 ? "Method Not Allowed"
                                    : status == 431 ? "Request Header Fields Too Large"
                                                    : "Error";
    std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: "
                                  "{}\r\nConnection: close\r\n{}\r\n",
                                  status,
                                  reason,
                                  content_type,
                                  body.size(),
                                  status == 405 ? "Allow: GET, HEAD\r\n" : "");
    if (!head_only) {
        out += body;
    }
    return out;
}

} // namespace tfslurm
