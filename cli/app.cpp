// SPDX-License-Identifier: MIT
#include "app.hpp"

#include "cmd_run.hpp"
#include "commands.hpp"
#include "logging.hpp"
#include "plan_args.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <exception>

namespace tfslurm::cli {

int run_main(int argc, char** argv) {
    CLI::App app{"tfslurm: exact TF_CONFIG, torch and tf4slurm settings for every task of a Slurm "
                 "step, and a launcher that ends the step when the training is done.",
                 "tfslurm"};
    app.set_version_flag("--version", TFSLURM_VERSION);
    app.require_subcommand(1);
    app.fallthrough();
    app.footer("Run 'tfslurm <command> --help' for a command's options; man tfslurm for the "
               "whole story.");
    int verbosity = 0;
    bool quiet = false;
    app.add_flag("-v,--verbose", verbosity, "More log output on stderr (-vv for trace)");
    app.add_flag("-q,--quiet", quiet, "Only errors on stderr");
    app.parse_complete_callback([&] { setup_logging(verbosity, quiet); });

    int status = 0;
    setup_hostnames(app, status);
    setup_hostlist(app, status);
    setup_plan(app, status);
    setup_env(app, status);
    setup_run(app, status);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version are "errors" with status 0; usage mistakes exit 2.
        return app.exit(e) == 0 ? 0 : 2;
    } catch (const Error& e) {
        // The library names settings by key; the user typed an option or a variable.
        const auto shown = cli_error(e);
        std::fputs(fmt::format("tfslurm: error: {}\n", shown.what()).c_str(), stderr);
        if (!shown.hint().empty()) {
            std::fputs(fmt::format("tfslurm: hint: {}\n", shown.hint()).c_str(), stderr);
        }
        return exit_status(e.code());
    } catch (const std::exception& e) {
        std::fputs(fmt::format("tfslurm: error: {}\n", e.what()).c_str(), stderr);
        return 1;
    }
    return status;
}

} // namespace tfslurm::cli
