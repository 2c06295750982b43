// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The phases of a rank's start (the start-up timeline): when Slurm started its task, when its
/// launcher was up, registered, had every node's address, started the trainer, and when the
/// trainer first reported progress. Each launcher takes its own times (wall clock, its node's)
/// and sends them with its `exit`; the coordinator records them (a `startup` event per rank) and
/// `tfslurm events --startup` tells where the start-up time went (render_startup(), events.hpp).
/// Durations are taken between two times of one node, never across nodes, but for the tasks'
/// start (Slurm's launch of the step), which compares the nodes' clocks.

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

using WallClock = std::chrono::system_clock;

/// A rank's phases, in the order they happen.
enum class StartupPhase {
    task,       ///< Slurm started the task: the launcher's process began
    up,         ///< the launcher read its plan and began to connect
    registered, ///< the coordinator admitted it (welcome checked)
    cluster,    ///< every node's address came (`cluster`; only with the address exchange)
    started,    ///< its trainer was started (the first time)
    progress    ///< the trainer first touched or wrote $TFSLURM_PROGRESS_FILE
};

inline constexpr std::size_t k_startup_phases = 6;

/// The wire's and the record's name: `task`, `up`, `registered`, `cluster`, `started`,
/// `progress`.
[[nodiscard]] std::string_view to_string(StartupPhase phase) noexcept;

/// As the report says it: `task started`, `launcher up`, `registered`, `addresses exchanged`,
/// `trainer started`, `first progress`.
[[nodiscard]] std::string_view describe(StartupPhase phase) noexcept;

/// When a rank reached each phase (indexed by StartupPhase); nullopt: not reached (or not
/// known: `cluster` without the exchange).
struct StartupTimes {
    std::array<std::optional<WallClock::time_point>, k_startup_phases> at;

    [[nodiscard]] std::optional<WallClock::time_point>& operator[](StartupPhase phase) {
        return at.at(static_cast<std::size_t>(phase));
    }
    [[nodiscard]] const std::optional<WallClock::time_point>& operator[](StartupPhase phase) const {
        return at.at(static_cast<std::size_t>(phase));
    }
    /// No phase known.
    [[nodiscard]] bool empty() const noexcept;

    friend bool operator==(const StartupTimes& a, const StartupTimes& b) noexcept {
        return a.at == b.at;
    }
};

/// How far a run's trainers got, from their launchers' `exit`s (the requeue storm rule,
/// requeue_policy.hpp): whether any trainer started, whether any reported progress through its
/// progress file (touched it), and the highest step any wrote there (the file's first line, a
/// decimal number, e.g. `1200`).
struct RunProgress {
    bool started = false;
    bool reported = false;
    std::optional<std::uint64_t> step;

    friend bool operator==(const RunProgress& a, const RunProgress& b) noexcept {
        return a.started == b.started && a.reported == b.reported && a.step == b.step;
    }
};

/// One rank's phases, as summarize_startup() reads them (views into the caller's data).
struct RankPhases {
    std::uint32_t rank = 0;
    std::string_view host;
    const StartupTimes* at = nullptr; ///< not null
};

/// One phase over the ranks that reached it: how many did, and the median, the 90th
/// percentile (nearest rank) and the maximum of the time each took from the phase before it
/// that it reached (the tasks' start: from the step's first task), with the rank that took
/// longest (the first of equals).
struct PhaseFigures {
    StartupPhase phase = StartupPhase::task;
    std::size_t ranks = 0;
    std::chrono::milliseconds median{0};
    std::chrono::milliseconds p90{0};
    std::chrono::milliseconds max{0};
    std::uint32_t slowest = 0;

    friend bool operator==(const PhaseFigures& a, const PhaseFigures& b) noexcept {
        return a.phase == b.phase && a.ranks == b.ranks && a.median == b.median && a.p90 == b.p90 &&
               a.max == b.max && a.slowest == b.slowest;
    }
};

/// A node and the time its slowest rank took from the step's first task to the summary's end.
struct NodeStartup {
    std::string host;
    std::chrono::milliseconds took{0};

    friend bool operator==(const NodeStartup& a, const NodeStartup& b) noexcept {
        return a.host == b.host && a.took == b.took;
    }
};

/// The rank that took longest to reach the summary's end, and the phase where it lost most
/// against the other ranks' median of that phase (`others_median` nullopt: no other rank
/// reached it).
struct SlowestStartup {
    std::uint32_t rank = 0;
    std::chrono::milliseconds total{0};
    std::optional<StartupPhase> lost;
    std::chrono::milliseconds took{0};
    std::optional<std::chrono::milliseconds> others_median;

    friend bool operator==(const SlowestStartup& a, const SlowestStartup& b) noexcept {
        return a.rank == b.rank && a.total == b.total && a.lost == b.lost && a.took == b.took &&
               a.others_median == b.others_median;
    }
};

/// Where a step's start-up time went (`tfslurm events --startup`, `tfslurm top` while the step
/// starts, the metrics' phase figures): one decision, summarize_startup().
struct StartupSummary {
    std::size_t reported = 0; ///< ranks with at least one phase known
    /// The phase the totals run to: `progress` once any trainer reported progress, else
    /// `started`.
    StartupPhase end = StartupPhase::started;
    std::vector<PhaseFigures> phases; ///< the phases some rank reached, in their order
    std::vector<NodeStartup> nodes;   ///< the k_slowest_nodes slowest nodes to `end`, slowest first
    std::size_t more_nodes = 0;       ///< nodes that reached `end` beyond those
    std::optional<SlowestStartup> slowest; ///< nullopt: no rank reached `end`

    friend bool operator==(const StartupSummary& a, const StartupSummary& b) noexcept {
        return a.reported == b.reported && a.end == b.end && a.phases == b.phases &&
               a.nodes == b.nodes && a.more_nodes == b.more_nodes && a.slowest == b.slowest;
    }
};

/// Nodes a StartupSummary names.
inline constexpr std::size_t k_slowest_nodes = 3;

/// The summary of `ranks` (ranks without a phase are left out). Durations are between two times
/// of one node, never below 0 (a file's time ticks coarser than the launcher's clock); the tasks'
/// start is taken from the step's first task, across the nodes' clocks.
/// Input: rank 0 on n1 up 10 ms after its task, rank 1 on n2 up 30 ms after its own (which came
/// 5 ms after rank 0's). Output: `up` median 10 ms, max 30 ms, slowest 1; `task` max 5 ms.
[[nodiscard]] StartupSummary summarize_startup(const std::vector<RankPhases>& ranks);

/// The step a progress file's text names: its first line, a decimal number (spaces around it
/// allowed); nullopt for anything else (an empty file: only touched).
/// Input: `1200\n`. Output: 1200. Input: `epoch 3`. Output: nullopt.
[[nodiscard]] std::optional<std::uint64_t> progress_step(std::string_view text) noexcept;

} // namespace tfslurm
