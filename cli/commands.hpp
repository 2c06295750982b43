// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// One `setup_<sub>` per subcommand: it adds the subcommand, its options and a callback that
/// runs it and stores the command's exit status. Errors are thrown as tfslurm::Error and
/// handled once, in run_main().

#include <CLI/CLI.hpp>

namespace tfslurm::cli {

void setup_hostnames(CLI::App& app, int& exit_status);
void setup_hostlist(CLI::App& app, int& exit_status);
void setup_plan(CLI::App& app, int& exit_status);
void setup_env(CLI::App& app, int& exit_status);
void setup_events(CLI::App& app, int& exit_status);
void setup_top(CLI::App& app, int& exit_status);

} // namespace tfslurm::cli
