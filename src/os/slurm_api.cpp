// SPDX-License-Identifier: MIT
// The one place tfslurm calls Slurm's library. Licensing is the reason for its shape: the
// tfslurm binary stays MIT because it neither links libslurm nor includes Slurm's headers; the
// node's libslurm is loaded at run time and called through the declarations below, written
// from Slurm's documented API (slurm.h of each release), never copied.
#include "os/detail/shared_library.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/slurm_api.hpp>

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
/// 41 = 24.05, 42 = 24.11, 43 = 25.05, 44 = 25.11, 45 = 26.05 (Slurm's META of each release;
/// 38, 42 and 45 checked against the slurm.h and libslurm.so of Debian's 22.05.8, 24.11.5 and
/// 26.05.5).
constexpr int k_oldest_api = 38;
constexpr const char* k_releases[] = {
    "22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05"};
constexpr int k_newest_api = k_oldest_api + static_cast<int>(std::size(k_releases)) - 1;
/// 46 is tried too, so that a newer release is refused (or used, see slurm_abi()) by name
/// rather than missed.
constexpr int k_newest_soname = k_newest_api + 1;

constexpr long api_current(long api_version) {
    return (api_version >> 16) & 0xff;
}
constexpr long api_age(long api_version) {
    return api_version & 0xff;
}

/// The declarations of one known API.
SlurmAbi known_abi(long api) noexcept {
    SlurmAbi abi;
    abi.api = api;
    if (api < k_oldest_api || api > k_newest_api) {
        return abi; // as_api 0: no declarations
    }
    abi.as_api = api;
    // slurm_kill_job_step(): a flags argument from 23.11, a slurm_step_id_t* from 25.11.
    abi.kill = api <= 39   ? KillStepAbi::signal
               : api <= 43 ? KillStepAbi::signal_flags
                           : KillStepAbi::step_id_pointer;
    // slurm_get_end_time() and slurm_requeue(): a slurm_step_id_t by value from 26.05.
    abi.job = api <= 44 ? JobIdAbi::job_id : JobIdAbi::step_id;
    return abi;
}

/// Slurm's slurm_step_id_t from 24.11 on (slurm.h): a 64-bit "sluid", then the job id, the
/// heterogeneous component and the step id; 24 bytes with its padding. Passed by pointer to
/// slurm_kill_job_step() (25.11 on) and by value to slurm_get_end_time() and slurm_requeue()
/// (26.05 on), where the x86-64 and aarch64 ABIs pass a struct of its size in memory, as
/// declared here.
struct SlurmStepId {
    std::uint64_t sluid = 0; ///< 0: "find the job by its id"
    std::uint32_t job_id = k_no_val;
    std::uint32_t step_het_comp = k_no_val;
    std::uint32_t step_id = k_no_val;

    static constexpr std::uint32_t k_no_val = 0xfffffffe; ///< Slurm's NO_VAL
};
static_assert(sizeof(SlurmStepId) == 24, "slurm_step_id_t is 24 bytes");

} // namespace

SlurmAbi slurm_abi(long api_version) noexcept {
    const long current = api_current(api_version);
    if (current <= k_newest_api) {
        return known_abi(current);
    }
    // A newer library whose API_AGE reaches back to the newest API we know still provides that
    // interface (libtool's versioning, which Slurm's META follows); otherwise nothing is known.
    SlurmAbi abi = known_abi(current - api_age(api_version) <= k_newest_api ? k_newest_api : 0);
    abi.api = current;
    return abi;
}

KillStepAbi kill_step_abi(long api_version) noexcept {
    return slurm_abi(api_version).kill;
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

std::string slurm_release_of_api(long api_version) {
    const long index = api_current(api_version) - k_oldest_api;
    if (index >= 0 && index < static_cast<long>(std::size(k_releases))) {
        return k_releases[index];
    }
    return {};
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
    library.m_abi = slurm_abi(api_version);
    library.m_description = fmt::format("{} ({})", loaded, slurm_version_text(api_version));
    if (library.m_abi.kill == KillStepAbi::unsupported) {
        throw errors::make(
            Errc::io,
            "libslurm",
            fmt::format("{} ({}) is not supported: this tfslurm knows the library calls of Slurm "
                        "22.05 to 26.05 (API {} to {}), and a newer API only when it declares "
                        "itself compatible with API {}",
                        slurm_version_text(api_version),
                        loaded,
                        k_oldest_api,
                        k_newest_api,
                        k_newest_api),
            "end the step with scancel <job>.<step>, requeue the job with scontrol requeue "
            "<job>");
    }
    if (library.m_abi.as_api != library.m_abi.api) {
        logger().debug("libslurm: API {} declares API {} compatible (API_AGE {}): using the "
                       "declarations of {}",
                       library.m_abi.api,
                       library.m_abi.as_api,
                       api_age(api_version),
                       slurm_version_text(library.m_abi.as_api << 16));
    }
    library.m_kill = symbol("slurm_kill_job_step");
    library.m_get_end_time = symbol("slurm_get_end_time");
    library.m_requeue = symbol("slurm_requeue");
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
    int rc = -1;
    // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's void* as the function
    // this release declares (slurm_abi()).
    switch (m_abi.kill) {
    case KillStepAbi::signal:
        rc = reinterpret_cast<int (*)(std::uint32_t, std::uint32_t, std::uint16_t)>(m_kill)(
            job, id, SIGKILL);
        break;
    case KillStepAbi::signal_flags:
        rc = reinterpret_cast<int (*)(std::uint32_t, std::uint32_t, std::uint16_t, std::uint16_t)>(
            m_kill)(job, id, SIGKILL, 0);
        break;
    case KillStepAbi::step_id_pointer: {
        SlurmStepId step_id;
        step_id.job_id = job;
        step_id.step_id = id;
        rc = reinterpret_cast<int (*)(SlurmStepId*, std::uint16_t, std::uint16_t)>(m_kill)(
            &step_id, SIGKILL, 0);
        break;
    }
    case KillStepAbi::unsupported:
        break; // load() refuses such a library
    }
    // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
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

/// A whole job as a slurm_step_id_t (SLURM_STEP_ID_INITIALIZER with the job id set).
SlurmStepId job_step_id(std::uint32_t job) {
    SlurmStepId id;
    id.job_id = job;
    return id;
}

/// How far ahead Slurm puts the end of a job without a time limit: its start + 365 days.
constexpr std::chrono::hours k_no_time_limit{24 * 300};

} // namespace

std::optional<std::chrono::system_clock::time_point>
SlurmLibrary::job_end_time(std::uint64_t job) const {
    const std::uint32_t id = slurm_job_id(job, "read the end time of");
    std::time_t end = 0;
    errno = 0;
    // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): as in cancel_step()
    const int rc =
        m_abi.job == JobIdAbi::step_id
            ? reinterpret_cast<int (*)(SlurmStepId, std::time_t*)>(m_get_end_time)(job_step_id(id),
                                                                                   &end)
            : reinterpret_cast<int (*)(std::uint32_t, std::time_t*)>(m_get_end_time)(id, &end);
    // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
    if (rc != 0) {
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
    // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast): as in cancel_step()
    const int rc =
        m_abi.job == JobIdAbi::step_id
            ? reinterpret_cast<int (*)(SlurmStepId, std::uint32_t)>(m_requeue)(job_step_id(id), 0)
            : reinterpret_cast<int (*)(std::uint32_t, std::uint32_t)>(m_requeue)(id, 0);
    // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
    if (rc != 0) {
        throw errors::make(
            Errc::io, "slurm", fmt::format("cannot requeue job {}: {}", job, last_error()));
    }
}

} // namespace tfslurm
