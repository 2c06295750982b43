// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// A trainer's progress as the node's /proc shows it (--stall-timeout): the CPU time of its
/// process tree and the modification time of its progress file. The launcher samples these
/// and feeds them to LauncherMachine, which decides.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tfslurm::detail {

/// The CPU time of `root` and of every descendant it has now (the trainer's supervisor: its
/// PID namespace's init and every process in it, orphans included, descend from it), its
/// reaped children's included, in clock ticks. One pass over /proc.
[[nodiscard]] std::uint64_t tree_cpu_ticks(pid_t root);

/// Every pid of `root`'s tree (one pass over /proc through list_children() per level).
[[nodiscard]] std::vector<pid_t> process_tree(pid_t root);

/// The modification time of `path` in nanoseconds; 0 when it cannot be read.
[[nodiscard]] std::int64_t mtime_ns(const std::string& path);

} // namespace tfslurm::detail
