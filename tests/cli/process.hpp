// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Run a program with an exact environment and stdin; capture stdout, stderr and status.

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <stdexcept>
#include <string>
#include <vector>

namespace tfslurm::test {

struct Result {
    int status = -1; ///< exit status, or 128 + signal
    std::string out;
    std::string err;
};

inline Result run(const std::vector<std::string>& argv,
                  const std::vector<std::string>& env,
                  const std::string& input = {}) {
    std::array<int, 2> in{};
    std::array<int, 2> out{};
    std::array<int, 2> err{};
    if (::pipe(in.data()) != 0 || ::pipe(out.data()) != 0 || ::pipe(err.data()) != 0) {
        throw std::runtime_error("pipe failed");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err[1], 2);
    for (const int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
        posix_spawn_file_actions_addclose(&actions, fd);
    }
    std::vector<char*> args;
    for (const auto& arg : argv) {
        args.push_back(const_cast<char*>(arg.c_str())); // NOLINT: POSIX API
    }
    args.push_back(nullptr);
    std::vector<char*> envp;
    for (const auto& var : env) {
        envp.push_back(const_cast<char*>(var.c_str())); // NOLINT: POSIX API
    }
    envp.push_back(nullptr);
    pid_t pid = 0;
    const int rc =
        ::posix_spawn(&pid, argv.front().c_str(), &actions, nullptr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
        throw std::runtime_error("posix_spawn failed for " + argv.front());
    }
    std::size_t written = 0;
    if (input.empty()) {
        ::close(in[1]);
        in[1] = -1;
    }
    Result result;
    std::array<char, 65536> buffer{};
    int open_pipes = 2;
    while (open_pipes > 0 || in[1] >= 0) {
        std::array<pollfd, 3> fds{{{out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in[1], POLLOUT, 0}}};
        if (::poll(fds.data(), fds.size(), 30000) <= 0) {
            throw std::runtime_error("timeout or poll error waiting for " + argv.front());
        }
        for (int i = 0; i < 2; ++i) {
            if (fds[static_cast<std::size_t>(i)].fd >= 0 &&
                fds[static_cast<std::size_t>(i)].revents != 0) {
                const auto got =
                    ::read(fds[static_cast<std::size_t>(i)].fd, buffer.data(), buffer.size());
                if (got > 0) {
                    (i == 0 ? result.out : result.err)
                        .append(buffer.data(), static_cast<std::size_t>(got));
                } else {
                    ::close(i == 0 ? out[0] : err[0]);
                    (i == 0 ? out[0] : err[0]) = -1;
                    --open_pipes;
                }
            }
        }
        if (in[1] >= 0 && fds[2].revents != 0) {
            const auto put = ::write(in[1], input.data() + written, input.size() - written);
            written += put > 0 ? static_cast<std::size_t>(put) : 0;
            if (put <= 0 || written == input.size()) {
                ::close(in[1]);
                in[1] = -1;
            }
        }
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

} // namespace tfslurm::test
