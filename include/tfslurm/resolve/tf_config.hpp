// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Outputs of a plan: TF_CONFIG, the tf4slurm server dictionary, torch-style variables,
/// CUDA_VISIBLE_DEVICES; rendered as `export` lines, `KEY=VALUE` lines or JSON; and the plan
/// itself as a table or JSON.

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm {

/// Linux MAX_ARG_STRLEN: one `NAME=value` environment string (with its NUL) must fit in it.
inline constexpr std::size_t k_max_env_string = 131072;

/// Compact TF_CONFIG of `rank`: `{"cluster":{...},"task":{"type":"worker","index":1}}`, plus
/// `"rpc_layer"` when the plan has one. Jobs in alphabetical order; the evaluator is not part of
/// the cluster (TensorFlow's convention) except in the tf-compat layout.
[[nodiscard]] std::string tf_config_json(const Plan& plan, std::uint32_t rank);

/// tf4slurm's server dictionary: `{"ps":[...],"worker":[...]}` (both always present, chief and
/// evaluator only when used).
[[nodiscard]] std::string server_dictionary_json(const Plan& plan);

/// Which variables `task_environment` produces.
struct OutputSelection {
    bool tf_config = true; ///< TF_CONFIG
    bool servers = true;   ///< TFSLURM_SERVERS, TFSLURM_TASK_TYPE, TFSLURM_TASK_INDEX
    bool torch = true;     ///< MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, ...
    bool gpus = true;      ///< CUDA_VISIBLE_DEVICES (only when the rank has GPUs)
};

/// Parse `all` or a comma list of `tf`, `servers`, `torch`, `gpus`.
/// \throws Error (Errc::invalid_argument) naming `subject`.
[[nodiscard]] OutputSelection parse_output_selection(std::string_view text,
                                                     std::string_view subject);

using EnvVars = std::vector<std::pair<std::string, std::string>>;

/// Where TF_CONFIG goes when the selection has it.
enum class TfConfigPlace {
    environment, ///< the TF_CONFIG variable
    file         ///< a file (tf_config_file.hpp): not among the variables
};

/// The variables for `rank`, in a fixed order. Always includes TFSLURM_RANK, TFSLURM_ROLE and
/// TFSLURM_CONTROL (`address:port` of the launcher coordinator).
/// \throws Error (Errc::too_large) naming every variable that would not fit in one environment
///         string, with one way out for all of them (the hint keeps the selected groups).
[[nodiscard]] EnvVars task_environment(const Plan& plan,
                                       std::uint32_t rank,
                                       const OutputSelection& selection,
                                       TfConfigPlace tf_config = TfConfigPlace::environment);

/// The variables that make the frameworks' own sockets (torch's gloo and TensorPipe, NCCL)
/// use the interface this node chose (Plan::socket_interface), whatever `only` says: none
/// when peers use node names, and none of those `user` (the task's environment) already sets.
/// Input: socket_interface ib0, user {NCCL_SOCKET_IFNAME=ib1}.
/// Output: {GLOO_SOCKET_IFNAME=ib0, TP_SOCKET_IFNAME=ib0}.
[[nodiscard]] EnvVars socket_interface_variables(const Plan& plan, const Environment& user);

/// With the torch variables, torchrun's thread rule: when several tasks share `rank`'s node and
/// `user` (the task's environment) does not set OMP_NUM_THREADS, OMP_NUM_THREADS is the task's
/// CPUs (SLURM_CPUS_PER_TASK), else 1, so that N processes of OpenMP/MKL do not each start one
/// thread per core of the node.
/// Input: 2 ranks on the node, user {SLURM_CPUS_PER_TASK=4}. Output: {OMP_NUM_THREADS=4}.
[[nodiscard]] EnvVars thread_variables(const Plan& plan,
                                       std::uint32_t rank,
                                       const OutputSelection& selection,
                                       const Environment& user);

/// How to print variables.
enum class EnvFormat {
    export_lines, ///< `export NAME='value'` (safe to eval in sh/bash/zsh)
    key_value,    ///< `NAME=value` raw lines
    json,         ///< one JSON object
    task_prolog   ///< `export NAME=value`, unquoted: what Slurm's TaskProlog reads literally
};

/// Parse `export`, `env`, `json` or `task-prolog`. \throws Error (Errc::invalid_argument).
[[nodiscard]] EnvFormat parse_env_format(std::string_view text, std::string_view subject);

/// Render variables; every line (and the JSON) ends with a newline.
/// Input: {{"A", "x y"}}, task_prolog. Output: `export A=x y\n`.
/// \throws Error (Errc::invalid_argument) naming the variable, for task_prolog, when a value
///         holds a newline: Slurm takes each `export` line up to its newline, verbatim.
[[nodiscard]] std::string render_env(const EnvVars& vars, EnvFormat format);

/// POSIX shell single-quoting. Input: `it's`. Output: `'it'\''s'`.
[[nodiscard]] std::string shell_quote(std::string_view value);

/// A readable table of the plan: rank, role:index, host, address, port, GPUs.
[[nodiscard]] std::string plan_table(const Plan& plan);

/// The plan as pretty JSON (2-space indent), with a trailing newline.
[[nodiscard]] std::string plan_json(const Plan& plan);

} // namespace tfslurm
