// SPDX-License-Identifier: MIT
#include "commands.hpp"
#include "io.hpp"
#include "plan_args.hpp"

#include <tfslurm/resolve/tf_config.hpp>

#include <memory>

namespace tfslurm::cli {

void setup_plan(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "plan",
        "Print the whole cluster: every rank's role, host, address, port and GPUs. Inside Slurm "
        "it reads the step (or, in a batch script, the job); anywhere, --nodelist and "
        "--tasks-per-node preview a layout before you submit.");
    auto args = std::make_shared<PlanArgs>();
    auto json = std::make_shared<bool>(false);
    add_plan_options(*sub, *args);
    sub->add_flag("--json", *json, "JSON instead of a table");
    sub->callback([args, json, &exit_status] {
        const auto env = Environment::from_process();
        warn_unknown_variables(env);
        const auto resolved = plan_from_args(*args, env);
        write_stdout(*json ? plan_json(resolved.plan) : plan_table(resolved.plan));
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
