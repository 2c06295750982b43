// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// A trainer's progress as the node's /proc shows it (--stall-timeout): the CPU time of its
/// process tree and the modification time of its progress file. The launcher samples these
/// and feeds them to LauncherMachine, which decides.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfslurm::detail {

/// The CPU time of `root` and of every descendant it has now (the trainer's supervisor: its
/// PID namespace's init and every process in it, orphans included, descend from it), its
/// reaped children's included, in clock ticks. One pass over /proc.
[[nodiscard]] std::uint64_t tree_cpu_ticks(pid_t root);

/// What a process tree uses: its CPU time (as tree_cpu_ticks()) and its resident memory (each
/// process's RSS, summed: shared pages count once per process). One pass over /proc.
struct TreeUsage {
    std::uint64_t cpu_ticks = 0;
    std::uint64_t rss_bytes = 0;
};
[[nodiscard]] TreeUsage tree_usage(pid_t root);

/// Every pid of `root`'s tree (list_children() of each pid, level by level).
[[nodiscard]] std::vector<pid_t> process_tree(pid_t root);

/// The modification time of `path` in nanoseconds; 0 when it cannot be read.
[[nodiscard]] std::int64_t mtime_ns(const std::string& path);

/// What a trainer reported through its progress file: when it last touched it (nullopt while
/// the modification time is still the 0 that set_untouched() gave it, or the file is gone) and
/// the step in its first line (progress_step(), startup.hpp; at most 64 bytes are read).
struct ProgressFileReport {
    std::optional<std::chrono::system_clock::time_point> touched;
    std::optional<std::uint64_t> step;
};

[[nodiscard]] ProgressFileReport read_progress_file(const std::string& path);

/// Give the open file `fd` a modification time of 0 (the Unix epoch): any touch by the trainer
/// is then told apart, and its time is the first progress's. Returns false on failure.
bool set_untouched(int fd) noexcept;

/// The latest a process can have started, from what is known of it at `now`: `entered`, when it
/// began running its own code (a fraction of a millisecond after its exec), and `tick_start`,
/// its start as /proc tells it, rounded down to the kernel's clock `tick` (10 ms): the earliest
/// of `entered`, `tick_start + tick` and `now`, of those known. Input: entered 12:00:00.0043,
/// tick_start 12:00:00.000, tick 10 ms, now 12:00:01. Output: 12:00:00.0043 (with entered
/// 12:00:00.0150, /proc's bound: 12:00:00.010; with neither known, now).
[[nodiscard]] std::chrono::system_clock::time_point
start_estimate(std::optional<std::chrono::system_clock::time_point> entered,
               std::optional<std::chrono::system_clock::time_point> tick_start,
               std::chrono::system_clock::duration tick,
               std::chrono::system_clock::time_point now);

/// When this process began (Slurm started the task): start_estimate() of the time this process
/// ran its static initialisation (not a forked copy's: that is the parent's) and of its start
/// in /proc/self/stat against CLOCK_BOOTTIME. Within about a millisecond of its exec, where
/// /proc alone is within a clock tick (10 ms).
[[nodiscard]] std::chrono::system_clock::time_point process_start_time();

} // namespace tfslurm::detail
