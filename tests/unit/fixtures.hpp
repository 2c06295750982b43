// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Loaders for the real task environments in tests/data/slurm-env/ (captured on a Slurm
/// 22.05.8 cluster), header-only so every test file can use them.

#include <tfslurm/env.hpp>
#include <tfslurm/error.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::test {

inline std::string data_path(const std::string& name) {
    return std::string{TFSLURM_TEST_DATA_DIR} + "/" + name;
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

} // namespace tfslurm::test
