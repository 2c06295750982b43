// SPDX-License-Identifier: MIT
// `tfslurm events FILE`: the record that `tfslurm run --events FILE` wrote, as a timeline.
#include "commands.hpp"
#include "io.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/events.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace tfslurm::cli {

void setup_events(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "events",
        "Print the record of a step that 'tfslurm run --events FILE' wrote, as a timeline: "
        "every registration, start, exit, restart, loss, stall, straggler, checkpoint signal, "
        "requeue and the verdict, with the time since the step began, the rank, its role and "
        "its host; with --startup, where the start-up time went. FILE '-' reads standard "
        "input.");
    auto file = std::make_shared<std::string>();
    auto json = std::make_shared<bool>(false);
    sub->add_option("FILE", *file, "The event file (one JSON object per line, version 1)")
        ->required();
    auto startup = std::make_shared<bool>(false);
    auto* json_flag = sub->add_flag("--json",
                                    *json,
                                    "Print the file's lines as they are, once each was checked to "
                                    "be a version-1 event (a last line cut short is left out)");
    sub->add_flag("--startup",
                  *startup,
                  "Tell where the start-up time went: per phase (task started, launcher up, "
                  "registered, addresses exchanged, trainer started, first progress) the median, "
                  "90th percentile and maximum over the ranks with the slowest one; the slowest "
                  "nodes; and the slowest rank with the phase where it lost most")
        ->excludes(json_flag);
    sub->callback([file, json, startup, &exit_status] {
        const std::string text = *file == "-" ? read_stdin() : read_file(*file, "FILE");
        const std::string subject = *file == "-" ? std::string("stdin") : quote(*file);
        std::size_t incomplete = 0;
        const auto events = parse_events(text, subject, &incomplete);
        if (incomplete > 0) {
            logger().warn("{}: its last line is cut short (the step was killed while writing "
                          "it?); left out",
                          subject);
        }
        if (*json) {
            // As they are (fields a later version adds included), once every line was checked.
            const auto end = incomplete > 0 ? text.rfind('\n') : text.size() - 1;
            write_stdout(end == std::string::npos ? std::string_view{}
                                                  : std::string_view(text).substr(0, end + 1));
        } else if (*startup) {
            write_stdout(render_startup(events));
        } else {
            write_stdout(render_timeline(events));
        }
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
