// SPDX-License-Identifier: MIT
#include <tfslurm/common/exit_status.hpp>

#include <fmt/format.h>

#include <cstring>

namespace tfslurm {

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
