// SPDX-License-Identifier: MIT
// The phases of a rank's start and the progress a trainer reports (tfslurm/run/startup.hpp).
#include "common/detail/text.hpp"

#include <tfslurm/run/startup.hpp>

#include <algorithm>
#include <utility>

namespace tfslurm {

namespace {

constexpr std::array<std::string_view, k_startup_phases> k_phase_names{
    "task", "up", "registered", "cluster", "started", "progress"};
constexpr std::array<std::string_view, k_startup_phases> k_phase_descriptions{"task started",
                                                                              "launcher up",
                                                                              "registered",
                                                                              "addresses exchanged",
                                                                              "trainer started",
                                                                              "first progress"};

} // namespace

std::string_view to_string(StartupPhase phase) noexcept {
    return k_phase_names.at(static_cast<std::size_t>(phase));
}

std::string_view describe(StartupPhase phase) noexcept {
    return k_phase_descriptions.at(static_cast<std::size_t>(phase));
}

bool StartupTimes::empty() const noexcept {
    return std::none_of(at.begin(), at.end(), [](const auto& time) { return time.has_value(); });
}

namespace {

using Millis = std::chrono::milliseconds;

/// One rank's durations: a phase from the one before it that the rank reached (`cluster` is
/// skipped without the exchange), the task's start from `first_task`, the total from
/// `first_task` to `end`.
struct RankDurations {
    const RankPhases* rank = nullptr;
    std::array<std::optional<Millis>, k_startup_phases> took;
    std::optional<Millis> total;
};

[[nodiscard]] Millis millis_between(WallClock::time_point from, WallClock::time_point to) {
    return std::chrono::duration_cast<Millis>(to - from);
}

[[nodiscard]] RankDurations durations(const RankPhases& rank,
                                      std::optional<WallClock::time_point> first_task,
                                      StartupPhase end) {
    RankDurations out;
    out.rank = &rank;
    const StartupTimes& at = *rank.at;
    if (first_task && at[StartupPhase::task]) {
        out.took[0] = millis_between(*first_task, *at[StartupPhase::task]);
    }
    std::optional<WallClock::time_point> before = at[StartupPhase::task];
    for (std::size_t i = 1; i < k_startup_phases; ++i) {
        const auto& time = at.at.at(i);
        if (!time) {
            continue;
        }
        if (before) {
            out.took.at(i) = std::max(millis_between(*before, *time), Millis{0});
        }
        before = time;
    }
    if (first_task && at[end]) {
        out.total = millis_between(*first_task, *at[end]);
    }
    return out;
}

/// The nearest-rank percentile `percent` of sorted `values` (not empty).
[[nodiscard]] Millis percentile(const std::vector<Millis>& values, std::size_t percent) {
    const std::size_t rank = (values.size() * percent + 99) / 100;
    return values.at(std::max<std::size_t>(rank, 1) - 1);
}

} // namespace

StartupSummary summarize_startup(const std::vector<RankPhases>& ranks) {
    StartupSummary out;
    std::optional<WallClock::time_point> first_task;
    bool any_progress = false;
    std::vector<const RankPhases*> known;
    for (const RankPhases& rank : ranks) {
        if (rank.at->empty()) {
            continue;
        }
        known.push_back(&rank);
        if (const auto& task = (*rank.at)[StartupPhase::task]) {
            first_task = first_task ? std::min(*first_task, *task) : *task;
        }
        any_progress = any_progress || (*rank.at)[StartupPhase::progress].has_value();
    }
    out.reported = known.size();
    out.end = any_progress ? StartupPhase::progress : StartupPhase::started;
    std::vector<RankDurations> all;
    all.reserve(known.size());
    for (const RankPhases* rank : known) {
        all.push_back(durations(*rank, first_task, out.end));
    }

    std::vector<Millis> values;
    for (std::size_t i = 0; i < k_startup_phases; ++i) {
        values.clear();
        const RankDurations* slowest = nullptr;
        for (const RankDurations& rank : all) {
            if (const auto& took = rank.took.at(i)) {
                values.push_back(*took);
                if (slowest == nullptr || *took > *slowest->took.at(i)) {
                    slowest = &rank;
                }
            }
        }
        if (values.empty()) {
            continue;
        }
        std::sort(values.begin(), values.end());
        out.phases.push_back({static_cast<StartupPhase>(i),
                              values.size(),
                              percentile(values, 50),
                              percentile(values, 90),
                              values.back(),
                              slowest->rank->rank});
    }

    // The nodes by their slowest rank, then the slowest rank and where it lost its time.
    std::vector<std::pair<std::string_view, Millis>> nodes;
    const RankDurations* slowest = nullptr;
    for (const RankDurations& rank : all) {
        if (!rank.total) {
            continue;
        }
        if (slowest == nullptr || *rank.total > *slowest->total) {
            slowest = &rank;
        }
        const std::string_view host = rank.rank->host;
        const auto node = std::find_if(
            nodes.begin(), nodes.end(), [host](const auto& entry) { return entry.first == host; });
        if (node == nodes.end()) {
            nodes.emplace_back(host, *rank.total);
        } else {
            node->second = std::max(node->second, *rank.total);
        }
    }
    if (slowest == nullptr) {
        return out;
    }
    std::stable_sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
        return a.second > b.second;
    });
    for (std::size_t i = 0; i < nodes.size() && i < k_slowest_nodes; ++i) {
        out.nodes.push_back({std::string(nodes[i].first), nodes[i].second});
    }
    out.more_nodes = nodes.size() - out.nodes.size();

    SlowestStartup last{slowest->rank->rank, *slowest->total, std::nullopt, Millis{0}, {}};
    // Where it lost most: its phase furthest above the other ranks' median of that phase (0 when
    // no other rank reached it).
    Millis lost{};
    for (std::size_t i = 0; i < k_startup_phases; ++i) {
        if (!slowest->took.at(i)) {
            continue;
        }
        values.clear();
        for (const RankDurations& rank : all) {
            if (&rank != slowest && rank.took.at(i)) {
                values.push_back(*rank.took.at(i));
            }
        }
        std::sort(values.begin(), values.end());
        const std::optional<Millis> base =
            values.empty() ? std::nullopt : std::optional<Millis>(percentile(values, 50));
        const Millis excess = *slowest->took.at(i) - base.value_or(Millis{0});
        if (!last.lost || excess > lost) {
            last.lost = static_cast<StartupPhase>(i);
            last.took = *slowest->took.at(i);
            last.others_median = base;
            lost = excess;
        }
    }
    out.slowest = last;
    return out;
}

std::optional<std::uint64_t> progress_step(std::string_view text) noexcept {
    text = text.substr(0, text.find('\n'));
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
        text.remove_suffix(1);
    }
    return detail::parse_decimal(text);
}

} // namespace tfslurm
