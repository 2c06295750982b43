// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// One task of `tfslurm run`, planned: from its resolved plan (resolve_plan.hpp) and run
/// settings, the trainer's environment (TrainerEnvironment, which also owns the TF_CONFIG file's
/// lifecycle) and the launcher's options (plan_launch()), exact mode included. The CLI parses,
/// calls plan_launch() and run_launcher() (launcher_shell.hpp), and prints the result.

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/tf_config_file.hpp>
#include <tfslurm/run/run_settings.hpp>
#include <tfslurm/settings/plan_settings.hpp>
#include <tfslurm/shell/launcher_shell.hpp>
#include <tfslurm/task/resolve_plan.hpp>

namespace tfslurm {

/// The trainer's environment for a plan: the launcher's own, with the plan's variables (and
/// its socket interface's) set and the launcher-only ones (TFSLURM_SECRET, the `--local` status
/// channel) removed. With `tf_config_file` it also writes the file (again for a plan rebuilt
/// with the exchanged addresses: the path stays) and removes it when destroyed (the launcher
/// ends after its trainer). Not copyable: it owns that file.
class TrainerEnvironment {
  public:
    /// Keeps references to both: they must outlive it.
    TrainerEnvironment(const SettingValues& settings, const Environment& env)
        : m_settings(settings), m_env(env) {}
    TrainerEnvironment(const TrainerEnvironment&) = delete;
    TrainerEnvironment& operator=(const TrainerEnvironment&) = delete;
    TrainerEnvironment(TrainerEnvironment&&) = delete;
    TrainerEnvironment& operator=(TrainerEnvironment&&) = delete;
    /// Removes the TF_CONFIG file (a warning when a part of it stays).
    ~TrainerEnvironment();

    /// The environment of `built`'s self rank. Input: a plan of rank 1 (worker:0). Output: the
    /// launcher's environment with TF_CONFIG, TFSLURM_RANK=1, ... set.
    /// \throws Error as task_environment(), file_task_environment() and write_tf_config_file().
    [[nodiscard]] Environment operator()(const Plan& built);

  private:
    const SettingValues& m_settings;
    const Environment& m_env;
    TfConfigFile m_file;
};

/// Who started the task: srun (a Slurm step and job) or `--local` (neither).
enum class TaskOrigin { slurm, local };

/// What one task's launcher runs with: its options, and the trainer's environment (empty in
/// exact mode: options.trainer_environment builds it once the coordinator's `cluster` came).
struct TaskLaunch {
    LauncherOptions options;
    Environment trainer;
};

/// Plan one task's launch from its resolved plan (with a self rank): the run settings, how it
/// authenticates (TFSLURM_SECRET, and where munged listens: TFSLURM_MUNGE_SOCKET, else Slurm's
/// AuthInfo), the trainer's environment, or in exact mode (`iface`/`network` with the
/// coordinator's exchange) this node's address, the trainer ports it may hold (its reserved
/// ports, else `port_range`) and the environment rebuilt from the exchanged plan. Under Slurm
/// (TaskOrigin::slurm) with the plan's job: the step to cancel when a node is lost, and with
/// `requeue` the job and its SLURM_RESTART_COUNT.
/// `resolved` and `trainer_env` must outlive the launcher (the exact-mode builder uses both).
/// Input: rank 1 of 4, run settings with grace 5 s. Output: options.run.grace == 5 s, trainer
/// with TF_CONFIG. \throws Error from `trainer_env` and for a SLURM_RESTART_COUNT that is not
/// a number.
[[nodiscard]] TaskLaunch plan_launch(const ResolvedPlan& resolved,
                                     const RunSettings& run,
                                     TrainerEnvironment& trainer_env,
                                     const Environment& env,
                                     TaskOrigin origin);

} // namespace tfslurm
