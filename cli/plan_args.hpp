// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Options shared by `tfslurm plan`, `env` and `run`: how to describe the allocation (from the
/// environment, or a preview from options) and the settings of the registry (plan_settings.hpp),
/// with the CLI's spelling of each setting for messages.

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/exchange.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/settings/plan_settings.hpp>
#include <tfslurm/task/resolve_plan.hpp>

#include <CLI/CLI.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::cli {

/// Raw option values of the registry's settings: one entry per setting the subcommand has,
/// empty when its option was not given.
using GivenSettings = std::map<std::string, std::string, std::less<>>;

/// Raw option values, converted by plan_from_args().
struct PlanArgs {
    StepOverrides preview;       ///< used when --nodelist is given
    bool nodelist_given = false; ///< --nodelist was given, even as ''
    GivenSettings given;         ///< plan settings, plus output settings for `env`
};

/// An option's number, read like the SLURM_* variables (the library's strict decimal reader:
/// ASCII digits only, so no sign, base prefix, octal or overflow), from `low` to `high`.
/// Input: "010", 0, 9999. Output: 10. Input: "0x10". Output: throws
/// `<subject>: expected an integer from 0 to 9999: "0x10"`.
/// \throws Error (Errc::invalid_argument) naming `subject` (may be a setting_ref()).
[[nodiscard]] std::uint64_t parse_option_number(std::string_view text,
                                                std::string_view subject,
                                                std::uint64_t low,
                                                std::uint64_t high);

/// Add the allocation-preview options and the plan settings (registry groups roles and
/// network) to a subcommand. Every setting also reads its `TFSLURM_<NAME>` variable (option >
/// variable > default), in plan_from_args().
void add_plan_options(CLI::App& sub, PlanArgs& args);

/// One rule for empty values: an option given as '' is checked like any other value (`--only ''`
/// is refused like `--only ','`), where an empty TFSLURM_* variable is an unset one; a launcher
/// setting (or one without a parser) needs a value. \throws Error from `option`'s parsing.
void check_empty_value(CLI::Option& option, const SettingSpec& spec);

/// Add the registry's settings of `group` (output, launcher) to a subcommand, bound to `given`; a
/// launcher option given twice takes its last value.
void add_setting_options(CLI::App& sub, GivenSettings& given, SettingGroup group);

/// Put the keys of the registry's settings of `group` that have an option in `given`, unset,
/// making no option: what add_setting_options() puts there when none of them is given, for a
/// command line that cannot hold one (`run -- CMD`); their TFSLURM_* variables still count.
void declare_settings(GivenSettings& given, SettingGroup group);

/// declare_settings() of add_plan_options()'s settings (roles and network).
void declare_plan_settings(GivenSettings& given);

/// The given options and the `TFSLURM_*` variables of the settings in `given`, as layers.
/// Input: given {ps: "3", layout: ""}, env {TFSLURM_LAYOUT=tf-compat, TFSLURM_ONLY=tf}.
/// Output: {layout=tf-compat (environment), ps=3 (option)}.
[[nodiscard]] std::vector<SettingValue> given_values(const GivenSettings& given,
                                                     const Environment& env);

/// The step of this invocation: a preview when --nodelist was given (even as ''), else the
/// environment's (read_step()), with the controller's layout when only that places its ranks
/// (add_controller_layout()).
/// \throws Error for preview options without --nodelist, and from preview_step()/read_step()
///         and add_controller_layout().
[[nodiscard]] StepInfo read_step_of(const PlanArgs& args, const Environment& env);

/// Validate the output settings, read the step (read_step_of()), apply the settings, and
/// resolve the plan (tfslurm::resolve_plan(), for `user` with `detail`). Records where every
/// setting came from in invocation_origins() first, so that errors name what the user typed.
/// \throws Error.
[[nodiscard]] ResolvedPlan plan_from_args(const PlanArgs& args,
                                          const Environment& env,
                                          ExchangeUser user = ExchangeUser::plan,
                                          GpuDetail detail = GpuDetail::every_rank);

/// Warn about every `TFSLURM_*` variable that is not tfslurm's (unknown_variables()), with the
/// closest known name: once per step, by the task of rank 0 (SLURM_PROCID 0) or a command run
/// outside a step; never by a `--local` launcher (its parent warned).
/// Output: `tfslurm: warning: TFSLURM_PSS: not a tfslurm variable, ignored (did you mean
/// TFSLURM_PS?)`.
void warn_unknown_variables(const Environment& env);

/// Where the settings of this invocation came from (one `tfslurm` process runs one command):
/// filled by plan_from_args() and the launcher options, read when an error is printed.
[[nodiscard]] SettingOrigins& invocation_origins();

/// Record the origins of the winners of `values` in invocation_origins().
void record_origins(const std::vector<SettingValue>& values);

/// The CLI's spelling of a setting: its option (`--gpus-per-task`, `--layout tf-compat`,
/// `--no-chief`), or its variable (`TFSLURM_GPUS_PER_TASK`, `TFSLURM_LAYOUT=tf-compat`) when its
/// value came from the environment; keys outside the registry as they are.
[[nodiscard]] std::string
cli_setting_name(std::string_view key, std::string_view value, const SettingOrigins& origins);

/// An error as the CLI words it (cli_setting_name() with invocation_origins()).
[[nodiscard]] Error cli_error(const Error& error);

} // namespace tfslurm::cli
