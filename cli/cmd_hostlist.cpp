// SPDX-License-Identifier: MIT
#include "commands.hpp"
#include "io.hpp"

#include <tfslurm/hostlist.hpp>

#include <memory>
#include <string>
#include <vector>

namespace tfslurm::cli {

void setup_hostlist(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "hostlist",
        "Compress hosts into a Slurm hostlist, like 'scontrol show hostlist': order and "
        "duplicates kept, so 'tfslurm hostnames' gives the same hosts back. Each HOST may itself "
        "be a hostlist; without HOST, or with HOST '-', hosts are read from standard input (any "
        "separators).");
    auto hosts = std::make_shared<std::vector<std::string>>();
    sub->add_option("HOST", *hosts, "Host names or hostlists");
    sub->callback([hosts, &exit_status] {
        std::vector<std::string> all;
        if (hosts->empty()) {
            all = expand_hostlist(read_stdin(), "stdin");
        } else {
            for (const auto& item : *hosts) {
                auto expanded = item == "-" ? expand_hostlist(read_stdin(), "stdin")
                                            : expand_hostlist(item, "HOST");
                all.insert(all.end(),
                           std::make_move_iterator(expanded.begin()),
                           std::make_move_iterator(expanded.end()));
            }
        }
        write_stdout(compress_hostlist(all, "HOST") + "\n");
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
