// SPDX-License-Identifier: MIT
#include "commands.hpp"
#include "io.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <memory>
#include <string>
#include <vector>

namespace tfslurm::cli {

void setup_hostlist(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "hostlist",
        "Compress hosts into a Slurm hostlist, like 'scontrol show hostlist': order and "
        "duplicates kept, so 'tfslurm hostnames' gives the same hosts back. Each HOST may itself "
        "be a hostlist; a HOST with a '/' is a file of hosts (as scontrol reads it); without "
        "HOST, or with HOST '-', hosts are read from standard input (any separators; not from "
        "a terminal without HOST).");
    auto hosts = std::make_shared<std::vector<std::string>>();
    sub->add_option("HOST", *hosts, "Host names or hostlists");
    sub->callback([hosts, &exit_status] {
        // Each input is folded as it is visited: a list that is already compressed is
        // never expanded (`a[1-1000]b[1-1000]` is 1,000 runs, not 1,000,000 names).
        HostlistCompressor compressor("HOST");
        if (hosts->empty()) {
            if (stdin_is_terminal()) {
                // It would wait there in silence for names and a ^D.
                throw errors::make(Errc::invalid_argument,
                                   "hostlist",
                                   "no HOST given and standard input is a terminal",
                                   "give the hosts (tfslurm hostlist n1 n2), pipe them in (... | "
                                   "tfslurm hostlist), or type them after 'tfslurm hostlist -'");
            }
            visit_hostlist(read_stdin(), compressor, "stdin");
        } else {
            for (const auto& item : *hosts) {
                if (item == "-") {
                    visit_hostlist(read_stdin(), compressor, "stdin");
                } else if (item.find('/') != std::string::npos) {
                    // No host name has a '/': like scontrol, such an argument names a file.
                    const auto subject = "HOST file " + quote(item);
                    visit_hostlist(read_file(item, subject), compressor, subject);
                } else {
                    visit_hostlist(item, compressor, "HOST");
                }
            }
        }
        write_stdout(compressor.finish() + "\n");
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
