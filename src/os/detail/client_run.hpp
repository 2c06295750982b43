// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// A Slurm client (scontrol, squeue) run from PATH by the launcher's job control
/// (os/job_control.cpp): its output read through one pipe, bounded in time and in size.

#include <string>
#include <vector>

namespace tfslurm::detail {

/// What a Slurm client of PATH said: empty `why` when it exited 0.
struct ClientRun {
    std::string output; ///< its stdout and stderr together, at most 64 KiB, trailing blanks cut
    std::string why;    ///< e.g. `scontrol exited with status 1: Job is no longer pending ...`
};

/// Run `args` (`args[0]` found in PATH as a shell would) with its stdout and stderr read through
/// one pipe, bounded by 30 s (then it is killed, and `why` says so). posix_spawnp: nothing of
/// ours runs in the child, and the signals this launcher ignores (SIGTERM after a requeue) stay
/// ignored there. Every read is bounded: the first 64 KiB of the output are kept, and a child of
/// the client that keeps the pipe and writes on cannot hold the caller.
[[nodiscard]] ClientRun run_client(std::vector<std::string> args);

} // namespace tfslurm::detail
