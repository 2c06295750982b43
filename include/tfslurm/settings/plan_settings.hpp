// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The one registry of settings: every plan setting (and `only`, `format`, the launcher's
/// settings and the preview fields) with its key, its `TFSLURM_*` variable, its CLI spelling,
/// its plugstack/`--tfslurm` spelling, its kind, its parser and its help text; and the one
/// layering of values (option > `TFSLURM_*` variable > plugstack.conf > default) that both
/// faces, the `tfslurm` CLI and the SPANK plugin, use. Library messages name settings by key
/// through setting_ref() (error.hpp); each face renders the key as its user typed it.

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Everything a setting's parser may set.
struct SettingValues {
    PlanOptions plan;
    OutputSelection outputs;
    EnvFormat format = EnvFormat::export_lines;
    std::string tf_config_file; ///< `tf_config_file`: empty = TF_CONFIG in the environment
    bool plugin_run = false;    ///< `run`: the SPANK plugin starts every task under `tfslurm run`
    RunSettings run;            ///< the settings of `tfslurm run` (SettingGroup::launcher)
};

/// The shape of a setting's value.
enum class SettingKind {
    value, ///< one value
    list,  ///< a comma list (`roles`, `only`): the plugin also accepts `+` (and `:` in the option)
    flag   ///< a boolean: the CLI has `--key`/`--no-key`, the plugin accepts a bare `key`
};

/// Where a setting belongs: its `--help` group in the CLI, and what consumes it.
enum class SettingGroup {
    preview,  ///< a field of a preview allocation (CLI only, read by preview_step())
    roles,    ///< a plan setting about roles
    network,  ///< a plan setting about addresses, ports and GPUs
    output,   ///< what `tfslurm env` and the plugin print or set (`only`, `format`), and
              ///< how the plugin starts the tasks (`run`, the plugin's only: no CLI option)
    launcher, ///< a setting of `tfslurm run` (CLI only): its row writes SettingValues::run
};

/// One row of the registry.
struct SettingSpec {
    std::string_view key;        ///< snake_case, e.g. `gpus_per_task`
    std::string_view variable;   ///< `TFSLURM_GPUS_PER_TASK`; empty: no variable
    std::string_view option;     ///< CLI long option, `--gpus-per-task`; empty: not on the CLI
    std::string_view type_name;  ///< the value's name in `--help`, e.g. `N`
    std::string_view plugin_key; ///< plugstack.conf and `--tfslurm` key; empty: not in the plugin
    SettingKind kind;
    SettingGroup group;
    std::string_view help;
    /// Parse `value` into `values`; \throws Error (Errc::invalid_argument) with the subject
    /// setting_ref(key). Null for preview fields (parsed by preview_step()).
    void (*apply)(SettingValues& values, std::string_view value);
    std::string_view short_option{}; ///< CLI short option (`-f`), usually none
    /// The values a fixed list of them allows, space-separated (`native tf-compat`): what shell
    /// completion offers. Empty when the value is free (a number, a name, a pattern).
    std::string_view choices{};
    /// The default, as the user would type it (or what happens without a value: `never`), read
    /// from a default SettingValues: `--help` shows it after the help, so that it is the code's
    /// own. Null: no default worth showing (a flag, a list of names, a path).
    std::string (*shown_default)(const SettingValues& defaults) = nullptr;
};

/// The row's help, with ` (default <value>)` when it has one (SettingSpec::shown_default).
/// Input: the row of `--grace`. Output: `Seconds between SIGTERM and SIGKILL when a trainer is
/// stopped (default 10)`.
[[nodiscard]] std::string setting_help(const SettingSpec& spec);

/// Every setting, in the CLI's `--help` order.
[[nodiscard]] const std::vector<SettingSpec>& setting_registry();

/// The registry row of `key`, or null. Input: `port_base`. Output: the row of `--port-base`.
[[nodiscard]] const SettingSpec* find_setting(std::string_view key);

/// Which face a question is about.
enum class Face { cli, plugin };

/// The keys a face accepts as `key=value` settings, comma-separated, in registry order.
/// Input: Face::plugin. Output: `ps, chief, evaluator, ..., rpc_layer, only`.
[[nodiscard]] std::string known_setting_keys(Face face);

/// Apply one setting that has a parser (plan settings, `only`, `format`); the settings of
/// `tfslurm run` are applied together, by resolve_settings().
/// Input: key `ps`, value `2`. Output: values.plan.counts.ps == 2.
/// \throws Error (Errc::invalid_argument) with the subject setting_ref(key) for a bad value,
///         or setting_ref(`setting`) for an unknown key (the key is the quoted input).
void apply_setting(SettingValues& values, std::string_view key, std::string_view value);

/// apply_setting() for a plan setting, on PlanOptions alone.
/// Input: key `ps`, value `2`. Output: options.counts.ps == 2. \throws as apply_setting().
void apply_plan_setting(PlanOptions& options, std::string_view key, std::string_view value);

/// Where a setting's value came from, lowest precedence first.
enum class Origin {
    plugstack,   ///< an argument in plugstack.conf
    environment, ///< a `TFSLURM_*` variable
    option,      ///< a CLI option or a `--tfslurm` item
};

/// One given value of one setting.
struct SettingValue {
    std::string key; ///< a registry key
    std::string value;
    Origin origin = Origin::option;

    friend bool operator==(const SettingValue& a, const SettingValue& b) {
        return a.key == b.key && a.value == b.value && a.origin == b.origin;
    }
};

/// Where the value of each resolved setting came from (keys without a value are absent).
using SettingOrigins = std::map<std::string, Origin, std::less<>>;

/// The winner for every key: the value of the highest Origin (the last one among equals).
/// Input: {ps=1 plugstack, ps=2 environment}. Output: {ps: ps=2 environment}.
[[nodiscard]] std::map<std::string, SettingValue, std::less<>>
winning_settings(const std::vector<SettingValue>& given);

/// The resolved settings and where each one came from.
struct ResolvedSettings {
    SettingValues values;
    SettingOrigins origins;
};

/// Layer `given` (any order): for each key the winner of winning_settings() is applied to the
/// defaults, in registry order; keys without a parser (preview fields) only get their origin
/// recorded; then the rules between run settings are checked (check_run_settings()). A
/// value replaces lower layers as a whole (an empty `roles=` clears roles from below).
/// `gpu_bind=auto` is resolved here: `task` when `gpus_per_task` is given, else `node` (never
/// by `only`: a group's values do not depend on which groups are printed).
/// Input: {ps=1 plugstack, ps=3 option, layout=tf-compat environment}.
/// Output: values.plan.counts.ps == 3, layout tf_compat; origins {ps: option, layout: environment}.
/// \throws Error from a row's parser for a bad winning value, or from check_run_settings().
[[nodiscard]] ResolvedSettings resolve_settings(const std::vector<SettingValue>& given);

/// The `TFSLURM_*` variables of the settings `face` reads from the environment (unset or empty
/// = not given), in registry order, unvalidated.
/// Input: env {TFSLURM_PS=2, TFSLURM_CHIEF=""}. Output: {ps=2 (Origin::environment)}.
[[nodiscard]] std::vector<SettingValue> environment_settings(const Environment& env, Face face);

/// The `TFSLURM_*` variables that are not settings but that tfslurm reads (`TFSLURM_SECRET`,
/// `TFSLURM_MUNGE_SOCKET`, `TFSLURM_LIBSLURM`, `TFSLURM_LOG_LEVEL`) or sets for a trainer
/// (`TFSLURM_RANK`, `TFSLURM_SERVERS`, ...: a tfslurm run inside a trainer sees them).
[[nodiscard]] const std::vector<std::string_view>& other_variables();

/// A `TFSLURM_*` variable that tfslurm does not know: a misspelt setting would otherwise be
/// ignored without a word (`TFSLURM_PSS=2` plans no ps).
struct UnknownVariable {
    std::string name;
    std::string closest; ///< the known variable it is closest to; empty when none is close

    friend bool operator==(const UnknownVariable& a, const UnknownVariable& b) {
        return a.name == b.name && a.closest == b.closest;
    }
};

/// Every `TFSLURM_*` variable of `env` that is neither a setting's (any face) nor one of
/// other_variables(), in name order, each with the closest known name (edit distance of the
/// part after `TFSLURM_` at most a third of its length, and at least 1).
/// Input: env {TFSLURM_PSS=2, TFSLURM_RANK=0, TFSLURM_XYZZY=1}.
/// Output: {{TFSLURM_PSS, TFSLURM_PS}, {TFSLURM_XYZZY, ""}}.
[[nodiscard]] std::vector<UnknownVariable> unknown_variables(const Environment& env);

/// The warning both faces give for an unknown variable, its name quoted unless it is an
/// identifier. Output: `TFSLURM_PSS: not a tfslurm variable, ignored (did you mean
/// TFSLURM_PS?)`.
[[nodiscard]] std::string unknown_variable_warning(const UnknownVariable& unknown);

} // namespace tfslurm
