// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Small descriptor and signal helpers shared by the Asio shells of `tfslurm run` (launcher,
/// coordinator server, local run).

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <string_view>

namespace tfslurm::detail {

/// Asio does not create sockets with SOCK_CLOEXEC: without this, a trainer (and its children)
/// would inherit the control connection, keep it open after the launcher died, and could talk
/// to the coordinator in our name.
inline void set_cloexec(int fd) noexcept {
    if (fd >= 0) {
        ::fcntl(fd, F_SETFD, ::fcntl(fd, F_GETFD) | FD_CLOEXEC);
    }
}

/// Write everything, retrying on EINTR; gives up silently on any other error.
inline void write_all(int fd, std::string_view data) noexcept {
    while (!data.empty()) {
        const ssize_t written = ::write(fd, data.data(), data.size());
        if (written < 0) {
            if (errno == EINTR) {
                continue;
            }
            return;
        }
        data.remove_prefix(static_cast<std::size_t>(written));
    }
}

/// Ignore SIGPIPE for the whole run (restored to the default in spawned children by spawn):
/// a peer that closes its connection must be an error code, not our death.
inline void ignore_sigpipe() noexcept {
    ::signal(SIGPIPE, SIG_IGN);
}

} // namespace tfslurm::detail
