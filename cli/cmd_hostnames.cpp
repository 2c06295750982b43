// SPDX-License-Identifier: MIT
#include "commands.hpp"
#include "io.hpp"

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <string>
#include <string_view>

namespace tfslurm::cli {

void setup_hostnames(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "hostnames",
        "Expand a Slurm hostlist, one host per line, like 'scontrol show hostnames' (no Slurm "
        "configuration needed). Without LIST: the step's nodelist (SLURM_STEP_NODELIST, then "
        "SLURM_JOB_NODELIST, then SLURM_NODELIST). LIST '-' reads standard input.");
    auto list = std::make_shared<std::string>();
    auto* given = sub->add_option("LIST", *list, "Hostlist such as n[01-03],gpu-a[1-2]-b[01-03]");
    sub->callback([list, given, &exit_status] {
        std::string text;
        std::string subject = "LIST";
        if (given->count() > 0) {
            text = *list == "-" ? read_stdin() : *list;
            subject = *list == "-" ? "stdin" : "LIST";
        } else {
            const auto env = Environment::from_process();
            bool found = false;
            for (const auto* name :
                 {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}) {
                if (const auto value = env.get(name)) {
                    text = std::string{*value};
                    subject = name;
                    found = true;
                    break;
                }
            }
            if (!found) {
                throw errors::missing_env(
                    "SLURM_STEP_NODELIST",
                    "not inside Slurm? give the list: tfslurm hostnames 'n[1-3]'");
            }
        }
        if (text.empty()) {
            // Printing nothing would read as "no hosts" to a script; scontrol refuses it too.
            throw errors::invalid_hostlist(subject, "empty host list", text);
        }
        write_hostnames(
            text, [](std::string_view chunk) { write_stdout(chunk); }, subject);
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
