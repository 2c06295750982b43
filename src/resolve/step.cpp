// SPDX-License-Identifier: MIT
#include "resolve/detail/step.hpp"

#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/slurm_config.hpp>
#include <tfslurm/resolve/step.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <utility>

namespace tfslurm {

namespace detail {

std::uint32_t checked_total(const std::vector<std::uint32_t>& counts, std::string_view subject) {
    std::uint64_t total = 0;
    for (const auto count : counts) {
        total += count;
    }
    if (total > k_max_expanded_hosts) {
        throw errors::too_large(
            subject,
            fmt::format("{} tasks exceed tfslurm's limit of {}", total, k_max_expanded_hosts),
            "split the job into several steps");
    }
    return static_cast<std::uint32_t>(total);
}

std::unordered_map<std::string_view, std::uint32_t>
node_index(const std::vector<std::string>& hosts) {
    std::unordered_map<std::string_view, std::uint32_t> index;
    index.reserve(hosts.size());
    for (std::uint32_t node = 0; node < hosts.size(); ++node) {
        index.emplace(hosts[node], node);
    }
    return index;
}

} // namespace detail
namespace {

std::string not_in_slurm_hint() {
    return "not inside a Slurm job or step? outside Slurm, describe the allocation with " +
           setting_ref("nodelist") + " and " + setting_ref("tasks_per_node") + " (a preview)";
}

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

/// The offset of the first byte of `text` that is not printable ASCII, if any. Device names
/// (indices, GPU-<uuid>, MIG-<uuid>) are printable ASCII; anything else would reach the
/// outputs (JSON included) as a raw byte.
std::optional<std::size_t> first_unprintable(std::string_view text) noexcept {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c < 0x20 || c >= 0x7f) {
            return i;
        }
    }
    return std::nullopt;
}

std::string unprintable_problem(std::string_view text, std::size_t offset) {
    return fmt::format("device names are printable ASCII: byte 0x{:02x} at offset {}",
                       static_cast<unsigned char>(text[offset]),
                       offset);
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

/// A comma-separated device list from the variable `name`, as its reader takes it. Slurm's
/// `NoDevFiles` (GPUs allocated, but gres.conf names no device file) means no device at all.
/// CUDA reads CUDA_VISIBLE_DEVICES up to its first empty item and ignores the rest: the list
/// ends there, with a warning (Slurm's own lists skip an empty item). \throws Error
/// (Errc::invalid_argument) for an unprintable character.
std::vector<std::string> env_device_list(std::string_view text, std::string_view name) {
    if (const auto bad = first_unprintable(text)) {
        throw errors::invalid_argument(name, unprintable_problem(text, *bad), text);
    }
    if (text == "NoDevFiles") {
        logger().debug("{}=NoDevFiles: Slurm allocated GPUs without device files: no GPU", name);
        return {};
    }
    if (name == "CUDA_VISIBLE_DEVICES") {
        const auto fields = detail::split(text, ',');
        const auto empty = std::find(fields.begin(), fields.end(), std::string_view{});
        if (empty != fields.end() && !text.empty()) {
            std::vector<std::string> devices(fields.begin(), empty);
            logger().warn("{}: item {} is empty, and CUDA reads no further: {} means {} ({})",
                          name,
                          empty - fields.begin() + 1,
                          quote(text),
                          devices.empty() ? std::string("no GPU")
                                          : quote(detail::join(devices, ",")),
                          devices.empty() ? "remove the empty item"
                                          : "remove the empty item to make the others visible");
            return devices;
        }
    }
    return parse_device_list(text);
}

} // namespace

std::string to_string(const StepRef& step) {
    return fmt::format("{}.{}", step.job, step.step);
}

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

namespace {

// Readers per field group. read_step() takes the fields from Slurm's variables, preview_step()
// from StepOverrides; both name what they read in messages: the variable, or the setting
// (setting_ref(), rendered by the face as its option).

/// The nodelist group: raw text, where it came from, the expanded hosts (never empty).
void read_nodelist(StepInfo& step, const std::string& subject, std::string_view text) {
    step.nodelist = std::string{text};
    step.nodelist_variable = subject;
    step.hosts = expand_hostlist(text, subject);
    if (step.hosts.empty()) {
        throw errors::invalid_hostlist(subject, "empty host list", text);
    }
}

/// Rank i's host from the hostfile `path` (its first `ntasks` names, or all of them).
std::vector<std::string> read_rank_hosts(const FileReader& read,
                                         const std::string& path,
                                         const std::string& subject,
                                         std::optional<std::uint32_t> ntasks) {
    return parse_hostfile(read(path, subject), ntasks, subject);
}

// --- from the environment ----------------------------------------------------------------

void env_nodelist(StepInfo& step, const Environment& env) {
    const auto nodelist =
        first_set(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"});
    if (!nodelist) {
        throw errors::missing_env("SLURM_STEP_NODELIST", not_in_slurm_hint());
    }
    step.scope = nodelist->name == "SLURM_STEP_NODELIST" ? Scope::step : Scope::job;
    read_nodelist(step, std::string{nodelist->name}, nodelist->value);
}

/// The counts group: tasks per node, and the total checked against the declared ntasks.
void env_counts(StepInfo& step, const Environment& env) {
    const bool in_step = step.scope == Scope::step;
    const auto tasks = in_step
                           ? first_set(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"})
                           : first_set(env, {"SLURM_TASKS_PER_NODE"});
    if (!tasks) {
        throw errors::missing_env(in_step ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE",
                                  not_in_slurm_hint());
    }
    step.tasks_variable = std::string{tasks->name};
    step.tasks_per_node = expand_counts(tasks->value, tasks->name);
    if (step.tasks_per_node.size() != step.hosts.size()) {
        throw errors::inconsistent_allocation(
            tasks->name,
            fmt::format("gives counts for {} nodes but {} lists {}",
                        step.tasks_per_node.size(),
                        step.nodelist_variable,
                        step.hosts.size()),
            tasks->value);
    }
    step.ntasks = detail::checked_total(step.tasks_per_node, tasks->name);

    const auto ntasks =
        in_step ? first_set(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"})
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
}

/// The distribution group: SLURM_DISTRIBUTION (plane size), and SLURM_HOSTFILE when arbitrary.
void env_distribution(StepInfo& step, const Environment& env, const FileReader& read) {
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
        step.rank_hosts = read_rank_hosts(
            read, step.hostfile, hostfile_subject("SLURM_HOSTFILE", step.hostfile), step.ntasks);
    }
}

/// The ids group: job and step ids, and the step's reserved ports.
void env_ids(StepInfo& step, const Environment& env) {
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
}

/// The component nodelist `i` of a heterogeneous step: `SLURM_JOB_NODELIST_HET_GROUP_<i>`, or
/// the `_PACK_GROUP_` spelling that 22.05's srun still writes when it creates the het job.
std::vector<std::string> env_component_hosts(const Environment& env, std::uint32_t i) {
    const auto het = fmt::format("SLURM_JOB_NODELIST_HET_GROUP_{}", i);
    const auto pack = fmt::format("SLURM_JOB_NODELIST_PACK_GROUP_{}", i);
    const auto found = first_set(env, {het, pack});
    if (!found) {
        throw errors::missing_env(het,
                                  fmt::format("SLURM_HET_SIZE says the step has {} components: "
                                              "every component lists its nodes",
                                              *env.get("SLURM_HET_SIZE")));
    }
    return expand_hostlist(found->value, found->name);
}

/// Which component each node of the step belongs to, checked: every node in exactly one.
std::vector<std::uint32_t> component_of_nodes(const StepInfo& step,
                                              const std::vector<std::vector<std::string>>& lists) {
    constexpr auto k_none = std::numeric_limits<std::uint32_t>::max();
    std::vector<std::uint32_t> owner(step.hosts.size(), k_none);
    const auto node_of = detail::node_index(step.hosts);
    for (std::uint32_t i = 0; i < lists.size(); ++i) {
        for (const auto& host : lists[i]) {
            const auto found = node_of.find(host);
            if (found == node_of.end()) {
                continue; // a node of the component's job that this step does not use
            }
            if (owner[found->second] != k_none && owner[found->second] != i) {
                throw errors::inconsistent_allocation(
                    fmt::format("SLURM_JOB_NODELIST_HET_GROUP_{}", i),
                    fmt::format("shares node {} with component {}", host, owner[found->second]),
                    host,
                    "Slurm 22.05 gives every component of a heterogeneous job nodes of its own");
            }
            owner[found->second] = i;
        }
    }
    for (std::size_t node = 0; node < owner.size(); ++node) {
        if (owner[node] == k_none) {
            throw errors::inconsistent_allocation(
                step.nodelist_variable,
                fmt::format("lists {}, which no component of the heterogeneous step has",
                            step.hosts[node]),
                step.nodelist);
        }
    }
    return owner;
}

/// The components group: a heterogeneous step's components, with their rank ranges (component
/// after component, as Slurm numbers them). Empty outside a heterogeneous step.
void env_components(StepInfo& step, const Environment& env) {
    const auto size = env.get("SLURM_HET_SIZE");
    if (!size || step.scope != Scope::step) {
        return;
    }
    const auto count = parse_unsigned<std::uint32_t>(*size, "SLURM_HET_SIZE");
    if (count == 0 || count > step.hosts.size()) {
        throw errors::inconsistent_allocation(
            "SLURM_HET_SIZE",
            fmt::format("expected 1 to {} components (one node each at least)", step.hosts.size()),
            *size);
    }
    if (step.distribution.kind == Distribution::arbitrary) {
        throw errors::invalid_argument("SLURM_DISTRIBUTION",
                                       "a heterogeneous step places its ranks component after "
                                       "component: an arbitrary distribution is not supported",
                                       "arbitrary");
    }
    std::vector<std::vector<std::string>> lists;
    for (std::uint32_t i = 0; i < count; ++i) {
        lists.push_back(env_component_hosts(env, i));
    }
    const auto owner = component_of_nodes(step, lists);
    step.components.assign(count, HetComponent{});
    for (std::size_t node = 0; node < step.hosts.size(); ++node) {
        auto& component = step.components[owner[node]];
        component.hosts.push_back(step.hosts[node]);
        component.ntasks += step.tasks_per_node[node];
    }
    std::uint32_t next = 0;
    for (auto& component : step.components) {
        component.first_rank = next;
        next += component.ntasks;
    }
}

/// The identity group: what the task knows about itself, absent outside a task.
std::optional<TaskIdentity> env_identity(const Environment& env) {
    const auto procid = env.get("SLURM_PROCID");
    if (!procid) {
        return std::nullopt;
    }
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
    return self;
}

/// The GPU group.
GpuEnv env_gpus(const Environment& env) {
    GpuEnv gpus;
    if (const auto value = env.get("CUDA_VISIBLE_DEVICES")) {
        gpus.visible = env_device_list(*value, "CUDA_VISIBLE_DEVICES");
    }
    if (const auto value = env.get("SLURM_STEP_GPUS")) {
        gpus.step_gpus = env_device_list(*value, "SLURM_STEP_GPUS");
    }
    if (const auto value = env.get("SLURM_JOB_GPUS")) {
        gpus.job_gpus = env_device_list(*value, "SLURM_JOB_GPUS");
    }
    if (const auto value = env.get("SLURM_GPUS_ON_NODE")) {
        gpus.gpus_on_node = parse_unsigned<std::uint32_t>(*value, "SLURM_GPUS_ON_NODE");
    }
    return gpus;
}

// --- from preview values (each names its setting) ---------------------------------------

/// The distribution group of a preview: a hostfile means an arbitrary distribution, as with
/// srun -m arbitrary. Returns the hostfile's text (empty without one).
std::string
preview_distribution(StepInfo& step, const StepOverrides& overrides, const FileReader& read) {
    if (!overrides.distribution.empty()) {
        step.distribution = parse_distribution(overrides.distribution, setting_ref("distribution"));
        if (step.distribution.kind == Distribution::plane && step.distribution.plane_size == 0) {
            throw errors::invalid_setting(
                "distribution", "plane needs a size: plane=N", overrides.distribution);
        }
    }
    if (overrides.hostfile.empty()) {
        if (step.distribution.kind == Distribution::arbitrary) {
            throw errors::invalid_setting("distribution",
                                          "arbitrary needs " + setting_ref("hostfile", "FILE"),
                                          overrides.distribution,
                                          "rank i runs on the i-th host of FILE, as with srun -m "
                                          "arbitrary and SLURM_HOSTFILE");
        }
        return {};
    }
    if (!overrides.distribution.empty() && step.distribution.kind != Distribution::arbitrary) {
        throw errors::invalid_setting(
            "hostfile",
            fmt::format("places every rank itself: it cannot be combined with {}",
                        setting_ref("distribution", overrides.distribution)),
            overrides.hostfile,
            "drop " + setting_ref("distribution") + ", or give " +
                setting_ref("distribution", "arbitrary"));
    }
    step.distribution = DistributionSpec{Distribution::arbitrary, 0};
    step.hostfile = overrides.hostfile;
    return read(step.hostfile, hostfile_subject(setting_ref("hostfile"), step.hostfile));
}

/// Counts from the hostfile: its first `ntasks` names (or all), each on a --nodelist host.
void counts_from_hostfile(StepInfo& step,
                          std::string_view hostfile_text,
                          std::optional<std::uint32_t> ntasks) {
    const auto subject = hostfile_subject(setting_ref("hostfile"), step.hostfile);
    step.rank_hosts = parse_hostfile(hostfile_text, ntasks, subject);
    step.tasks_per_node.assign(step.hosts.size(), 0);
    const auto node_of = detail::node_index(step.hosts);
    for (const auto& host : step.rank_hosts) {
        const auto found = node_of.find(host);
        if (found == node_of.end()) {
            throw errors::invalid_argument(subject,
                                           "names a host that is not in " + setting_ref("nodelist"),
                                           host,
                                           "list every host of the hostfile in " +
                                               setting_ref("nodelist"));
        }
        ++step.tasks_per_node[found->second];
    }
}

/// Counts from tasks_per_node: one count for every node, or one per node.
void counts_from_text(StepInfo& step, const std::string& text) {
    const auto nodes = step.hosts.size();
    step.tasks_per_node = expand_counts(text, setting_ref("tasks_per_node"));
    if (step.tasks_per_node.size() == 1 && nodes > 1) {
        step.tasks_per_node.assign(nodes, step.tasks_per_node.front());
    }
    if (step.tasks_per_node.size() != nodes) {
        throw errors::invalid_setting("tasks_per_node",
                                      fmt::format("gives counts for {} nodes but {} has {}",
                                                  step.tasks_per_node.size(),
                                                  setting_ref("nodelist"),
                                                  nodes),
                                      text,
                                      "give one count (same on every node) or one per node");
    }
    // Slurm never lists a node without a task; a 0 here is a typing mistake, not an allocation
    // that contradicts itself (placement's check would call it inconsistent).
    if (std::find(step.tasks_per_node.begin(), step.tasks_per_node.end(), 0U) !=
        step.tasks_per_node.end()) {
        throw errors::invalid_setting(
            "tasks_per_node", "every node of a step runs at least one task", text);
    }
}

/// Counts like `srun -N<nodes> -n<ntasks>` with enough CPUs: the first nodes get one more.
void counts_from_ntasks(StepInfo& step, std::uint32_t ntasks) {
    const auto nodes = step.hosts.size();
    if (ntasks > k_max_expanded_hosts) {
        // Checked here so that the message names what was typed, not the derived counts.
        throw errors::too_large(
            setting_ref("ntasks"),
            fmt::format("{} tasks exceed tfslurm's limit of {}", ntasks, k_max_expanded_hosts),
            "split the job into several steps");
    }
    if (ntasks < nodes) {
        throw errors::invalid_setting(
            "ntasks",
            fmt::format("fewer tasks than the {} nodes of {}", nodes, setting_ref("nodelist")),
            std::to_string(ntasks));
    }
    const auto base = static_cast<std::uint32_t>(ntasks / nodes);
    const auto extra = ntasks % nodes;
    step.tasks_per_node.assign(nodes, base);
    for (std::size_t node = 0; node < extra; ++node) {
        ++step.tasks_per_node[node];
    }
}

/// The counts group of a preview: from the hostfile, tasks_per_node, ntasks, or 1 per node.
void preview_counts(StepInfo& step, const StepOverrides& overrides, std::string_view hostfile) {
    if (!step.hostfile.empty() && overrides.tasks_per_node.empty()) {
        counts_from_hostfile(step, hostfile, overrides.ntasks);
    } else if (!overrides.tasks_per_node.empty()) {
        counts_from_text(step, overrides.tasks_per_node);
    } else if (overrides.ntasks) {
        counts_from_ntasks(step, *overrides.ntasks);
    } else {
        step.tasks_per_node.assign(step.hosts.size(), 1);
    }
    step.ntasks = detail::checked_total(step.tasks_per_node, setting_ref("tasks_per_node"));
    if (overrides.ntasks && *overrides.ntasks != step.ntasks) {
        throw errors::invalid_setting(
            "ntasks",
            fmt::format("disagrees with {} ({} tasks)",
                        setting_ref("tasks_per_node", compress_counts(step.tasks_per_node)),
                        step.ntasks),
            std::to_string(*overrides.ntasks));
    }
    if (!step.hostfile.empty() && step.rank_hosts.empty()) {
        step.rank_hosts = parse_hostfile(
            hostfile, step.ntasks, hostfile_subject(setting_ref("hostfile"), step.hostfile));
    }
}

/// The ids, identity and GPU groups of a preview.
void preview_ids(StepInfo& step, const StepOverrides& overrides) {
    step.job_id = overrides.job_id;
    step.step_id = overrides.step_id;
    if (!overrides.resv_ports.empty()) {
        step.resv_ports = expand_ports(overrides.resv_ports, setting_ref("resv_ports"));
    }
    if (overrides.rank) {
        if (*overrides.rank >= step.ntasks) {
            throw errors::invalid_setting("rank",
                                          fmt::format("the step has only {} tasks", step.ntasks),
                                          std::to_string(*overrides.rank));
        }
        TaskIdentity self;
        self.rank = *overrides.rank;
        step.self = self;
    }
    if (!overrides.gpus.empty()) {
        if (const auto bad = first_unprintable(overrides.gpus)) {
            throw errors::invalid_setting(
                "gpus", unprintable_problem(overrides.gpus, *bad), overrides.gpus);
        }
        // What CUDA would stop at is refused here: the value was typed, not inherited.
        const auto fields = detail::split(overrides.gpus, ',');
        if (const auto empty = std::find(fields.begin(), fields.end(), std::string_view{});
            empty != fields.end()) {
            throw errors::invalid_setting(
                "gpus",
                fmt::format("item {} is empty (expected GPU indices or names separated by "
                            "single commas, as in CUDA_VISIBLE_DEVICES, which ends at an empty "
                            "item)",
                            empty - fields.begin() + 1),
                overrides.gpus);
        }
        step.gpus.visible = parse_device_list(overrides.gpus);
    }
}

} // namespace

StepInfo read_step(const Environment& env, const FileReader& read) {
    StepInfo step;
    env_nodelist(step, env);
    env_counts(step, env);
    env_distribution(step, env, read);
    env_ids(step, env);
    env_components(step, env);
    if (step.components.empty() && step.distribution.kind == Distribution::block &&
        step.hosts.size() > 1) {
        step.topology_order = topology_ordering(env, read).value_or("");
    }
    step.self = env_identity(env);
    step.gpus = env_gpus(env);
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
    read_nodelist(step, setting_ref("nodelist"), overrides.nodelist);
    step.tasks_variable = setting_ref("tasks_per_node");
    const auto hostfile_text = preview_distribution(step, overrides, read);
    preview_counts(step, overrides, hostfile_text);
    preview_ids(step, overrides);
    return step;
}

} // namespace tfslurm
