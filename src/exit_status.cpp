// SPDX-License-Identifier: MIT
#include <tfslurm/exit_status.hpp>

#include <fmt/format.h>

#include <sys/wait.h>

#include <cstring>

namespace tfslurm {

ExitStatus ExitStatus::from_wait_status(int status) noexcept {
    if (WIFSIGNALED(status)) {
        return signaled(WTERMSIG(status));
    }
    if (WIFEXITED(status)) {
        return exited(WEXITSTATUS(status));
    }
    // Stopped/continued statuses are only reported with WUNTRACED/WCONTINUED, which tfslurm
    // never asks for; treat anything else as a failure rather than a success.
    return exited(255);
}

int ExitStatus::shell_status() const noexcept {
    return kind == Kind::signaled ? 128 + value : value;
}

std::string signal_description(int signo) {
    // sigdescr_np (glibc >= 2.32) is thread-safe, unlike strsignal.
    const char* text = sigdescr_np(signo);
    if (text == nullptr) {
        return fmt::format("Unknown signal {}", signo);
    }
    return text;
}

std::string describe(const ExitStatus& status) {
    if (status.kind == ExitStatus::Kind::signaled) {
        return fmt::format(
            "was killed by signal {} ({})", status.value, signal_description(status.value));
    }
    return fmt::format("exited with status {}", status.value);
}

} // namespace tfslurm
