// SPDX-License-Identifier: MIT
#include "app.hpp"

#include <tfslurm/error.hpp>

#include <CLI/CLI.hpp>

#include <iostream>

namespace tfslurm::cli {

int run_main(int argc, char** argv) {
    CLI::App app{"tfslurm: Slurm-aware cluster resolver and launcher for distributed training"};
    app.set_version_flag("--version", TFSLURM_VERSION);
    app.require_subcommand(1);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    return 0;
}

} // namespace tfslurm::cli
