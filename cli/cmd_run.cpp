// SPDX-License-Identifier: MIT
#include "cmd_run.hpp"

#include "plan_args.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/job_control.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/resolve/tf_config_file.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/shell/launcher_shell.hpp>
#include <tfslurm/shell/local_run.hpp>
#include <tfslurm/task/run_task.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <unistd.h>

#include <array>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace tfslurm::cli {
namespace {

struct RunArgs {
    GivenSettings given; ///< the launcher settings of the registry
    std::uint32_t local = 0;
    std::vector<std::string> command;
};

/// Every setting of this `run`, the plan's and the launcher's, layered once (their origins
/// recorded: an error names the option or variable the user set).
/// \throws Error for a bad value.
SettingValues
resolve_run_settings(const PlanArgs& plan_args, const RunArgs& args, const Environment& env) {
    auto values = given_values(plan_args.given, env);
    auto launcher = given_values(args.given, env);
    values.insert(values.end(), launcher.begin(), launcher.end());
    record_origins(values);
    return resolve_settings(values).values;
}

std::string own_executable() {
    std::string path(PATH_MAX, '\0');
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
    if (n <= 0) {
        return "/proc/self/exe";
    }
    path.resize(static_cast<std::size_t>(n));
    return path;
}

/// Append `option` as the parent gave it: `--name=value` once per value (a flag's value too:
/// CLI11 gives flags their value back, e.g. `--no-chief` as `--chief=0` and `-vv` as two
/// `--verbose=true`), so that whatever the value looks like, it is not taken for an option.
void append_option(const CLI::Option& option, std::vector<std::string>& argv) {
    const std::string name = option.get_name(false, false);
    for (const std::string& value : option.results()) {
        if (name.rfind("--", 0) == 0) {
            argv.push_back(fmt::format("{}={}", name, value));
        } else {
            argv.push_back(name); // a short name takes no `=`
            argv.push_back(value);
        }
    }
}

/// The launcher command of `--local`: this executable, the options of the parent command and
/// of `run` that were given (from the command line or their TFSLURM_* variable), except
/// `--local` and `--job-id` (the task environment says both), then `--` and the trainer.
/// Input: `tfslurm -v run --local 4 --ps 1 -- cmd --local 2`. Output: {self, "--verbose=true",
/// "run", "--ps=1", "--", "cmd", "--local", "2"}.
std::vector<std::string> launcher_command_line(const CLI::App& run,
                                               const std::vector<std::string>& command) {
    std::vector<std::string> argv{own_executable()};
    const auto given = [](const CLI::Option* option) {
        return !option->get_positional() && option->count() > 0 &&
               option->get_lnames() != std::vector<std::string>{"help"};
    };
    if (const CLI::App* parent = run.get_parent()) {
        for (const CLI::Option* option : parent->get_options(given)) {
            append_option(*option, argv);
        }
    }
    argv.push_back(run.get_name());
    for (const CLI::Option* option : run.get_options(given)) {
        if (option->check_lname("local") || option->check_lname("job-id")) {
            continue;
        }
        append_option(*option, argv);
    }
    argv.emplace_back("--");
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
}

/// Print a launcher's message as the CLI words it (its setting references rendered as options).
void print_line(Outcome outcome, const std::string& message) {
    const std::string_view level =
        outcome == Outcome::interrupted || outcome == Outcome::checkpointed ? "warning" : "error";
    const std::string text = cli_error(Error(Errc::io, message)).what();
    std::fputs(fmt::format("tfslurm: {}: {}\n", level, text).c_str(), stderr);
    std::fflush(stderr);
}

/// Run `check`, which validates the settings. Their errors are the same in every task of a
/// step (the same options and TFSLURM_* variables reach each one): only rank 0 prints one, as
/// an error, and the others log it at debug level and exit with the same status, so that the
/// user reads it once, not once per task. Returns that status for a task that stays quiet.
/// \throws Error from `check` otherwise.
template <typename Check>
std::optional<int> settings_once_per_step(const Environment& env, Check check) {
    try {
        check();
    } catch (const Error& e) {
        const auto rank = env.get("SLURM_PROCID");
        if (e.code() != Errc::invalid_argument || !rank || rank->empty() || *rank == "0" ||
            !env.get("SLURM_STEP_ID")) {
            throw;
        }
        const Error shown = cli_error(e);
        logger().debug("{} (rank 0 shows this error)", shown.what());
        return exit_status(e.code());
    }
    return std::nullopt;
}

/// Take TFSLURM_SECRET out of this process's environment once `env` holds it: the children
/// that inherit the environment (the preflight command, scontrol, squeue, scancel, sattach)
/// must not see it; the launcher reads it from `env` only.
void withhold_secret() {
    ::unsetenv(std::string(k_secret_variable).c_str());
}

// One task in order (~75 lines): the settings (layered once), the plan, the launch (the library's
// plan_launch()), the job's end, run_launcher(), then what its result asks of Slurm and the
// user; each step needs what the previous one made, and the order is the point.
int run_task(const PlanArgs& plan_args, const RunArgs& args) {
    const Environment env = Environment::from_process();
    withhold_secret();
    warn_unknown_variables(env);
    SettingValues settings;
    if (const auto status = settings_once_per_step(
            env, [&] { settings = resolve_run_settings(plan_args, args, env); })) {
        return *status;
    }
    const std::string hint = "tfslurm run starts one task's trainer: run it with srun (srun "
                             "tfslurm run ... CMD), or try the whole job on this machine with "
                             "--local N";
    ResolvedPlan resolved;
    try {
        resolved = resolve_plan(read_step_of(plan_args, env), settings, env, ExchangeUser::run);
    } catch (const Error& e) {
        if (e.code() != Errc::missing_env) {
            throw;
        }
        throw Error(e.code(), e.what(), hint);
    }
    const Plan& plan = resolved.plan;
    const RunSettings& run = resolved.settings.run;
    if (!plan.self_rank) {
        throw errors::missing_env("SLURM_PROCID", hint);
    }
    if (resolved.step.scope == Scope::job && resolved.step.ntasks > 1) {
        // A batch script is not a task: as rank 0 of N it would wait for N-1 launchers that
        // nobody starts.
        throw errors::missing_env("SLURM_STEP_ID", hint);
    }
    // Every task refuses what cannot work, at once, not only rank 0's coordinator (which
    // alone says so).
    if (const auto status =
            settings_once_per_step(env, [&] { check_until(members_of(plan), run.until); })) {
        return *status;
    }
    // Set by `--local` for its launchers only (anything else is ignored); close-on-exec now.
    const std::optional<int> status_channel = local_status_channel(env);
    TrainerEnvironment trainer_env{resolved.settings, env};
    TaskLaunch launch = plan_launch(
        resolved, run, trainer_env, env, status_channel ? TaskOrigin::local : TaskOrigin::slurm);
    LauncherOptions& options = launch.options;
    if (run.checkpoint_before) {
        options.job_end =
            job_end_time(plan, env, status_channel ? SlurmJob::no : SlurmJob::yes, print_line);
    }
    if (options.requeue && *plan.self_rank == 0) {
        options.requeue->previous =
            announce_requeued_run(*options.requeue, run.max_requeues, env, print_line);
    }
    const LaunchResult result = run_launcher(plan, args.command, launch.trainer, options);
    if (status_channel) {
        // `--local`: the parent shows each line once.
        write_local_report(*status_channel,
                           {*plan.self_rank, result.outcome, result.step_status, result.message});
        return result.exit_status;
    }
    if (result.requeue) {
        const int status = requeue_job(result, env, options.run.events, print_line);
        if (status != k_status_requeued && result.cancel) {
            // Refused (not a batch job, say): the node may still be gone.
            cancel_step(*result.cancel, result.outcome, {}, env, print_line);
        }
        return status;
    }
    if (result.cancel) {
        cancel_step(*result.cancel, result.outcome, result.message, env, print_line);
    } else if (!result.message.empty() && !result.announce) {
        logger().debug("{} (another launcher shows this line)", result.message);
    } else if (!result.message.empty()) {
        print_line(result.outcome, result.message);
        if (result.outcome == Outcome::aborted || result.outcome == Outcome::coordinator_lost) {
            // Let Slurm forward the line above before it learns that this task exited: once a
            // task of the step has died by SIGKILL or SIGTERM (a launcher killed by the OOM
            // killer, say), srun stops reading task output as soon as every task has exited,
            // and the line naming the failure would be lost. An abort is rare; 0.2 s on its
            // way out is cheap.
            logger().debug("waiting {} ms before exiting so that srun forwards the line above",
                           k_abort_linger.count());
            std::this_thread::sleep_for(k_abort_linger);
        }
    }
    return result.exit_status;
}

int run_local_job(const PlanArgs& plan_args, const RunArgs& args, const CLI::App& run_app) {
    const StepOverrides& preview = plan_args.preview;
    if (!preview.nodelist.empty() || !preview.tasks_per_node.empty() || preview.ntasks ||
        !preview.distribution.empty() || !preview.hostfile.empty() || preview.step_id ||
        preview.rank || !preview.resv_ports.empty() || !preview.gpus.empty()) {
        throw errors::invalid_argument("--local",
                                       "cannot be combined with the preview options",
                                       std::to_string(args.local),
                                       "--local N describes one node with N tasks by itself; only "
                                       "--job-id (which picks the ports) applies");
    }
    Environment env = Environment::from_process();
    withhold_secret(); // the launchers get it from `local.env`
    warn_unknown_variables(env);
    LocalOptions local;
    local.ntasks = args.local;
    local.job_id = plan_args.preview.job_id.value_or(static_cast<std::uint64_t>(::getpid()));
    // One run id for every launcher (each would make its own): kept when the user set one.
    if (const auto given = env.get("TFSLURM_RUN_ID")) {
        static_cast<void>(run_identity(given, {}, 0, 0)); // checked once, here
    } else {
        const auto now = std::chrono::duration_cast<std::chrono::seconds>(
            std::chrono::system_clock::now().time_since_epoch());
        env.set("TFSLURM_RUN_ID", fmt::format("local-{}-{}", local.job_id, now.count()));
    }

    // Check every option once here rather than N times in the launchers.
    // As its rank 0 will: the settings of its task environment (TFSLURM_ADDRESS=ip, ...).
    PlanArgs check = plan_args;
    check.preview = StepOverrides{};
    const Environment task_env = local_task_environment(env, local.ntasks, 0, local.job_id);
    SettingValues settings = resolve_run_settings(check, args, task_env);
    const RunSettings run = settings.run;
    const auto checked = resolve_plan(
        read_step_of(check, task_env), std::move(settings), task_env, ExchangeUser::run);
    check_until(members_of(checked.plan), run.until);

    add_local_secret(env, run.auth);
    local.env = std::move(env);
    local.launcher_argv = launcher_command_line(run_app, args.command);
    const LocalResult result = run_local(local);
    for (const LocalReport& report : result.messages) {
        print_line(report.outcome, report.message);
    }
    return result.exit_status;
}

/// The plan settings that `run` has beyond add_plan_options()'s (`env` has them as output
/// settings), each with the end of its help.
constexpr std::array<std::pair<std::string_view, std::string_view>, 2> k_run_plan_settings{
    {{"only", " (the variables given to the trainer)"},
     {"tf_config_file", " (removed when the launcher ends)"}}};

/// run's own options: the plan's (add_plan_options()), the launcher's, --local, --only and
/// --tf-config-file, bound to `plan_args` and `args` (which the command's callback keeps).
void add_run_options(CLI::App& sub, PlanArgs& plan_args, RunArgs& args) {
    add_plan_options(sub, plan_args);
    add_setting_options(sub, args.given, SettingGroup::launcher);
    const std::string group = "Launcher (also TFSLURM_<NAME>, e.g. TFSLURM_GRACE)";
    sub.add_option_function<std::string>(
           "--local",
           [&args](const std::string& text) {
               args.local =
                   static_cast<std::uint32_t>(parse_option_number(text, "--local", 1, 4096));
           },
           "Run the whole job on this machine: N tasks on one node 'localhost' "
           "(--job-id picks the ports)")
        ->type_name("N")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->group(group);
    for (const auto& [key, suffix] : k_run_plan_settings) {
        const SettingSpec* spec = find_setting(key);
        check_empty_value(*sub.add_option(std::string{spec->option},
                                          plan_args.given[std::string{spec->key}],
                                          std::string{spec->help} + std::string{suffix})
                               ->type_name(std::string{spec->type_name})
                               ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast),
                          *spec);
    }
}

/// The keys add_run_options() puts in `plan_args` and `args`, with no option: every setting of
/// `run` still reads its TFSLURM_* variable (given_values()).
void declare_run_settings(PlanArgs& plan_args, RunArgs& args) {
    declare_plan_settings(plan_args.given);
    declare_settings(args.given, SettingGroup::launcher);
    for (const auto& setting : k_run_plan_settings) {
        plan_args.given.try_emplace(std::string{setting.first});
    }
}

} // namespace

void setup_run(CLI::App& app, int& exit_status, RunOptions options) {
    auto* sub = app.add_subcommand(
        "run",
        "Run this task's trainer with its TF_CONFIG (and the other variables of 'tfslurm env'), "
        "and end the step: parameter servers are stopped once the training roles exit 0, and any "
        "failure stops every rank. Options end at the trainer's command (or at '--'). In a job "
        "script: srun tfslurm run --ps 2 python train.py. Without Slurm: tfslurm run --local 4 "
        "--ps 1 python train.py.");
    auto plan_args = std::make_shared<PlanArgs>();
    auto args = std::make_shared<RunArgs>();
    if (options == RunOptions::all) {
        add_run_options(*sub, *plan_args, *args);
    } else {
        declare_run_settings(*plan_args, *args);
    }
    sub->add_option("command",
                    args->command,
                    "The trainer and its arguments: options end at the first word that is not "
                    "one (or at '--'); the rest goes to the trainer")
        ->required();
    // Like srun, mpirun and torchrun: `tfslurm run python train.py --ps 2` gives `--ps 2` to
    // train.py. Once the command's first word is read, everything else is the command's.
    sub->positionals_at_end(true);
    sub->callback([plan_args, args, sub, &exit_status] {
        exit_status =
            args->local > 0 ? run_local_job(*plan_args, *args, *sub) : run_task(*plan_args, *args);
    });
}

} // namespace tfslurm::cli
