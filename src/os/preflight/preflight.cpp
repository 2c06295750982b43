// SPDX-License-Identifier: MIT
// Health before start (tfslurm/os/preflight.hpp): the node's interface, temporary directory,
// GPUs (NVML, loaded at run time) and a site's own command.
#include "os/detail/shared_library.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/os/preflight.hpp>

#include <fmt/format.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <spawn.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

extern char** environ; // NOLINT(readability-redundant-declaration): for posix_spawn

namespace tfslurm {

namespace {

using Result = PreflightCheck::Result;

constexpr std::uint64_t k_mib = std::uint64_t{1} << 20U;

/// `60 s`, `0.25 s`.
[[nodiscard]] std::string seconds_text(Millis time) {
    if (time.count() % 1000 == 0) {
        return fmt::format("{} s", time.count() / 1000);
    }
    return fmt::format("{} s", static_cast<double>(time.count()) / 1000.0);
}

[[nodiscard]] PreflightCheck check(std::string name, Result result, std::string detail) {
    return PreflightCheck{std::move(name), result, std::move(detail)};
}

/// Whether `name` is up and running (IFF_UP and IFF_RUNNING: a cable, a port that is active).
[[nodiscard]] std::optional<unsigned> interface_flags(const std::string& name) {
    ifaddrs* list = nullptr;
    if (::getifaddrs(&list) != 0) {
        return std::nullopt;
    }
    std::optional<unsigned> flags;
    for (const ifaddrs* entry = list; entry != nullptr; entry = entry->ifa_next) {
        if (entry->ifa_name != nullptr && name == entry->ifa_name) {
            flags = flags.value_or(0U) | entry->ifa_flags;
        }
    }
    ::freeifaddrs(list);
    return flags;
}

[[nodiscard]] PreflightCheck check_interface(const std::optional<InterfaceAddress>& chosen) {
    if (!chosen) {
        return check("interface",
                     Result::skipped,
                     fmt::format("no interface chosen ({}, {})",
                                 setting_ref("iface"),
                                 setting_ref("network")));
    }
    const auto flags = interface_flags(chosen->interface);
    if (!flags) {
        return check(
            "interface", Result::failed, fmt::format("{} is gone", quote(chosen->interface)));
    }
    if ((*flags & IFF_UP) == 0U || (*flags & IFF_RUNNING) == 0U) {
        return check("interface",
                     Result::failed,
                     fmt::format("{} is down ({})",
                                 quote(chosen->interface),
                                 (*flags & IFF_UP) == 0U ? "not up" : "no carrier"));
    }
    const auto now = read_interfaces();
    if (std::find(now.begin(), now.end(), *chosen) == now.end()) {
        return check("interface",
                     Result::failed,
                     fmt::format("{} no longer has {}", quote(chosen->interface), chosen->address));
    }
    return check("interface",
                 Result::passed,
                 fmt::format("{} is up with {}", chosen->interface, chosen->address));
}

[[nodiscard]] PreflightCheck check_tmpdir(const std::string& dir, std::uint64_t needed) {
    // Writable: a file really created, written and removed (permissions alone do not say it:
    // a read-only mount, a full quota).
    std::string path = dir + "/.tfslurm-preflight-XXXXXX";
    const int fd = ::mkstemp(path.data());
    if (fd < 0) {
        return check("tmpdir",
                     Result::failed,
                     fmt::format("{} is not writable: {}", quote(dir), std::strerror(errno)));
    }
    constexpr std::string_view k_probe = "tfslurm preflight\n";
    const auto written = ::write(fd, k_probe.data(), k_probe.size());
    const int write_error = errno;
    ::close(fd);
    ::unlink(path.c_str());
    if (written != static_cast<ssize_t>(k_probe.size())) {
        return check("tmpdir",
                     Result::failed,
                     fmt::format("{} is not writable: {}", quote(dir), std::strerror(write_error)));
    }
    struct statvfs stats {};
    if (::statvfs(dir.c_str(), &stats) != 0) {
        return check(
            "tmpdir",
            Result::failed,
            fmt::format("cannot read the free space of {}: {}", quote(dir), std::strerror(errno)));
    }
    const std::uint64_t free = std::uint64_t{stats.f_bavail} * stats.f_frsize;
    const std::string found = fmt::format("{} has {} MiB free", quote(dir), free / k_mib);
    if (free < needed) {
        return check("tmpdir",
                     Result::failed,
                     fmt::format("{} (at least {} MiB needed)", found, needed / k_mib));
    }
    return check("tmpdir", Result::passed, found);
}

// NVML's C API, declared from NVIDIA's documentation (nvml.h): every call returns an
// nvmlReturn_t, 0 for success; a device is an opaque handle.
using NvmlReturn = int;
using NvmlDevice = void*;
struct NvmlMemory {
    unsigned long long total; // NOLINT(google-runtime-int): the C API's own type
    unsigned long long free;  // NOLINT(google-runtime-int)
    unsigned long long used;  // NOLINT(google-runtime-int)
};
using NvmlInit = NvmlReturn (*)();
using NvmlShutdown = NvmlReturn (*)();
using NvmlErrorString = const char* (*)(NvmlReturn);
using NvmlByIndex = NvmlReturn (*)(unsigned, NvmlDevice*);
using NvmlByUuid = NvmlReturn (*)(const char*, NvmlDevice*);
using NvmlMemoryInfo = NvmlReturn (*)(NvmlDevice, NvmlMemory*);

template <typename Function>
[[nodiscard]] Function function(const detail::SharedLibrary& library, const char* name) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym() gives a void*
    return reinterpret_cast<Function>(library.symbol(name));
}

[[nodiscard]] PreflightCheck check_gpus(const std::vector<std::string>& gpus,
                                        const std::vector<std::string>& names) {
    if (gpus.empty()) {
        return check("gpus", Result::skipped, "no visible GPUs");
    }
    detail::SharedLibrary nvml;
    try {
        nvml = detail::load_first_library(names, RTLD_NOW | RTLD_LOCAL, "NVML", {});
    } catch (const Error& e) {
        return check("gpus", Result::skipped, fmt::format("no NVML on this node ({})", e.what()));
    }
    try {
        const auto init = function<NvmlInit>(nvml, "nvmlInit_v2");
        const auto shutdown = function<NvmlShutdown>(nvml, "nvmlShutdown");
        const auto error_string = function<NvmlErrorString>(nvml, "nvmlErrorString");
        const auto by_index = function<NvmlByIndex>(nvml, "nvmlDeviceGetHandleByIndex_v2");
        const auto by_uuid = function<NvmlByUuid>(nvml, "nvmlDeviceGetHandleByUUID");
        const auto memory_info = function<NvmlMemoryInfo>(nvml, "nvmlDeviceGetMemoryInfo");
        const auto why = [error_string](NvmlReturn code) {
            const char* text = error_string(code);
            return text == nullptr ? fmt::format("NVML error {}", code) : std::string(text);
        };
        if (const NvmlReturn code = init(); code != 0) {
            return check("gpus", Result::failed, fmt::format("NVML does not start: {}", why(code)));
        }
        std::string failure;
        for (const std::string& gpu : gpus) {
            NvmlDevice device = nullptr;
            const bool numeric = !gpu.empty() && std::all_of(gpu.begin(), gpu.end(), [](char c) {
                return c >= '0' && c <= '9';
            });
            NvmlReturn code = numeric && gpu.size() < 10
                                  ? by_index(static_cast<unsigned>(std::stoul(gpu)), &device)
                                  : by_uuid(gpu.c_str(), &device);
            NvmlMemory memory{};
            if (code == 0) {
                code = memory_info(device, &memory);
            }
            if (code != 0) {
                failure = fmt::format("GPU {} does not answer: {}", quote(gpu), why(code));
                break;
            }
        }
        shutdown();
        if (!failure.empty()) {
            return check("gpus", Result::failed, failure);
        }
    } catch (const Error& e) {
        return check("gpus", Result::skipped, fmt::format("NVML cannot be used ({})", e.what()));
    }
    return check("gpus",
                 Result::passed,
                 fmt::format("{} GPU{} answer{}",
                             gpus.size(),
                             gpus.size() == 1 ? "" : "s",
                             gpus.size() == 1 ? "s" : ""));
}

/// Run `command` with /bin/sh -c in its own process group; past `timeout` the whole group is
/// killed (nothing of it outlives the check).
[[nodiscard]] PreflightCheck check_command(const std::string& command, Millis timeout) {
    if (command.empty()) {
        return check(
            "command", Result::skipped, fmt::format("no {}", setting_ref("preflight_command")));
    }
    posix_spawnattr_t attributes{};
    ::posix_spawnattr_init(&attributes);
    // Its own group, every signal unblocked and at its default (a launcher blocks the signals it
    // reads from a signalfd and ignores SIGPIPE: a shell must not inherit either).
    ::posix_spawnattr_setflags(
        &attributes, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    ::posix_spawnattr_setpgroup(&attributes, 0);
    sigset_t signals;
    ::sigemptyset(&signals);
    ::posix_spawnattr_setsigmask(&attributes, &signals);
    ::sigfillset(&signals);
    ::posix_spawnattr_setsigdefault(&attributes, &signals);
    std::string shell = "/bin/sh";
    std::string dash_c = "-c";
    std::string text = command;
    std::array<char*, 4> argv{shell.data(), dash_c.data(), text.data(), nullptr};
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, shell.c_str(), nullptr, &attributes, argv.data(), environ);
    ::posix_spawnattr_destroy(&attributes);
    if (rc != 0) {
        return check("command",
                     Result::failed,
                     fmt::format("cannot start {}: {}", quote(command), std::strerror(rc)));
    }
    // The shell is waited for without being reaped (WNOWAIT): until it is, its pid (the
    // group's id) cannot be reused, so the group killed below is surely this command's.
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    bool timed_out = false;
    while (true) {
        siginfo_t info{};
        const int done =
            ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
        if ((done == 0 && info.si_pid == pid) || (done < 0 && errno != EINTR)) {
            break;
        }
        if (std::chrono::steady_clock::now() >= deadline) {
            timed_out = true;
            break;
        }
        std::this_thread::sleep_for(Millis{5});
    }
    // Whatever it started in the background goes with it.
    ::kill(-pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (timed_out) {
        return check(
            "command",
            Result::failed,
            fmt::format("{} did not end within {}", quote(command), seconds_text(timeout)));
    }
    const ExitStatus exit = ExitStatus::from_wait_status(status);
    if (!exit.success()) {
        return check(
            "command", Result::failed, fmt::format("{} {}", quote(command), describe(exit)));
    }
    return check("command", Result::passed, fmt::format("{} exited with status 0", quote(command)));
}

} // namespace

std::vector<PreflightCheck> run_preflight(const PreflightSettings& settings) {
    return {check_interface(settings.address),
            check_tmpdir(settings.tmpdir, settings.tmp_free_bytes),
            check_gpus(settings.gpus, settings.nvml_names),
            check_command(settings.command, settings.command_timeout)};
}

const PreflightCheck* first_failure(const std::vector<PreflightCheck>& checks) {
    const auto found = std::find_if(checks.begin(), checks.end(), [](const PreflightCheck& c) {
        return c.result == PreflightCheck::Result::failed;
    });
    return found == checks.end() ? nullptr : &*found;
}

std::string describe(const PreflightCheck& check) {
    return fmt::format("{}: {}", check.name, check.detail);
}

} // namespace tfslurm
