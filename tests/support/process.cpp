// SPDX-License-Identifier: MIT
#include "process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <ctime>
#include <fstream>
#include <string_view>
#include <system_error>
#include <thread>

extern char** environ;

namespace tfslurm::test {

bool ended(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(stat, line);
    // `pid (comm) state ...`: comm may hold spaces and parentheses; the state follows the last ')'.
    const auto close = line.rfind(')');
    return close == std::string::npos || line.compare(close, 4, ") Z ") == 0;
}

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void throw_errno(int error, const std::string& what) {
    throw std::system_error(error, std::generic_category(), what);
}

/// A pipe whose two ends are closed on exec and on destruction.
struct Pipe {
    Pipe() {
        if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
            throw_errno(errno, "pipe2");
        }
    }
    ~Pipe() {
        close_read();
        close_write();
    }
    Pipe(const Pipe&) = delete;
    Pipe& operator=(const Pipe&) = delete;
    Pipe(Pipe&&) = delete;
    Pipe& operator=(Pipe&&) = delete;

    void close_read() noexcept { close_end(0); }
    void close_write() noexcept { close_end(1); }
    [[nodiscard]] int read_end() const noexcept { return fds[0]; }
    [[nodiscard]] int write_end() const noexcept { return fds[1]; }

    std::array<int, 2> fds{-1, -1};

  private:
    void close_end(std::size_t end) noexcept {
        if (fds[end] >= 0) {
            ::close(fds[end]);
            fds[end] = -1;
        }
    }
};

/// posix_spawn() with owned file actions and attributes.
class Spawner {
  public:
    Spawner() {
        posix_spawn_file_actions_init(&m_actions);
        posix_spawnattr_init(&m_attributes);
    }
    ~Spawner() {
        posix_spawn_file_actions_destroy(&m_actions);
        posix_spawnattr_destroy(&m_attributes);
    }
    Spawner(const Spawner&) = delete;
    Spawner& operator=(const Spawner&) = delete;
    Spawner(Spawner&&) = delete;
    Spawner& operator=(Spawner&&) = delete;

    void dup_to(int fd, int target) { posix_spawn_file_actions_adddup2(&m_actions, fd, target); }
    void open_to(int target, const std::string& path, int flags) {
        posix_spawn_file_actions_addopen(&m_actions, target, path.c_str(), flags, 0644);
    }
    void own_process_group() {
        posix_spawnattr_setflags(&m_attributes, POSIX_SPAWN_SETPGROUP);
        posix_spawnattr_setpgroup(&m_attributes, 0);
    }

    [[nodiscard]] pid_t start(const Command& command) const {
        if (command.argv.empty()) {
            throw_errno(EINVAL, "spawn: empty argv");
        }
        std::vector<char*> argv;
        argv.reserve(command.argv.size() + 1);
        for (const auto& arg : command.argv) {
            argv.push_back(const_cast<char*>(arg.c_str())); // NOLINT: POSIX interface
        }
        argv.push_back(nullptr);
        std::vector<char*> envp;
        envp.reserve(command.env.size() + 1);
        for (const auto& entry : command.env) {
            envp.push_back(const_cast<char*>(entry.c_str())); // NOLINT: POSIX interface
        }
        envp.push_back(nullptr);
        pid_t pid = -1;
        const int rc =
            ::posix_spawn(&pid, argv.front(), &m_actions, &m_attributes, argv.data(), envp.data());
        if (rc != 0) {
            throw_errno(rc, "posix_spawn " + command.argv.front());
        }
        return pid;
    }

  private:
    posix_spawn_file_actions_t m_actions{};
    posix_spawnattr_t m_attributes{};
};

int shell_status(int wait_status) {
    return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : 128 + WTERMSIG(wait_status);
}

int reap(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            throw_errno(errno, "waitpid");
        }
    }
    return status;
}

/// write() that reports a closed reader as EPIPE instead of killing the test with SIGPIPE:
/// SIGPIPE is blocked in this thread meanwhile and a pending one is consumed.
ssize_t write_no_sigpipe(int fd, std::string_view data) {
    sigset_t pipe_signal;
    sigset_t old_mask;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_signal, &old_mask);
    const ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0 && errno == EPIPE) {
        const timespec no_wait{0, 0};
        while (sigtimedwait(&pipe_signal, nullptr, &no_wait) < 0 && errno == EINTR) {
        }
        errno = EPIPE;
    }
    const int saved = errno;
    pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
    errno = saved;
    return written;
}

} // namespace

Result run(const Command& command) {
    Pipe in;
    Pipe out;
    Pipe err;
    Spawner spawner;
    spawner.dup_to(in.read_end(), 0);
    spawner.dup_to(out.write_end(), 1);
    spawner.dup_to(err.write_end(), 2);
    const pid_t pid = spawner.start(command);
    in.close_read();
    out.close_write();
    err.close_write();
    if (command.input.empty()) {
        in.close_write();
    } else if (::fcntl(in.write_end(), F_SETFL, O_NONBLOCK) != 0) {
        throw_errno(errno, "fcntl");
    }

    Result result;
    std::size_t written = 0;
    bool killed = false;
    const auto deadline = Clock::now() + command.timeout;
    std::array<char, 65536> buffer{};
    while (out.read_end() >= 0 || err.read_end() >= 0 || in.write_end() >= 0) {
        int wait_ms = -1;
        if (!killed) {
            const auto left =
                std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
            if (left.count() <= 0) {
                ::kill(pid, SIGKILL);
                killed = true;
                result.timed_out = true;
                in.close_write();
            } else {
                wait_ms = static_cast<int>(left.count());
            }
        }
        std::array<pollfd, 3> fds{{{out.read_end(), POLLIN, 0},
                                   {err.read_end(), POLLIN, 0},
                                   {in.write_end(), POLLOUT, 0}}};
        if (::poll(fds.data(), fds.size(), wait_ms) < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw_errno(errno, "poll");
        }
        const std::array<std::pair<Pipe*, std::string*>, 2> sinks{
            {{&out, &result.out}, {&err, &result.err}}};
        for (std::size_t i = 0; i < sinks.size(); ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) {
                continue;
            }
            const ssize_t got = ::read(fds[i].fd, buffer.data(), buffer.size());
            if (got > 0) {
                sinks[i].second->append(buffer.data(), static_cast<std::size_t>(got));
            } else if (got == 0 || errno != EINTR) {
                sinks[i].first->close_read();
            }
        }
        if (fds[2].fd >= 0 && fds[2].revents != 0) {
            const ssize_t put =
                write_no_sigpipe(in.write_end(), std::string_view(command.input).substr(written));
            if (put > 0) {
                written += static_cast<std::size_t>(put);
            }
            if ((put < 0 && errno != EINTR && errno != EAGAIN) || written == command.input.size()) {
                in.close_write();
            }
        }
    }
    result.wait_status = reap(pid);
    result.status = shell_status(result.wait_status);
    return result;
}

std::vector<std::string> environment_without(const std::vector<std::string>& prefixes) {
    std::vector<std::string> env;
    for (char** entry = environ; *entry != nullptr; ++entry) {
        const std::string_view var(*entry);
        bool dropped = false;
        for (const auto& prefix : prefixes) {
            dropped = dropped || var.rfind(prefix, 0) == 0;
        }
        if (!dropped) {
            env.emplace_back(var);
        }
    }
    return env;
}

Process::Process(const Command& command, const std::string& output_file) {
    Spawner spawner;
    spawner.own_process_group();
    spawner.open_to(1, output_file, O_WRONLY | O_CREAT | O_TRUNC);
    spawner.dup_to(1, 2);
    m_pid = spawner.start(command);
}

Process::~Process() {
    if (m_pid > 0 && !m_reaped) {
        kill_group(SIGKILL);
        int ignored = 0;
        while (::waitpid(m_pid, &ignored, 0) < 0 && errno == EINTR) {
        }
    }
}

std::optional<int> Process::wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
        int status = 0;
        const pid_t done = ::waitpid(m_pid, &status, WNOHANG);
        if (done == m_pid) {
            m_reaped = true;
            return status;
        }
        if (done < 0 && errno != EINTR) {
            throw_errno(errno, "waitpid");
        }
        if (Clock::now() > deadline) {
            return std::nullopt;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

void Process::kill_group(int signal) const noexcept {
    if (m_pid > 0 && !m_reaped) {
        ::kill(-m_pid, signal);
    }
}

} // namespace tfslurm::test
