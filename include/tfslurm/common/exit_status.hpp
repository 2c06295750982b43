// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// How a process ended, and how that is told: pure (no process is started or waited for here).

#include <string>

namespace tfslurm {

/// How a process ended, as waitpid() reports it.
///
/// Example: `ExitStatus::from_wait_status(status)` of a `kill -9`ed process is
/// `{Kind::signaled, 9}`, its shell_status() is 137 and describe() gives
/// `was killed by signal 9 (Killed)`.
struct ExitStatus {
    enum class Kind { exited, signaled };

    Kind kind = Kind::exited;
    int value = 0; ///< the exit code (0..255) or the signal number

    [[nodiscard]] static ExitStatus exited(int code) noexcept { return {Kind::exited, code}; }
    [[nodiscard]] static ExitStatus signaled(int signo) noexcept { return {Kind::signaled, signo}; }
    /// Decode a `waitpid()` status (WIFEXITED/WIFSIGNALED). Anything else (stopped or
    /// continued, never asked for) is reported as exited(255), a failure.
    [[nodiscard]] static ExitStatus from_wait_status(int status) noexcept;

    [[nodiscard]] bool success() const noexcept { return kind == Kind::exited && value == 0; }
    /// What a shell (and srun) reports: the code, or 128 + the signal number.
    [[nodiscard]] int shell_status() const noexcept;

    friend bool operator==(const ExitStatus& a, const ExitStatus& b) noexcept {
        return a.kind == b.kind && a.value == b.value;
    }
    friend bool operator!=(const ExitStatus& a, const ExitStatus& b) noexcept { return !(a == b); }
};

/// `exited with status 3` or `was killed by signal 9 (Killed)`.
[[nodiscard]] std::string describe(const ExitStatus& status);

/// The description of a signal. Input: 15. Output: `Terminated`. Unknown numbers give
/// `Unknown signal N`.
[[nodiscard]] std::string signal_description(int signo);

} // namespace tfslurm
