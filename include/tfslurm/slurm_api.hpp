// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The one place tfslurm calls Slurm's library. The tfslurm binary contains no Slurm code and
/// does not link libslurm (GPL-2.0-or-later): it loads the node's own libslurm at run time with
/// dlopen(), through our own declarations of the few functions it uses (no <slurm/slurm.h>
/// here), and only for three things: cancel a step whose node was lost, read a job's end time
/// (`--checkpoint-before`) and requeue a job (`--requeue`).

#include <chrono>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace tfslurm {

/// A step of a Slurm job, `<job>.<step>`.
struct StepRef {
    std::uint64_t job = 0;
    std::uint64_t step = 0;

    friend bool operator==(const StepRef& a, const StepRef& b) noexcept {
        return a.job == b.job && a.step == b.step;
    }
};

/// `12.0`.
[[nodiscard]] std::string to_string(const StepRef& step);

/// How a Slurm release declares slurm_kill_job_step().
enum class KillStepAbi {
    unsupported, ///< not a release this tfslurm knows: refuse rather than guess
    signal,      ///< 22.05, 23.02: (uint32_t job, uint32_t step, uint16_t signal)
    signal_flags ///< 23.11 to 25.05: (uint32_t job, uint32_t step, uint16_t signal, uint16_t flags)
};

/// The slurm_kill_job_step() of the Slurm release whose slurm_api_version() is `api_version`:
/// SLURM_API_VERSION, `(API_CURRENT << 16) | (API_REVISION << 8) | API_AGE`, where API_CURRENT
/// (also the soname) is 38 for 22.05 up to 43 for 25.05. 25.11 (44) takes a slurm_step_id_t and
/// is unsupported, like every API this tfslurm does not know.
/// Input: 0x260000 (22.05). Output: KillStepAbi::signal.
[[nodiscard]] KillStepAbi kill_step_abi(long api_version) noexcept;

/// The release of a slurm_api_version(): `Slurm 22.05 (API 38)`, or `Slurm API 37` when the
/// API is not one this tfslurm knows the release of.
[[nodiscard]] std::string slurm_version_text(long api_version);

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
    ///         25.11 (API 44) (libslurm.so.44) is not supported: ...`), or a missing symbol.
    [[nodiscard]] static SlurmLibrary load(const std::vector<std::string>& names);

    /// Cancel every task of `step` (SIGKILL, as `scancel <job>.<step>` does).
    /// \throws Error (Errc::io) with Slurm's own text, e.g. `slurm: cannot cancel step 12.0:
    ///         Invalid job id specified`.
    void cancel_step(const StepRef& step) const;

    /// When `job` ends (its time limit), as slurmctld knows it (slurm_get_end_time(), the same
    /// in 22.05 to 25.11); nullopt for a job without a time limit (Slurm then says "start time
    /// + 365 days": anything more than 300 days ahead counts as none).
    /// \throws Error (Errc::io) with Slurm's own text, e.g. `slurm: cannot read the end time of
    ///         job 12: Invalid job id specified`.
    [[nodiscard]] std::optional<std::chrono::system_clock::time_point>
    job_end_time(std::uint64_t job) const;

    /// Requeue `job` (slurm_requeue(job, 0), the same in 22.05 to 25.11, as `scontrol requeue`
    /// does): Slurm ends every step and the batch script, and the job goes back to pending,
    /// with SLURM_RESTART_COUNT one higher when it runs again.
    /// \throws Error (Errc::io) with Slurm's own text, e.g. `slurm: cannot requeue job 12:
    ///         Only batch jobs are accepted or processed`.
    void requeue(std::uint64_t job) const;

    /// The loaded file and release, e.g. `libslurm.so (Slurm 22.05 (API 38))`.
    [[nodiscard]] const std::string& description() const noexcept { return m_description; }

  private:
    SlurmLibrary() = default;
    /// Slurm's text for its last error, e.g. `Invalid job id specified`.
    [[nodiscard]] std::string last_error() const;

    using KillStep3 = int (*)(std::uint32_t, std::uint32_t, std::uint16_t);
    using KillStep4 = int (*)(std::uint32_t, std::uint32_t, std::uint16_t, std::uint16_t);
    using GetEndTime = int (*)(std::uint32_t, std::time_t*);
    using Requeue = int (*)(std::uint32_t, std::uint32_t);
    using StrError = char* (*)(int);
    using GetErrno = int (*)();

    KillStepAbi m_abi = KillStepAbi::unsupported;
    KillStep3 m_kill3 = nullptr;
    KillStep4 m_kill4 = nullptr;
    GetEndTime m_get_end_time = nullptr;
    Requeue m_requeue = nullptr;
    StrError m_strerror = nullptr;
    GetErrno m_get_errno = nullptr; ///< absent from 24.11 on: errno is Slurm's errno then
    std::string m_description;
};

} // namespace tfslurm
