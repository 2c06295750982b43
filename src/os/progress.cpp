// SPDX-License-Identifier: MIT
// A trainer's progress as /proc shows it (detail/progress.hpp).
#include "os/detail/progress.hpp"

#include <tfslurm/os/spawn.hpp>

#include <dirent.h>
#include <sys/stat.h>

#include <array>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace tfslurm::detail {
namespace {

/// One process as `/proc/<pid>/stat` tells it: its parent and its CPU time (its own and its
/// reaped children's), in clock ticks. Input: `12 (python3) S 7 ... 250 30 4 1 ...`.
/// Output: {7, 285}. nullopt for an unreadable or malformed line (a process that just ended).
struct ProcStat {
    pid_t parent = 0;
    std::uint64_t cpu_ticks = 0;
};

std::optional<ProcStat> read_proc_stat(const std::string& pid) {
    std::ifstream file("/proc/" + pid + "/stat");
    std::string line;
    if (!std::getline(file, line)) {
        return std::nullopt;
    }
    // The command name may hold spaces and parentheses: the fields start after the last `)`.
    const auto close = line.rfind(')');
    if (close == std::string::npos) {
        return std::nullopt;
    }
    std::istringstream fields(line.substr(close + 1));
    std::string state;
    long long parent = 0;
    std::array<std::string, 9> skipped{};      // pgrp .. cmajflt (fields 5 to 13)
    std::array<unsigned long long, 4> times{}; // utime, stime, cutime, cstime
    fields >> state >> parent;
    for (auto& field : skipped) {
        fields >> field;
    }
    for (auto& time : times) {
        fields >> time;
    }
    if (!fields) {
        return std::nullopt;
    }
    return ProcStat{static_cast<pid_t>(parent), times[0] + times[1] + times[2] + times[3]};
}

} // namespace

std::uint64_t tree_cpu_ticks(pid_t root) {
    std::unordered_map<pid_t, ProcStat> processes;
    if (DIR* proc = ::opendir("/proc")) {
        while (const dirent* entry = ::readdir(proc)) {
            const std::string name = entry->d_name;
            if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
                continue;
            }
            if (const auto stat = read_proc_stat(name)) {
                processes.emplace(static_cast<pid_t>(std::stoll(name)), *stat);
            }
        }
        ::closedir(proc);
    }
    std::unordered_map<pid_t, std::vector<pid_t>> children;
    for (const auto& [pid, stat] : processes) {
        children[stat.parent].push_back(pid);
    }
    std::uint64_t total = 0;
    std::vector<pid_t> pending{root};
    while (!pending.empty()) {
        const pid_t pid = pending.back();
        pending.pop_back();
        if (const auto found = processes.find(pid); found != processes.end()) {
            total += found->second.cpu_ticks;
        }
        if (const auto found = children.find(pid); found != children.end()) {
            pending.insert(pending.end(), found->second.begin(), found->second.end());
        }
    }
    return total;
}

std::vector<pid_t> process_tree(pid_t root) {
    std::vector<pid_t> out{root};
    for (std::size_t i = 0; i < out.size(); ++i) {
        for (const pid_t child : list_children(out[i])) {
            out.push_back(child);
        }
    }
    return out;
}

std::int64_t mtime_ns(const std::string& path) {
    struct stat info {};
    if (path.empty() || ::stat(path.c_str(), &info) != 0) {
        return 0;
    }
    return static_cast<std::int64_t>(info.st_mtim.tv_sec) * 1000000000 + info.st_mtim.tv_nsec;
}

} // namespace tfslurm::detail
