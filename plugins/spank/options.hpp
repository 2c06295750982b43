// SPDX-License-Identifier: MIT
// Part of spank_tfslurm.so; see plugins/spank/LICENSE-NOTE.md for the licence of the built plugin.
#pragma once

/// \file
/// The Slurm-free half of the SPANK plugin: parsing of plugstack.conf arguments, of the
/// `--tfslurm[=SPEC]` value and of `TFSLURM_*` variables into one layered set of settings, and
/// the per-task computation of the variables to set. Everything here is pure (explicit inputs,
/// values returned, tfslurm::Error on bad input) so that it is unit-tested without Slurm; the
/// hooks in spank_tfslurm.cpp only move data between Slurm and these functions.
///
/// Resolution itself is libtfslurm's (read_step, resolve_allocation, make_plan,
/// task_environment): the plugin maps its settings onto the same apply_plan_setting() keys as
/// the `tfslurm` CLI and has no second implementation.

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::spank {

/// The subject of every message about the structure of the `--tfslurm` value.
inline constexpr std::string_view k_option_subject = "--tfslurm";
/// The subject of every message about the structure of plugstack.conf arguments.
inline constexpr std::string_view k_plugstack_subject = "plugstack.conf";

/// One validated `key=value` setting: a registry key (plan_settings.hpp) with a plugstack and
/// `--tfslurm` spelling; `value` is what apply_setting() takes (list separators already turned
/// into commas); `origin` is where it came from, for later messages.
using Setting = SettingValue;

/// The plugin's spelling of a setting, by where its value came from: `--tfslurm ps`,
/// `plugstack.conf ps`, `TFSLURM_PS` (with a value: `--tfslurm layout=tf-compat`,
/// `TFSLURM_LAYOUT=tf-compat`); a setting not given at all reads `ps` (`layout=tf-compat`).
[[nodiscard]] std::string
plugin_setting_name(std::string_view key, std::string_view value, const SettingOrigins& origins);

/// An error as the plugin words it (plugin_setting_name() with `origins`).
[[nodiscard]] Error plugin_error(const Error& error, const SettingOrigins& origins);

/// When the plugin acts in a step without `--tfslurm`.
enum class Activation {
    option, ///< only in steps that asked for it with --tfslurm (default)
    always  ///< in every step, best effort (problems are logged, the task still starts)
};

/// The site defaults from the plugin's plugstack.conf arguments.
struct SiteConfig {
    Activation activation = Activation::option;
    std::vector<Setting> settings; ///< in argument order
    /// `tfslurm=PATH`: the command that `run` starts every task under (an absolute path);
    /// empty: the plugin's built-in default (where the package installs it).
    std::string tfslurm;
};

/// A Slurm release, `major.minor` (the micro release never changes the plugin API).
struct Release {
    unsigned major = 0;
    unsigned minor = 0;

    /// `22.05`.
    [[nodiscard]] std::string text() const;
    /// Whether spank.h has spank_prepend_task_argv() (Slurm 23.11 and later), which `run` needs.
    [[nodiscard]] bool can_prepend_task_argv() const {
        return major > 23 || (major == 23 && minor >= 11);
    }
    friend bool operator==(const Release& a, const Release& b) {
        return a.major == b.major && a.minor == b.minor;
    }
};

/// The release of a SLURM_VERSION_NUMBER (slurm_version.h). Input: 0x160508. Output: 22.05.
[[nodiscard]] Release release_of_version_number(unsigned version_number);

/// Why a plugin built for `built_for` must not run in a process whose libslurm says
/// `running_api` (slurm_api_version()); nullopt when both are the same release. Slurm's own
/// loader refuses a plugin of another release too, but names only the plugin's; this line names
/// both and the way out.
/// Input: 22.05, 0x2a0000 (24.11). Output: `spank_tfslurm.so is built for Slurm 22.05 and cannot
/// run in Slurm 24.11 (API 42): install the tfslurm-spank package built for Slurm 24.11, or build
/// the plugin against its slurm/spank.h (spank_tfslurm(8), BUILDING)`.
[[nodiscard]] std::optional<std::string> release_mismatch(Release built_for, long running_api);

/// Refuse a true `run` among `settings` when the plugin is built for a release without
/// spank_prepend_task_argv() (before 23.11).
/// \throws Error (Errc::invalid_argument) naming `run` as the user gave it (`--tfslurm run`,
///         `plugstack.conf run`, `TFSLURM_RUN`), the release and the way out.
void check_run_supported(const std::vector<Setting>& settings, Release built_for);

/// Parse plugstack.conf arguments: whitespace-separated `key=value` words. Keys are the
/// registry's plugin keys (known_setting_keys(Face::plugin): `ps`, `chief`, ..., `only`, `run`),
/// `enabled` (`option` or `always`) and `tfslurm` (an absolute path). Lists (`roles`, `only`) use
/// `,` or `+`. Every value is validated here.
///
/// Input: {"ps=1", "only=tf,servers", "enabled=always"}.
/// Output: activation always, settings {ps=1, only=tf,servers}.
/// \throws Error (Errc::invalid_argument) for a word without `=`, an unknown or repeated key,
///         or a bad value; subjects are `plugstack.conf` and `plugstack.conf <key>`.
[[nodiscard]] SiteConfig parse_plugstack_args(const std::vector<std::string>& args);

/// A parsed `--tfslurm` value.
struct OptionSpec {
    bool off = false;              ///< `--tfslurm=off`: do nothing in this step
    std::vector<Setting> settings; ///< in the order given
};

/// Parse the value of `--tfslurm[=SPEC]`. SPEC is empty (the defaults), `(null)` (the same:
/// Slurm's spelling of a bare `sbatch|salloc --tfslurm` in the job's environment), `off`, or a
/// comma-separated list of `key[=value]` items: the plan keys and `only` (`-` may replace `_`
/// in keys). A bare boolean key (`chief`, `evaluator`) means `=1`. Inside values of the list
/// keys `roles` and `only`, `+` or `:` stands for the comma that separates settings.
///
/// Input: `ps=2,chief,roles=ps+worker*3`.
/// Output: settings {ps=2, chief=1, roles=ps,worker*3}.
/// \throws Error (Errc::invalid_argument): subject `--tfslurm` for the structure (empty item,
///         unknown or repeated key, missing value), `--tfslurm <key>` for a bad value.
[[nodiscard]] OptionSpec parse_option_spec(std::string_view spec);

/// The `TFSLURM_*` variables of the plugin's settings, as the CLI reads them (unset or empty =
/// not given), validated. Subject of errors: the variable name.
/// Input: env {TFSLURM_PS=2}. Output: {ps=2 (Origin::environment)}.
/// \throws Error (Errc::invalid_argument) for a bad value.
[[nodiscard]] std::vector<Setting> environment_settings(const Environment& env);

/// Everything the plugin needs to describe one task.
struct TaskSettings {
    /// The settings resolved: `plan`, `outputs`, and `plugin_run` (`run`: start the task under
    /// `tfslurm run` instead).
    SettingValues values;
    SettingOrigins origins; ///< where each setting came from, for messages
};

/// Layer the settings with libtfslurm's resolve_settings(): defaults < plugstack.conf <
/// `TFSLURM_*` environment < `--tfslurm`. Each key is replaced as a whole by a higher layer (as
/// in the CLI, a non-empty `roles` from any layer overrides the `ps`/`chief`/`evaluator`
/// counts; an empty `roles=` clears it).
/// \throws Error only for values that bypassed the parsers above.
[[nodiscard]] TaskSettings resolve_settings(const SiteConfig& site,
                                            const std::vector<Setting>& environment,
                                            const OptionSpec& option);

/// The variables to set in one task: read the step from the task's environment (a step that
/// Slurm laid out in topology order: with the controller's layout, add_controller_layout(), run
/// with the task's environment), plan it with libtfslurm's resolve_plan() (the path `tfslurm
/// env` takes too), and render `rank`'s variables. `rank` defaults to the task's SLURM_PROCID. Uses
/// the system resolver for `address=ip`. Input: the environment of task 3 of `srun -N3 -n6`, ps=1.
/// Output: TF_CONFIG with `"task":{"type":"worker","index":2}`, TFSLURM_RANK=3, ...
/// \throws Error from libtfslurm (missing or inconsistent variables, impossible plans), its
///         settings named as plugin_setting_name() spells them.
[[nodiscard]] EnvVars task_variables(const TaskSettings& settings,
                                     const Environment& task_env,
                                     std::optional<std::uint32_t> rank = std::nullopt);

/// With `run`, what carries the step's settings to `tfslurm run`: `TFSLURM_<KEY>=value` for the
/// winning value of every setting given in any layer (as resolve_settings() layers them),
/// `run` itself excepted, in registry order. `tfslurm run` reads them as its own variables.
/// Input: plugstack ps=1 only=tf, option `run,ps=2`. Output: {TFSLURM_PS=2, TFSLURM_ONLY=tf}.
[[nodiscard]] EnvVars launcher_variables(const SiteConfig& site,
                                         const std::vector<Setting>& environment,
                                         const OptionSpec& option);

/// The one line the plugin logs for an error: the message, plus ` (<hint>)` when there is a
/// hint. Input: Error("--tfslurm ps: ...", hint "h"). Output: `--tfslurm ps: ... (h)`.
[[nodiscard]] std::string describe(const std::exception& error);

} // namespace tfslurm::spank
