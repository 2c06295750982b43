// SPDX-License-Identifier: MIT
#include "settings/detail/plan_settings.hpp"

#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/exchange.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/resolve/tf_config_file.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

namespace tfslurm {

bool detail::parse_bool(std::string_view value, std::string_view key) {
    if (value.empty() || value == "1" || value == "yes" || value == "true" || value == "on") {
        return true;
    }
    if (value == "0" || value == "no" || value == "false" || value == "off") {
        return false;
    }
    throw errors::invalid_setting(key, "expected yes/no, true/false, on/off or 1/0", value);
}

namespace {

/// An output format as parse_env_format() reads it.
std::string env_format_text(EnvFormat format) {
    switch (format) {
    case EnvFormat::export_lines:
        return "export";
    case EnvFormat::key_value:
        return "env";
    case EnvFormat::json:
        return "json";
    case EnvFormat::task_prolog:
        return "task-prolog";
    }
    return "export";
}

/// An output selection as parse_output_selection() reads it: `all`, or `tf,torch`.
std::string output_selection_text(const OutputSelection& selection) {
    if (selection.tf_config && selection.servers && selection.torch && selection.gpus) {
        return "all";
    }
    std::string out;
    for (const auto& [on, name] : {std::pair{selection.tf_config, "tf"},
                                   std::pair{selection.servers, "servers"},
                                   std::pair{selection.torch, "torch"},
                                   std::pair{selection.gpus, "gpus"}}) {
        if (on) {
            out += (out.empty() ? "" : ",") + std::string{name};
        }
    }
    return out;
}

/// Values that end up inside TF_CONFIG and host names are printable ASCII, like the host names
/// of a nodelist: a control character or a byte that is not ASCII would reach JSON raw.
void check_printable(std::string_view value, std::string_view key) {
    for (std::size_t i = 0; i < value.size(); ++i) {
        const auto byte = static_cast<unsigned char>(value[i]);
        if (byte < 0x20 || byte >= 0x7f) {
            throw errors::invalid_setting(
                key,
                fmt::format("expected printable ASCII: byte 0x{:02x} at offset {}",
                            static_cast<unsigned>(byte),
                            i),
                value);
        }
    }
}

void validate_pattern(std::string_view pattern, std::string_view key) {
    check_printable(pattern, key);
    std::size_t pos = 0;
    while ((pos = pattern.find_first_of("{}", pos)) != std::string_view::npos) {
        if (pattern.compare(pos, 6, "{host}") != 0) {
            throw errors::invalid_setting(
                key,
                fmt::format("unknown placeholder at offset {} (only {{host}} is known)", pos),
                pattern);
        }
        pos += 6;
    }
}

/// One of `names`, as its enumerator in `values`.
template <typename T, std::size_t N>
T parse_choice(std::string_view value,
               std::string_view key,
               const std::array<std::pair<std::string_view, T>, N>& choices,
               std::string_view expected) {
    for (const auto& [name, choice] : choices) {
        if (value == name) {
            return choice;
        }
    }
    throw errors::invalid_setting(key, expected, value);
}

using Values = SettingValues;
using G = SettingGroup;
using K = SettingKind;

// The registry. Adding a setting is one row here (or, for `tfslurm run`, in
// run_setting_rows.cpp); a setting with a parser also gets its case in the lambda of its row.
// Preview fields have no parser: preview_step() parses them, and names them through
// setting_ref() all the same. Built once, on first use: run_setting_rows() lives in another file.
std::vector<SettingSpec> build_registry() {
    std::vector<SettingSpec> rows{
        {"nodelist",
         "",
         "--nodelist",
         "HOSTLIST",
         "",
         K::value,
         G::preview,
         "Hosts of the step, as a Slurm hostlist (n[1-3])",
         nullptr},
        {"tasks_per_node",
         "",
         "--tasks-per-node",
         "COUNTS",
         "",
         K::value,
         G::preview,
         "Tasks per node: one count for every node, or per node like 2(x3),1",
         nullptr},
        {"ntasks",
         "",
         "--ntasks",
         "N",
         "",
         K::value,
         G::preview,
         "Total tasks, spread like srun -n (the first nodes get one more)",
         nullptr},
        {"distribution",
         "",
         "--distribution",
         "DIST",
         "",
         K::value,
         G::preview,
         "block, cyclic, plane=N or arbitrary (with --hostfile)",
         nullptr,
         {},
         "block cyclic arbitrary",
         [](const SettingValues& /*v*/) -> std::string {
             return std::string{to_string(DistributionSpec{}.kind)};
         }},
        {"hostfile",
         "",
         "--hostfile",
         "FILE",
         "",
         K::value,
         G::preview,
         "Rank i on the i-th host of FILE, like srun -m arbitrary with SLURM_HOSTFILE; without "
         "--tasks-per-node the counts come from FILE",
         nullptr},
        {"job_id",
         "",
         "--job-id",
         "ID",
         "",
         K::value,
         G::preview,
         "Job id (derives the ports)",
         nullptr},
        {"step_id",
         "",
         "--step-id",
         "ID",
         "",
         K::value,
         G::preview,
         "Step id (derives the ports)",
         nullptr},
        {"rank",
         "",
         "--rank",
         "N",
         "",
         K::value,
         G::preview,
         "The task to describe (for env)",
         nullptr},
        {"resv_ports",
         "",
         "--resv-ports",
         "PORTS",
         "",
         K::value,
         G::preview,
         "Reserved ports, like SLURM_STEP_RESV_PORTS",
         nullptr},
        {"gpus",
         "",
         "--gpus",
         "LIST",
         "",
         K::value,
         G::preview,
         "Visible GPUs, like CUDA_VISIBLE_DEVICES",
         nullptr},

        {"ps",
         "TFSLURM_PS",
         "--ps",
         "N",
         "ps",
         K::value,
         G::roles,
         "Number of parameter servers",
         [](Values& v, std::string_view s) {
             v.plan.counts.ps =
                 detail::parse_number<std::uint32_t>(s, "ps", 0, k_max_expanded_hosts);
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return std::to_string(v.plan.counts.ps); }},
        {"chief",
         "TFSLURM_CHIEF",
         "--chief",
         "",
         "chief",
         K::flag,
         G::roles,
         "One task is the chief",
         [](Values& v, std::string_view s) {
             v.plan.counts.chief = detail::parse_bool(s, "chief");
         }},
        {"evaluator",
         "TFSLURM_EVALUATOR",
         "--evaluator",
         "",
         "evaluator",
         K::flag,
         G::roles,
         "One task is the evaluator",
         [](Values& v, std::string_view s) {
             v.plan.counts.evaluator = detail::parse_bool(s, "evaluator");
         }},
        {"roles",
         "TFSLURM_ROLES",
         "--roles",
         "LIST",
         "roles",
         K::list,
         G::roles,
         "Explicit role of every rank, e.g. ps,worker*3 (instead of counts)",
         [](Values& v, std::string_view s) {
             v.plan.role_list =
                 s.empty() ? std::vector<Role>{} : parse_role_list(s, setting_ref("roles"));
         }},
        {"roles_by_component",
         "TFSLURM_ROLES_BY_COMPONENT",
         "--roles-by-component",
         "LIST",
         "roles_by_component",
         K::list,
         G::roles,
         "Role of every component of a heterogeneous step (srun A : B), e.g. ps,worker",
         [](Values& v, std::string_view s) {
             v.plan.component_roles = s.empty()
                                          ? std::vector<Role>{}
                                          : parse_role_list(s, setting_ref("roles_by_component"));
         }},
        {"ps_placement",
         "TFSLURM_PS_PLACEMENT",
         "--ps-placement",
         "WHERE",
         "ps_placement",
         K::value,
         G::roles,
         "first: ranks 0..N-1; spread: one ps per node",
         [](Values& v, std::string_view s) {
             v.plan.ps_placement = parse_choice<PsPlacement, 2>(
                 s,
                 "ps_placement",
                 {{{"first", PsPlacement::first}, {"spread", PsPlacement::spread}}},
                 "expected first or spread");
         },
         {},
         "first spread",
         [](const SettingValues& v) -> std::string {
             return std::string{to_string(v.plan.ps_placement)};
         }},
        {"layout",
         "TFSLURM_LAYOUT",
         "--layout",
         "LAYOUT",
         "layout",
         K::value,
         G::network,
         "native or tf-compat (TensorFlow's SlurmClusterResolver spec)",
         [](Values& v, std::string_view s) {
             v.plan.layout = parse_choice<Layout, 3>(s,
                                                     "layout",
                                                     {{{"native", Layout::native},
                                                       {"tf-compat", Layout::tf_compat},
                                                       {"tf_compat", Layout::tf_compat}}},
                                                     "expected native or tf-compat");
         },
         {},
         "native tf-compat",
         [](const SettingValues& v) -> std::string {
             return std::string{to_string(v.plan.layout)};
         }},
        {"port_base",
         "TFSLURM_PORT_BASE",
         "--port-base",
         "PORT",
         "port_base",
         K::value,
         G::network,
         "First port",
         [](Values& v, std::string_view s) {
             v.plan.port_base = detail::parse_number<std::uint16_t>(s, "port_base", 1, 65535);
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return v.plan.port_base ? std::to_string(*v.plan.port_base)
                                     : "SLURM_STEP_RESV_PORTS, else derived from job and step";
         }},
        {"address",
         "TFSLURM_ADDRESS",
         "--address",
         "name|ip",
         "address",
         K::value,
         G::network,
         "name or ip: what peers connect to",
         [](Values& v, std::string_view s) {
             v.plan.address = parse_choice<AddressMode, 2>(
                 s,
                 "address",
                 {{{"name", AddressMode::name}, {"ip", AddressMode::ip}}},
                 "expected name or ip");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return std::string{to_string(v.plan.address)};
         }},
        {"host_pattern",
         "TFSLURM_HOST_PATTERN",
         "--host-pattern",
         "PATTERN",
         "host_pattern",
         K::value,
         G::network,
         "Network name of a node, e.g. {host}-ib0",
         [](Values& v, std::string_view s) {
             validate_pattern(s, "host_pattern");
             v.plan.host_pattern = std::string{s};
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return v.plan.host_pattern.empty() ? "{host}" : v.plan.host_pattern;
         }},
        {"iface",
         "TFSLURM_IFACE",
         "--iface",
         "NAME[,NAME...]",
         "",
         K::list,
         G::network,
         "Reach each node at the address of its own interface NAME (e.g. ib0; the first listed "
         "that "
         "the node has), read on the node, instead of its name; also sets GLOO_SOCKET_IFNAME, "
         "NCCL_SOCKET_IFNAME and TP_SOCKET_IFNAME",
         [](Values& v, std::string_view s) {
             check_printable(s, "iface");
             v.plan.address_selection.interfaces.clear();
             for (const auto name : detail::split(s, ',')) {
                 if (name.empty() || name.size() >= 16 || name.find_first_of(" /:") != name.npos) {
                     throw errors::invalid_setting(
                         "iface", "expected interface names such as ib0 (a comma list)", s);
                 }
                 v.plan.address_selection.interfaces.emplace_back(name);
             }
         }},
        {"network",
         "TFSLURM_NETWORK",
         "--network",
         "CIDR",
         "",
         K::value,
         G::network,
         "Reach each node at its own address inside CIDR (e.g. 10.1.0.0/16 or fd00::/64), read on "
         "the node; with --iface, only addresses of those interfaces inside CIDR",
         [](Values& v, std::string_view s) {
             check_printable(s, "network");
             v.plan.address_selection.network = parse_network(s, setting_ref("network"));
         }},
        {"exchange",
         "TFSLURM_EXCHANGE",
         "--exchange",
         "auto|env|pmi2|coordinator",
         "exchange",
         K::value,
         G::network,
         "How the tasks learn the addresses the other nodes chose with --iface/--network: pmi2 "
         "(tfslurm env under srun --mpi=pmi2), coordinator (tfslurm run), env (none: only this "
         "node's) or auto (coordinator under run, pmi2 under env when srun started a PMI2 "
         "server, else env)",
         [](Values& v, std::string_view s) { v.plan.exchange = parse_exchange(s); },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return std::string{to_string(v.plan.exchange)};
         }},
        {"gpus_per_task",
         "TFSLURM_GPUS_PER_TASK",
         "--gpus-per-task",
         "N",
         "gpus_per_task",
         K::value,
         G::network,
         "GPUs per task",
         [](Values& v, std::string_view s) {
             v.plan.gpus_per_task =
                 detail::parse_number<std::uint32_t>(s, "gpus_per_task", 0, 1U << 16);
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return v.plan.gpus_per_task ? std::to_string(*v.plan.gpus_per_task)
                                         : "split the visible GPUs among the node's tasks";
         }},
        {"gpu_bind",
         "TFSLURM_GPU_BIND",
         "--gpu-bind",
         "auto|task|node",
         "gpu_bind",
         K::value,
         G::network,
         "What CUDA_VISIBLE_DEVICES lists: task (the task's own GPUs, cuda:0 inside it), node (the "
         "node's GPUs, pick cuda:LOCAL_RANK) or auto (node, task when GPUs per task are "
         "given)",
         [](Values& v, std::string_view s) {
             v.plan.gpu_bind = parse_choice<GpuBind, 3>(
                 s,
                 "gpu_bind",
                 {{{"auto", GpuBind::automatic}, {"task", GpuBind::task}, {"node", GpuBind::node}}},
                 "expected auto, task or node");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return std::string{to_string(v.plan.gpu_bind)};
         }},
        {"gpus_per_node",
         "TFSLURM_GPUS_PER_NODE",
         "--gpus-per-node",
         "N",
         "gpus_per_node",
         K::value,
         G::network,
         "tf-compat only: TensorFlow's gpus_per_node",
         [](Values& v, std::string_view s) {
             v.plan.tf_gpus_per_node =
                 detail::parse_number<std::uint32_t>(s, "gpus_per_node", 0, 1U << 16);
         }},
        {"rpc_layer",
         "TFSLURM_RPC_LAYER",
         "--rpc-layer",
         "PROTOCOL",
         "rpc_layer",
         K::value,
         G::network,
         "Add \"rpc_layer\" to TF_CONFIG, e.g. grpc",
         [](Values& v, std::string_view s) {
             check_printable(s, "rpc_layer");
             if (s.find_first_of("\"\\") != std::string_view::npos) {
                 throw errors::invalid_setting(
                     "rpc_layer", "expected a protocol name such as grpc", s);
             }
             v.plan.rpc_layer = std::string{s};
         }},

        {"format",
         "TFSLURM_FORMAT",
         "--format",
         "FORMAT",
         "",
         K::value,
         G::output,
         "export ('export NAME=...' lines safe to eval), env (NAME=value lines), json, or "
         "task-prolog (unquoted export lines for srun --task-prolog and TaskProlog)",
         [](Values& v, std::string_view s) {
             v.format = parse_env_format(s, setting_ref("format"));
         },
         "-f",
         "export env json task-prolog",
         [](const SettingValues& v) -> std::string { return env_format_text(v.format); }},
        {"only",
         "TFSLURM_ONLY",
         "--only",
         "LIST",
         "only",
         K::list,
         G::output,
         "all or a comma list of tf, servers, torch, gpus",
         [](Values& v, std::string_view s) {
             v.outputs = parse_output_selection(s, setting_ref("only"));
         },
         {},
         "all tf servers torch gpus",
         [](const SettingValues& v) -> std::string { return output_selection_text(v.outputs); }},
        // The SPANK plugin's only: no CLI option (`tfslurm run` is the CLI's way).
        {"run",
         "TFSLURM_RUN",
         "",
         "",
         "run",
         K::flag,
         G::output,
         "Start every task under 'tfslurm run' (the SPANK plugin, Slurm 23.11 and later)",
         [](Values& v, std::string_view s) { v.plugin_run = detail::parse_bool(s, "run"); }},

        {"tf_config_file",
         "TFSLURM_TF_CONFIG_FILE",
         "--tf-config-file",
         "PATH",
         "",
         K::value,
         G::output,
         "Write TF_CONFIG to this file on the node instead of the environment (for steps whose "
         "TF_CONFIG exceeds 128 KiB) and set TFSLURM_TF_CONFIG_FILE, with a sitecustomize first on "
         "PYTHONPATH that loads it into TF_CONFIG. auto: tfslurm-JOB.STEP.RANK.tf_config.json in "
         "TMPDIR (else /tmp); a path may use {tmpdir}, {job}, {step}, {rank}",
         [](Values& v, std::string_view s) {
             validate_tf_config_template(s);
             v.tf_config_file = std::string{s};
         }},

    };
    auto run_rows = detail::run_setting_rows();
    rows.insert(rows.end(), run_rows.begin(), run_rows.end());
    return rows;
}

const std::vector<SettingSpec>& registry() {
    static const std::vector<SettingSpec> k_registry = build_registry();
    return k_registry;
}

bool in_face(const SettingSpec& spec, Face face) {
    return face == Face::plugin ? !spec.plugin_key.empty() : !spec.option.empty();
}

bool is_plan_setting(const SettingSpec& spec) {
    return spec.group == G::roles || spec.group == G::network;
}

/// Whether apply_setting() takes `spec` alone: the settings of `tfslurm run` are applied only
/// together, by resolve_settings(), which then checks the rules between them.
bool applies_alone(const SettingSpec& spec) {
    return spec.apply != nullptr && spec.group != G::launcher;
}

template <typename Predicate> std::string keys_where(Predicate wanted) {
    std::string out;
    for (const auto& spec : registry()) {
        if (applies_alone(spec) && wanted(spec)) {
            out += out.empty() ? "" : ", ";
            out += spec.key;
        }
    }
    return out;
}

Error unknown_setting(std::string_view key, const std::string& known) {
    return errors::invalid_argument(
        "setting", fmt::format("unknown setting (known: {})", known), key);
}

} // namespace

const std::vector<SettingSpec>& setting_registry() {
    return registry();
}

std::string setting_help(const SettingSpec& spec) {
    std::string help{spec.help};
    if (spec.shown_default != nullptr) {
        // A value as typed (`10`, `USR1`), or what happens without one (`never`, or a phrase).
        const std::string shown = spec.shown_default(SettingValues{});
        help += fmt::format(
            shown.find(' ') == std::string::npos ? " (default {})" : " (default: {})", shown);
    }
    return help;
}

const SettingSpec* find_setting(std::string_view key) {
    const auto& rows = registry();
    const auto found =
        std::find_if(rows.begin(), rows.end(), [key](const auto& spec) { return spec.key == key; });
    return found == rows.end() ? nullptr : &*found;
}

std::string known_setting_keys(Face face) {
    return keys_where([face](const SettingSpec& spec) { return in_face(spec, face); });
}

void apply_setting(SettingValues& values, std::string_view key, std::string_view value) {
    const auto* spec = find_setting(key);
    if (spec == nullptr || !applies_alone(*spec)) {
        throw unknown_setting(key, keys_where([](const SettingSpec&) { return true; }));
    }
    spec->apply(values, value);
}

void apply_plan_setting(PlanOptions& options, std::string_view key, std::string_view value) {
    const auto* spec = find_setting(key);
    if (spec == nullptr || !applies_alone(*spec) || !is_plan_setting(*spec)) {
        throw unknown_setting(key, keys_where(is_plan_setting));
    }
    SettingValues values;
    values.plan = std::move(options);
    spec->apply(values, value);
    options = std::move(values.plan);
}

std::map<std::string, SettingValue, std::less<>>
winning_settings(const std::vector<SettingValue>& given) {
    std::map<std::string, SettingValue, std::less<>> winners;
    for (const auto& value : given) {
        auto [it, inserted] = winners.try_emplace(value.key, value);
        if (!inserted && value.origin >= it->second.origin) {
            it->second = value;
        }
    }
    return winners;
}

ResolvedSettings resolve_settings(const std::vector<SettingValue>& given) {
    ResolvedSettings resolved;
    const auto winners = winning_settings(given);
    // Registry order, so that a result never depends on the order of the layers' contents.
    for (const auto& spec : registry()) {
        const auto found = winners.find(spec.key);
        if (found == winners.end()) {
            continue;
        }
        if (spec.apply != nullptr) {
            spec.apply(resolved.values, found->second.value);
        }
        resolved.origins.emplace(found->first, found->second.origin);
    }
    const auto heartbeat_timeout = winners.find("heartbeat_timeout");
    check_run_settings(resolved.values.run,
                       heartbeat_timeout == winners.end() ? std::string_view{}
                                                          : heartbeat_timeout->second.value);
    for (const auto& [key, value] : winners) {
        if (find_setting(key) == nullptr) {
            apply_setting(resolved.values, key, value.value); // throws: unknown setting
        }
    }
    // torch code calls set_device(LOCAL_RANK): with a per-task CUDA_VISIBLE_DEVICES every
    // LOCAL_RANK but 0 is an invalid ordinal. A given gpus_per_task asks for the split. The
    // rule never looks at `only`: users evaluate the groups separately (`--only torch`, then
    // `--only gpus`), and a group's values must not depend on which others are printed.
    auto& plan = resolved.values.plan;
    if (plan.gpu_bind == GpuBind::automatic) {
        plan.gpu_bind = plan.gpus_per_task ? GpuBind::task : GpuBind::node;
    }
    return resolved;
}

const std::vector<std::string_view>& other_variables() {
    static const std::vector<std::string_view> k_other{
        // Read: authentication, libraries, logging.
        "TFSLURM_SECRET",
        "TFSLURM_MUNGE_SOCKET",
        "TFSLURM_LIBSLURM",
        "TFSLURM_LOG_LEVEL",
        // Set for a trainer (tf_config.hpp, tf_config_file.hpp, launcher.hpp, local_run.hpp).
        "TFSLURM_SERVERS",
        "TFSLURM_TASK_TYPE",
        "TFSLURM_TASK_INDEX",
        "TFSLURM_RANK",
        "TFSLURM_ROLE",
        "TFSLURM_CONTROL",
        "TFSLURM_RESTART_COUNT",
        "TFSLURM_RUN_ID",
        "TFSLURM_PROGRESS_FILE",
        "TFSLURM_LOCAL_STATUS_FD",
    };
    return k_other;
}

namespace {

/// Levenshtein distance, for suggestions between short names.
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) {
        row[j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t above = row[j];
            row[j] =
                std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = above;
        }
    }
    return row[b.size()];
}

} // namespace

std::vector<UnknownVariable> unknown_variables(const Environment& env) {
    constexpr std::string_view k_prefix = "TFSLURM_";
    std::vector<std::string_view> known;
    for (const auto& spec : registry()) {
        if (!spec.variable.empty()) {
            known.push_back(spec.variable);
        }
    }
    const auto& other = other_variables();
    known.insert(known.end(), other.begin(), other.end());
    std::vector<UnknownVariable> unknown;
    for (const auto& [name, value] : env.vars()) {
        if (name.rfind(k_prefix, 0) != 0 ||
            std::find(known.begin(), known.end(), name) != known.end()) {
            continue;
        }
        const std::string_view suffix = std::string_view{name}.substr(k_prefix.size());
        UnknownVariable found{name, {}};
        std::size_t best = std::max<std::size_t>(1, suffix.size() / 3) + 1;
        for (const auto candidate : known) {
            const auto distance = edit_distance(suffix, candidate.substr(k_prefix.size()));
            if (distance < best) {
                best = distance;
                found.closest = std::string{candidate};
            }
        }
        unknown.push_back(std::move(found));
    }
    return unknown;
}

std::string unknown_variable_warning(const UnknownVariable& unknown) {
    // A name from the environment: quoted unless it is a plain identifier.
    const bool plain = std::all_of(unknown.name.begin(), unknown.name.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
               c == '_';
    });
    return fmt::format(
        "{}: not a tfslurm variable, ignored{}",
        plain ? unknown.name : quote(unknown.name),
        unknown.closest.empty() ? "" : fmt::format(" (did you mean {}?)", unknown.closest));
}

std::vector<SettingValue> environment_settings(const Environment& env, Face face) {
    std::vector<SettingValue> found;
    for (const auto& spec : registry()) {
        if (spec.variable.empty() || !in_face(spec, face)) {
            continue;
        }
        if (const auto value = env.get(spec.variable); value && !value->empty()) {
            found.push_back({std::string{spec.key}, std::string{*value}, Origin::environment});
        }
    }
    return found;
}

} // namespace tfslurm
