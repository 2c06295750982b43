// SPDX-License-Identifier: MIT
#include "detail/text.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/tasks.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <unordered_map>
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

std::string describe_layout(const Allocation& allocation, const StepInfo& step) {
    std::string text{to_string(allocation.distribution)};
    if (allocation.distribution == Distribution::plane) {
        text += fmt::format("={}", allocation.plane_size);
    } else if (allocation.distribution == Distribution::arbitrary) {
        text += fmt::format(" (hostfile {})", step.hostfile);
    }
    return text;
}

/// `SLURM_HOSTFILE (<path>)` or `--hostfile (<path>)`: the subject of hostfile errors.
std::string hostfile_subject(std::string_view name, std::string_view path) {
    return fmt::format("{} ({})", name, path);
}

/// Drop spaces, tabs and carriage returns at both ends.
std::string_view trim_blanks(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) {
        return {};
    }
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

/// The checks shared by every layout: one positive count per host.
void check_layout_input(const std::vector<std::string>& hosts,
                        const std::vector<std::uint32_t>& tasks_per_node) {
    if (hosts.empty()) {
        throw errors::inconsistent_allocation("allocation", "no nodes", "");
    }
    if (hosts.size() != tasks_per_node.size()) {
        throw errors::inconsistent_allocation(
            "tasks per node",
            fmt::format("{} counts for {} nodes", tasks_per_node.size(), hosts.size()),
            compress_counts(tasks_per_node));
    }
    for (std::size_t node = 0; node < hosts.size(); ++node) {
        if (tasks_per_node[node] == 0) {
            throw errors::inconsistent_allocation(
                "tasks per node",
                fmt::format("node {} ({}) has no task", node, hosts[node]),
                compress_counts(tasks_per_node));
        }
    }
}

/// Host name -> node index (the first, should a name repeat). Views into `hosts`.
std::unordered_map<std::string_view, std::uint32_t>
node_index(const std::vector<std::string>& hosts) {
    std::unordered_map<std::string_view, std::uint32_t> index;
    index.reserve(hosts.size());
    for (std::uint32_t node = 0; node < hosts.size(); ++node) {
        index.emplace(hosts[node], node);
    }
    return index;
}

/// Append `rank` to its node in `allocation`, with the next local id there.
void assign_rank(Allocation& allocation, std::uint32_t rank, std::uint32_t node) {
    auto& ranks = allocation.node_ranks[node];
    allocation.places[rank] = TaskPlace{node, static_cast<std::uint32_t>(ranks.size())};
    ranks.push_back(rank);
}

void check_identity(const StepInfo& step, const Allocation& allocation) {
    const auto& self = *step.self;
    if (self.rank >= allocation.ntasks()) {
        throw errors::inconsistent_allocation(
            "SLURM_PROCID",
            fmt::format("rank is outside the step's {} tasks ({}={})",
                        allocation.ntasks(),
                        step.tasks_variable,
                        compress_counts(step.tasks_per_node)),
            std::to_string(self.rank));
    }
    const auto& place = allocation.places[self.rank];
    const std::string_view hint =
        "the nodelist, tasks-per-node and distribution variables (with -m arbitrary: the file "
        "SLURM_HOSTFILE names, which must not change while the step runs) do not describe "
        "where Slurm runs this task";
    const auto where = [&] {
        return fmt::format("{} distribution of {}={} over {}={} puts rank {} on node {} ({}) "
                           "as local task {}",
                           describe_layout(allocation, step),
                           step.tasks_variable,
                           compress_counts(step.tasks_per_node),
                           step.nodelist_variable,
                           step.nodelist,
                           self.rank,
                           place.node,
                           allocation.hosts[place.node],
                           place.local);
    };
    if (self.node_id && *self.node_id != place.node) {
        throw errors::inconsistent_allocation(
            "SLURM_NODEID",
            fmt::format("disagrees with the computed placement: {}", where()),
            std::to_string(*self.node_id),
            std::string{hint});
    }
    if (self.local_id && *self.local_id != place.local) {
        throw errors::inconsistent_allocation(
            "SLURM_LOCALID",
            fmt::format("disagrees with the computed placement: {}", where()),
            std::to_string(*self.local_id),
            std::string{hint});
    }
    if (self.node_name && *self.node_name != allocation.hosts[place.node]) {
        throw errors::inconsistent_allocation(
            "SLURMD_NODENAME",
            fmt::format("disagrees with the computed placement: {}", where()),
            *self.node_name,
            std::string{hint});
    }
    // The batch script (job scope) reports only itself in SLURM_GTIDS; steps list the node.
    if (step.scope == Scope::step && self.gtids) {
        auto expected = allocation.node_ranks[place.node];
        auto actual = *self.gtids;
        std::sort(expected.begin(), expected.end());
        std::sort(actual.begin(), actual.end());
        if (expected != actual) {
            std::vector<std::string> shown;
            shown.reserve(self.gtids->size());
            for (const auto id : *self.gtids) {
                shown.push_back(std::to_string(id));
            }
            std::vector<std::string> wanted;
            for (const auto id : expected) {
                wanted.push_back(std::to_string(id));
            }
            throw errors::inconsistent_allocation(
                "SLURM_GTIDS",
                fmt::format("lists other ranks than the computed placement ({}): {}",
                            detail::join(wanted, ","),
                            where()),
                detail::join(shown, ","),
                std::string{hint});
        }
    }
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

std::uint32_t Allocation::max_tasks_per_node() const noexcept {
    std::uint32_t most = 0;
    for (const auto count : tasks_per_node) {
        most = std::max(most, count);
    }
    return most;
}

Allocation place_tasks(std::vector<std::string> hosts,
                       std::vector<std::uint32_t> tasks_per_node,
                       Distribution distribution,
                       std::uint32_t plane_size) {
    check_layout_input(hosts, tasks_per_node);
    if (distribution == Distribution::arbitrary) {
        throw errors::invalid_argument(
            "distribution",
            "an arbitrary distribution needs the host of every rank (a hostfile)",
            "arbitrary",
            "place_arbitrary() takes the hostfile's hosts");
    }
    if (distribution == Distribution::plane && plane_size == 0) {
        throw errors::invalid_argument("distribution",
                                       "plane distribution needs a size >= 1",
                                       "plane",
                                       "set SLURM_DIST_PLANESIZE or use plane=N");
    }
    const auto total = checked_total(tasks_per_node, "tasks per node");

    Allocation allocation;
    allocation.distribution = distribution;
    allocation.plane_size = distribution == Distribution::plane ? plane_size : 0;
    allocation.places.resize(total);
    allocation.node_ranks.resize(hosts.size());
    for (std::size_t node = 0; node < hosts.size(); ++node) {
        allocation.node_ranks[node].reserve(tasks_per_node[node]);
    }

    if (distribution == Distribution::block) {
        // Block: ranks fill node after node, in nodelist order.
        std::uint32_t rank = 0;
        for (std::uint32_t node = 0; node < hosts.size(); ++node) {
            for (std::uint32_t i = 0; i < tasks_per_node[node]; ++i) {
                assign_rank(allocation, rank++, node);
            }
        }
    } else {
        // Cyclic (block of 1) and plane (block of plane_size): deal blocks round robin over
        // the nodes that still have room. With the final per-node counts as caps this gives
        // the same ranks as Slurm's layout loops, including uneven counts.
        const std::uint32_t block = distribution == Distribution::cyclic ? 1 : plane_size;
        std::vector<std::uint32_t> active(hosts.size());
        std::iota(active.begin(), active.end(), 0U);
        std::vector<std::uint32_t> left = tasks_per_node;
        std::uint32_t rank = 0;
        while (!active.empty()) {
            std::size_t kept = 0;
            for (const auto node : active) {
                const auto take = std::min(block, left[node]);
                for (std::uint32_t i = 0; i < take; ++i) {
                    assign_rank(allocation, rank++, node);
                }
                left[node] -= take;
                if (left[node] > 0) {
                    active[kept++] = node;
                }
            }
            active.resize(kept);
        }
    }
    allocation.hosts = std::move(hosts);
    allocation.tasks_per_node = std::move(tasks_per_node);
    return allocation;
}

Allocation place_arbitrary(std::vector<std::string> hosts,
                           std::vector<std::uint32_t> tasks_per_node,
                           const std::vector<std::string>& rank_hosts,
                           std::string_view subject) {
    check_layout_input(hosts, tasks_per_node);
    const auto total = checked_total(tasks_per_node, "tasks per node");
    if (rank_hosts.size() != total) {
        throw errors::inconsistent_allocation(
            subject,
            fmt::format("names {} hosts for the step's {} tasks", rank_hosts.size(), total),
            compress_counts(tasks_per_node));
    }
    const auto node_of = node_index(hosts);
    Allocation allocation;
    allocation.distribution = Distribution::arbitrary;
    allocation.places.resize(total);
    allocation.node_ranks.resize(hosts.size());
    for (std::uint32_t rank = 0; rank < total; ++rank) {
        const auto found = node_of.find(rank_hosts[rank]);
        if (found == node_of.end()) {
            throw errors::inconsistent_allocation(
                subject,
                fmt::format("puts rank {} on a host that is not one of the step's {} nodes",
                            rank,
                            hosts.size()),
                rank_hosts[rank]);
        }
        assign_rank(allocation, rank, found->second);
    }
    for (std::uint32_t node = 0; node < hosts.size(); ++node) {
        if (allocation.node_ranks[node].size() != tasks_per_node[node]) {
            throw errors::inconsistent_allocation(
                subject,
                fmt::format("puts {} ranks on {} where the step has {} tasks (per node: {})",
                            allocation.node_ranks[node].size(),
                            hosts[node],
                            tasks_per_node[node],
                            compress_counts(tasks_per_node)),
                hosts[node]);
        }
    }
    allocation.hosts = std::move(hosts);
    allocation.tasks_per_node = std::move(tasks_per_node);
    return allocation;
}

std::vector<std::string> parse_hostfile(std::string_view text,
                                        std::optional<std::uint32_t> ntasks,
                                        std::string_view subject) {
    const auto wanted = ntasks.value_or(k_max_expanded_hosts);
    std::vector<std::string> hosts;
    std::size_t line_number = 0;
    std::size_t pos = 0;
    while (hosts.size() < wanted && pos < text.size()) {
        const auto end = text.find('\n', pos);
        const auto raw = text.substr(pos, end == std::string_view::npos ? end : end - pos);
        pos = end == std::string_view::npos ? text.size() : end + 1;
        ++line_number;
        // '#' starts a comment unless written as '\#'.
        std::string line;
        for (const char c : raw) {
            if (c == '#') {
                if (!line.empty() && line.back() == '\\') {
                    line.back() = '#';
                    continue;
                }
                break;
            }
            line += c;
        }
        const auto content = trim_blanks(line);
        if (content.empty()) {
            continue;
        }
        const auto first = static_cast<unsigned char>(content.front());
        if (std::isalnum(first) == 0) {
            throw errors::invalid_hostlist(
                subject,
                fmt::format("line {}: a host name must start with a letter or a digit",
                            line_number),
                raw);
        }
        for (const auto field : detail::split(content, ',')) {
            const auto entry = trim_blanks(field);
            if (entry.empty()) {
                continue;
            }
            auto name = entry;
            std::uint64_t count = 1;
            if (const auto star = entry.find('*'); star != std::string_view::npos) {
                const auto repeat = detail::parse_decimal(entry.substr(star + 1));
                name = trim_blanks(entry.substr(0, star));
                if (!repeat || *repeat == 0 || name.empty()) {
                    throw errors::invalid_hostlist(
                        subject,
                        fmt::format("line {}: expected NAME or NAME*COUNT with a count of at "
                                    "least 1",
                                    line_number),
                        entry);
                }
                count = *repeat;
            }
            const auto take = std::min<std::uint64_t>(count, wanted - hosts.size());
            hosts.insert(hosts.end(), static_cast<std::size_t>(take), std::string{name});
            if (hosts.size() == wanted) {
                break;
            }
        }
    }
    if (hosts.empty() || (ntasks && hosts.size() < *ntasks)) {
        throw errors::invalid_hostlist(
            subject,
            ntasks ? fmt::format("names {} hosts for {} tasks", hosts.size(), *ntasks)
                   : std::string{"names no host"},
            text);
    }
    return hosts;
}

std::string read_text_file(const std::string& path, std::string_view subject) {
    constexpr std::streamoff k_max_size = std::streamoff{16} * 1024 * 1024;
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        throw errors::make(Errc::io,
                           subject,
                           fmt::format("cannot open {}: {}", quote(path), std::strerror(errno)),
                           "check the path and its permissions; with srun -m arbitrary the file "
                           "must stay readable on every node while the step runs");
    }
    file.seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(file.tellg());
    if (size > k_max_size) {
        throw errors::too_large(
            subject, fmt::format("{} has {} bytes (limit {})", quote(path), size, k_max_size), {});
    }
    file.seekg(0, std::ios::beg);
    std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    if (file.bad()) {
        throw errors::make(Errc::io,
                           subject,
                           fmt::format("cannot read {}: {}", quote(path), std::strerror(errno)));
    }
    return text;
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
    step.ntasks = checked_total(step.tasks_per_node, tasks->name);

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
        const auto node_of = node_index(step.hosts);
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
    step.ntasks = checked_total(step.tasks_per_node, "--tasks-per-node");
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

Allocation resolve_allocation(const StepInfo& step) {
    auto allocation =
        step.distribution.kind == Distribution::arbitrary
            ? place_arbitrary(
                  step.hosts,
                  step.tasks_per_node,
                  step.rank_hosts,
                  hostfile_subject(step.scope == Scope::preview ? "--hostfile" : "SLURM_HOSTFILE",
                                   step.hostfile))
            : place_tasks(step.hosts,
                          step.tasks_per_node,
                          step.distribution.kind,
                          step.distribution.plane_size);
    if (step.self) {
        check_identity(step, allocation);
    }
    return allocation;
}

} // namespace tfslurm
