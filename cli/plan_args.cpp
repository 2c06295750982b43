// SPDX-License-Identifier: MIT
#include "plan_args.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/plan_settings.hpp>

#include <fmt/format.h>

#include <array>
#include <cctype>

namespace tfslurm::cli {
namespace {

struct Setting {
    std::string_view key;    ///< apply_plan_setting() key, also TFSLURM_<KEY>
    std::string_view option; ///< the long option
    std::string PlanArgs::*value;
};

constexpr std::array<Setting, 13> k_settings{{
    {"ps", "--ps", &PlanArgs::ps},
    {"chief", "--chief", &PlanArgs::chief},
    {"evaluator", "--evaluator", &PlanArgs::evaluator},
    {"roles", "--roles", &PlanArgs::roles},
    {"ps_placement", "--ps-placement", &PlanArgs::ps_placement},
    {"layout", "--layout", &PlanArgs::layout},
    {"port_base", "--port-base", &PlanArgs::port_base},
    {"address", "--address", &PlanArgs::address},
    {"host_pattern", "--host-pattern", &PlanArgs::host_pattern},
    {"gpus_per_task", "--gpus-per-task", &PlanArgs::gpus_per_task},
    {"gpus_per_node", "--gpus-per-node", &PlanArgs::gpus_per_node},
    {"rpc_layer", "--rpc-layer", &PlanArgs::rpc_layer},
    {"", "", nullptr},
}};

std::string env_name(std::string_view key) {
    std::string name = "TFSLURM_";
    for (const char c : key) {
        name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    return name;
}

bool preview_requested(const StepOverrides& preview) {
    return !preview.tasks_per_node.empty() || preview.ntasks || !preview.distribution.empty() ||
           !preview.hostfile.empty() || preview.job_id || preview.step_id || preview.rank ||
           !preview.resv_ports.empty() || !preview.gpus.empty();
}

} // namespace

void add_plan_options(CLI::App& sub, PlanArgs& args) {
    const std::string preview = "Preview without Slurm (instead of reading SLURM_*)";
    sub.add_option(
           "--nodelist", args.preview.nodelist, "Hosts of the step, as a Slurm hostlist (n[1-3])")
        ->group(preview);
    sub.add_option("--tasks-per-node",
                   args.preview.tasks_per_node,
                   "Tasks per node: one count for every node, or per node like 2(x3),1")
        ->group(preview);
    sub.add_option("--ntasks",
                   args.preview.ntasks,
                   "Total tasks, spread like srun -n (the first nodes get one more)")
        ->group(preview);
    sub.add_option("--distribution",
                   args.preview.distribution,
                   "block (default), cyclic, plane=N or arbitrary (with --hostfile)")
        ->group(preview);
    sub.add_option("--hostfile",
                   args.preview.hostfile,
                   "Rank i on the i-th host of FILE, like srun -m arbitrary with SLURM_HOSTFILE; "
                   "without --tasks-per-node the counts come from FILE")
        ->type_name("FILE")
        ->group(preview);
    sub.add_option("--job-id", args.preview.job_id, "Job id (derives the ports)")->group(preview);
    sub.add_option("--step-id", args.preview.step_id, "Step id (derives the ports)")
        ->group(preview);
    sub.add_option("--rank", args.preview.rank, "The task to describe (for env)")->group(preview);
    sub.add_option(
           "--resv-ports", args.preview.resv_ports, "Reserved ports, like SLURM_STEP_RESV_PORTS")
        ->group(preview);
    sub.add_option("--gpus", args.preview.gpus, "Visible GPUs, like CUDA_VISIBLE_DEVICES")
        ->group(preview);

    const std::string roles = "Roles (each also read from TFSLURM_<NAME>, e.g. TFSLURM_PS)";
    sub.add_option("--ps", args.ps, "Number of parameter servers (default 0)")->group(roles);
    sub.add_flag("--chief{1},--no-chief{0}", args.chief, "One task is the chief")->group(roles);
    sub.add_flag("--evaluator{1},--no-evaluator{0}", args.evaluator, "One task is the evaluator")
        ->group(roles);
    sub.add_option("--roles",
                   args.roles,
                   "Explicit role of every rank, e.g. ps,worker*3 (instead of counts)")
        ->group(roles);
    sub.add_option("--ps-placement",
                   args.ps_placement,
                   "first: ranks 0..N-1 (default); spread: one ps per node")
        ->group(roles);

    const std::string network = "Addresses, ports and GPUs (also TFSLURM_<NAME>)";
    sub.add_option("--layout",
                   args.layout,
                   "native (default) or tf-compat (TensorFlow's SlurmClusterResolver spec)")
        ->group(network);
    sub.add_option("--port-base",
                   args.port_base,
                   "First port (default: SLURM_STEP_RESV_PORTS, else derived from job and step)")
        ->group(network);
    sub.add_option("--address", args.address, "name (default) or ip: what peers connect to")
        ->group(network);
    sub.add_option("--host-pattern",
                   args.host_pattern,
                   "Network name of a node, e.g. {host}-ib0 (default {host})")
        ->group(network);
    sub.add_option("--gpus-per-task",
                   args.gpus_per_task,
                   "GPUs per task (default: split the visible GPUs among the node's tasks)")
        ->group(network);
    sub.add_option(
           "--gpus-per-node", args.gpus_per_node, "tf-compat only: TensorFlow's gpus_per_node")
        ->group(network);
    sub.add_option("--rpc-layer", args.rpc_layer, "Add \"rpc_layer\" to TF_CONFIG, e.g. grpc")
        ->group(network);
}

ResolvedPlan resolve_plan(const PlanArgs& args, const Environment& env) {
    ResolvedPlan resolved;
    if (!args.preview.nodelist.empty()) {
        resolved.step = preview_step(args.preview);
    } else {
        if (preview_requested(args.preview)) {
            throw errors::make(
                Errc::invalid_argument,
                "preview options",
                "need --nodelist",
                "give --nodelist to describe an allocation, or run inside Slurm without them");
        }
        resolved.step = read_step(env);
    }
    PlanOptions options;
    for (const auto& setting : k_settings) {
        if (setting.value == nullptr) {
            continue;
        }
        const auto& given = args.*setting.value;
        if (!given.empty()) {
            apply_plan_setting(options, setting.key, given, setting.option);
        } else {
            const auto name = env_name(setting.key);
            if (const auto value = env.get(name); value && !value->empty()) {
                apply_plan_setting(options, setting.key, *value, name);
            }
        }
    }
    resolved.allocation = resolve_allocation(resolved.step);
    resolved.plan = make_plan(resolved.step, resolved.allocation, options);
    return resolved;
}

} // namespace tfslurm::cli
