// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `tfslurm run --local N`: the whole job on this machine, one launcher per task.

#include <tfslurm/env.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tfslurm {

/// SLURM_STEP_TASKS_PER_NODE=N, SLURM_PROCID=rank, SLURM_GTIDS=0,...,N-1, SLURM_JOB_ID=job,
/// SLURM_STEP_ID=0, ...) and TFSLURM_ADDRESS=ip (so that every address is 127.0.0.1).
[[nodiscard]] Environment local_task_environment(const Environment& base,
                                                 std::uint32_t ntasks,
                                                 std::uint32_t rank,
                                                 std::uint64_t job_id);

struct LocalOptions {
    std::uint32_t ntasks = 1;
    std::uint64_t job_id = 0;
    /// The launcher command (`/proc/self/exe run [options] -- CMD ...`), run once per task.
    std::vector<std::string> launcher_argv;
    /// The parent's environment, the base of every task's.
    Environment env;
};

/// The launcher command line for `--local`: `argv` (the parent's own, as in /proc/self/cmdline)
/// with argv[0] replaced by `self_exe` and `--local N` / `--job-id ID` (or their `=` forms)
/// removed before the first `--`.
/// Input: {"tfslurm", "-v", "run", "--local", "4", "--ps=1", "--", "cmd", "--local", "2"}.
/// Output: {self_exe, "-v", "run", "--ps=1", "--", "cmd", "--local", "2"}.
[[nodiscard]] std::vector<std::string> local_launcher_argv(const std::vector<std::string>& argv,
                                                           const std::string& self_exe);

/// `tfslurm run --local N`: start N launchers with local_task_environment(), forward signals to
/// them, wait for all, kill any leftover descendant. Returns the step's status: on an abort the
/// failing rank's status (as reported by the launchers), otherwise the highest launcher exit
/// status (like srun). \throws Error (Errc::spawn_failed) when a launcher cannot be started.
[[nodiscard]] int run_local(const LocalOptions& options);

} // namespace tfslurm
