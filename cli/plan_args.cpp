// SPDX-License-Identifier: MIT
#include "plan_args.hpp"

#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/controller_layout.hpp>
#include <tfslurm/shell/local_run.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace tfslurm::cli {
namespace {

bool preview_requested(const StepOverrides& preview) {
    return !preview.tasks_per_node.empty() || preview.ntasks || !preview.distribution.empty() ||
           !preview.hostfile.empty() || preview.job_id || preview.step_id || preview.rank ||
           !preview.resv_ports.empty() || !preview.gpus.empty();
}

std::string group_title(SettingGroup group) {
    switch (group) {
    case SettingGroup::preview:
        return "Preview without Slurm (instead of reading SLURM_*)";
    case SettingGroup::roles:
        return "Roles (each also read from TFSLURM_<NAME>, e.g. TFSLURM_PS)";
    case SettingGroup::network:
        return "Addresses, ports and GPUs (also TFSLURM_<NAME>)";
    case SettingGroup::output:
        return "Output (also TFSLURM_<NAME>, e.g. TFSLURM_FORMAT)";
    case SettingGroup::launcher:
        return "Launcher (also TFSLURM_<NAME>, e.g. TFSLURM_GRACE)";
    }
    return "Options";
}

/// A preview option: its name and help come from the registry, its typed target from the CLI.
template <typename T> void add_field(CLI::App& sub, std::string_view key, T& target) {
    const auto* spec = find_setting(key);
    sub.add_option(std::string{spec->option}, target, setting_help(*spec))
        ->type_name(std::string{spec->type_name})
        ->group(group_title(spec->group));
}

/// A numeric preview option, read as text and converted by parse_option_number(): CLI11 would
/// detect a base (`010` is 8, `0x10` is 16) and wrap `-1` around to the maximum.
template <typename T>
void add_field(CLI::App& sub, std::string_view key, std::optional<T>& target) {
    const auto* spec = find_setting(key);
    sub.add_option_function<std::string>(
           std::string{spec->option},
           [&target, key](const std::string& text) {
               target = static_cast<T>(
                   parse_option_number(text, setting_ref(key), 0, std::numeric_limits<T>::max()));
           },
           setting_help(*spec))
        ->type_name(std::string{spec->type_name})
        ->group(group_title(spec->group));
}

/// The values of the output settings only: validated before the step is read, so that a bad
/// --format is reported even outside Slurm.
std::vector<SettingValue> output_values(const std::vector<SettingValue>& values) {
    std::vector<SettingValue> out;
    std::copy_if(values.begin(), values.end(), std::back_inserter(out), [](const auto& value) {
        const auto* spec = find_setting(value.key);
        return spec != nullptr && spec->group == SettingGroup::output;
    });
    return out;
}

/// Whether `spec` is a setting of `group` with an option: one that add_setting_options() makes
/// and declare_settings() declares.
bool option_of(const SettingSpec& spec, SettingGroup group) {
    return spec.group == group && !spec.option.empty();
}

} // namespace

std::uint64_t parse_option_number(std::string_view text,
                                  std::string_view subject,
                                  std::uint64_t low,
                                  std::uint64_t high) {
    const auto value = detail::parse_decimal(text);
    if (!value || *value < low || *value > high) {
        throw errors::invalid_argument(
            subject, fmt::format("expected an integer from {} to {}", low, high), text);
    }
    return *value;
}

void check_empty_value(CLI::Option& option, const SettingSpec& spec) {
    option.each([&spec](const std::string& value) {
        if (!value.empty()) {
            return;
        }
        // The launcher's settings keep their rule from before they had parsers: '' is no value.
        if (spec.apply != nullptr && spec.group != SettingGroup::launcher) {
            SettingValues scratch;
            spec.apply(scratch, value);
            return;
        }
        throw errors::invalid_argument(
            setting_ref(spec.key), fmt::format("expected {}", spec.type_name), value);
    });
}

void add_setting_options(CLI::App& sub, GivenSettings& given, SettingGroup group) {
    for (const auto& spec : setting_registry()) {
        if (!option_of(spec, group)) {
            continue;
        }
        auto& target = given[std::string{spec.key}];
        CLI::Option* option = nullptr;
        if (spec.kind == SettingKind::flag) {
            const auto name = spec.option.substr(2);
            option = sub.add_flag(
                fmt::format("--{}{{1}},--no-{}{{0}}", name, name), target, setting_help(spec));
        } else {
            const auto names = spec.short_option.empty()
                                   ? std::string{spec.option}
                                   : fmt::format("{},{}", spec.short_option, spec.option);
            option = sub.add_option(names, target, setting_help(spec))
                         ->type_name(std::string{spec.type_name});
            check_empty_value(*option, spec);
        }
        if (group != SettingGroup::output) {
            option->group(group_title(group));
        }
        // Like srun's, a launcher option given twice takes its last value.
        if (group == SettingGroup::launcher) {
            option->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
        }
    }
}

void declare_settings(GivenSettings& given, SettingGroup group) {
    for (const auto& spec : setting_registry()) {
        if (option_of(spec, group)) {
            given.try_emplace(std::string{spec.key});
        }
    }
}

void declare_plan_settings(GivenSettings& given) {
    declare_settings(given, SettingGroup::roles);
    declare_settings(given, SettingGroup::network);
}

void add_plan_options(CLI::App& sub, PlanArgs& args) {
    add_field(sub, "nodelist", args.preview.nodelist);
    // An empty --nodelist '' is a preview with a bad nodelist, not "outside Slurm".
    sub.get_option("--nodelist")->each([&args](const std::string&) { args.nodelist_given = true; });
    add_field(sub, "tasks_per_node", args.preview.tasks_per_node);
    add_field(sub, "ntasks", args.preview.ntasks);
    add_field(sub, "distribution", args.preview.distribution);
    add_field(sub, "hostfile", args.preview.hostfile);
    add_field(sub, "job_id", args.preview.job_id);
    add_field(sub, "step_id", args.preview.step_id);
    add_field(sub, "rank", args.preview.rank);
    add_field(sub, "resv_ports", args.preview.resv_ports);
    add_field(sub, "gpus", args.preview.gpus);
    add_setting_options(sub, args.given, SettingGroup::roles);
    add_setting_options(sub, args.given, SettingGroup::network);
}

std::vector<SettingValue> given_values(const GivenSettings& given, const Environment& env) {
    std::vector<SettingValue> values;
    for (auto& value : environment_settings(env, Face::cli)) {
        if (given.count(value.key) != 0) {
            values.push_back(std::move(value));
        }
    }
    for (const auto& [key, value] : given) {
        if (!value.empty()) {
            values.push_back({key, value, Origin::option});
        }
    }
    return values;
}

StepInfo read_step_of(const PlanArgs& args, const Environment& env) {
    if (args.nodelist_given || !args.preview.nodelist.empty()) {
        return preview_step(args.preview);
    }
    if (preview_requested(args.preview)) {
        throw errors::make(Errc::invalid_argument,
                           "preview options",
                           "need " + setting_ref("nodelist"),
                           "give " + setting_ref("nodelist") +
                               " to describe an allocation, or run inside Slurm without them");
    }
    auto step = read_step(env);
    add_controller_layout(step, env);
    return step;
}

ResolvedPlan
plan_from_args(const PlanArgs& args, const Environment& env, ExchangeUser user, GpuDetail detail) {
    const auto values = given_values(args.given, env);
    record_origins(values);
    static_cast<void>(resolve_settings(output_values(values)));
    StepInfo step = read_step_of(args, env);
    return tfslurm::resolve_plan(
        std::move(step), resolve_settings(values).values, env, user, detail);
}

void warn_unknown_variables(const Environment& env) {
    const auto rank = env.get("SLURM_PROCID");
    if ((rank && *rank != "0") || env.contains(k_local_status_variable)) {
        return;
    }
    for (const auto& unknown : unknown_variables(env)) {
        logger().warn("{}", unknown_variable_warning(unknown));
    }
}

SettingOrigins& invocation_origins() {
    static SettingOrigins origins;
    return origins;
}

void record_origins(const std::vector<SettingValue>& values) {
    for (const auto& [key, winner] : winning_settings(values)) {
        invocation_origins()[key] = winner.origin;
    }
}

std::string
cli_setting_name(std::string_view key, std::string_view value, const SettingOrigins& origins) {
    const auto* spec = find_setting(key);
    if (spec == nullptr || spec->option.empty()) {
        return neutral_setting_name(key, value);
    }
    const auto origin = origins.find(key);
    if (origin != origins.end() && origin->second == Origin::environment) {
        return neutral_setting_name(spec->variable, value);
    }
    if (spec->kind == SettingKind::flag) {
        const bool off = value == "0" || value == "no" || value == "false" || value == "off";
        return off ? fmt::format("--no-{}", spec->option.substr(2)) : std::string{spec->option};
    }
    return value.empty() ? std::string{spec->option} : fmt::format("{} {}", spec->option, value);
}

Error cli_error(const Error& error) {
    return error.rendered([](std::string_view key, std::string_view value) {
        return cli_setting_name(key, value, invocation_origins());
    });
}

} // namespace tfslurm::cli
