// SPDX-License-Identifier: MIT
// Part of spank_tfslurm.so; see plugins/spank/LICENSE-NOTE.md for the licence of the built plugin.
#include "options.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/controller_layout.hpp>
#include <tfslurm/os/slurm_api.hpp>
#include <tfslurm/resolve/exchange.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/task/resolve_plan.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <utility>

namespace tfslurm::spank {
namespace {

constexpr std::string_view k_man_hint = "see spank_tfslurm(8)";
/// What Slurm 22.05 stores for an option given without a value (`sbatch --tfslurm`).
constexpr std::string_view k_bare_option_in_job = "(null)";

/// The registry row of a plugstack/`--tfslurm` key, or null.
const SettingSpec* plugin_setting(std::string_view key) {
    for (const auto& spec : setting_registry()) {
        if (!spec.plugin_key.empty() && spec.plugin_key == key) {
            return &spec;
        }
    }
    return nullptr;
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

/// Throw now, in the plugin's words, what would otherwise only fail inside the task. List
/// values are checked item by item first so that a message quotes what the user typed (`+`
/// and all) rather than the whole translated list.
void validate(const Setting& setting, std::string_view raw_value, std::string_view list_seps) {
    const SettingOrigins origins{{setting.key, setting.origin}};
    try {
        SettingValues scratch;
        if (plugin_setting(setting.key)->kind == SettingKind::list && !list_seps.empty()) {
            for (const auto item : split(raw_value, list_seps.front())) {
                for (const auto piece : split(item, list_seps.back())) {
                    if (!piece.empty()) { // an empty piece is reported below with the whole value
                        apply_setting(scratch, setting.key, piece);
                    }
                }
            }
        }
        apply_setting(scratch, setting.key, setting.value);
        // `exchange=pmi2` (and `coordinator`) are refused here, where the user typed them.
        static_cast<void>(choose_exchange(
            scratch.plan.exchange, ExchangeUser::plugin, scratch.plan.address_selection, {}));
    } catch (const Error& e) {
        throw plugin_error(e, origins);
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

EnvVars task_variables_of(const TaskSettings& settings,
                          const Environment& task_env,
                          std::optional<std::uint32_t> rank) {
    auto step = read_step(task_env);
    // A step Slurm laid out in topology order: ask the controller, with the task's environment.
    add_controller_layout(step, task_env);
    const auto resolved =
        resolve_plan(std::move(step), settings.values, task_env, ExchangeUser::plugin);
    const auto& plan = resolved.plan;
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
    auto vars = task_environment(plan, *self, settings.values.outputs);
    for (auto& var : thread_variables(plan, *self, settings.values.outputs, task_env)) {
        vars.push_back(std::move(var));
    }
    return vars;
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
        if (key == "tfslurm") {
            if (!site.tfslurm.empty()) {
                throw errors::invalid_argument(
                    k_plugstack_subject, "setting given twice", key, "give each setting once");
            }
            if (value.empty() || value.front() != '/' ||
                std::any_of(value.begin(), value.end(), [](char c) {
                    return static_cast<unsigned char>(c) <= 0x20 ||
                           static_cast<unsigned char>(c) >= 0x7f;
                })) {
                throw errors::invalid_argument(
                    "plugstack.conf tfslurm",
                    "expected the absolute path of the tfslurm command on the nodes",
                    value);
            }
            site.tfslurm = std::string{value};
            continue;
        }
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
                    "plugstack.conf enabled", "expected option or always", value);
            }
            continue;
        }
        const auto* spec = plugin_setting(key);
        if (spec == nullptr) {
            throw errors::invalid_argument(
                k_plugstack_subject,
                "unknown setting (known: " + known_setting_keys(Face::plugin) +
                    ", enabled, tfslurm)",
                key,
                std::string{k_man_hint});
        }
        reject_repeated(site.settings, key, k_plugstack_subject);
        const bool list = spec->kind == SettingKind::list;
        Setting setting{
            key, list ? with_commas(value, "+") : std::string{value}, Origin::plugstack};
        validate(setting, value, list ? ",+" : "");
        site.settings.push_back(std::move(setting));
    }
    return site;
}

OptionSpec parse_option_spec(std::string_view spec) {
    OptionSpec option;
    // sbatch and salloc export a bare --tfslurm as SLURM_SPANK__SLURM_SPANK_OPTION_tfslurm_tfslurm
    // =(null) (printf of a null optarg); every srun of the job hands that text back to us.
    if (spec.empty() || spec == k_bare_option_in_job) {
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
        const auto* row = plugin_setting(key);
        if (row == nullptr) {
            throw errors::invalid_argument(
                k_option_subject,
                "unknown setting (known: " + known_setting_keys(Face::plugin) + ")",
                item.substr(0, eq),
                "write --tfslurm=key=value,...; " + std::string{k_man_hint});
        }
        reject_repeated(option.settings, key, k_option_subject);
        std::string_view raw_value;
        if (eq == std::string_view::npos) {
            if (row->kind != SettingKind::flag) {
                throw errors::invalid_argument(k_option_subject,
                                               "setting needs a value (write " + key + "=...)",
                                               item,
                                               std::string{k_man_hint});
            }
            raw_value = "1";
        } else {
            raw_value = item.substr(eq + 1);
        }
        const bool list = row->kind == SettingKind::list;
        Setting setting{
            key, list ? with_commas(raw_value, "+:") : std::string{raw_value}, Origin::option};
        validate(setting, raw_value, list ? "+:" : "");
        option.settings.push_back(std::move(setting));
    }
    return option;
}

std::vector<Setting> environment_settings(const Environment& env) {
    auto settings = tfslurm::environment_settings(env, Face::plugin);
    for (const auto& setting : settings) {
        validate(setting, setting.value, "");
    }
    return settings;
}

TaskSettings resolve_settings(const SiteConfig& site,
                              const std::vector<Setting>& environment,
                              const OptionSpec& option) {
    std::vector<SettingValue> given = site.settings;
    given.insert(given.end(), environment.begin(), environment.end());
    given.insert(given.end(), option.settings.begin(), option.settings.end());
    auto resolved = tfslurm::resolve_settings(given);
    return {std::move(resolved.values), std::move(resolved.origins)};
}

EnvVars launcher_variables(const SiteConfig& site,
                           const std::vector<Setting>& environment,
                           const OptionSpec& option) {
    std::vector<SettingValue> given = site.settings;
    given.insert(given.end(), environment.begin(), environment.end());
    given.insert(given.end(), option.settings.begin(), option.settings.end());
    const auto winners = winning_settings(given);
    EnvVars vars;
    for (const auto& spec : setting_registry()) {
        const auto found = winners.find(spec.key);
        if (found != winners.end() && spec.key != "run" && !spec.variable.empty()) {
            vars.emplace_back(std::string{spec.variable}, found->second.value);
        }
    }
    return vars;
}

std::string Release::text() const {
    return fmt::format("{}.{:02}", major, minor);
}

Release release_of_version_number(unsigned version_number) {
    return {(version_number >> 16U) & 0xffU, (version_number >> 8U) & 0xffU};
}

std::optional<std::string> release_mismatch(Release built_for, long running_api) {
    const auto running = slurm_release_of_api(running_api);
    if (running == built_for.text()) {
        return std::nullopt;
    }
    const auto target = running.empty() ? std::string{"that release"} : "Slurm " + running;
    return fmt::format("spank_tfslurm.so is built for Slurm {} and cannot run in {}: install the "
                       "tfslurm-spank package built for {}, or build the plugin against its "
                       "slurm/spank.h (spank_tfslurm(8), BUILDING)",
                       built_for.text(),
                       slurm_version_text(running_api),
                       target);
}

void check_run_supported(const std::vector<Setting>& settings, Release built_for) {
    if (built_for.can_prepend_task_argv()) {
        return;
    }
    for (const auto& setting : settings) {
        if (setting.key != "run") {
            continue;
        }
        SettingValues scratch;
        apply_setting(scratch, setting.key, setting.value); // validated by the parsers already
        if (!scratch.plugin_run) {
            continue;
        }
        const SettingOrigins origins{{setting.key, setting.origin}};
        throw errors::invalid_argument(
            plugin_setting_name(setting.key, "", origins),
            "needs Slurm 23.11 or later (spank_prepend_task_argv), and this plugin is built for "
            "Slurm " +
                built_for.text(),
            setting.value,
            "start the trainer as 'srun tfslurm run ...' instead, or install the plugin built for "
            "a newer Slurm");
    }
}

EnvVars task_variables(const TaskSettings& settings,
                       const Environment& task_env,
                       std::optional<std::uint32_t> rank) {
    try {
        return task_variables_of(settings, task_env, rank);
    } catch (const Error& e) {
        const std::string_view what = e.what();
        if (e.code() == Errc::too_large && what.rfind("TF_CONFIG", 0) == 0) {
            // The library suggests tf_config_file, which the plugin does not have: it would
            // write a file per task from slurmstepd and could not remove it after the task.
            // The tf4slurm dictionary, when it is too large as well, is left out the same way.
            const bool servers =
                what.substr(0, what.find(':')).find("TFSLURM_SERVERS") != std::string_view::npos;
            throw Error(e.code(),
                        e.what(),
                        std::string{"the plugin cannot write TF_CONFIG to a file: run the "
                                    "trainer with 'tfslurm run --tf-config-file auto"} +
                            (servers ? " --only tf,torch,gpus" : "") +
                            "' and without --tfslurm (tfslurm(1), LARGE JOBS)");
        }
        throw plugin_error(e, settings.origins);
    }
}

std::string
plugin_setting_name(std::string_view key, std::string_view value, const SettingOrigins& origins) {
    const auto found = origins.find(key);
    const auto* spec = find_setting(key);
    if (found == origins.end() || spec == nullptr) {
        return neutral_setting_name(key, value);
    }
    switch (found->second) {
    case Origin::option:
        return "--tfslurm " + neutral_setting_name(spec->plugin_key, value);
    case Origin::plugstack:
        return "plugstack.conf " + neutral_setting_name(spec->plugin_key, value);
    case Origin::environment:
        return neutral_setting_name(spec->variable, value);
    }
    return neutral_setting_name(key, value);
}

Error plugin_error(const Error& error, const SettingOrigins& origins) {
    return error.rendered([&origins](std::string_view key, std::string_view value) {
        return plugin_setting_name(key, value, origins);
    });
}

std::string describe(const std::exception& error) {
    std::string text = error.what();
    if (const auto* ours = dynamic_cast<const Error*>(&error); ours && !ours->hint().empty()) {
        text += " (" + ours->hint() + ")";
    }
    return text;
}

} // namespace tfslurm::spank
