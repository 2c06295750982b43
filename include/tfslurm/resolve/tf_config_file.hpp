// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// TF_CONFIG past the environment limit: a Linux environment string holds at most 128 KiB
/// (k_max_env_string), which TF_CONFIG outgrows at about 7,000 tasks. With the setting
/// `tf_config_file` tfslurm writes the JSON to a file on the node and sets
/// `TFSLURM_TF_CONFIG_FILE` (its path) instead of TF_CONFIG, plus a directory first on
/// PYTHONPATH holding a `sitecustomize.py` that loads the file into `os.environ["TF_CONFIG"]`
/// when Python starts, before TensorFlow reads it. The shim is written next to the file, so
/// nothing has to be installed on the nodes and it always matches the writer's version.
///
/// Pure: the template and the variables. OS: write_tf_config_file() and
/// remove_tf_config_file() (used by `tfslurm env` and by `tfslurm run`'s launcher).

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/tf_config.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace tfslurm {

/// The variable that names the file, for the shim.
inline constexpr std::string_view k_tf_config_file_variable = "TFSLURM_TF_CONFIG_FILE";

/// The template that the value `auto` stands for: unique per job, step and rank.
inline constexpr std::string_view k_default_tf_config_file =
    "{tmpdir}/tfslurm-{job}.{step}.{rank}.tf_config.json";

/// Check a `tf_config_file` value: `auto`, or a template of printable ASCII with the
/// placeholders `{tmpdir}` (TMPDIR, else /tmp), `{job}`, `{step}`, `{rank}` only, that is an
/// absolute path (starts with `/` or `{tmpdir}`) and names a file (does not end with `/`).
/// Input: `/scratch/tf.{job}.{rank}.json`. Output: returns. Input: `tf.json`. Output: throws
/// `tf_config_file: expected an absolute path (or {tmpdir}/...): "tf.json"`.
/// \throws Error (Errc::invalid_argument) with the subject setting_ref(`tf_config_file`).
void validate_tf_config_template(std::string_view value);

/// One task's file and the directory of its shim (`<path>.site`, holding `sitecustomize.py`).
struct TfConfigFile {
    std::string path;
    std::string shim_dir;
};

/// Expand a `tf_config_file` value for `rank`. `{job}` and `{step}` read `none` when the plan
/// has no id; `{tmpdir}` is TMPDIR when it is an absolute path, else `/tmp`.
/// Input: `auto`, job 7, step 0, rank 3, env {TMPDIR=/tmp/job7}.
/// Output: {/tmp/job7/tfslurm-7.0.3.tf_config.json, /tmp/job7/tfslurm-7.0.3.tf_config.json.site}.
/// \throws Error (Errc::invalid_argument, subject setting_ref(`tf_config_file`)) for a bad
///         template, or one without `{rank}` when the rank's node runs more than one task of
///         the step (they would all write the same file).
[[nodiscard]] TfConfigFile tf_config_file_for(std::string_view value,
                                              const Plan& plan,
                                              std::uint32_t rank,
                                              const Environment& env);

/// One task's variables with TF_CONFIG delivered through a file, and what to write.
struct FileTaskEnvironment {
    EnvVars vars;          ///< task_environment() with TF_CONFIG replaced (see below)
    TfConfigFile file;     ///< empty path when TF_CONFIG is not selected: nothing to write
    std::string tf_config; ///< the file's content: tf_config_json() of the rank
};

/// task_environment() of `rank`, but in TF_CONFIG's place `TFSLURM_TF_CONFIG_FILE=<path>` and
/// `PYTHONPATH=<shim_dir>[:<env's PYTHONPATH>]`. Without TF_CONFIG in `selection` this is
/// task_environment() and no file.
/// Input: a 80,000-task plan, rank 5, `auto`, env {}. Output: vars {TFSLURM_TF_CONFIG_FILE=
/// /tmp/tfslurm-...5.tf_config.json, PYTHONPATH=/tmp/...json.site, TFSLURM_SERVERS=...,...}.
/// \throws Error as tf_config_file_for() and task_environment() (another variable too large).
[[nodiscard]] FileTaskEnvironment file_task_environment(const Plan& plan,
                                                        std::uint32_t rank,
                                                        const OutputSelection& selection,
                                                        std::string_view value,
                                                        const Environment& env);

/// The `sitecustomize.py` written into the shim directory: reads TFSLURM_TF_CONFIG_FILE into
/// `os.environ["TF_CONFIG"]` (exits Python with status 1 and a `tfslurm:` line on stderr when
/// the file cannot be read), then runs the next `sitecustomize` on `sys.path`, if any.
[[nodiscard]] std::string_view sitecustomize_shim() noexcept;

/// Write the file (mode 0600) and the shim (in a 0700 directory), each atomically: a
/// temporary file in the same directory, fsync, rename. An existing
/// shim directory is reused only when it is a real directory owned by this user and writable by
/// no one else. Touches the OS.
/// \throws Error (Errc::io) naming the path and the system's reason.
void write_tf_config_file(const TfConfigFile& file, std::string_view tf_config);

/// Remove the file, the shim and its directory; what is already gone is fine. Touches the OS.
/// Returns false (having removed what it could) when something could not be removed.
[[nodiscard]] bool remove_tf_config_file(const TfConfigFile& file) noexcept;

} // namespace tfslurm
