// SPDX-License-Identifier: MIT
// The keeper of Containment::keeper (see spawn.hpp and spawn/spawn_child.hpp): a child
// subreaper between the launcher and the command that kills every descendant when the launcher
// dies. Like the supervisor: between fork() and exec (or _exit), async-signal-safe calls only,
// no allocation; the descendant walk uses fixed buffers.
#include "os/spawn/spawn_child.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstring>
#include <ctime>
#include <system_error>

namespace {

/// The caller's lifeline: a pipe whose write end only this process holds (close-on-exec, closed
/// in every keeper), made once per process: its EOF in a keeper says the caller died.
struct Lifeline {
    int read = -1;
    int write = -1;
    pid_t owner = 0; ///< the process that made it (a forked copy must make its own)
};
Lifeline g_lifeline; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// The read end of this process's lifeline. \throws std::system_error when pipe2 fails.
int lifeline_read_end() {
    if (g_lifeline.owner != ::getpid()) {
        int fds[2] = {-1, -1};
        if (::pipe2(fds, O_CLOEXEC) != 0) {
            throw std::system_error(errno, std::generic_category(), "pipe2");
        }
        // An inherited lifeline (of the process we were forked from) stays open: it is not ours.
        g_lifeline = Lifeline{fds[0], fds[1], ::getpid()};
    }
    return g_lifeline.read;
}

/// Append the decimal `number` to `out` at `length` (NUL-terminated, at most `size` bytes).
void append_number(char* out,
                   std::size_t size,
                   std::size_t& length,
                   unsigned long number) noexcept {
    char digits[24];
    std::size_t count = 0;
    do {
        digits[count++] = static_cast<char>('0' + number % 10);
        number /= 10;
    } while (number != 0 && count < sizeof digits);
    while (count > 0 && length + 1 < size) {
        out[length++] = digits[--count];
    }
    out[length] = '\0';
}

/// Append `text` to `out` at `length` (NUL-terminated, at most `size` bytes).
void append_text(char* out, std::size_t size, std::size_t& length, const char* text) noexcept {
    for (; *text != '\0' && length + 1 < size; ++text) {
        out[length++] = *text;
    }
    out[length] = '\0';
}

/// Room for one walk of the keeper's descendants; a larger tree is killed over several rounds
/// (the killed processes' orphans come to the keeper, a subreaper, and are found next round).
constexpr std::size_t k_max_walk = 8192;
pid_t g_walk[k_max_walk];   // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
pid_t g_parent[k_max_walk]; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// Append the children of every thread of `pid` (from `/proc/<pid>/task/<tid>/children`) to
/// g_walk[count...], each with `pid` in g_parent; returns the new count.
std::size_t append_children(pid_t pid, std::size_t count) noexcept {
    char path[64];
    std::size_t length = 0;
    append_text(path, sizeof path, length, "/proc/");
    append_number(path, sizeof path, length, static_cast<unsigned long>(pid));
    append_text(path, sizeof path, length, "/task");
    const int dir = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) {
        return count;
    }
    alignas(8) char entries[4096];
    long got = 0;
    while ((got = ::syscall(SYS_getdents64, dir, entries, sizeof entries)) > 0) {
        for (long offset = 0; offset < got;) {
            const auto* entry = reinterpret_cast<const dirent64*>(entries + offset);
            offset += entry->d_reclen;
            if (entry->d_name[0] < '1' || entry->d_name[0] > '9') {
                continue;
            }
            std::size_t file_length = length;
            char file[96];
            std::memcpy(file, path, length + 1);
            append_text(file, sizeof file, file_length, "/");
            append_text(file, sizeof file, file_length, entry->d_name);
            append_text(file, sizeof file, file_length, "/children");
            const int fd = ::open(file, O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                continue;
            }
            // "pid pid pid " (each followed by a space); a number may span two reads.
            char text[1024];
            unsigned long number = 0;
            bool digits = false;
            ssize_t n = 0;
            while ((n = ::read(fd, text, sizeof text)) > 0) {
                for (ssize_t i = 0; i < n; ++i) {
                    if (text[i] >= '0' && text[i] <= '9') {
                        number = number * 10 + static_cast<unsigned long>(text[i] - '0');
                        digits = true;
                    } else if (digits) {
                        if (count < k_max_walk) {
                            g_parent[count] = pid;
                            g_walk[count++] = static_cast<pid_t>(number);
                        }
                        number = 0;
                        digits = false;
                    }
                }
            }
            if (digits && count < k_max_walk) {
                g_parent[count] = pid;
                g_walk[count++] = static_cast<pid_t>(number);
            }
            ::close(fd);
        }
    }
    ::close(dir);
    return count;
}

/// Reap every ended child (`command`'s status into `command_status`); true when no child is
/// left at all.
bool reap_children(pid_t command, int& command_status, bool& command_ended) noexcept {
    for (;;) {
        int wait_status = 0;
        const pid_t pid = ::waitpid(-1, &wait_status, WNOHANG);
        if (pid > 0) {
            if (pid == command) {
                command_status = wait_status;
                command_ended = true;
            }
            continue;
        }
        if (pid < 0 && errno == EINTR) {
            continue;
        }
        return pid < 0 && errno == ECHILD;
    }
}

/// SIGKILL every descendant of the keeper, again and again, until it has no child left: the
/// orphans of the killed come to it (a subreaper) and are killed in the next round. Never
/// `kill(-1)`: only what the walk found, and only while it is still where the walk found it
/// (kill_if_child(): a number read from /proc may be another process's by the time of the
/// signal).
void kill_descendants(pid_t command, int& command_status, bool& command_ended) noexcept {
    // No child left means no descendant left: an orphan comes to us (a subreaper), so each
    // descendant is a child of ours or below one. Then no walk of /proc is made (a small
    // step's every trainer ends so, issue #33).
    if (reap_children(command, command_status, command_ended)) {
        return;
    }
    const pid_t self = ::getpid();
    for (;;) {
        std::size_t count = append_children(self, 0);
        for (std::size_t i = 0; i < count && count < k_max_walk; ++i) {
            count = append_children(g_walk[i], count);
        }
        for (std::size_t i = 0; i < count; ++i) {
            tfslurm::detail::kill_if_child(g_walk[i], g_parent[i], self);
        }
        if (reap_children(command, command_status, command_ended)) {
            return;
        }
        const timespec pause{0, 1000L * 1000L};
        ::nanosleep(&pause, nullptr);
    }
}

extern "C" void note_child(int /*signo*/) {}

} // namespace

namespace tfslurm::detail {

pid_t parent_of(pid_t pid) noexcept {
    char path[64];
    std::size_t length = 0;
    append_text(path, sizeof path, length, "/proc/");
    append_number(path, sizeof path, length, static_cast<unsigned long>(pid));
    append_text(path, sizeof path, length, "/stat");
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    // `pid (comm) state ppid ...`: comm may hold spaces and parentheses, so the fields after it
    // are found from the last ')'.
    char text[1024];
    const ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (n <= 0) {
        return -1;
    }
    text[n] = '\0';
    const char* close = std::strrchr(text, ')');
    if (close == nullptr || close[1] != ' ' || close[2] == '\0' || close[3] != ' ') {
        return -1;
    }
    long parent = 0;
    const char* digit = close + 4;
    if (*digit < '0' || *digit > '9') {
        return -1;
    }
    for (; *digit >= '0' && *digit <= '9'; ++digit) {
        parent = parent * 10 + (*digit - '0');
    }
    return static_cast<pid_t>(parent);
}

bool kill_if_child(pid_t pid, pid_t parent, pid_t keeper) noexcept {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
    // The pidfd is taken first: from then on it names one process, whatever happens to the
    // number, and the check below is about the process the signal reaches.
    const long fd = ::syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0 && errno != ENOSYS) {
        return false; // gone already
    }
#else
    const long fd = -1;
#endif
    const pid_t now = parent_of(pid);
    bool killed = false;
    if (now > 0 && (now == parent || now == keeper)) {
#if defined(SYS_pidfd_open) && defined(SYS_pidfd_send_signal)
        killed = fd >= 0 ? ::syscall(SYS_pidfd_send_signal, fd, SIGKILL, nullptr, 0) == 0
                         : ::kill(pid, SIGKILL) == 0;
#else
        killed = ::kill(pid, SIGKILL) == 0;
#endif
    }
    if (fd >= 0) {
        ::close(static_cast<int>(fd));
    }
    return killed;
}

/// End the keeper whose caller died: its file is removed, for the caller no longer can.
[[noreturn]] void end_orphaned(const KeeperArgs& keeper) noexcept {
    if (keeper.remove_if_orphaned != nullptr) {
        ::unlink(keeper.remove_if_orphaned);
    }
    ::_exit(128 + SIGKILL);
}

// Kept whole (~75 lines): set-up, fork and the wait loop share the signal mask's state.
[[noreturn]] void keep(const ExecArgs& exec, const KeeperArgs& keeper, pid_t parent) noexcept {
    ::setpgid(0, 0);
    // Our command line is still the caller's: the name tells us apart in ps and /proc.
    ::prctl(PR_SET_NAME, "tfslurm-keeper");
    close_other_fds(keeper.keep_fds);
    ignore_signals();
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        const int report = -errno;
        [[maybe_unused]] const auto written = ::write(exec.report_fd, &report, sizeof report);
        ::close(keeper.lifeline);
        exec_child(exec, /*new_group=*/true, SIGKILL, parent);
    }
    // SIGTERM/SIGINT: T is being stopped. SIGCHLD: a handler that only interrupts ppoll(),
    // blocked outside it, so that no child's end is missed between a reap and the wait.
    install_stop_handler();
    struct sigaction action {};
    ::sigemptyset(&action.sa_mask);
    action.sa_handler = note_child;
    ::sigaction(SIGCHLD, &action, nullptr);
    sigset_t child_signal;
    ::sigemptyset(&child_signal);
    ::sigaddset(&child_signal, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &child_signal, nullptr);
    pollfd lifeline{keeper.lifeline, POLLIN, 0};
    if (::getppid() != parent || ::poll(&lifeline, 1, 0) != 0) {
        end_orphaned(keeper); // the caller died before we started the command
    }
    const pid_t command = start_command(exec, keeper.lifeline);
    int command_status = 0;
    bool command_ended = false;
    bool settled = false;
    sigset_t during_wait;
    ::sigemptyset(&during_wait);
    for (;;) {
        const bool no_child = reap_children(command, command_status, command_ended);
        if (command_ended) {
            if (!stop_noted() && !settled && killed_by_stop_signal(command_status)) {
                await_stop_signal(); // perhaps the step's cancel, which reached T before us
                settled = true;
            }
            if (!stop_noted() || no_child) {
                break; // ended by itself (what is left is killed), or stopped and all ended
            }
        }
        lifeline.revents = 0;
        if (::ppoll(&lifeline, 1, nullptr, &during_wait) > 0) {
            // The caller died (its end of the lifeline closed): nothing it started may stay.
            // Its file goes first, should we be killed too (the step's end), and again at the end
            // (a trainer's `touch` may have made it again meanwhile).
            if (keeper.remove_if_orphaned != nullptr) {
                ::unlink(keeper.remove_if_orphaned);
            }
            kill_descendants(command, command_status, command_ended);
            end_orphaned(keeper);
        }
    }
    kill_descendants(command, command_status, command_ended);
    end_like(command_status);
}

KeeperArgs
keeper_args(const std::vector<int>& inherit_fds, int stdout_fd, int stderr_fd, int report_fd) {
    KeeperArgs keeper;
    keeper.lifeline = lifeline_read_end();
    keeper.keep_fds = inherit_fds;
    keeper.keep_fds.push_back(report_fd);
    for (const int fd : {stdout_fd, stderr_fd}) {
        if (fd >= 0) {
            keeper.keep_fds.push_back(fd);
        }
    }
    keeper.keep_fds.push_back(keeper.lifeline);
    std::sort(keeper.keep_fds.begin(), keeper.keep_fds.end());
    return keeper;
}

} // namespace tfslurm::detail
