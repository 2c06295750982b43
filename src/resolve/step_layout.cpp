// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"
#include "resolve/detail/step.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/step_layout.hpp>

#include <fmt/format.h>

#include <optional>

namespace tfslurm {

namespace {

constexpr std::string_view k_layout_subject = "sattach --layout";

std::string_view layout_trimmed(std::string_view text) noexcept {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) {
        return {};
    }
    const auto last = text.find_last_not_of(" \t\r");
    return text.substr(first, last - first + 1);
}

/// One `Node <index> (<name>), <count> task(s): <rank> <rank> ...` line of sattach.
struct LayoutLine {
    std::string_view name;
    std::uint64_t count = 0;
    std::vector<std::uint64_t> ranks;
};

/// Consume `prefix` from the front of `text`.
bool take_prefix(std::string_view& text, std::string_view prefix) noexcept {
    if (text.substr(0, prefix.size()) != prefix) {
        return false;
    }
    text.remove_prefix(prefix.size());
    return true;
}

/// Consume a decimal number ending at `end` (or at the end of `text` when `end` is empty).
std::optional<std::uint64_t> take_layout_number(std::string_view& text, std::string_view end) {
    const auto stop = end.empty() ? text.size() : text.find(end);
    if (stop == std::string_view::npos) {
        return std::nullopt;
    }
    const auto number = detail::parse_decimal(text.substr(0, stop));
    text.remove_prefix(stop);
    return number;
}

std::optional<LayoutLine> parse_layout_line(std::string_view line) {
    LayoutLine parsed;
    if (!take_prefix(line, "Node ") || !take_layout_number(line, " (") ||
        !take_prefix(line, " (")) {
        return std::nullopt;
    }
    const auto close = line.find("), ");
    if (close == 0 || close == std::string_view::npos) {
        return std::nullopt;
    }
    parsed.name = line.substr(0, close);
    line.remove_prefix(close + 3);
    const auto count = take_layout_number(line, " task(s):");
    if (!count || !take_prefix(line, " task(s):")) {
        return std::nullopt;
    }
    parsed.count = *count;
    for (const auto word : detail::split(layout_trimmed(line), ' ')) {
        if (word.empty()) {
            continue;
        }
        const auto rank = detail::parse_decimal(word);
        if (!rank) {
            return std::nullopt;
        }
        parsed.ranks.push_back(*rank);
    }
    return parsed;
}

} // namespace

bool needs_step_layout(const StepInfo& step) noexcept {
    return step.scope == Scope::step && step.components.empty() &&
           step.distribution.kind == Distribution::block && step.hosts.size() > 1 &&
           !step.topology_order.empty();
}

std::vector<std::string> step_layout_command(const StepInfo& step) {
    if (!step.job_id) {
        throw errors::missing_env("SLURM_JOB_ID", "not inside an srun step?");
    }
    if (!step.step_id) {
        throw errors::missing_env("SLURM_STEP_ID", "not inside an srun step?");
    }
    return {"sattach", "--layout", fmt::format("{}.{}", *step.job_id, *step.step_id)};
}

// One pass over the lines, then one over the ranks: every check names the line it failed on.
std::vector<std::string> parse_step_layout(std::string_view text, const StepInfo& step) {
    const auto node_of = detail::node_index(step.hosts);
    std::vector<bool> node_seen(step.hosts.size(), false);
    std::vector<std::string> rank_hosts(step.ntasks);
    std::vector<bool> rank_seen(step.ntasks, false);
    const auto counts =
        fmt::format("{}={}", step.tasks_variable, compress_counts(step.tasks_per_node));
    std::size_t nodes = 0;
    for (const auto raw : detail::split(text, '\n')) {
        const auto line = layout_trimmed(raw);
        if (line.substr(0, 5) != "Node ") {
            continue; // the heading and the summary line, checked through the nodes below
        }
        const auto parsed = parse_layout_line(line);
        if (!parsed || parsed->count != parsed->ranks.size()) {
            throw errors::inconsistent_allocation(
                k_layout_subject,
                "expected \"Node <index> (<name>), <count> task(s): <ranks>\"",
                line);
        }
        const auto node = node_of.find(parsed->name);
        if (node == node_of.end()) {
            throw errors::inconsistent_allocation(
                k_layout_subject,
                fmt::format("{} is not a node of the step ({}={})",
                            parsed->name,
                            step.nodelist_variable,
                            step.nodelist),
                line);
        }
        if (node_seen[node->second]) {
            throw errors::inconsistent_allocation(
                k_layout_subject, fmt::format("{} is listed twice", parsed->name), line);
        }
        node_seen[node->second] = true;
        ++nodes;
        if (parsed->count != step.tasks_per_node[node->second]) {
            throw errors::inconsistent_allocation(k_layout_subject,
                                                  fmt::format("{} has {} tasks, {} gives it {}",
                                                              parsed->name,
                                                              parsed->count,
                                                              counts,
                                                              step.tasks_per_node[node->second]),
                                                  line);
        }
        for (const auto rank : parsed->ranks) {
            if (rank >= step.ntasks || rank_seen[rank]) {
                throw errors::inconsistent_allocation(
                    k_layout_subject,
                    rank >= step.ntasks
                        ? fmt::format("rank {} is outside the step's {} tasks", rank, step.ntasks)
                        : fmt::format("rank {} is listed twice", rank),
                    line);
            }
            rank_seen[rank] = true;
            rank_hosts[rank] = std::string(parsed->name);
        }
    }
    if (nodes != step.hosts.size()) {
        throw errors::inconsistent_allocation(k_layout_subject,
                                              fmt::format("lists {} of the step's {} nodes ({}={})",
                                                          nodes,
                                                          step.hosts.size(),
                                                          step.nodelist_variable,
                                                          step.nodelist),
                                              layout_trimmed(text.substr(0, text.find('\n'))));
    }
    for (std::uint32_t rank = 0; rank < step.ntasks; ++rank) {
        if (!rank_seen[rank]) {
            throw errors::inconsistent_allocation(
                k_layout_subject, fmt::format("rank {} is on no node", rank), layout_trimmed(text));
        }
    }
    return rank_hosts;
}

} // namespace tfslurm
