// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/resolve/tf_config.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace tfslurm {
namespace {

using OrderedJson = nlohmann::ordered_json;

constexpr std::array<Role, 4> k_roles{Role::chief, Role::evaluator, Role::ps, Role::worker};

/// Append `text` to a JSON string being written by hand, escaped as JSON does
/// (detail::append_escaped()). TF_CONFIG is written by hand because it is built for every task
/// and can hold 100k entries: a JSON DOM would cost far more than the string. Host names and
/// addresses are printable ASCII (validated), which still allows a quote or a backslash.
void append_json_escaped(std::string& out, std::string_view text) {
    for (const char c : text) {
        detail::append_escaped(out, static_cast<unsigned char>(c), detail::Escape::json);
    }
}

void append_members(std::string& out, const Plan& plan, const std::vector<std::uint32_t>& members) {
    out.push_back('[');
    bool first = true;
    for (const auto rank : members) {
        if (!first) {
            out.push_back(',');
        }
        first = false;
        out.push_back('"');
        append_json_escaped(out, host_port(plan.ranks[rank].address, plan.ranks[rank].port));
        out.push_back('"');
    }
    out.push_back(']');
}

/// `"role":["address:port",...]`, preceded by a comma unless it is the object's first member.
void append_job(std::string& out,
                bool& first,
                const Plan& plan,
                Role role,
                const std::vector<std::uint32_t>& members) {
    if (!first) {
        out.push_back(',');
    }
    first = false;
    out.push_back('"');
    out += to_string(role);
    out += "\":";
    append_members(out, plan, members);
}

/// `only` without the tf4slurm dictionary: the selected groups but `servers`.
/// Input: {tf, servers, torch, gpus}. Output: `tf,torch,gpus`.
std::string only_without_servers(const OutputSelection& selection) {
    std::vector<std::string> groups;
    for (const auto& [selected, name] : {std::pair{selection.tf_config, "tf"},
                                         std::pair{selection.torch, "torch"},
                                         std::pair{selection.gpus, "gpus"}}) {
        if (selected) {
            groups.emplace_back(name);
        }
    }
    return detail::join(groups, ",");
}

/// The way out for every variable that does not fit, at once: following a hint must not lead
/// to the next error (80,000 tasks outgrow TF_CONFIG and the tf4slurm dictionary together).
std::string too_large_hint(const std::vector<std::string>& names,
                           const OutputSelection& selection) {
    const auto has = [&names](std::string_view name) {
        return std::find(names.begin(), names.end(), name) != names.end();
    };
    const bool tf_config = has("TF_CONFIG");
    const bool servers = has("TFSLURM_SERVERS");
    const auto rest = only_without_servers(selection);
    // Another variable (a very long address), or the dictionary alone was asked for.
    if (names.size() != static_cast<std::size_t>(tf_config) + static_cast<std::size_t>(servers) ||
        (servers && rest.empty())) {
        return "use fewer tasks per job or shorter addresses (" + setting_ref("address", "ip") +
               ")";
    }
    const auto file = setting_ref("tf_config_file", "auto");
    const auto only = setting_ref("only", rest);
    if (tf_config && servers) {
        return "write TF_CONFIG to a file on the node that Python trainers load, and leave the "
               "tf4slurm dictionary out: " +
               file + " " + only;
    }
    return tf_config ? "write it to a file on the node that Python trainers load into "
                       "TF_CONFIG: " +
                           file
                     : "leave the tf4slurm dictionary out: " + only;
}

/// Every variable of `vars` that does not fit in one environment string, in one error.
void check_sizes(const EnvVars& vars, const Plan& plan, const OutputSelection& selection) {
    std::vector<std::string> names;
    std::vector<std::string> sizes;
    for (const auto& [name, value] : vars) {
        const auto size = name.size() + 1 + value.size() + 1;
        if (size > k_max_env_string) {
            names.emplace_back(name);
            sizes.push_back(std::to_string(size));
        }
    }
    if (names.empty()) {
        return;
    }
    throw errors::too_large(
        detail::join(names, ", "),
        fmt::format("{} bytes for {} tasks do not fit in one environment variable{} (Linux "
                    "allows {} bytes per NAME=value string)",
                    detail::join(sizes, " and "),
                    plan.ranks.size(),
                    names.size() > 1 ? " each" : "",
                    k_max_env_string),
        too_large_hint(names, selection));
}

std::string gpu_text(const std::vector<std::string>& gpus) {
    return gpus.empty() ? std::string{"-"} : detail::join(gpus, ",");
}

} // namespace

std::string tf_config_json(const Plan& plan, std::uint32_t rank) {
    const auto& self = plan.ranks.at(rank);
    std::string out;
    out.reserve(plan.ranks.size() * 24 + 64);
    out += R"({"cluster":{)";
    bool first = true;
    for (const auto role : k_roles) {
        // TensorFlow's convention: the evaluator is a side task outside the cluster spec.
        if (role == Role::evaluator && plan.layout == Layout::native) {
            continue;
        }
        const auto members = plan.members(role);
        if (members.empty()) {
            continue;
        }
        append_job(out, first, plan, role, members);
    }
    out += R"(},"task":{"type":")";
    out += to_string(self.role);
    out += R"(","index":)";
    out += std::to_string(self.index);
    out.push_back('}');
    if (!plan.rpc_layer.empty()) {
        out += R"(,"rpc_layer":")";
        append_json_escaped(out, plan.rpc_layer);
        out.push_back('"');
    }
    out.push_back('}');
    return out;
}

std::string server_dictionary_json(const Plan& plan) {
    std::string out;
    out.reserve(plan.ranks.size() * 24 + 32);
    out.push_back('{');
    bool first = true;
    for (const auto role : k_roles) {
        const auto members = plan.members(role);
        // tf4slurm always has both "ps" and "worker"; chief/evaluator only when used.
        if (members.empty() && (role == Role::chief || role == Role::evaluator)) {
            continue;
        }
        append_job(out, first, plan, role, members);
    }
    out.push_back('}');
    return out;
}

OutputSelection parse_output_selection(std::string_view text, std::string_view subject) {
    if (text == "all") {
        return {};
    }
    OutputSelection selection{false, false, false, false};
    for (const auto item : detail::split(text, ',')) {
        if (item == "tf") {
            selection.tf_config = true;
        } else if (item == "servers") {
            selection.servers = true;
        } else if (item == "torch") {
            selection.torch = true;
        } else if (item == "gpus") {
            selection.gpus = true;
        } else {
            throw errors::invalid_argument(
                subject, "expected all, or a comma list of tf, servers, torch, gpus", text);
        }
    }
    return selection;
}

EnvVars task_environment(const Plan& plan,
                         std::uint32_t rank,
                         const OutputSelection& selection,
                         TfConfigPlace tf_config) {
    const auto& self = plan.ranks.at(rank);
    EnvVars vars;
    if (selection.tf_config && tf_config == TfConfigPlace::environment) {
        vars.emplace_back("TF_CONFIG", tf_config_json(plan, rank));
    }
    if (selection.servers) {
        vars.emplace_back("TFSLURM_SERVERS", server_dictionary_json(plan));
        vars.emplace_back("TFSLURM_TASK_TYPE", std::string{to_string(self.role)});
        vars.emplace_back("TFSLURM_TASK_INDEX", std::to_string(self.index));
    }
    if (selection.torch) {
        const auto& master = plan.ranks.front();
        std::uint32_t local_world = 0;
        for (const auto& other : plan.ranks) {
            local_world += other.node == self.node ? 1U : 0U;
        }
        vars.emplace_back("MASTER_ADDR", master.address);
        vars.emplace_back("MASTER_PORT", std::to_string(master.port));
        vars.emplace_back("RANK", std::to_string(self.rank));
        vars.emplace_back("WORLD_SIZE", std::to_string(plan.ranks.size()));
        vars.emplace_back("LOCAL_RANK", std::to_string(self.local));
        vars.emplace_back("LOCAL_WORLD_SIZE", std::to_string(local_world));
        vars.emplace_back("NODE_RANK", std::to_string(self.node));
    }
    if (selection.gpus && !self.gpus.empty()) {
        vars.emplace_back("CUDA_VISIBLE_DEVICES", detail::join(self.gpus, ","));
    }
    vars.emplace_back("TFSLURM_RANK", std::to_string(self.rank));
    vars.emplace_back("TFSLURM_ROLE", std::string{to_string(self.role)});
    vars.emplace_back("TFSLURM_CONTROL", host_port(plan.control_address, plan.control_port));
    check_sizes(vars, plan, selection);
    return vars;
}

EnvVars socket_interface_variables(const Plan& plan, const Environment& user) {
    EnvVars vars;
    if (plan.socket_interface.empty()) {
        return vars;
    }
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "TP_SOCKET_IFNAME"}) {
        if (!user.contains(name)) {
            vars.emplace_back(name, plan.socket_interface);
        }
    }
    return vars;
}

EnvVars thread_variables(const Plan& plan,
                         std::uint32_t rank,
                         const OutputSelection& selection,
                         const Environment& user) {
    EnvVars vars;
    if (!selection.torch || user.contains("OMP_NUM_THREADS")) {
        return vars;
    }
    const auto node = plan.ranks.at(rank).node;
    const auto sharing =
        std::count_if(plan.ranks.begin(), plan.ranks.end(), [node](const RankPlan& other) {
            return other.node == node;
        });
    if (sharing < 2) {
        return vars;
    }
    std::string threads = "1";
    if (const auto cpus = user.get("SLURM_CPUS_PER_TASK")) {
        if (const auto count = detail::parse_decimal(*cpus); count && *count > 0) {
            threads = std::to_string(*count);
        }
    }
    vars.emplace_back("OMP_NUM_THREADS", std::move(threads));
    return vars;
}

EnvFormat parse_env_format(std::string_view text, std::string_view subject) {
    if (text == "export") {
        return EnvFormat::export_lines;
    }
    if (text == "env") {
        return EnvFormat::key_value;
    }
    if (text == "json") {
        return EnvFormat::json;
    }
    if (text == "task-prolog") {
        return EnvFormat::task_prolog;
    }
    throw errors::invalid_argument(subject, "expected export, env, json or task-prolog", text);
}

std::string shell_quote(std::string_view value) {
    std::string out;
    out.reserve(value.size() + 2);
    out.push_back('\'');
    for (const char c : value) {
        if (c == '\'') {
            out += R"('\'')";
        } else {
            out.push_back(c);
        }
    }
    out.push_back('\'');
    return out;
}

std::string render_env(const EnvVars& vars, EnvFormat format) {
    std::string out;
    switch (format) {
    case EnvFormat::export_lines:
        for (const auto& [name, value] : vars) {
            out += fmt::format("export {}={}\n", name, shell_quote(value));
        }
        break;
    case EnvFormat::key_value:
        for (const auto& [name, value] : vars) {
            out += fmt::format("{}={}\n", name, value);
        }
        break;
    case EnvFormat::task_prolog:
        // slurmstepd splits the prolog's stdout at newlines and sets NAME to the rest of an
        // `export NAME=value` line as it is: no quoting exists, so a newline cannot be written.
        for (const auto& [name, value] : vars) {
            if (value.find('\n') != std::string::npos) {
                throw errors::invalid_argument(
                    name,
                    "a newline in the value cannot be written for Slurm's TaskProlog (it reads "
                    "one 'export NAME=value' line per variable, verbatim)",
                    value,
                    "remove the newline from the setting it comes from, or evaluate " +
                        setting_ref("format", "export") + " in the task itself");
            }
            out += fmt::format("export {}={}\n", name, value);
        }
        break;
    case EnvFormat::json: {
        OrderedJson object = OrderedJson::object();
        for (const auto& [name, value] : vars) {
            object[name] = value;
        }
        try {
            out = object.dump(2) + "\n";
        } catch (const nlohmann::json::type_error&) {
            // Only text that is not UTF-8 fails to dump (type_error 316): name the variable.
            for (const auto& [name, value] : vars) {
                try {
                    static_cast<void>(OrderedJson(value).dump());
                } catch (const nlohmann::json::type_error&) {
                    throw errors::invalid_argument(name, "not valid UTF-8, cannot be JSON", value);
                }
            }
            throw;
        }
        break;
    }
    }
    return out;
}

std::string plan_table(const Plan& plan) {
    std::vector<std::array<std::string, 6>> rows;
    rows.reserve(plan.ranks.size() + 1);
    rows.push_back({"RANK", "ROLE", "HOST", "ADDRESS", "PORT", "GPUS"});
    for (const auto& rank : plan.ranks) {
        rows.push_back({std::to_string(rank.rank),
                        fmt::format("{}:{}", to_string(rank.role), rank.index),
                        rank.host,
                        rank.address,
                        std::to_string(rank.port),
                        gpu_text(rank.gpus)});
    }
    std::array<std::size_t, 6> width{};
    for (const auto& row : rows) {
        for (std::size_t i = 0; i < row.size(); ++i) {
            width[i] = std::max(width[i], row[i].size());
        }
    }
    std::string out;
    out += fmt::format("# job {}, step {}: {} tasks on {} nodes ({}), {} layout\n",
                       plan.job_id ? std::to_string(*plan.job_id) : "-",
                       plan.step_id ? std::to_string(*plan.step_id) : "-",
                       plan.ranks.size(),
                       plan.hosts.size(),
                       compress_hostlist(plan.hosts),
                       to_string(plan.layout));
    out += fmt::format("# ports: {}; launcher control endpoint {}:{}{}\n",
                       to_string(plan.port_source),
                       plan.control_address,
                       plan.control_port,
                       plan.control_port_note.empty() ? "" : " (" + plan.control_port_note + ")");
    if (!plan.gpus_exact) {
        out += "# GPUs of other nodes are assumed to match this node's\n";
    }
    for (const auto& row : rows) {
        std::string line;
        for (std::size_t i = 0; i < row.size(); ++i) {
            if (i + 1 == row.size()) {
                line += row[i];
            } else {
                line += row[i];
                line.append(width[i] - row[i].size() + 2, ' ');
            }
        }
        out += line;
        out.push_back('\n');
    }
    return out;
}

std::string plan_json(const Plan& plan) {
    // The header through nlohmann (small); the ranks array streamed by hand: a JSON DOM of
    // 80,000 objects costs half a second, the string a few milliseconds.
    OrderedJson root = OrderedJson::object();
    root["job_id"] = plan.job_id ? OrderedJson(*plan.job_id) : OrderedJson(nullptr);
    root["step_id"] = plan.step_id ? OrderedJson(*plan.step_id) : OrderedJson(nullptr);
    root["layout"] = to_string(plan.layout);
    root["hosts"] = plan.hosts;
    root["port_source"] = to_string(plan.port_source);
    root["control"] = {{"address", plan.control_address},
                       {"port", plan.control_port},
                       {"port_source", to_string(plan.control_port_source)}};
    root["rpc_layer"] = plan.rpc_layer.empty() ? OrderedJson(nullptr) : OrderedJson(plan.rpc_layer);
    root["self_rank"] = plan.self_rank ? OrderedJson(*plan.self_rank) : OrderedJson(nullptr);
    root["gpus_exact"] = plan.gpus_exact;
    OrderedJson cluster = OrderedJson::object();
    for (const auto role : k_roles) {
        const auto members = plan.members(role);
        if (members.empty()) {
            continue;
        }
        auto& list = cluster[std::string{to_string(role)}] = OrderedJson::array();
        for (const auto rank : members) {
            list.push_back(plan.endpoint(rank));
        }
    }
    root["cluster"] = std::move(cluster);
    root["ranks"] = OrderedJson::array();
    auto out = root.dump(2);
    // dump() ends with `"ranks": []\n}`: replace the empty array with the streamed one.
    const auto empty = out.rfind("[]");
    std::string ranks = "[";
    ranks.reserve(plan.ranks.size() * 160 + 16);
    const auto quoted = [&ranks](std::string_view text) {
        ranks.push_back('"');
        append_json_escaped(ranks, text);
        ranks.push_back('"');
    };
    for (std::size_t i = 0; i < plan.ranks.size(); ++i) {
        const auto& rank = plan.ranks[i];
        ranks += i == 0 ? "\n    {\n" : ",\n    {\n";
        ranks += fmt::format("      \"rank\": {},\n      \"role\": \"{}\",\n      \"index\": {},\n"
                             "      \"host\": ",
                             rank.rank,
                             to_string(rank.role),
                             rank.index);
        quoted(rank.host);
        ranks += fmt::format(",\n      \"node\": {},\n      \"local\": {},\n      \"address\": ",
                             rank.node,
                             rank.local);
        quoted(rank.address);
        ranks += fmt::format(",\n      \"port\": {},\n      \"gpus\": [", rank.port);
        for (std::size_t g = 0; g < rank.gpus.size(); ++g) {
            ranks += g == 0 ? "" : ", ";
            quoted(rank.gpus[g]);
        }
        ranks += "]\n    }";
    }
    ranks += plan.ranks.empty() ? "]" : "\n  ]";
    out.replace(empty, 2, ranks);
    out.push_back('\n');
    return out;
}

} // namespace tfslurm
