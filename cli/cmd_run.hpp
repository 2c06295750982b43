// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `tfslurm run [plan options] [run options] -- CMD ARGS...`: the launcher of one Slurm task
/// (or, with --local N, of a whole job on this machine).

#include <CLI/CLI.hpp>

namespace tfslurm::cli {

/// Add the `run` subcommand. Its callback stores the launcher's exit status: the trainer's
/// status (128 + signo if signalled), never an exception for a trainer failure.
void setup_run(CLI::App& app, int& exit_status);

} // namespace tfslurm::cli
