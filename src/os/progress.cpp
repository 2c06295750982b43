// SPDX-License-Identifier: MIT
// A trainer's progress as /proc shows it (detail/progress.hpp).
#include "os/detail/progress.hpp"

#include <tfslurm/os/spawn.hpp>
#include <tfslurm/run/startup.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <ctime>
#include <fstream>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace tfslurm::detail {
namespace {

/// When this process began running its own code (static initialisation, after exec and the
/// dynamic loader), and which process that was: a forked copy inherits both, not its start.
struct Entered {
    std::chrono::system_clock::time_point at = std::chrono::system_clock::now();
    pid_t pid = ::getpid();
};
const Entered k_entered;

std::uint64_t page_size() {
    static const long size = ::sysconf(_SC_PAGESIZE);
    return size > 0 ? static_cast<std::uint64_t>(size) : 4096;
}

/// One process as `/proc/<pid>/stat` tells it: its parent, its CPU time (its own and its
/// reaped children's), in clock ticks, and its resident pages. Input: `12 (python3) S 7 ...
/// 250 30 4 1 ... 812 ...`. Output: {7, 285, 812}. nullopt for an unreadable or malformed line (a
/// process that just ended).
struct ProcStat {
    pid_t parent = 0;
    std::uint64_t cpu_ticks = 0;
    std::uint64_t rss_pages = 0;
};

/// The fields of `/proc/<pid>/stat` from the third (the state) on; nullopt when it cannot be
/// read. The command name may hold spaces and parentheses: the fields start after the last `)`.
std::optional<std::string> stat_fields(const std::string& pid) {
    std::ifstream file("/proc/" + pid + "/stat");
    std::string line;
    if (!std::getline(file, line)) {
        return std::nullopt;
    }
    const auto close = line.rfind(')');
    if (close == std::string::npos) {
        return std::nullopt;
    }
    return line.substr(close + 1);
}

std::optional<ProcStat> read_proc_stat(const std::string& pid) {
    const auto text = stat_fields(pid);
    if (!text) {
        return std::nullopt;
    }
    std::istringstream fields(*text);
    std::string state;
    long long parent = 0;
    std::array<std::string, 9> skipped{};      // pgrp .. cmajflt (fields 5 to 13)
    std::array<unsigned long long, 4> times{}; // utime, stime, cutime, cstime
    std::array<std::string, 6> between{};      // priority .. vsize (fields 18 to 23)
    long long rss = 0;                         // field 24, in pages
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
    for (auto& field : between) {
        fields >> field;
    }
    fields >> rss;
    return ProcStat{static_cast<pid_t>(parent),
                    times[0] + times[1] + times[2] + times[3],
                    fields && rss > 0 ? static_cast<std::uint64_t>(rss) : 0};
}

} // namespace

std::uint64_t tree_cpu_ticks(pid_t root) {
    return tree_usage(root).cpu_ticks;
}

TreeUsage tree_usage(pid_t root) {
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
    TreeUsage total;
    std::vector<pid_t> pending{root};
    while (!pending.empty()) {
        const pid_t pid = pending.back();
        pending.pop_back();
        if (const auto found = processes.find(pid); found != processes.end()) {
            total.cpu_ticks += found->second.cpu_ticks;
            total.rss_bytes += found->second.rss_pages * page_size();
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

ProgressFileReport read_progress_file(const std::string& path) {
    ProgressFileReport out;
    if (path.empty()) {
        return out;
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) {
        return out;
    }
    struct stat info {};
    if (::fstat(fd, &info) == 0 && S_ISREG(info.st_mode) &&
        (info.st_mtim.tv_sec != 0 || info.st_mtim.tv_nsec != 0)) {
        out.touched = std::chrono::system_clock::time_point{
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                std::chrono::seconds{info.st_mtim.tv_sec} +
                std::chrono::nanoseconds{info.st_mtim.tv_nsec})};
        std::array<char, 64> buffer{};
        const ssize_t got = ::read(fd, buffer.data(), buffer.size());
        if (got > 0) {
            out.step =
                progress_step(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
        }
    }
    ::close(fd);
    return out;
}

bool set_untouched(int fd) noexcept {
    const std::array<timespec, 2> times{timespec{0, UTIME_OMIT}, timespec{0, 0}};
    return ::futimens(fd, times.data()) == 0;
}

std::chrono::system_clock::time_point
start_estimate(std::optional<std::chrono::system_clock::time_point> entered,
               std::optional<std::chrono::system_clock::time_point> tick_start,
               std::chrono::system_clock::duration tick,
               std::chrono::system_clock::time_point now) {
    auto latest = now;
    if (tick_start) {
        latest = std::min(latest, *tick_start + tick); // /proc rounds the start down to its tick
    }
    return entered ? std::min(latest, *entered) : latest;
}

std::chrono::system_clock::time_point process_start_time() {
    const std::optional<std::chrono::system_clock::time_point> entered =
        k_entered.pid == ::getpid() ? std::optional(k_entered.at) : std::nullopt;
    const long hertz = ::sysconf(_SC_CLK_TCK);
    const auto text = stat_fields("self");
    timespec boot{};
    if (!text || hertz <= 0 || ::clock_gettime(CLOCK_BOOTTIME, &boot) != 0) {
        return start_estimate(entered, std::nullopt, {}, std::chrono::system_clock::now());
    }
    // Fields 3 (state) to 21 are skipped; field 22 is the start, in clock ticks since boot.
    std::istringstream fields(*text);
    std::string skipped;
    for (int i = 3; i <= 21; ++i) {
        fields >> skipped;
    }
    unsigned long long start_ticks = 0;
    fields >> start_ticks;
    const auto now = std::chrono::system_clock::now();
    const auto since_boot =
        std::chrono::seconds{boot.tv_sec} + std::chrono::nanoseconds{boot.tv_nsec};
    const std::chrono::nanoseconds tick{1000000000 / hertz};
    const auto started = static_cast<std::int64_t>(start_ticks) * tick;
    if (!fields || started > since_boot) {
        return start_estimate(entered, std::nullopt, {}, now);
    }
    return start_estimate(
        entered,
        now - std::chrono::duration_cast<std::chrono::system_clock::duration>(since_boot - started),
        std::chrono::duration_cast<std::chrono::system_clock::duration>(tick),
        now);
}

} // namespace tfslurm::detail
