// SPDX-License-Identifier: MIT
// A stand-in for libslurm, built once per Slurm API (FAKE_SLURM_API, FAKE_SLURM_AGE) with the
// declarations of that release (our own, from each release's documented slurm.h), so that the
// unit tests can check which signature SlurmLibrary calls and with which arguments, without
// Slurm. Every call appends one line to a log the test reads with fake_slurm_calls().
#include <cerrno>
#include <cstdint>
#include <ctime>
#include <string>

#ifndef FAKE_SLURM_API
#error "FAKE_SLURM_API (38, 42, 45, ...) must be defined"
#endif
#ifndef FAKE_SLURM_AGE
#define FAKE_SLURM_AGE 0
#endif

namespace {

std::string g_calls; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

void record(const std::string& line) {
    g_calls += line;
    g_calls += '\n';
}

/// slurm_step_id_t of 24.11 on.
struct StepId {
    std::uint64_t sluid;
    std::uint32_t job_id;
    std::uint32_t step_het_comp;
    std::uint32_t step_id;
};

[[maybe_unused]] std::string text(const StepId& id) {
    return "{sluid=" + std::to_string(id.sluid) + " job=" + std::to_string(id.job_id) +
           " het=" + std::to_string(id.step_het_comp) + " step=" + std::to_string(id.step_id) + "}";
}

/// Job 99 does not exist: every call about it fails, as slurmctld's "Invalid job id" does.
constexpr std::uint32_t k_missing_job = 99;
/// What slurm_get_end_time() answers for every job but k_missing_job (fake_slurm_set_end()).
std::time_t g_end = 0; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// 0, or -1 with errno ESLURM_INVALID_JOB_ID (2017) for k_missing_job, as libslurm fails.
int answer(std::uint32_t job) {
    if (job != k_missing_job) {
        return 0;
    }
    errno = 2017;
    return -1;
}

} // namespace

extern "C" {

__attribute__((visibility("default"))) const char* fake_slurm_calls() {
    return g_calls.c_str();
}

__attribute__((visibility("default"))) void fake_slurm_reset() {
    g_calls.clear();
}

__attribute__((visibility("default"))) void fake_slurm_set_end(std::time_t end) {
    g_end = end;
}

__attribute__((visibility("default"))) long slurm_api_version() {
    return (static_cast<long>(FAKE_SLURM_API) << 16) | FAKE_SLURM_AGE;
}

__attribute__((visibility("default"))) void slurm_init(const char* conf) {
    record(std::string("slurm_init(") + (conf == nullptr ? "NULL" : conf) + ")");
}

__attribute__((visibility("default"))) char* slurm_strerror(int code) {
    static char invalid[] = "Invalid job id specified";
    static char other[] = "Unexpected error";
    return code == 2017 ? invalid : other;
}

#if FAKE_SLURM_API <= 39
__attribute__((visibility("default"))) int
slurm_kill_job_step(std::uint32_t job, std::uint32_t step, std::uint16_t signal) {
    record("slurm_kill_job_step(" + std::to_string(job) + ", " + std::to_string(step) + ", " +
           std::to_string(signal) + ")");
    return answer(job);
}
#elif FAKE_SLURM_API <= 43
__attribute__((visibility("default"))) int slurm_kill_job_step(std::uint32_t job,
                                                               std::uint32_t step,
                                                               std::uint16_t signal,
                                                               std::uint16_t flags) {
    record("slurm_kill_job_step(" + std::to_string(job) + ", " + std::to_string(step) + ", " +
           std::to_string(signal) + ", " + std::to_string(flags) + ")");
    return answer(job);
}
#else
__attribute__((visibility("default"))) int
slurm_kill_job_step(StepId* id, std::uint16_t signal, std::uint16_t flags) {
    record("slurm_kill_job_step(&" + text(*id) + ", " + std::to_string(signal) + ", " +
           std::to_string(flags) + ")");
    return answer(id->job_id);
}
#endif

#if FAKE_SLURM_API <= 44
__attribute__((visibility("default"))) int slurm_get_end_time(std::uint32_t job, std::time_t* end) {
    record("slurm_get_end_time(" + std::to_string(job) + ")");
    *end = g_end;
    return answer(job);
}
__attribute__((visibility("default"))) int slurm_requeue(std::uint32_t job, std::uint32_t flags) {
    record("slurm_requeue(" + std::to_string(job) + ", " + std::to_string(flags) + ")");
    return answer(job);
}
#else
__attribute__((visibility("default"))) int slurm_get_end_time(StepId id, std::time_t* end) {
    record("slurm_get_end_time(" + text(id) + ")");
    *end = g_end;
    return answer(id.job_id);
}
__attribute__((visibility("default"))) int slurm_requeue(StepId id, std::uint32_t flags) {
    record("slurm_requeue(" + text(id) + ", " + std::to_string(flags) + ")");
    return answer(id.job_id);
}
#endif

} // extern "C"
