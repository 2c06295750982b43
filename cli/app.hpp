// SPDX-License-Identifier: MIT
#pragma once

namespace tfslurm::cli {

/// Parse the command line, run the subcommand, map errors to exit statuses (tfslurm(1)).
[[nodiscard]] int run_main(int argc, char** argv);

} // namespace tfslurm::cli
