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
#include <string_view>

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

/// The step a progress file's text names: its first line, a decimal number (spaces around it
/// allowed); nullopt for anything else (an empty file: only touched).
/// Input: `1200\n`. Output: 1200. Input: `epoch 3`. Output: nullopt.
[[nodiscard]] std::optional<std::uint64_t> progress_step(std::string_view text) noexcept;

} // namespace tfslurm
