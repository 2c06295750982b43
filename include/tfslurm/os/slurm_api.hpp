// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The one place tfslurm calls Slurm's library. The tfslurm binary contains no Slurm code and
/// does not link libslurm (GPL-2.0-or-later): it loads the node's own libslurm at run time with
/// dlopen(), through our own declarations of the few functions it uses (no <slurm/slurm.h>
/// here), and only for three things: cancel a step whose node was lost, read a job's end time
/// (`--checkpoint-before`) and requeue a job (`--requeue`).

#include <tfslurm/resolve/step.hpp>

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace tfslurm {

/// How a Slurm release declares slurm_kill_job_step().
enum class KillStepAbi {
    unsupported,    ///< not a release this tfslurm knows: refuse rather than guess
    signal,         ///< 22.05, 23.02: (uint32_t job, uint32_t step, uint16_t signal)
    signal_flags,   ///< 23.11 to 25.05: (uint32_t job, uint32_t step, uint16_t signal,
                    ///< uint16_t flags)
    step_id_pointer ///< 25.11 on: (slurm_step_id_t* step, uint16_t signal, uint16_t flags)
};

/// How a Slurm release names the job in slurm_get_end_time() and slurm_requeue().
enum class JobIdAbi {
    unsupported, ///< not a release this tfslurm knows
    job_id,      ///< 22.05 to 25.11: uint32_t job id
    step_id      ///< 26.05 on: slurm_step_id_t by value (its job id set, the rest "none")
};

/// The declarations tfslurm uses for one libslurm.
struct SlurmAbi {
    long api = 0;    ///< the library's API (API_CURRENT, also its soname)
    long as_api = 0; ///< the API whose declarations are used: `api`, or the newest known one
                     ///< for a newer library whose API_AGE says it still provides that one
    KillStepAbi kill = KillStepAbi::unsupported;
    JobIdAbi job = JobIdAbi::unsupported;

    friend bool operator==(const SlurmAbi& a, const SlurmAbi& b) noexcept {
        return a.api == b.api && a.as_api == b.as_api && a.kill == b.kill && a.job == b.job;
    }
};

/// The declarations for the library whose slurm_api_version() is `api_version`:
/// SLURM_API_VERSION, `(API_CURRENT << 16) | (API_REVISION << 8) | API_AGE`, where API_CURRENT
/// (also the soname) is 38 for 22.05 up to 45 for 26.05. A newer API is used with 26.05's
/// declarations only when its API_AGE reaches back to 45 (libtool's promise that the interface
/// of 45 is still provided); anything else is unsupported (both members `unsupported`).
/// Input: 0x2d0000 (26.05). Output: {45, 45, KillStepAbi::step_id_pointer, JobIdAbi::step_id}.
[[nodiscard]] SlurmAbi slurm_abi(long api_version) noexcept;

/// The slurm_kill_job_step() of the release whose slurm_api_version() is `api_version`
/// (slurm_abi(api_version).kill).
/// Input: 0x260000 (22.05). Output: KillStepAbi::signal.
[[nodiscard]] KillStepAbi kill_step_abi(long api_version) noexcept;

/// The release of a slurm_api_version(): `Slurm 22.05 (API 38)`, or `Slurm API 46` when the
/// API is not one this tfslurm knows the release of.
[[nodiscard]] std::string slurm_version_text(long api_version);

/// The release (`major.minor`) whose libslurm has the API_CURRENT of `api_version`; empty when
/// this tfslurm does not know it. Input: 0x2a0000. Output: `24.11`.
[[nodiscard]] std::string slurm_release_of_api(long api_version);

/// The names tried by default, in order: `libslurm.so`, then `libslurm.so.<N>` for the sonames
/// of the releases kill_step_abi() knows and the next ones (newest first, so that an unknown
/// newer release is refused by name rather than missed).
/// Input: none. Output: {"libslurm.so", "libslurm.so.45", ..., "libslurm.so.38"}.
[[nodiscard]] std::vector<std::string> default_libslurm_names();

/// The node's libslurm, loaded with dlopen() (never unloaded: Slurm's library keeps state for
/// the whole process). Not copyable; one per process is enough.
class SlurmLibrary {
  public:
    /// Load the first of `names` (file names searched like dlopen() does, or paths) that
    /// dlopen() accepts, check its slurm_api_version() and look up the functions used, then
    /// call slurm_init(NULL) (reads slurm.conf or the configless cache, as scancel does).
    /// \throws Error (Errc::io) naming what was tried, e.g. `libslurm: cannot load any of
    ///         libslurm.so, libslurm.so.45, ...: libslurm.so.38: cannot open shared object
    ///         file: No such file or directory`, or an unsupported release (`libslurm: Slurm
    ///         API 46 (libslurm.so.46) is not supported: ...` with a hint naming `scancel` and
    ///         `scontrol requeue`), or a missing symbol.
    [[nodiscard]] static SlurmLibrary load(const std::vector<std::string>& names);

    /// Cancel every task of `step` (SIGKILL, as `scancel <job>.<step>` does).
    /// \throws Error (Errc::io) with Slurm's own text, e.g. `slurm: cannot cancel step 12.0:
    ///         Invalid job id specified`.
    void cancel_step(const StepRef& step) const;

    /// When `job` ends (its time limit), as slurmctld knows it (slurm_get_end_time(): a job id
    /// up to 25.11, a slurm_step_id_t from 26.05); nullopt for a job without a time limit (Slurm
    /// then says "start time
    /// + 365 days": anything more than 300 days ahead counts as none).
    /// \throws Error (Errc::io) with Slurm's own text, e.g. `slurm: cannot read the end time of
    ///         job 12: Invalid job id specified`.
    [[nodiscard]] std::optional<std::chrono::system_clock::time_point>
    job_end_time(std::uint64_t job) const;

    /// Requeue `job` (slurm_requeue(job, 0), with a job id up to 25.11 and a slurm_step_id_t
    /// from 26.05, as `scontrol requeue` does): Slurm ends every step and the batch script, and the
    /// job goes back to pending, with SLURM_RESTART_COUNT one higher when it runs again. \throws
    /// Error (Errc::io) with Slurm's own text, e.g. `slurm: cannot requeue job 12:
    ///         Only batch jobs are accepted or processed`.
    void requeue(std::uint64_t job) const;

    /// The loaded file and release, e.g. `libslurm.so (Slurm 22.05 (API 38))`.
    [[nodiscard]] const std::string& description() const noexcept { return m_description; }

    /// The declarations in use.
    [[nodiscard]] const SlurmAbi& abi() const noexcept { return m_abi; }

  private:
    SlurmLibrary() = default;
    /// Slurm's text for its last error, e.g. `Invalid job id specified`.
    [[nodiscard]] std::string last_error() const;

    using StrError = char* (*)(int);
    using GetErrno = int (*)();

    SlurmAbi m_abi;
    void* m_kill = nullptr;         ///< slurm_kill_job_step, called as m_abi.kill says
    void* m_get_end_time = nullptr; ///< slurm_get_end_time, called as m_abi.job says
    void* m_requeue = nullptr;      ///< slurm_requeue, called as m_abi.job says
    StrError m_strerror = nullptr;
    GetErrno m_get_errno = nullptr; ///< absent from 24.11 on: errno is Slurm's errno then
    std::string m_description;
};

} // namespace tfslurm
