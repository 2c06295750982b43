// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `tfslurm run [plan options] [run options] -- CMD ARGS...`: the launcher of one Slurm task
/// (or, with --local N, of a whole job on this machine).

#include <CLI/CLI.hpp>

namespace tfslurm::cli {

/// Which of `run`'s options setup_run() makes.
enum class RunOptions {
    all,  ///< every one: the command line may hold some, or ask for the help
    none, ///< none: no option can be on the command line (`run -- CMD`, `run CMD`); every
          ///< setting still reads its TFSLURM_* variable, as with every option made
};

/// Add the `run` subcommand. Its callback stores the launcher's exit status: the trainer's
/// status (128 + signo if signalled), never an exception for a trainer failure.
void setup_run(CLI::App& app, int& exit_status, RunOptions options);

} // namespace tfslurm::cli
