// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/run/requeue_policy.hpp>
#include <tfslurm/run/top_view.hpp> // parse_scontrol_record()

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

namespace tfslurm {

namespace {

/// What starts tfslurm's record in a job's comment (exclusion_record()).
constexpr std::string_view k_record_start = "tfslurm run ";
/// Between the user's own comment and the record.
constexpr std::string_view k_record_separator = "; ";
constexpr std::string_view k_left_out = " left out (";
constexpr std::string_view k_no_progress = "no progress";
constexpr std::string_view k_progress = "progress";
constexpr std::string_view k_progress_at_step = "progress at step ";

/// `no progress`, `progress` or `progress at step N`; nullopt for anything else.
std::optional<ProgressMark> parse_mark(std::string_view text) {
    if (text == k_no_progress) {
        return ProgressMark{ProgressMark::Kind::none, 0};
    }
    if (text == k_progress) {
        return ProgressMark{ProgressMark::Kind::made, 0};
    }
    if (text.rfind(k_progress_at_step, 0) == 0) {
        if (const auto step = detail::parse_decimal(text.substr(k_progress_at_step.size()))) {
            return ProgressMark{ProgressMark::Kind::step, *step};
        }
    }
    return std::nullopt;
}

/// Where the record starts in `comment`, or npos: at the start, or after the separator.
std::size_t record_position(std::string_view comment) {
    if (comment.rfind(k_record_start, 0) == 0) {
        return 0;
    }
    const auto at = comment.rfind(std::string(k_record_separator) + std::string(k_record_start));
    return at == std::string_view::npos ? at : at + k_record_separator.size();
}

/// Slurm's text for "none".
bool slurm_none(std::string_view text) {
    return text.empty() || text == "(null)" || text == "N/A";
}

} // namespace

std::optional<std::string_view> node_fault_reason(protocol::FailureCause cause) noexcept {
    // A switch without default: a new cause does not build until it is sorted here (a cause
    // that is a node's fault says what happened to the rank, for the requeued run's line).
    switch (cause) {
    case protocol::FailureCause::lost:
        return "launcher lost";
    case protocol::FailureCause::preflight:
        return "preflight failed";
    case protocol::FailureCause::trainer:
    case protocol::FailureCause::start:
    case protocol::FailureCause::unregistered:
    case protocol::FailureCause::stalled:
    case protocol::FailureCause::unreachable:
        return std::nullopt;
    }
    return std::nullopt;
}

bool node_fault(protocol::FailureCause cause) noexcept {
    return node_fault_reason(cause).has_value();
}

std::optional<NodeExclusion> node_exclusion(const protocol::Failure& failure,
                                            std::uint32_t restart_count,
                                            std::size_t step_nodes,
                                            const std::optional<protocol::Checked>& check) {
    if (failure.host.empty()) {
        return std::nullopt;
    }
    NodeExclusion out;
    out.run = restart_count + 1;
    if (check && check->failure &&
        (failure.cause == protocol::FailureCause::trainer ||
         failure.cause == protocol::FailureCause::stalled)) {
        out.nodes = {failure.host};
        out.why = fmt::format("rank {} node check failed", failure.rank);
        return out;
    }
    if (failure.cause == protocol::FailureCause::unregistered) {
        // Several missing ranks: `host` is their hosts as a hostlist, `ranks` their ranges. A
        // list that is none (the coordinator writes none such) names no node to leave out.
        try {
            out.nodes = failure.missing > 1 ? expand_hostlist(failure.host, "unregistered hosts")
                                            : std::vector<std::string>{failure.host};
        } catch (const Error&) {
            return std::nullopt;
        }
        if (out.nodes.size() * 2 >= step_nodes) {
            return std::nullopt;
        }
        out.why = failure.missing > 1 ? fmt::format("ranks {} did not register", failure.ranks)
                                      : fmt::format("rank {} did not register", failure.rank);
        return out;
    }
    const auto reason = node_fault_reason(failure.cause);
    if (!reason) {
        return std::nullopt;
    }
    out.nodes = {failure.host};
    out.why = fmt::format("rank {} {}", failure.rank, *reason);
    return out;
}

std::string node_check_text(const protocol::Failure& failure,
                            const std::optional<protocol::Checked>& check) {
    if (!check) {
        return fmt::format("no node check result from {} (its launcher left without one)",
                           failure.host);
    }
    if (!check->failure) {
        return fmt::format("node check passed on {}", failure.host);
    }
    return fmt::format("node check failed on {}: {}: {}",
                       failure.host,
                       check->failure->check,
                       check->failure->detail);
}

bool requeue_allowed(std::uint32_t restart_count, std::uint32_t max_requeues) noexcept {
    return restart_count < max_requeues;
}

std::string merged_exclusion(std::string_view existing, const std::vector<std::string>& nodes) {
    std::vector<std::string> hosts;
    if (!slurm_none(existing)) {
        hosts = expand_hostlist(existing, "ExcNodeList");
    }
    for (const std::string& node : nodes) {
        if (std::find(hosts.begin(), hosts.end(), node) == hosts.end()) {
            hosts.push_back(node);
        }
    }
    return compress_hostlist(hosts, "ExcNodeList");
}

std::string exclusion_record(const NodeExclusion& exclusion) {
    return run_record_text(RunRecord{exclusion.run, exclusion, std::nullopt});
}

std::string run_record_text(const RunRecord& record) {
    std::string text = fmt::format("{}{}: ", k_record_start, record.run);
    if (record.exclusion) {
        text += fmt::format("{}{}{})",
                            compress_hostlist(record.exclusion->nodes),
                            k_left_out,
                            record.exclusion->why);
    }
    if (record.progress) {
        text += record.exclusion ? k_record_separator : std::string_view();
        switch (record.progress->kind) {
        case ProgressMark::Kind::none:
            text += k_no_progress;
            break;
        case ProgressMark::Kind::made:
            text += k_progress;
            break;
        case ProgressMark::Kind::step:
            text += fmt::format("{}{}", k_progress_at_step, record.progress->step);
            break;
        }
    }
    return text;
}

ProgressMark progress_mark(const RunProgress& progress, Millis ran, Millis min_run) {
    if (progress.started && progress.step) {
        return {ProgressMark::Kind::step, *progress.step};
    }
    if (!progress.started || (!progress.reported && ran < min_run)) {
        return {ProgressMark::Kind::none, 0};
    }
    return {ProgressMark::Kind::made, 0};
}

std::optional<std::string> requeue_storm(const std::optional<RunRecord>& previous,
                                         const ProgressMark& now,
                                         std::uint32_t restart_count) {
    if (!previous || !previous->progress || previous->run != restart_count || restart_count == 0) {
        return std::nullopt;
    }
    const ProgressMark& before = *previous->progress;
    if (before.kind == ProgressMark::Kind::none && now.kind == ProgressMark::Kind::none) {
        return fmt::format("runs {} and {} both ended before any trainer's first progress",
                           restart_count,
                           restart_count + 1);
    }
    if (before.kind == ProgressMark::Kind::step && now == before) {
        return fmt::format(
            "runs {} and {} both ended at step {}", restart_count, restart_count + 1, now.step);
    }
    return std::nullopt;
}

std::string comment_without_record(std::string_view comment) {
    const auto at = record_position(comment);
    if (at == std::string_view::npos) {
        return std::string(comment);
    }
    return std::string(comment.substr(0, at == 0 ? 0 : at - k_record_separator.size()));
}

std::string comment_with_record(std::string_view comment, std::string_view record) {
    const std::string own = comment_without_record(comment);
    return own.empty() ? std::string(record)
                       : fmt::format("{}{}{}", own, k_record_separator, record);
}

std::optional<NodeExclusion> record_in_comment(std::string_view comment) {
    const auto record = run_record_in_comment(comment);
    return record ? record->exclusion : std::nullopt;
}

std::optional<RunRecord> run_record_in_comment(std::string_view comment) {
    const auto at = record_position(comment);
    if (at == std::string_view::npos) {
        return std::nullopt;
    }
    // `tfslurm run <run>: [<nodes> left out (<why>)][; ]<mark>`
    std::string_view rest = comment.substr(at + k_record_start.size());
    const auto colon = rest.find(": ");
    if (colon == std::string_view::npos) {
        return std::nullopt;
    }
    const auto run = detail::parse_decimal(rest.substr(0, colon));
    if (!run || *run == 0 || *run > UINT32_MAX) {
        return std::nullopt;
    }
    RunRecord out;
    out.run = static_cast<std::uint32_t>(*run);
    std::string_view body = rest.substr(colon + 2);
    if (const auto mark = parse_mark(body)) {
        out.progress = mark;
        return out;
    }
    const auto left = body.find(k_left_out);
    const auto why_at = left == std::string_view::npos ? left : left + k_left_out.size();
    const auto close = why_at == std::string_view::npos ? why_at : body.find(')', why_at);
    if (close == std::string_view::npos) {
        return std::nullopt;
    }
    NodeExclusion exclusion;
    exclusion.run = out.run;
    try {
        exclusion.nodes = expand_hostlist(body.substr(0, left));
    } catch (const Error&) {
        return std::nullopt;
    }
    exclusion.why = std::string(body.substr(why_at, close - why_at));
    if (exclusion.nodes.empty()) {
        return std::nullopt;
    }
    out.exclusion = std::move(exclusion);
    const std::string_view after = body.substr(close + 1);
    if (after.empty()) {
        return out;
    }
    if (after.rfind(k_record_separator, 0) != 0) {
        return std::nullopt;
    }
    out.progress = parse_mark(after.substr(k_record_separator.size()));
    if (!out.progress) {
        return std::nullopt;
    }
    return out;
}

std::optional<std::string> requeued_run_line(const NodeExclusion& record,
                                             std::uint32_t restart_count,
                                             std::uint32_t max_requeues,
                                             const std::vector<std::string>& job_nodes) {
    if (record.run != restart_count || restart_count == 0) {
        return std::nullopt;
    }
    std::vector<std::string> still;
    for (const std::string& node : record.nodes) {
        if (std::find(job_nodes.begin(), job_nodes.end(), node) != job_nodes.end()) {
            still.push_back(node);
        }
    }
    const std::string head =
        fmt::format("requeued run {} of {}: ", restart_count + 1, max_requeues + 1);
    if (!still.empty()) {
        return fmt::format("{}{} should have been left out ({} in run {}) but runs this job: its "
                           "ExcNodeList did not reach Slurm before the requeue ended the step",
                           head,
                           compress_hostlist(still),
                           record.why,
                           record.run);
    }
    return fmt::format("{}{} left out ({} in run {})",
                       head,
                       compress_hostlist(record.nodes),
                       record.why,
                       record.run);
}

JobRecord parse_job_record(std::string_view text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.remove_suffix(1);
    }
    const auto bar = text.find('|');
    if (bar == std::string_view::npos) {
        throw Error(Errc::io,
                    fmt::format("squeue: expected the job's ExcNodeList|Comment: \"{}\"", text));
    }
    JobRecord out;
    const std::string_view excluded = text.substr(0, bar);
    const std::string_view comment = text.substr(bar + 1);
    out.excluded = slurm_none(excluded) ? std::string() : std::string(excluded);
    out.comment = comment == "(null)" ? std::string() : std::string(comment);
    return out;
}

std::optional<std::chrono::system_clock::time_point>
job_end_from_variable(std::string_view text, std::chrono::system_clock::time_point now) {
    const auto seconds = detail::parse_decimal(text);
    if (!seconds || *seconds > static_cast<std::uint64_t>(INT64_MAX)) {
        throw errors::invalid_argument(
            "SLURM_JOB_END_TIME", fmt::format("expected an integer from 0 to {}", INT64_MAX), text);
    }
    const std::chrono::system_clock::time_point end{
        std::chrono::seconds{static_cast<std::chrono::seconds::rep>(*seconds)}};
    // Slurm puts the end of a job without a time limit a year after its start.
    if (*seconds == 0 || end - now > std::chrono::hours{24 * 300}) {
        return std::nullopt;
    }
    return end;
}

Millis coordinator_linger(const RunSettings& run) {
    Millis linger = run.grace + run.heartbeat_timeout + Millis{2000};
    if (!run.on_failure_check.empty()) {
        // The failed rank's launcher checks its node after its trainer ended (its grace).
        linger += run.on_failure_check_timeout + Millis{5000};
    }
    return linger;
}

Millis takeover_silence_wait(const RunSettings& run) {
    return coordinator_linger(run) + Millis{10000};
}

Millis takeover_rank0_wait(const RunSettings& run) {
    return 2 * takeover_silence_wait(run) + k_takeover_turns * k_takeover_stagger;
}

bool strict_majority(std::uint32_t answering, std::size_t nodes) noexcept {
    return 2 * static_cast<std::size_t>(answering) > nodes;
}

std::optional<Takeover> takeover_turn(const std::vector<Member>& ranks,
                                      std::uint32_t rank,
                                      CoordinatorLoss loss,
                                      const RunSettings& run) {
    if (loss == CoordinatorLoss::other || rank == 0 || rank >= ranks.size()) {
        return std::nullopt;
    }
    if (node_leaders(ranks)[rank] != rank) {
        return std::nullopt; // the node's leader speaks for it
    }
    // The nodes in rank order: rank 0's first. A leader is its node's lowest rank, so the
    // nodes before this one are those of the lower ranks.
    std::vector<std::string_view> hosts;
    for (std::uint32_t r = 0; r < rank; ++r) {
        if (std::find(hosts.begin(), hosts.end(), ranks[r].host) == hosts.end()) {
            hosts.emplace_back(ranks[r].host);
        }
    }
    const auto turn = static_cast<std::uint32_t>(hosts.size()); // rank 0's node is turn 0
    if (turn == 0 || turn > k_takeover_turns) {
        return std::nullopt;
    }
    Takeover out;
    out.turn = turn;
    out.wait = (turn - 1) * k_takeover_stagger;
    if (loss == CoordinatorLoss::silent) {
        out.wait += takeover_silence_wait(run);
    }
    return out;
}

std::optional<std::string>
takeover_refusal(std::string_view record, std::uint64_t job, std::uint32_t restart_count) {
    const auto fields = parse_scontrol_record(record);
    const auto state = fields.find("JobState");
    if (state == fields.end()) {
        return fmt::format("scontrol's record of job {} has no JobState", job);
    }
    const auto restarts = fields.find("Restarts");
    if (restarts == fields.end()) {
        return fmt::format("scontrol's record of job {} has no Restarts", job);
    }
    const auto count = detail::parse_decimal(restarts->second);
    if (!count) {
        return fmt::format("scontrol's record of job {} has an unreadable Restarts: {}",
                           job,
                           quote(restarts->second));
    }
    if (*count != restart_count) {
        return fmt::format("job {} was requeued already (Restarts={})", job, *count);
    }
    if (state->second != "RUNNING") {
        return fmt::format("job {} is {}", job, quote(state->second));
    }
    return std::nullopt;
}

} // namespace tfslurm
