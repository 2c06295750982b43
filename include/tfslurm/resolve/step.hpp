// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// From a task's environment (or preview values) to a typed, validated snapshot of the step:
/// StepInfo. Pure: nothing here reads the process environment.

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/hostfile.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// How Slurm distributes a step's tasks over its nodes (first field of `SLURM_DISTRIBUTION`).
enum class Distribution { block, cyclic, plane, arbitrary };

[[nodiscard]] std::string_view to_string(Distribution distribution) noexcept;

/// Parse `block`, `cyclic`, `plane`, `plane=4`, `arbitrary`, `*`, and Slurm's compound forms
/// such as `cyclic:block,pack` (only the node level, before `:`/`,`, matters here).
/// A size given as `plane=N` is stored in `plane_size`.
/// \throws Error (Errc::invalid_argument) naming `subject`.
struct DistributionSpec {
    Distribution kind = Distribution::block;
    std::uint32_t plane_size = 0; ///< 0 = not given
};
[[nodiscard]] DistributionSpec parse_distribution(std::string_view text, std::string_view subject);

/// A step of a Slurm job, `<job>.<step>`.
struct StepRef {
    std::uint64_t job = 0;
    std::uint64_t step = 0;

    friend bool operator==(const StepRef& a, const StepRef& b) noexcept {
        return a.job == b.job && a.step == b.step;
    }
};

/// `12.0`.
[[nodiscard]] std::string to_string(const StepRef& step);

/// Where the values came from: a step (srun task) or only the job (a batch script).
enum class Scope { step, job, preview };

/// What a task knows about itself (SLURM_PROCID, ...). Optional fields were not set.
struct TaskIdentity {
    std::uint32_t rank = 0;
    std::optional<std::uint32_t> local_id;
    std::optional<std::uint32_t> node_id;
    std::optional<std::vector<std::uint32_t>> gtids;
    std::optional<std::string> node_name; ///< SLURMD_NODENAME
};

/// GPU-related variables of this task, unparsed beyond splitting on commas.
struct GpuEnv {
    std::optional<std::vector<std::string>> visible;   ///< CUDA_VISIBLE_DEVICES (may be empty)
    std::optional<std::vector<std::string>> step_gpus; ///< SLURM_STEP_GPUS (global ids)
    std::optional<std::vector<std::string>> job_gpus;  ///< SLURM_JOB_GPUS (global ids)
    std::optional<std::uint32_t> gpus_on_node;         ///< SLURM_GPUS_ON_NODE
};

/// One component of a heterogeneous step (`srun -n1 A : -n2 B`). Slurm 22.05 numbers the
/// ranks component after component (component 0 first) in one rank space over one nodelist,
/// and gives every component nodes of its own.
///
/// Input: `srun -n2 -w n1 : -n1 -w n2 : -n1 -w n3`. Output: {n1: ranks 0-1}, {n2: 2}, {n3: 3}.
struct HetComponent {
    std::vector<std::string> hosts; ///< the component's nodes, in step nodelist order
    std::uint32_t first_rank = 0;   ///< its ranks are first_rank .. first_rank + ntasks - 1
    std::uint32_t ntasks = 0;
};

/// The typed, validated snapshot of a step (or of a job, inside a batch script).
struct StepInfo {
    Scope scope = Scope::step;
    std::string nodelist;          ///< the raw nodelist text
    std::string nodelist_variable; ///< which variable (or option) it came from
    std::vector<std::string> hosts;
    std::string tasks_variable;
    std::vector<std::uint32_t> tasks_per_node;
    std::uint32_t ntasks = 0;
    DistributionSpec distribution;
    std::vector<std::string> rank_hosts; ///< arbitrary distribution: each rank's host (hostfile)
    std::string hostfile;                ///< arbitrary distribution: where rank_hosts came from
    std::optional<std::uint64_t> job_id;
    std::optional<std::uint64_t> step_id;
    std::vector<std::uint16_t> resv_ports; ///< SLURM_STEP_RESV_PORTS, empty when absent
    std::optional<TaskIdentity> self;      ///< absent when not run as a task
    GpuEnv gpus;
    /// A heterogeneous step: one entry per component (SLURM_HET_SIZE and the
    /// SLURM_JOB_NODELIST_HET_GROUP_<i> variables); empty for an ordinary step.
    std::vector<HetComponent> components;
    /// The network topology whose order Slurm may have laid a block distribution out in
    /// (topology_ordering(): 25.11 on, a non-flat topology), which no task can see; empty when
    /// the nodelist's order holds.
    std::string topology_order;
    /// With `topology_order` (needs_step_layout()): each rank's host as the controller laid the
    /// step out (parse_step_layout() of `sattach --layout`), set by the face that asked it;
    /// empty when nobody asked or the answer could not be had.
    std::vector<std::string> layout_rank_hosts;
    /// Why the controller's layout could not be had (for the refusal's hint), e.g. `sattach
    /// not found in PATH`; empty when it was not asked for.
    std::string layout_error;
};

/// Read a task's Slurm variables: step variables first (`SLURM_STEP_NODELIST`,
/// `SLURM_STEP_TASKS_PER_NODE`, `SLURM_STEP_NUM_TASKS`), job variables as the fallback
/// (`SLURM_JOB_NODELIST`/`SLURM_NODELIST`, `SLURM_TASKS_PER_NODE`, `SLURM_NTASKS`), plus
/// identity, distribution, reserved ports and GPU variables. Every value is validated. With
/// `SLURM_DISTRIBUTION=arbitrary`, the file named by `SLURM_HOSTFILE` is read through `read`
/// (the only I/O here; tests pass their own reader). In a heterogeneous step
/// (`SLURM_HET_SIZE`), the components come from `SLURM_JOB_NODELIST_HET_GROUP_<i>` (22.05's
/// srun outside an allocation writes `..._PACK_GROUP_<i>`: read as well), each node in
/// exactly one component. A block distribution over several nodes also reads, through `read`,
/// the slurm.conf and topology.yaml that topology_ordering() looks at (`topology_order`).
///
/// Input: the environment of task 3 of `srun -N3 -n6`. Output: hosts {n1,n2,n3}, counts
/// {2,2,2}, ntasks 6, self.rank 3, self.node_id 1, self.gtids {2,3}.
/// \throws Error (Errc::missing_env) when no nodelist is set, or a parse error naming the
///         variable.
[[nodiscard]] StepInfo read_step(const Environment& env, const FileReader& read = read_text_file);

/// Values that describe a step without Slurm (`tfslurm plan --nodelist ...`): a preview.
struct StepOverrides {
    std::string nodelist;                ///< required
    std::string tasks_per_node;          ///< counts string; a single number applies to every node;
                                         ///< empty = 1 per node
    std::optional<std::uint32_t> ntasks; ///< with an empty tasks_per_node: spread like srun -n
    std::string distribution;            ///< empty = block
    std::string hostfile;                ///< arbitrary distribution: rank i on line i's host
    std::optional<std::uint64_t> job_id;
    std::optional<std::uint64_t> step_id;
    std::optional<std::uint32_t> rank; ///< "this" task, for `tfslurm env` previews
    std::string resv_ports;
    std::string gpus; ///< visible GPUs, like CUDA_VISIBLE_DEVICES
};

/// Build a StepInfo (Scope::preview) from explicit values; option names in messages are the
/// CLI's (`--nodelist`, ...). With `--distribution arbitrary`, `hostfile` is read through
/// `read`, and without `--tasks-per-node` the counts per node come from it.
/// \throws Error on invalid values.
[[nodiscard]] StepInfo preview_step(const StepOverrides& overrides,
                                    const FileReader& read = read_text_file);

} // namespace tfslurm
