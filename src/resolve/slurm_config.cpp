// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/slurm_config.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace tfslurm {
namespace {

/// ASCII case, as Slurm compares its keys (and as std::tolower does in the C locale, which
/// tfslurm never leaves), without a library call per byte: may_hold() runs it at every byte of
/// slurm.conf.
bool equal_ignoring_case(std::string_view a, std::string_view b) noexcept {
    const auto fold = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) {
               return fold(x) == fold(y);
           });
}

bool is_blank(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\r';
}

/// The text of one line before its comment (`\#` is a literal `#`, as in Slurm).
std::string without_comment(std::string_view line) {
    std::string out;
    for (std::size_t i = 0; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '#') {
            out += '#';
            ++i;
        } else if (line[i] == '#') {
            break;
        } else {
            out += line[i];
        }
    }
    return out;
}

/// The next `Key=Value` word of `line` from `pos`: a value in double quotes may hold blanks.
std::string next_word(std::string_view line, std::size_t& pos) {
    while (pos < line.size() && is_blank(line[pos])) {
        ++pos;
    }
    std::string word;
    bool quoted = false;
    for (; pos < line.size() && (quoted || !is_blank(line[pos])); ++pos) {
        if (line[pos] == '"') {
            quoted = !quoted;
        } else {
            word += line[pos];
        }
    }
    return word;
}

std::string trimmed(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) {
        return {};
    }
    const auto last = text.find_last_not_of(" \t\r");
    return std::string{text.substr(first, last - first + 1)};
}

/// One `Key=Value` word of slurm.conf.
struct ConfSetting {
    std::string key;
    std::string value;
};

/// The `Key=Value` words of one line of slurm.conf: its comment dropped, words without '='
/// skipped.
std::vector<ConfSetting> line_settings(std::string_view raw_line) {
    const std::string line = without_comment(raw_line);
    std::vector<ConfSetting> settings;
    std::size_t pos = 0;
    for (std::string word = next_word(line, pos); !word.empty(); word = next_word(line, pos)) {
        const auto eq = word.find('=');
        if (eq != std::string::npos) {
            settings.push_back({word.substr(0, eq), word.substr(eq + 1)});
        }
    }
    return settings;
}

/// Calls `visit(line)` with each line of `text`, without its newline.
template <typename Visit> void for_each_line(std::string_view text, Visit&& visit) {
    std::size_t start = 0;
    while (start < text.size()) {
        const auto end = std::min(text.find('\n', start), text.size());
        visit(text.substr(start, end - start));
        start = end + 1;
    }
}

/// The `Key=Value` words of slurm.conf `text`, line by line: comments dropped, words without
/// '=' skipped (the one walk over the file's lines that its readers share).
std::vector<std::vector<ConfSetting>> conf_lines(std::string_view text) {
    std::vector<std::vector<ConfSetting>> lines;
    for_each_line(text, [&](std::string_view line) { lines.push_back(line_settings(line)); });
    return lines;
}

/// Whether `line` can hold a word whose key is `key`: it holds `key` in some case, or a quote
/// or a backslash (which line_settings() takes out of words). Skipping the other lines unparsed
/// gives the same values (issue #33: the launcher reads two keys of a whole slurm.conf at every
/// start, and parsing every line of it took a fifth of a follower's instructions).
bool may_hold(std::string_view line, std::string_view key) noexcept {
    if (std::any_of(line.begin(), line.end(), [](char c) { return c == '"' || c == '\\'; })) {
        return true;
    }
    for (std::size_t at = 0; at + key.size() <= line.size(); ++at) {
        if (equal_ignoring_case(line.substr(at, key.size()), key)) {
            return true;
        }
    }
    return false;
}

bool is_flat_plugin(std::string_view plugin) noexcept {
    return plugin.empty() || equal_ignoring_case(plugin, "topology/flat") ||
           equal_ignoring_case(plugin, "topology/default") ||
           equal_ignoring_case(plugin, "topology/none");
}

/// The `Topology=` of `partition` in slurm.conf: its own line's, else that of the last
/// `PartitionName=DEFAULT` line before it.
std::optional<std::string> partition_topology_name(std::string_view text,
                                                   std::string_view partition) {
    std::optional<std::string> by_default;
    for (const auto& line : conf_lines(text)) {
        std::optional<std::string> name;
        std::optional<std::string> topology;
        for (const auto& setting : line) {
            if (equal_ignoring_case(setting.key, "PartitionName")) {
                name = setting.value;
            } else if (equal_ignoring_case(setting.key, "Topology")) {
                topology = setting.value;
            }
        }
        if (!name || !topology) {
            continue;
        }
        if (equal_ignoring_case(*name, "DEFAULT")) {
            by_default = topology;
        } else if (!partition.empty() && *name == partition) {
            return topology;
        }
    }
    return by_default;
}

/// One topology of topology.yaml: its name, its kind (`flat`, `tree`, `block`, ...) and whether
/// it is the cluster's default.
struct YamlTopology {
    std::string name;
    std::string kind;
    bool cluster_default = false;
};

/// The topologies of topology.yaml, read line by line: each starts at `- topology: NAME`; in it,
/// `cluster_default: true` and the first of the keys that name a kind.
std::vector<YamlTopology> yaml_topologies(std::string_view text) {
    static constexpr std::array<std::string_view, 5> k_kinds{
        "flat", "tree", "block", "ring", "torus3d"};
    std::vector<YamlTopology> topologies;
    std::size_t start = 0;
    while (start < text.size()) {
        const auto end = std::min(text.find('\n', start), text.size());
        auto line = trimmed(text.substr(start, end - start));
        start = end + 1;
        if (const auto hash = line.find('#'); hash != std::string::npos) {
            line = trimmed(std::string_view{line}.substr(0, hash));
        }
        const bool item = line.rfind("- ", 0) == 0;
        if (item) {
            line = trimmed(std::string_view{line}.substr(2));
        }
        const auto colon = line.find(':');
        if (colon == std::string::npos) {
            continue;
        }
        const auto key = trimmed(std::string_view{line}.substr(0, colon));
        const auto value = trimmed(std::string_view{line}.substr(colon + 1));
        if (item && key == "topology") {
            topologies.push_back({value, {}, false});
            continue;
        }
        if (topologies.empty()) {
            continue;
        }
        auto& current = topologies.back();
        if (key == "cluster_default") {
            current.cluster_default = equal_ignoring_case(value, "true");
        } else if (current.kind.empty() &&
                   std::find(k_kinds.begin(), k_kinds.end(), key) != k_kinds.end()) {
            current.kind = key;
        }
    }
    return topologies;
}

} // namespace

std::optional<std::string> partition_topology(std::string_view conf,
                                              std::string_view conf_file,
                                              const std::optional<std::string>& yaml,
                                              std::string_view yaml_file,
                                              std::string_view partition) {
    if (const auto params = slurm_conf_value(conf, "SelectTypeParameters")) {
        std::string upper = *params;
        std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) {
            return static_cast<char>(std::toupper(c));
        });
        if (upper.find("CR_NO_DIST_TOPO_BLOCK") != std::string::npos) {
            return std::nullopt;
        }
    }
    if (!yaml) {
        const auto plugin = slurm_conf_value(conf, "TopologyPlugin");
        if (!plugin || is_flat_plugin(*plugin)) {
            return std::nullopt;
        }
        return fmt::format("TopologyPlugin={} in {}", *plugin, conf_file);
    }
    const auto topologies = yaml_topologies(*yaml);
    const auto name = partition_topology_name(conf, partition);
    const YamlTopology* chosen = nullptr;
    for (const auto& topology : topologies) {
        if (name ? topology.name == *name : topology.cluster_default) {
            chosen = &topology;
            break;
        }
    }
    if (chosen == nullptr && name) {
        // A partition naming a topology that topology.yaml lacks: Slurm would not have started.
        return fmt::format(
            "topology \"{}\" of partition {} (not in {})", *name, partition, yaml_file);
    }
    if (chosen == nullptr || chosen->kind == "flat" || chosen->kind.empty()) {
        return std::nullopt;
    }
    if (name) {
        return fmt::format("topology \"{}\" ({}) of partition {} in {}",
                           chosen->name,
                           chosen->kind,
                           partition,
                           yaml_file);
    }
    return fmt::format("topology \"{}\" ({}), the cluster's default, in {}",
                       chosen->name,
                       chosen->kind,
                       yaml_file);
}

std::optional<std::string> slurm_conf_value(std::string_view text, std::string_view key) {
    std::optional<std::string> found;
    for_each_line(text, [&](std::string_view line) {
        if (!may_hold(line, key)) {
            return;
        }
        for (auto& setting : line_settings(line)) {
            if (equal_ignoring_case(setting.key, key)) {
                found = std::move(setting.value);
            }
        }
    });
    return found;
}

std::optional<std::string> auth_info_socket(std::string_view auth_info) {
    std::size_t start = 0;
    while (start <= auth_info.size()) {
        const auto end = std::min(auth_info.find(',', start), auth_info.size());
        const auto option = auth_info.substr(start, end - start);
        const auto eq = option.find('=');
        if (eq != std::string_view::npos && equal_ignoring_case(option.substr(0, eq), "socket") &&
            eq + 1 < option.size()) {
            return std::string{option.substr(eq + 1)};
        }
        start = end + 1;
    }
    return std::nullopt;
}

std::vector<std::string> slurm_conf_candidates(const Environment& env) {
    std::vector<std::string> files;
    if (const auto named = env.get("SLURM_CONF"); named && !named->empty()) {
        files.emplace_back(*named);
    }
    files.emplace_back("/etc/slurm/slurm.conf");
    files.emplace_back("/run/slurm/conf/slurm.conf");
    return files;
}

MungeSocket find_munge_socket(const Environment& env, const FileReader& read) {
    if (const auto socket = env.get("TFSLURM_MUNGE_SOCKET"); socket && !socket->empty()) {
        return {std::string{*socket}, "TFSLURM_MUNGE_SOCKET"};
    }
    for (const auto& file : slurm_conf_candidates(env)) {
        std::string text;
        try {
            text = read(file, "slurm.conf");
        } catch (const Error& e) {
            logger().debug("munge socket: skipping {}", e.what());
            continue;
        }
        // The first slurm.conf that can be read is the one Slurm itself uses.
        if (const auto info = slurm_conf_value(text, "AuthInfo")) {
            if (auto socket = auth_info_socket(*info)) {
                return {std::move(*socket), "AuthInfo in " + file};
            }
        }
        break;
    }
    return {{}, "libmunge's default"};
}

bool step_signals_reach_every_process(const Environment& env, const FileReader& read) {
    for (const auto& file : slurm_conf_candidates(env)) {
        std::string text;
        try {
            text = read(file, "slurm.conf");
        } catch (const Error& e) {
            logger().debug("proctrack: skipping {}", e.what());
            continue;
        }
        const auto type = slurm_conf_value(text, "ProctrackType");
        return !type || *type != "proctrack/pgid";
    }
    return true;
}

std::optional<std::string> topology_ordering(const Environment& env, const FileReader& read) {
    if (!env.get("SLURM_JOB_SLUID")) {
        return std::nullopt; // a release before 25.11: block is the nodelist's order
    }
    for (const auto& file : slurm_conf_candidates(env)) {
        std::string text;
        try {
            text = read(file, "slurm.conf");
        } catch (const Error& e) {
            logger().debug("topology: skipping {}", e.what());
            continue;
        }
        const auto slash = file.rfind('/');
        const std::string yaml_file =
            (slash == std::string::npos ? std::string{} : file.substr(0, slash + 1)) +
            "topology.yaml";
        std::optional<std::string> yaml;
        try {
            yaml = read(yaml_file, "topology.yaml");
        } catch (const Error& e) {
            logger().debug("topology: no {}", e.what());
        }
        const auto partition = env.get("SLURM_JOB_PARTITION");
        return partition_topology(
            text, file, yaml, yaml_file, partition ? std::string_view{*partition} : "");
    }
    return std::nullopt;
}

} // namespace tfslurm
