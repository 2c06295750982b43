// SPDX-License-Identifier: MIT
// The one place tfslurm calls Slurm's library. Licensing is the reason for its shape: the
// tfslurm binary stays MIT because it neither links libslurm nor includes Slurm's headers; the
// node's libslurm is loaded at run time and called through the declarations below, written
// from Slurm's documented API (slurm.h of each release), never copied.
#include "detail/shared_library.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/slurm_api.hpp>

#include <fmt/format.h>

#include <dlfcn.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <ctime>
#include <iterator>
#include <limits>
#include <string_view>

namespace tfslurm {

namespace {

/// slurm_api_version() is SLURM_API_VERSION: `(API_CURRENT << 16) | (API_REVISION << 8) |
/// API_AGE`, and API_CURRENT is also the soname: 38 = 22.05, 39 = 23.02, 40 = 23.11,
/// 41 = 24.05, 42 = 24.11, 43 = 25.05, 44 = 25.11 (Slurm's META of each release).
constexpr int k_oldest_api = 38;
constexpr const char* k_releases[] = {
    "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11"};
/// 45 is tried too, so that a newer release is refused by name rather than missed.
constexpr int k_newest_soname = 45;

constexpr long api_current(long api_version) {
    return (api_version >> 16) & 0xff;
}

} // namespace

std::string to_string(const StepRef& step) {
    return fmt::format("{}.{}", step.job, step.step);
}

KillStepAbi kill_step_abi(long api_version) noexcept {
    switch (api_current(api_version)) {
    case 38: // 22.05
    case 39: // 23.02
        return KillStepAbi::signal;
    case 40: // 23.11
    case 41: // 24.05
    case 42: // 24.11
    case 43: // 25.05
        return KillStepAbi::signal_flags;
    default: // 25.11 takes a slurm_step_id_t; anything else is unknown
        return KillStepAbi::unsupported;
    }
}

std::string slurm_version_text(long api_version) {
    const long current = api_current(api_version);
    const long index = current - k_oldest_api;
    const long known = static_cast<long>(std::size(k_releases));
    if (index >= 0 && index < known) {
        return fmt::format("Slurm {} (API {})", k_releases[index], current);
    }
    return fmt::format("Slurm API {}", current);
}

std::vector<std::string> default_libslurm_names() {
    std::vector<std::string> names{"libslurm.so"};
    for (int soname = k_newest_soname; soname >= k_oldest_api; --soname) {
        names.push_back(fmt::format("libslurm.so.{}", soname));
    }
    return names;
}

// Loading and checking in one place: each refusal (no file, not a libslurm, an unknown release,
// a missing symbol) names the file it is about.
SlurmLibrary SlurmLibrary::load(const std::vector<std::string>& names) {
    // RTLD_GLOBAL: the plugins libslurm loads itself (auth/munge, hash/k12) resolve
    // libslurm's symbols (slurm_conf, ...) from the global scope, as in a program linked
    // with it. Our executable exports no symbols of its own, so nothing of ours collides.
    const detail::SharedLibrary shared =
        detail::load_first_library(names,
                                   RTLD_NOW | RTLD_GLOBAL,
                                   "libslurm",
                                   "is Slurm's library (libslurm) installed on this node?");
    void* handle = shared.handle;
    const std::string& loaded = shared.name;
    // dlsym returns void*: converting it to a function pointer is how POSIX defines its use.
    const auto symbol = [&shared](const char* name) { return shared.symbol(name); };
    // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast)
    const auto api_version = reinterpret_cast<long (*)()>(symbol("slurm_api_version"))();
    SlurmLibrary library;
    library.m_abi = kill_step_abi(api_version);
    library.m_description = fmt::format("{} ({})", loaded, slurm_version_text(api_version));
    if (library.m_abi == KillStepAbi::unsupported) {
        throw errors::make(Errc::io,
                           "libslurm",
                           fmt::format("{} ({}) is not supported: slurm_kill_job_step() is only "
                                       "known for Slurm 22.05 to 25.05 (API 38 to 43)",
                                       slurm_version_text(api_version),
                                       loaded),
                           "cancel the step with scancel");
    }
    if (library.m_abi == KillStepAbi::signal) {
        library.m_kill3 = reinterpret_cast<KillStep3>(symbol("slurm_kill_job_step"));
    } else {
        library.m_kill4 = reinterpret_cast<KillStep4>(symbol("slurm_kill_job_step"));
    }
    library.m_get_end_time = reinterpret_cast<GetEndTime>(symbol("slurm_get_end_time"));
    library.m_requeue = reinterpret_cast<Requeue>(symbol("slurm_requeue"));
    library.m_strerror = reinterpret_cast<StrError>(symbol("slurm_strerror"));
    library.m_get_errno = reinterpret_cast<GetErrno>(::dlsym(handle, "slurm_get_errno"));
    if (void* init = ::dlsym(handle, "slurm_init")) {
        reinterpret_cast<void (*)(const char*)>(init)(nullptr);
    }
    // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
    logger().debug("libslurm: loaded {}", library.m_description);
    return library;
}

void SlurmLibrary::cancel_step(const StepRef& step) const {
    constexpr auto k_max = std::numeric_limits<std::uint32_t>::max();
    if (step.job > k_max || step.step > k_max) {
        throw errors::make(
            Errc::io,
            "slurm",
            fmt::format("cannot cancel step {}: not a Slurm step id", to_string(step)));
    }
    const auto job = static_cast<std::uint32_t>(step.job);
    const auto id = static_cast<std::uint32_t>(step.step);
    errno = 0;
    const int rc =
        m_abi == KillStepAbi::signal ? m_kill3(job, id, SIGKILL) : m_kill4(job, id, SIGKILL, 0);
    if (rc == 0) {
        return;
    }
    throw errors::make(
        Errc::io, "slurm", fmt::format("cannot cancel step {}: {}", to_string(step), last_error()));
}

std::string SlurmLibrary::last_error() const {
    const int code = m_get_errno != nullptr ? m_get_errno() : errno;
    const char* text = m_strerror(code);
    return text != nullptr ? std::string(text) : fmt::format("error {}", code);
}

namespace {

/// A job id as libslurm takes it. \throws Error (Errc::io) `slurm: cannot <what> job <id>: not
/// a Slurm job id`.
std::uint32_t slurm_job_id(std::uint64_t job, std::string_view what) {
    if (job == 0 || job > std::numeric_limits<std::uint32_t>::max()) {
        throw errors::make(
            Errc::io, "slurm", fmt::format("cannot {} job {}: not a Slurm job id", what, job));
    }
    return static_cast<std::uint32_t>(job);
}

/// How far ahead Slurm puts the end of a job without a time limit: its start + 365 days.
constexpr std::chrono::hours k_no_time_limit{24 * 300};

} // namespace

std::optional<std::chrono::system_clock::time_point>
SlurmLibrary::job_end_time(std::uint64_t job) const {
    const std::uint32_t id = slurm_job_id(job, "read the end time of");
    std::time_t end = 0;
    errno = 0;
    if (m_get_end_time(id, &end) != 0) {
        throw errors::make(
            Errc::io,
            "slurm",
            fmt::format("cannot read the end time of job {}: {}", job, last_error()));
    }
    const auto at = std::chrono::system_clock::from_time_t(end);
    if (end <= 0 || at - std::chrono::system_clock::now() > k_no_time_limit) {
        return std::nullopt;
    }
    return at;
}

void SlurmLibrary::requeue(std::uint64_t job) const {
    const std::uint32_t id = slurm_job_id(job, "requeue");
    errno = 0;
    if (m_requeue(id, 0) != 0) {
        throw errors::make(
            Errc::io, "slurm", fmt::format("cannot requeue job {}: {}", job, last_error()));
    }
}

} // namespace tfslurm
