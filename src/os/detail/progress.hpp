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

/// When this process began (Slurm started the task), to the kernel's clock tick: its start
/// in /proc/self/stat against CLOCK_BOOTTIME. nullopt when /proc cannot tell.
[[nodiscard]] std::optional<std::chrono::system_clock::time_point> process_start_time();

} // namespace tfslurm::detail
