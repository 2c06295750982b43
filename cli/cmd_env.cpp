// SPDX-License-Identifier: MIT
#include "commands.hpp"
#include "io.hpp"
#include "plan_args.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/pmi2.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/resolve/tf_config_file.hpp>

#include <memory>
#include <string>

namespace tfslurm::cli {
namespace {

/// The plan with every node's chosen address: after the PMI2 exchange (every task of the step
/// takes part), else the resolved plan as it is.
Plan exact_plan(const ResolvedPlan& resolved) {
    if (resolved.exchange != Exchange::pmi2) {
        return resolved.plan;
    }
    if (resolved.own_address_error) {
        // Take part without an address, so that the other tasks fail instead of waiting.
        static_cast<void>(exchange_addresses_pmi2(resolved.plan, {}));
        throw Error(*resolved.own_address_error);
    }
    auto exact = resolved.settings.plan;
    exact.node_addresses = exchange_addresses_pmi2(resolved.plan, resolved.own_address->address);
    auto plan = make_plan(resolved.step, resolved.allocation, exact, {}, GpuDetail::self_only);
    plan.socket_interface = resolved.own_address->interface;
    return plan;
}

} // namespace

// Mostly the command's help text and its option list (~65 lines); the callback itself is a
// few lines: resolve the plan, check the size limits, print.
void setup_env(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "env",
        "Print this task's settings: TF_CONFIG, the tf4slurm server dictionary "
        "(TFSLURM_SERVERS), torch variables (MASTER_ADDR, RANK, ...) and CUDA_VISIBLE_DEVICES. "
        "In a job script: srun bash -c 'eval \"$(tfslurm env)\"; exec python train.py'.");
    auto args = std::make_shared<PlanArgs>();
    add_plan_options(*sub, *args);
    add_setting_options(*sub, args->given, SettingGroup::output);
    sub->callback([args, &exit_status] {
        const auto env = Environment::from_process();
        warn_unknown_variables(env);
        // One task's variables: the other ranks' GPU lists would be built for nothing.
        const auto resolved = plan_from_args(*args, env, ExchangeUser::env, GpuDetail::self_only);
        if (!resolved.plan.self_rank && resolved.step.scope == Scope::preview) {
            // A preview reads no SLURM_* variable, SLURM_PROCID included.
            throw errors::make(Errc::invalid_argument,
                               "preview options",
                               "tfslurm env describes one task: need " + setting_ref("rank"),
                               "a preview reads no SLURM_* variable: name the task, e.g. " +
                                   setting_ref("rank", "0"));
        }
        if (!resolved.plan.self_rank) {
            throw errors::missing_env(
                "SLURM_PROCID",
                "tfslurm env describes one task: run it inside srun, or preview with --nodelist "
                "... --rank N");
        }
        if (resolved.step.scope == Scope::job && resolved.plan.ranks.size() > 1) {
            // `eval "$(tfslurm env)"` in the batch script, then srun: every task inherits
            // RANK=0 and the framework's rendezvous waits forever for the other ranks.
            logger().warn("batch script: not a task of a step: these variables describe rank {} "
                          "of the job's {} tasks, and every task started with them would be "
                          "rank {}; set them in each task instead: srun bash -c 'eval "
                          "\"$(tfslurm env)\"; exec python train.py'",
                          *resolved.plan.self_rank,
                          resolved.plan.ranks.size(),
                          *resolved.plan.self_rank);
        } else if (resolved.step.scope == Scope::job) {
            logger().debug("no step variables: describing rank {} of the job's layout (this is "
                           "the batch script, not a task of a step)",
                           *resolved.plan.self_rank);
        }
        const Plan plan = exact_plan(resolved);
        const auto rank = *plan.self_rank;
        const auto with_socket_interface = [&](EnvVars vars) {
            for (auto& var : socket_interface_variables(plan, env)) {
                vars.push_back(std::move(var));
            }
            for (auto& var : thread_variables(plan, rank, resolved.settings.outputs, env)) {
                vars.push_back(std::move(var));
            }
            return vars;
        };
        if (resolved.settings.tf_config_file.empty()) {
            write_stdout(render_env(
                with_socket_interface(task_environment(plan, rank, resolved.settings.outputs)),
                resolved.settings.format));
            exit_status = 0;
            return;
        }
        // The file outlives this process: the job script (or whoever evaluates the output)
        // owns it. Rendered before writing, so that a value the format cannot hold leaves no
        // file behind.
        const auto with_file = file_task_environment(
            plan, rank, resolved.settings.outputs, resolved.settings.tf_config_file, env);
        const auto text =
            render_env(with_socket_interface(with_file.vars), resolved.settings.format);
        if (!with_file.file.path.empty()) {
            write_tf_config_file(with_file.file, with_file.tf_config);
        }
        write_stdout(text);
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
