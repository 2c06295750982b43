// SPDX-License-Identifier: MIT
// Part of spank_tfslurm.so; see plugins/spank/LICENSE-NOTE.md for the licence of the built plugin.
#include "options.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/placement.hpp>
#include <tfslurm/step.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <exception>
#include <utility>

namespace tfslurm::spank {
namespace {

/// The apply_plan_setting() keys, in the CLI's order, plus `only`.
constexpr std::array<std::string_view, 13> k_keys{
    "ps",
    "chief",
    "evaluator",
    "roles",
    "ps_placement",
    "layout",
    "port_base",
    "address",
    "host_pattern",
    "gpus_per_task",
    "gpus_per_node",
    "rpc_layer",
    "only",
};

constexpr std::string_view k_known_keys =
    "ps, chief, evaluator, roles, ps_placement, layout, port_base, address, host_pattern, "
    "gpus_per_task, gpus_per_node, rpc_layer, only";

constexpr std::string_view k_man_hint = "see spank_tfslurm(8)";

bool is_known_key(std::string_view key) {
    return std::find(k_keys.begin(), k_keys.end(), key) != k_keys.end();
}

/// Keys whose value is a list: the only ones where `+` (and `:` in the option) stand for `,`.
bool is_list_key(std::string_view key) {
    return key == "roles" || key == "only";
}

/// Keys that may be given bare (`chief` = `chief=1`).
bool is_flag_key(std::string_view key) {
    return key == "chief" || key == "evaluator";
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    while (true) {
        const auto end = text.find(separator, start);
        parts.push_back(text.substr(start, end == std::string_view::npos ? end : end - start));
        if (end == std::string_view::npos) {
            return parts;
        }
        start = end + 1;
    }
}

std::string with_commas(std::string_view value, const char* separators) {
    std::string out{value};
    std::replace_if(
        out.begin(),
        out.end(),
        [separators](char c) {
            return std::string_view{separators}.find(c) != std::string_view::npos;
        },
        ',');
    return out;
}

std::string subject_for(std::string_view subject, const std::string& key) {
    std::string out{subject};
    out += ' ';
    out += key;
    return out;
}

std::string env_name(std::string_view key) {
    std::string name = "TFSLURM_";
    for (const char c : key) {
        name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(c))));
    }
    return name;
}

/// Throw now, with the right subject, what would otherwise only fail inside the task. List
/// values are checked item by item first so that a message quotes what the user typed (`+`
/// and all) rather than the whole translated list.
void validate(const Setting& setting, std::string_view raw_value, std::string_view list_seps) {
    if (is_list_key(setting.key) && !list_seps.empty()) {
        for (const auto item : split(raw_value, list_seps.front())) {
            for (const auto piece : split(item, list_seps.back())) {
                if (piece.empty()) {
                    continue; // reported below with the whole value
                }
                if (setting.key == "only") {
                    static_cast<void>(parse_output_selection(piece, setting.subject));
                } else {
                    PlanOptions scratch;
                    apply_plan_setting(scratch, setting.key, piece, setting.subject);
                }
            }
        }
    }
    if (setting.key == "only") {
        static_cast<void>(parse_output_selection(setting.value, setting.subject));
    } else {
        PlanOptions scratch;
        apply_plan_setting(scratch, setting.key, setting.value, setting.subject);
    }
}

void reject_repeated(const std::vector<Setting>& settings,
                     std::string_view key,
                     std::string_view subject) {
    const auto same = [key](const Setting& s) { return s.key == key; };
    if (std::any_of(settings.begin(), settings.end(), same)) {
        throw errors::invalid_argument(
            subject, "setting given twice", key, "give each setting once");
    }
}

} // namespace

SiteConfig parse_plugstack_args(const std::vector<std::string>& args) {
    SiteConfig site;
    bool activation_seen = false;
    for (const auto& word : args) {
        const auto eq = word.find('=');
        if (eq == std::string::npos || eq == 0) {
            throw errors::invalid_argument(k_plugstack_subject,
                                           "expected key=value",
                                           word,
                                           "arguments after the plugin path are key=value words; " +
                                               std::string{k_man_hint});
        }
        const std::string key = word.substr(0, eq);
        const std::string_view value = std::string_view{word}.substr(eq + 1);
        if (key == "enabled") {
            if (activation_seen) {
                throw errors::invalid_argument(
                    k_plugstack_subject, "setting given twice", key, "give each setting once");
            }
            activation_seen = true;
            if (value == "option") {
                site.activation = Activation::option;
            } else if (value == "always") {
                site.activation = Activation::always;
            } else {
                throw errors::invalid_argument(
                    subject_for(k_plugstack_subject, key), "expected option or always", value);
            }
            continue;
        }
        if (!is_known_key(key)) {
            throw errors::invalid_argument(k_plugstack_subject,
                                           "unknown setting (known: " + std::string{k_known_keys} +
                                               ", enabled)",
                                           key,
                                           std::string{k_man_hint});
        }
        reject_repeated(site.settings, key, k_plugstack_subject);
        Setting setting{key,
                        is_list_key(key) ? with_commas(value, "+") : std::string{value},
                        subject_for(k_plugstack_subject, key)};
        validate(setting, value, is_list_key(key) ? ",+" : "");
        site.settings.push_back(std::move(setting));
    }
    return site;
}

OptionSpec parse_option_spec(std::string_view spec) {
    OptionSpec option;
    if (spec.empty()) {
        return option;
    }
    if (spec == "off") {
        option.off = true;
        return option;
    }
    std::size_t offset = 0;
    for (const auto item : split(spec, ',')) {
        if (item.empty()) {
            throw errors::invalid_argument(
                k_option_subject,
                "empty setting at offset " + std::to_string(offset),
                spec,
                "separate settings with one comma; inside roles= and only= use + between items");
        }
        offset += item.size() + 1;
        const auto eq = item.find('=');
        std::string key{item.substr(0, eq)};
        std::replace(key.begin(), key.end(), '-', '_');
        if (key == "off") {
            throw errors::invalid_argument(
                k_option_subject, "off cannot be combined with settings", spec);
        }
        if (!is_known_key(key)) {
            throw errors::invalid_argument(
                k_option_subject,
                "unknown setting (known: " + std::string{k_known_keys} + ")",
                item.substr(0, eq),
                "write --tfslurm=key=value,...; " + std::string{k_man_hint});
        }
        reject_repeated(option.settings, key, k_option_subject);
        std::string_view raw_value;
        if (eq == std::string_view::npos) {
            if (!is_flag_key(key)) {
                throw errors::invalid_argument(k_option_subject,
                                               "setting needs a value (write " + key + "=...)",
                                               item,
                                               std::string{k_man_hint});
            }
            raw_value = "1";
        } else {
            raw_value = item.substr(eq + 1);
        }
        Setting setting{key,
                        is_list_key(key) ? with_commas(raw_value, "+:") : std::string{raw_value},
                        subject_for(k_option_subject, key)};
        validate(setting, raw_value, is_list_key(key) ? "+:" : "");
        option.settings.push_back(std::move(setting));
    }
    return option;
}

std::vector<Setting> environment_settings(const Environment& env) {
    std::vector<Setting> settings;
    for (const auto key : k_keys) {
        auto name = env_name(key);
        const auto value = env.get(name);
        if (!value || value->empty()) {
            continue; // like the CLI: an empty variable is not a setting
        }
        Setting setting{std::string{key}, std::string{*value}, std::move(name)};
        validate(setting, setting.value, "");
        settings.push_back(std::move(setting));
    }
    return settings;
}

TaskSettings resolve_settings(const SiteConfig& site,
                              const std::vector<Setting>& environment,
                              const OptionSpec& option) {
    TaskSettings resolved;
    for (const auto* layer : {&site.settings, &environment, &option.settings}) {
        for (const auto& setting : *layer) {
            if (setting.key == "only") {
                resolved.outputs = parse_output_selection(setting.value, setting.subject);
            } else {
                apply_plan_setting(resolved.plan, setting.key, setting.value, setting.subject);
            }
        }
    }
    return resolved;
}

EnvVars task_variables(const TaskSettings& settings,
                       const Environment& task_env,
                       std::optional<std::uint32_t> rank) {
    const auto step = read_step(task_env);
    const auto allocation = resolve_allocation(step);
    const auto plan = make_plan(step, allocation, settings.plan);
    const auto self = rank ? rank : plan.self_rank;
    if (!self) {
        throw errors::missing_env("SLURM_PROCID", "not a task of a Slurm step?");
    }
    if (*self >= plan.ranks.size()) {
        throw errors::inconsistent_allocation("SLURM_PROCID",
                                              "rank outside the step's " +
                                                  std::to_string(plan.ranks.size()) + " tasks",
                                              std::to_string(*self));
    }
    return task_environment(plan, *self, settings.outputs);
}

std::string describe(const std::exception& error) {
    std::string text = error.what();
    if (const auto* ours = dynamic_cast<const Error*>(&error); ours && !ours->hint().empty()) {
        text += " (" + ours->hint() + ")";
    }
    return text;
}

} // namespace tfslurm::spank
