// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Loaders for the real task environments in tests/data/slurm-env/ (captured on a Slurm
/// 22.05.8 cluster), header-only so every test file can use them.

#include "test_paths.hpp"

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostfile.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/run_settings.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::test {

inline std::string data_path(const std::string& name) {
    return std::string{tfslurm::test::paths::test_data_dir} + "/" + name;
}

inline std::vector<std::string> read_lines(const std::string& name) {
    std::ifstream in{data_path(name)};
    if (!in) {
        throw std::runtime_error("cannot open test data " + data_path(name));
    }
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) {
        lines.push_back(line);
    }
    return lines;
}

/// `NAME=value` lines; with `label` >= 0 only lines prefixed `<label>: ` (srun -l output).
inline Environment load_env_dump(const std::string& name, int label = -1) {
    Environment env;
    const std::string prefix = label >= 0 ? std::to_string(label) + ": " : "";
    for (const auto& line : read_lines(name)) {
        if (line.rfind(prefix, 0) != 0) {
            continue;
        }
        if (label < 0 && line.find(": ") != std::string::npos && line[0] >= '0' && line[0] <= '9') {
            continue; // a task's line (srun -l) when the unlabelled part was asked for
        }
        const auto text = line.substr(prefix.size());
        const auto eq = text.find('=');
        if (eq == std::string::npos || eq == 0 || text[0] == '#' || text[0] == '$') {
            continue;
        }
        env.set(text.substr(0, eq), text.substr(eq + 1));
    }
    return env;
}

/// One `=== title` section of a layout or GRES file: each task line as an environment.
struct Section {
    std::string title;
    std::vector<std::pair<int, Environment>> tasks; ///< (srun -l label, variables)
};

/// Parse `N: host=n1 KEY=VALUE ...` lines. `host` becomes SLURMD_NODENAME; every other key
/// gets the `SLURM_` prefix unless it already names a full variable (`CUDA_VISIBLE_DEVICES`,
/// `SLURM_...`); `DIST` is SLURM_DISTRIBUTION; `unset` values are dropped.
inline std::vector<Section> load_sections(const std::string& name) {
    std::vector<Section> sections;
    for (const auto& line : read_lines(name)) {
        if (line.rfind("=== ", 0) == 0) {
            sections.push_back(Section{line.substr(4), {}});
            continue;
        }
        const auto colon = line.find(": ");
        if (sections.empty() || colon == std::string::npos || line[0] < '0' || line[0] > '9') {
            continue;
        }
        Environment env;
        std::istringstream words{line.substr(colon + 2)};
        for (std::string word; words >> word;) {
            const auto eq = word.find('=');
            if (eq == std::string::npos) {
                continue;
            }
            auto key = word.substr(0, eq);
            auto value = word.substr(eq + 1);
            if (value == "unset") {
                continue;
            }
            if (key == "host") {
                key = "SLURMD_NODENAME";
            } else if (key == "DIST") {
                key = "SLURM_DISTRIBUTION";
            } else if (key.rfind("SLURM_", 0) != 0 && key.find('_') != std::string::npos &&
                       key != "STEP_NODELIST" && key != "JOB_NODELIST" &&
                       key != "STEP_TASKS_PER_NODE" && key != "JOB_CPUS_PER_NODE" &&
                       key != "TASKS_PER_NODE" && key != "CPUS_ON_NODE" && key != "CPUS_PER_TASK") {
                // CUDA_VISIBLE_DEVICES, GPU_DEVICE_ORDINAL, ...: already full names.
            } else if (key.rfind("SLURM_", 0) != 0) {
                key = "SLURM_" + key;
            }
            env.set(key, value);
        }
        sections.back().tasks.emplace_back(std::stoi(line.substr(0, colon)), std::move(env));
    }
    return sections;
}

/// The run settings that `given` resolve to, every other setting at its default.
inline tfslurm::RunSettings resolve_run(const std::vector<tfslurm::SettingValue>& given) {
    return tfslurm::resolve_settings(given).values.run;
}

/// The time origin of the tests of the run rules (their clocks are injected).
inline const tfslurm::Clock::time_point k_t0{};

/// The subject of the errors of a hostfile named `hf` (SLURM_HOSTFILE).
inline constexpr std::string_view k_hostfile_subject = "SLURM_HOSTFILE (hf)";

/// The variable the hostlist tests expand (the subject of their errors).
inline constexpr const char* k_nodelist_subject = "SLURM_JOB_NODELIST";

/// `list` expanded as k_nodelist_subject.
inline std::vector<std::string> expand_nodelist(const std::string& list) {
    return tfslurm::expand_hostlist(list, k_nodelist_subject);
}

/// The failure of rank `rank`, `role`:`index` on `host`, for `cause`: what the coordinator
/// names in its abort. Its status, detail and other fields are the caller's to set.
inline tfslurm::protocol::Failure failure_of_rank(std::uint32_t rank,
                                                  tfslurm::Role role,
                                                  std::uint32_t index,
                                                  const std::string& host,
                                                  tfslurm::protocol::FailureCause cause,
                                                  int step_status) {
    tfslurm::protocol::Failure failure;
    failure.rank = rank;
    failure.role = role;
    failure.index = index;
    failure.host = host;
    failure.cause = cause;
    failure.step_status = step_status;
    return failure;
}

/// A FileReader of `files` (path to text) alone: any other path cannot be opened.
inline tfslurm::FileReader reader_of(std::map<std::string, std::string> files) {
    return [files = std::move(files)](const std::string& path, std::string_view subject) {
        const auto found = files.find(path);
        if (found == files.end()) {
            throw tfslurm::errors::make(
                tfslurm::Errc::io, subject, "cannot open " + tfslurm::quote(path));
        }
        return found->second;
    };
}

/// The value of `name` in `vars` (the first one), or "<unset>".
inline std::string value_of(const tfslurm::EnvVars& vars, const std::string& name) {
    for (const auto& [key, value] : vars) {
        if (key == name) {
            return value;
        }
    }
    return "<unset>";
}

/// What a tfslurm::Error said: its code's name, its message and its hint.
struct Thrown {
    std::string code;
    std::string message;
    std::string hint;
};

/// Run `action`, which must throw a tfslurm::Error, and return what it threw.
inline Thrown thrown_by(const std::function<void()>& action) {
    try {
        action();
    } catch (const tfslurm::Error& error) {
        return {std::string(tfslurm::to_string(error.code())), error.what(), error.hint()};
    }
    FAIL("no tfslurm::Error was thrown");
    return {};
}

/// Run `f` and require a tfslurm::Error with exactly this code and message.
template <typename F> void require_error(F&& f, Errc code, const std::string& message) {
    try {
        f();
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == code);
        CHECK(std::string{e.what()} == message);
    }
}

inline /// Ranks on each node, as a readable string: "n1:0,1 n2:2,3".
    std::string
    layout_of(const tfslurm::Allocation& allocation) {
    std::string out;
    for (std::size_t node = 0; node < allocation.hosts.size(); ++node) {
        if (!out.empty()) {
            out += ' ';
        }
        out += allocation.hosts[node] + ':';
        for (std::size_t i = 0; i < allocation.node_ranks[node].size(); ++i) {
            out += (i ? "," : "") + std::to_string(allocation.node_ranks[node][i]);
        }
    }
    return out;
}

/// A rank's GPUs as a comma list: "0,1".
inline std::string gpus_of(const tfslurm::RankPlan& rank) {
    std::string out;
    for (const auto& gpu : rank.gpus) {
        out += (out.empty() ? "" : ",") + gpu;
    }
    return out;
}

/// Plan options from settings given as text: with({{"ps", "1"}}).
inline tfslurm::PlanOptions
with(std::initializer_list<std::pair<const char*, const char*>> settings) {
    tfslurm::PlanOptions options;
    for (const auto& [key, value] : settings) {
        tfslurm::apply_plan_setting(options, key, value);
    }
    return options;
}

/// A step, its placement and its plan.
struct Built {
    tfslurm::StepInfo step;
    tfslurm::Allocation allocation;
    tfslurm::Plan plan;
};

/// The step of `env`, its placement and its plan.
inline Built build(const Environment& env, const PlanOptions& options = {}) {
    Built built;
    built.step = tfslurm::read_step(env);
    built.allocation = tfslurm::resolve_allocation(built.step);
    built.plan = tfslurm::make_plan(built.step, built.allocation, options);
    return built;
}

/// What `tfslurm plan --nodelist <nodelist> --tasks-per-node <tasks> --job-id <job> --step-id
/// <step>` previews, seen from `rank` when given; the other overrides are the caller's to set.
inline tfslurm::StepOverrides preview_overrides(const std::string& nodelist,
                                                const std::string& tasks,
                                                std::uint64_t job,
                                                std::uint64_t step = 0,
                                                std::optional<std::uint32_t> rank = std::nullopt) {
    tfslurm::StepOverrides overrides;
    overrides.nodelist = nodelist;
    overrides.tasks_per_node = tasks;
    overrides.job_id = job;
    overrides.step_id = step;
    overrides.rank = rank;
    return overrides;
}

/// The plan of the preview step of `overrides`, with `options`.
inline tfslurm::Plan plan_of_preview(const tfslurm::StepOverrides& overrides,
                                     const PlanOptions& options = {}) {
    const auto step = tfslurm::preview_step(overrides);
    return tfslurm::make_plan(step, tfslurm::resolve_allocation(step), options);
}

/// A preview step (as `tfslurm plan --nodelist ... --tasks-per-node ...`), its placement and
/// its plan.
inline Built preview(const std::string& nodelist,
                     const std::string& tasks,
                     const PlanOptions& options = {},
                     std::uint64_t job = 1234) {
    Built built;
    built.step = tfslurm::preview_step(preview_overrides(nodelist, tasks, job));
    built.allocation = tfslurm::resolve_allocation(built.step);
    built.plan = tfslurm::make_plan(built.step, built.allocation, options);
    return built;
}

/// Every rank's `role:index`, space-separated.
inline std::string roles_of(const tfslurm::Plan& plan) {
    std::string out;
    for (const auto& rank : plan.ranks) {
        out += (out.empty() ? "" : " ") + std::string{tfslurm::to_string(rank.role)} + ":" +
               std::to_string(rank.index);
    }
    return out;
}

/// The V4 test environment of TensorFlow's resolver tests (slurm_cluster_resolver_test.py).
inline Built tf_case(const std::string& nodelist,
                     std::vector<std::uint32_t> tasks,
                     std::uint32_t procid,
                     const tfslurm::PlanOptions& options,
                     std::optional<std::vector<std::string>> visible = std::nullopt) {
    Built built;
    built.step.scope = tfslurm::Scope::step;
    built.step.nodelist = nodelist;
    built.step.nodelist_variable = "SLURM_STEP_NODELIST";
    built.step.hosts = tfslurm::expand_hostlist(nodelist);
    built.step.tasks_variable = "SLURM_STEP_TASKS_PER_NODE";
    built.step.tasks_per_node = std::move(tasks);
    built.step.ntasks = 0;
    for (const auto count : built.step.tasks_per_node) {
        built.step.ntasks += count;
    }
    built.step.self = tfslurm::TaskIdentity{procid, {}, {}, {}, {}};
    built.step.gpus.visible = std::move(visible);
    built.allocation = tfslurm::resolve_allocation(built.step);
    built.plan = tfslurm::make_plan(built.step, built.allocation, options);
    return built;
}

} // namespace tfslurm::test
