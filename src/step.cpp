// SPDX-License-Identifier: MIT
#include "detail/placement.hpp"
#include "detail/text.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/step.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace tfslurm {
namespace {

constexpr std::string_view k_not_in_slurm_hint =
    "not inside a Slurm job or step? outside Slurm, describe the allocation with "
    "--nodelist and --tasks-per-node (see 'tfslurm plan --help')";

/// The first of `names` that is set, with its name.
struct Found {
    std::string_view name;
    std::string_view value;
};

std::optional<Found> first_set(const Environment& env,
                               std::initializer_list<std::string_view> names) {
    for (const auto name : names) {
        if (const auto value = env.get(name)) {
            return Found{name, *value};
        }
    }
    return std::nullopt;
}

template <typename T> T parse_unsigned(std::string_view text, std::string_view subject) {
    const auto value = detail::parse_decimal(text);
    if (!value || *value > std::numeric_limits<T>::max()) {
        throw errors::invalid_argument(
            subject,
            fmt::format("expected an integer from 0 to {}", std::numeric_limits<T>::max()),
            text);
    }
    return static_cast<T>(*value);
}

std::vector<std::uint32_t> parse_id_list(std::string_view text, std::string_view subject) {
    std::vector<std::uint32_t> ids;
    for (const auto field : detail::split(text, ',')) {
        const auto value = detail::parse_decimal(field);
        if (!value || *value > std::numeric_limits<std::uint32_t>::max()) {
            throw errors::invalid_argument(
                subject, "expected a comma-separated list of ranks", text);
        }
        ids.push_back(static_cast<std::uint32_t>(*value));
    }
    return ids;
}

std::vector<std::string> parse_device_list(std::string_view text) {
    std::vector<std::string> devices;
    if (text.empty()) {
        return devices;
    }
    for (const auto field : detail::split(text, ',')) {
        if (!field.empty()) {
            devices.emplace_back(field);
        }
    }
    return devices;
}

} // namespace

std::string_view to_string(Distribution distribution) noexcept {
    switch (distribution) {
    case Distribution::block:
        return "block";
    case Distribution::cyclic:
        return "cyclic";
    case Distribution::plane:
        return "plane";
    case Distribution::arbitrary:
        return "arbitrary";
    }
    return "block";
}

DistributionSpec parse_distribution(std::string_view text, std::string_view subject) {
    // Slurm writes e.g. "cyclic", "block:cyclic", "cyclic:block,pack", "plane" (size in
    // SLURM_DIST_PLANESIZE); users type "plane=4". Only the node level matters for placement.
    DistributionSpec spec;
    auto node_level = text.substr(0, text.find_first_of(":,"));
    std::string_view size_text;
    if (const auto eq = node_level.find('='); eq != std::string_view::npos) {
        size_text = node_level.substr(eq + 1);
        node_level = node_level.substr(0, eq);
    }
    if (node_level.empty() || node_level == "block" || node_level == "*") {
        spec.kind = Distribution::block;
    } else if (node_level == "cyclic") {
        spec.kind = Distribution::cyclic;
    } else if (node_level == "plane") {
        spec.kind = Distribution::plane;
    } else if (node_level == "arbitrary") {
        spec.kind = Distribution::arbitrary;
    } else {
        throw errors::invalid_argument(
            subject,
            "expected block, cyclic, plane=N or arbitrary (optionally ':' and more levels)",
            text);
    }
    if (!size_text.empty() || text.find('=') != std::string_view::npos) {
        const auto size = detail::parse_decimal(size_text);
        if (spec.kind != Distribution::plane || !size || *size == 0 ||
            *size > std::numeric_limits<std::uint32_t>::max()) {
            throw errors::invalid_argument(
                subject, "a size is only valid as plane=N with N >= 1", text);
        }
        spec.plane_size = static_cast<std::uint32_t>(*size);
    }
    return spec;
}

StepInfo read_step(const Environment& env, const FileReader& read) {
    StepInfo step;
    const auto nodelist =
        first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
    if (!nodelist) {
        throw errors::missing_env("SLURM_STEP_NODELIST", std::string{k_not_in_slurm_hint});
    }
    step.scope = nodelist->name == "SLURM_STEP_NODELIST" ? Scope::step : Scope::job;
    step.nodelist = std::string{nodelist->value};
    step.nodelist_variable = std::string{nodelist->name};
    step.hosts = expand_hostlist(nodelist->value, nodelist->name);
    if (step.hosts.empty()) {
        throw errors::invalid_hostlist(nodelist->name, "empty host list", nodelist->value);
    }

    const auto tasks = step.scope == Scope::step
                           ? first_set(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
                           : first_set(env, {"SLURM_TASKS_PER_NODE"});
    if (!tasks) {
        throw errors::missing_env(step.scope == Scope::step ? "SLURM_STEP_TASKS_PER_NODE"
                                                            : "SLURM_TASKS_PER_NODE",
                                  std::string{k_not_in_slurm_hint});
    }
    step.tasks_variable = std::string{tasks->name};
    step.tasks_per_node = expand_counts(tasks->value, tasks->name);
    if (step.tasks_per_node.size() != step.hosts.size()) {
        throw errors::inconsistent_allocation(
            tasks->name,
            fmt::format("gives counts for {} nodes but {} lists {}",
                        step.tasks_per_node.size(),
                        nodelist->name,
                        step.hosts.size()),
            tasks->value);
    }
    step.ntasks = detail::checked_total(step.tasks_per_node, tasks->name);

    const auto ntasks =
        step.scope == Scope::step
            ? first_set(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"})
            : first_set(env, {"SLURM_NTASKS", "SLURM_NPROCS"});
    if (ntasks) {
        const auto declared = parse_unsigned<std::uint32_t>(ntasks->value, ntasks->name);
        if (declared != step.ntasks) {
            throw errors::inconsistent_allocation(
                ntasks->name,
                fmt::format(
                    "disagrees with {}={} ({} tasks)", tasks->name, tasks->value, step.ntasks),
                ntasks->value);
        }
    }

    if (const auto dist = env.get("SLURM_DISTRIBUTION")) {
        step.distribution = parse_distribution(*dist, "SLURM_DISTRIBUTION");
        if (step.distribution.kind == Distribution::plane && step.distribution.plane_size == 0) {
            const auto size = env.get("SLURM_DIST_PLANESIZE");
            if (!size) {
                throw errors::missing_env("SLURM_DIST_PLANESIZE",
                                          "SLURM_DISTRIBUTION=plane needs the plane size");
            }
            step.distribution.plane_size =
                parse_unsigned<std::uint32_t>(*size, "SLURM_DIST_PLANESIZE");
            if (step.distribution.plane_size == 0) {
                throw errors::invalid_argument("SLURM_DIST_PLANESIZE", "must be at least 1", *size);
            }
        }
    }

    if (step.distribution.kind == Distribution::arbitrary) {
        const auto path = env.get("SLURM_HOSTFILE");
        if (!path || path->empty()) {
            throw errors::missing_env(
                "SLURM_HOSTFILE",
                "SLURM_DISTRIBUTION=arbitrary runs rank i on the i-th host of the file "
                "SLURM_HOSTFILE names: keep it set, and the file in place, for the whole step");
        }
        step.hostfile = std::string{*path};
        const auto subject = hostfile_subject("SLURM_HOSTFILE", step.hostfile);
        step.rank_hosts = parse_hostfile(read(step.hostfile, subject), step.ntasks, subject);
    }

    if (const auto job = first_set(env, {"SLURM_JOB_ID", "SLURM_JOBID"})) {
        step.job_id = parse_unsigned<std::uint64_t>(job->value, job->name);
    }
    if (step.scope == Scope::step) {
        if (const auto id = first_set(env, {"SLURM_STEP_ID", "SLURM_STEPID"})) {
            step.step_id = parse_unsigned<std::uint64_t>(id->value, id->name);
        }
        if (const auto ports = env.get("SLURM_STEP_RESV_PORTS")) {
            step.resv_ports = expand_ports(*ports, "SLURM_STEP_RESV_PORTS");
        }
    }

    if (const auto procid = env.get("SLURM_PROCID")) {
        TaskIdentity self;
        self.rank = parse_unsigned<std::uint32_t>(*procid, "SLURM_PROCID");
        if (const auto value = env.get("SLURM_LOCALID")) {
            self.local_id = parse_unsigned<std::uint32_t>(*value, "SLURM_LOCALID");
        }
        if (const auto value = env.get("SLURM_NODEID")) {
            self.node_id = parse_unsigned<std::uint32_t>(*value, "SLURM_NODEID");
        }
        if (const auto value = env.get("SLURM_GTIDS")) {
            self.gtids = parse_id_list(*value, "SLURM_GTIDS");
        }
        if (const auto value = env.get("SLURMD_NODENAME")) {
            self.node_name = std::string{*value};
        }
        step.self = std::move(self);
    }

    if (const auto value = env.get("CUDA_VISIBLE_DEVICES")) {
        step.gpus.visible = parse_device_list(*value);
    }
    if (const auto value = env.get("SLURM_STEP_GPUS")) {
        step.gpus.step_gpus = parse_device_list(*value);
    }
    if (const auto value = env.get("SLURM_JOB_GPUS")) {
        step.gpus.job_gpus = parse_device_list(*value);
    }
    if (const auto value = env.get("SLURM_GPUS_ON_NODE")) {
        step.gpus.gpus_on_node = parse_unsigned<std::uint32_t>(*value, "SLURM_GPUS_ON_NODE");
    }
    logger().debug("step snapshot: scope={} {}={} ({} hosts) {}={} ntasks={} distribution={}",
                   step.scope == Scope::step ? "step" : "job",
                   step.nodelist_variable,
                   step.nodelist,
                   step.hosts.size(),
                   step.tasks_variable,
                   compress_counts(step.tasks_per_node),
                   step.ntasks,
                   to_string(step.distribution.kind));
    return step;
}

StepInfo preview_step(const StepOverrides& overrides, const FileReader& read) {
    StepInfo step;
    step.scope = Scope::preview;
    step.nodelist = overrides.nodelist;
    step.nodelist_variable = "--nodelist";
    step.hosts = expand_hostlist(overrides.nodelist, "--nodelist");
    if (step.hosts.empty()) {
        throw errors::invalid_hostlist("--nodelist", "empty host list", overrides.nodelist);
    }
    const auto nodes = step.hosts.size();
    step.tasks_variable = "--tasks-per-node";

    if (!overrides.distribution.empty()) {
        step.distribution = parse_distribution(overrides.distribution, "--distribution");
        if (step.distribution.kind == Distribution::plane && step.distribution.plane_size == 0) {
            throw errors::invalid_argument(
                "--distribution", "plane needs a size: plane=N", overrides.distribution);
        }
    }
    // A hostfile means an arbitrary distribution, as with srun -m arbitrary.
    std::string hostfile_text;
    const auto subject = hostfile_subject("--hostfile", overrides.hostfile);
    if (!overrides.hostfile.empty()) {
        if (!overrides.distribution.empty() && step.distribution.kind != Distribution::arbitrary) {
            throw errors::invalid_argument("--hostfile",
                                           fmt::format("places every rank itself: it cannot be "
                                                       "combined with --distribution {}",
                                                       overrides.distribution),
                                           overrides.hostfile,
                                           "drop --distribution, or give --distribution arbitrary");
        }
        step.distribution = DistributionSpec{Distribution::arbitrary, 0};
        step.hostfile = overrides.hostfile;
        hostfile_text = read(step.hostfile, subject);
    } else if (step.distribution.kind == Distribution::arbitrary) {
        throw errors::invalid_argument("--distribution",
                                       "arbitrary needs --hostfile FILE",
                                       overrides.distribution,
                                       "rank i runs on the i-th host of FILE, as with srun -m "
                                       "arbitrary and SLURM_HOSTFILE");
    }

    if (!step.hostfile.empty() && overrides.tasks_per_node.empty()) {
        // The counts per node are the hostfile's (its first --ntasks names, or all of them).
        step.rank_hosts = parse_hostfile(hostfile_text, overrides.ntasks, subject);
        step.tasks_per_node.assign(nodes, 0);
        const auto node_of = detail::node_index(step.hosts);
        for (const auto& host : step.rank_hosts) {
            const auto found = node_of.find(host);
            if (found == node_of.end()) {
                throw errors::invalid_argument(subject,
                                               "names a host that is not in --nodelist",
                                               host,
                                               "list every host of the hostfile in --nodelist");
            }
            ++step.tasks_per_node[found->second];
        }
    } else if (!overrides.tasks_per_node.empty()) {
        step.tasks_per_node = expand_counts(overrides.tasks_per_node, "--tasks-per-node");
        if (step.tasks_per_node.size() == 1 && nodes > 1) {
            step.tasks_per_node.assign(nodes, step.tasks_per_node.front());
        }
        if (step.tasks_per_node.size() != nodes) {
            throw errors::invalid_argument(
                "--tasks-per-node",
                fmt::format("gives counts for {} nodes but --nodelist has {}",
                            step.tasks_per_node.size(),
                            nodes),
                overrides.tasks_per_node,
                "give one count (same on every node) or one per node");
        }
    } else if (overrides.ntasks) {
        // Like `srun -N<nodes> -n<ntasks>` with enough CPUs: the first nodes get one more.
        const auto ntasks = *overrides.ntasks;
        if (ntasks < nodes) {
            throw errors::invalid_argument(
                "--ntasks",
                fmt::format("fewer tasks than the {} nodes of --nodelist", nodes),
                std::to_string(ntasks));
        }
        const auto base = static_cast<std::uint32_t>(ntasks / nodes);
        const auto extra = ntasks % nodes;
        step.tasks_per_node.resize(nodes, base);
        for (std::size_t node = 0; node < extra; ++node) {
            ++step.tasks_per_node[node];
        }
    } else {
        step.tasks_per_node.assign(nodes, 1);
    }
    step.ntasks = detail::checked_total(step.tasks_per_node, "--tasks-per-node");
    if (overrides.ntasks && *overrides.ntasks != step.ntasks) {
        throw errors::invalid_argument("--ntasks",
                                       fmt::format("disagrees with --tasks-per-node {} ({} tasks)",
                                                   compress_counts(step.tasks_per_node),
                                                   step.ntasks),
                                       std::to_string(*overrides.ntasks));
    }
    if (!step.hostfile.empty() && step.rank_hosts.empty()) {
        step.rank_hosts = parse_hostfile(hostfile_text, step.ntasks, subject);
    }
    step.job_id = overrides.job_id;
    step.step_id = overrides.step_id;
    if (!overrides.resv_ports.empty()) {
        step.resv_ports = expand_ports(overrides.resv_ports, "--resv-ports");
    }
    if (overrides.rank) {
        if (*overrides.rank >= step.ntasks) {
            throw errors::invalid_argument("--rank",
                                           fmt::format("the step has only {} tasks", step.ntasks),
                                           std::to_string(*overrides.rank));
        }
        TaskIdentity self;
        self.rank = *overrides.rank;
        step.self = self;
    }
    if (!overrides.gpus.empty()) {
        step.gpus.visible = parse_device_list(overrides.gpus);
    }
    return step;
}

} // namespace tfslurm
