// SPDX-License-Identifier: MIT
#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/spawn.hpp>

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <thread>

namespace tfslurm {

namespace {

bool is_executable_file(const std::string& path, int& error) {
    struct stat info {};
    if (::stat(path.c_str(), &info) != 0) {
        error = errno;
        return false;
    }
    if (!S_ISREG(info.st_mode)) {
        error = EACCES;
        return false;
    }
    if (::access(path.c_str(), X_OK) != 0) {
        error = errno;
        return false;
    }
    return true;
}

Error cannot_execute(int error, std::string_view path) {
    return errors::make(Errc::spawn_failed,
                        "trainer",
                        fmt::format("cannot execute ({}): {}", std::strerror(error), quote(path)),
                        error == ENOEXEC ? "a script needs a '#!' line" : "");
}

/// `execve`'s view of `strings`: pointers into them, null-terminated.
std::vector<char*> c_strings(const std::vector<std::string>& strings) {
    std::vector<char*> out;
    out.reserve(strings.size() + 1);
    for (const auto& text : strings) {
        out.push_back(const_cast<char*>(text.c_str()));
    }
    out.push_back(nullptr);
    return out;
}

/// What a child needs to exec the command, prepared before fork().
struct ExecArgs {
    const char* path;
    char* const* argv;
    char* const* envp;
    const std::vector<int>* inherit_fds;
    int report_fd; ///< the errno of a failed execve is written here
    int stdout_fd; ///< dup2'd to 1 in the command; -1: inherited
    int stderr_fd; ///< dup2'd to 2 in the command; -1: inherited
};

/// The child's side of spawn_process(), between fork() and exec: async-signal-safe calls only.
/// On failure the errno of execve goes to `report_fd` and the child exits 127.
[[noreturn]] void
exec_child(const ExecArgs& exec, ProcessGroup group, int death_signal, pid_t parent) noexcept {
    if (group == ProcessGroup::new_group) {
        ::setpgid(0, 0);
    }
    if (death_signal != 0) {
        ::prctl(PR_SET_PDEATHSIG, death_signal);
        if (::getppid() != parent) {
            // The parent died before prctl: the death signal will never come.
            ::_exit(128 + death_signal);
        }
    }
    // Handlers are reset by exec, ignored signals are not, and the mask is inherited.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    for (int signo = 1; signo < NSIG; ++signo) {
        if (signo != SIGKILL && signo != SIGSTOP) {
            ::sigaction(signo, &dfl, nullptr);
        }
    }
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (const int fd : *exec.inherit_fds) {
        ::fcntl(fd, F_SETFD, 0);
    }
    // dup2 clears close-on-exec on the copy; the originals close at exec.
    if (exec.stdout_fd >= 0) {
        ::dup2(exec.stdout_fd, STDOUT_FILENO);
    }
    if (exec.stderr_fd >= 0) {
        ::dup2(exec.stderr_fd, STDERR_FILENO);
    }
    ::execve(exec.path, exec.argv, exec.envp);
    const int error = errno;
    [[maybe_unused]] const auto written = ::write(exec.report_fd, &error, sizeof error);
    ::_exit(127);
}

// --- containment (see spawn.hpp) -----------------------------------------------------------------
//
// Everything below runs between fork() and exec (or _exit) in a copy of the caller:
// async-signal-safe calls only, no allocation, no logging.

/// What the supervisor needs, prepared before fork().
struct ContainArgs {
    /// `unshare` flags: CLONE_NEWPID, with CLONE_NEWUSER unless we are root.
    int flags = 0;
    /// For a user namespace: "<uid> <uid> 1" and "<gid> <gid> 1".
    std::string uid_map;
    std::string gid_map;
    /// Descriptors the supervisor keeps (sorted): the report pipe and `inherit_fds`.
    std::vector<int> keep_fds;
};

/// Write `text` to the file at `path` (a /proc control file); false on any failure.
bool write_control(const char* path, const std::string& text) noexcept {
    const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    const auto written = ::write(fd, text.data(), text.size());
    ::close(fd);
    return written == static_cast<ssize_t>(text.size());
}

/// Every signal but SIGKILL, SIGSTOP and SIGCHLD ignored (SIGCHLD keeps its default so that
/// waitpid still sees the children): the group's signals are for the command, not for us.
void ignore_signals() noexcept {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigemptyset(&ignore.sa_mask);
    for (int signo = 1; signo < NSIG; ++signo) {
        if (signo != SIGKILL && signo != SIGSTOP && signo != SIGCHLD) {
            ::sigaction(signo, &ignore, nullptr);
        }
    }
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

/// Close every descriptor from 3 up except `keep` (sorted): a supervisor never execs, so it
/// must not hold the caller's sockets open.
void close_other_fds(const std::vector<int>& keep) noexcept {
    unsigned first = 3;
    for (const int fd : keep) {
        if (fd >= static_cast<int>(first)) {
            if (fd > static_cast<int>(first)) {
                ::close_range(first, static_cast<unsigned>(fd) - 1, 0);
            }
            first = static_cast<unsigned>(fd) + 1;
        }
    }
    ::close_range(first, ~0U, 0);
}

/// End this process the way `wait_status` says the command ended: the same exit code, or
/// killed by the same signal (without a core file of our own).
[[noreturn]] void end_like(int wait_status) noexcept {
    if (WIFEXITED(wait_status)) {
        ::_exit(WEXITSTATUS(wait_status));
    }
    const int signo = WIFSIGNALED(wait_status) ? WTERMSIG(wait_status) : SIGKILL;
    const rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigemptyset(&dfl.sa_mask);
    ::sigaction(signo, &dfl, nullptr);
    sigset_t only;
    ::sigemptyset(&only);
    ::sigaddset(&only, signo);
    ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
    ::kill(::getpid(), signo);
    ::_exit(128 + signo); // not reached for a fatal signal
}

/// Set by the namespace's init when it receives SIGTERM or SIGINT: the command is being stopped.
volatile sig_atomic_t g_stopping = 0; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void note_stop(int /*signo*/) {
    g_stopping = 1;
}

/// How long the namespace's init waits for the stop signal itself after the command died of
/// SIGTERM or SIGINT: slurmstepd signals the processes of a step one by one, children perhaps
/// before their parents (the same window as the launcher's k_settle_window).
constexpr int k_stop_settle_ms = 1000;

/// Whether `wait_status` says killed by SIGTERM or SIGINT, the signals that stop a trainer.
bool killed_by_stop_signal(int wait_status) noexcept {
    return WIFSIGNALED(wait_status) &&
           (WTERMSIG(wait_status) == SIGTERM || WTERMSIG(wait_status) == SIGINT);
}

/// Sleep until note_stop() ran or k_stop_settle_ms passed.
void await_stop_signal() noexcept {
    constexpr int k_step_ms = 5;
    for (int waited = 0; g_stopping == 0 && waited < k_stop_settle_ms; waited += k_step_ms) {
        const timespec step{0, k_step_ms * 1000L * 1000L};
        ::nanosleep(&step, nullptr);
    }
}

/// The namespace's init I: start the command, reap every process of the namespace until the
/// command ends, hand its wait status to the supervisor on `status_fd`, and end (the kernel
/// then kills whatever is left in the namespace). When the command is being stopped (I received
/// SIGTERM or SIGINT: the step's signals and the launcher's reach the whole group), the rest of
/// the namespace gets the same grace: I waits for every process to end, and the launcher's
/// SIGKILL at the end of the grace ends them all. A wrapper (`sh train.sh`) that dies at once of
/// SIGTERM then no longer takes the real trainer, halfway through its handler, with it. A
/// command killed by SIGTERM or SIGINT before I received its own copy waits k_stop_settle_ms
/// for it (slurmstepd may signal the command first).
[[noreturn]] void namespace_init(const ExecArgs& exec, int status_fd) noexcept {
    ignore_signals();
    // A handler, not SIG_IGN: a namespace's init only receives signals it handles (from the
    // parent namespace too). The command's child resets it to the default before exec.
    struct sigaction stop {};
    stop.sa_handler = note_stop;
    ::sigemptyset(&stop.sa_mask);
    ::sigaction(SIGTERM, &stop, nullptr);
    ::sigaction(SIGINT, &stop, nullptr);
    const pid_t self = ::getpid(); // 1
    const pid_t command = ::fork();
    if (command == 0) {
        ::close(status_fd);
        exec_child(exec, ProcessGroup::inherit, SIGKILL, self);
    }
    if (command < 0) {
        const int error = errno;
        [[maybe_unused]] const auto written = ::write(exec.report_fd, &error, sizeof error);
        ::_exit(127);
    }
    ::close(exec.report_fd);
    std::optional<int> command_status;
    for (;;) {
        int wait_status = 0;
        const pid_t pid = ::waitpid(-1, &wait_status, 0);
        if (pid == command) {
            command_status = wait_status;
            if (g_stopping == 0 && killed_by_stop_signal(wait_status)) {
                // Perhaps the step's cancel, which reached the command before us.
                await_stop_signal();
            }
            if (g_stopping == 0) {
                break; // ended by itself: what is left is killed at once
            }
        } else if (pid < 0 && errno != EINTR) {
            break; // ECHILD: stopped and the namespace is empty
        }
    }
    const int status = command_status.value_or(127 << 8);
    [[maybe_unused]] const auto written = ::write(status_fd, &status, sizeof status);
    ::_exit(0);
}

/// Enter a new PID namespace (and user namespace, see ContainArgs). Returns 0, or the errno.
int enter_namespace(const ContainArgs& contain) noexcept {
    if (::unshare(contain.flags) != 0) {
        return errno;
    }
    if ((contain.flags & CLONE_NEWUSER) != 0 &&
        !(write_control("/proc/self/setgroups", "deny") &&
          write_control("/proc/self/uid_map", contain.uid_map) &&
          write_control("/proc/self/gid_map", contain.gid_map))) {
        return errno != 0 ? errno : EPERM;
    }
    return 0;
}

/// The supervisor S (see spawn.hpp). A negative errno on `report_fd` tells the caller that no
/// namespace could be made; S then execs the command itself.
[[noreturn]] void
supervise(const ExecArgs& exec, const ContainArgs& contain, pid_t parent) noexcept {
    ::setpgid(0, 0);
    // Our command line is still the caller's: the name tells us apart in ps and /proc.
    ::prctl(PR_SET_NAME, "tfslurm-super");
    close_other_fds(contain.keep_fds);
    ignore_signals();
    if (const int error = enter_namespace(contain); error != 0) {
        const int report = -error;
        [[maybe_unused]] const auto written = ::write(exec.report_fd, &report, sizeof report);
        exec_child(exec, ProcessGroup::new_group, SIGKILL, parent);
    }
    // After unshare: a change of user namespace clears the death signal.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) {
        ::_exit(128 + SIGKILL);
    }
    int lifeline[2] = {-1, -1}; // S holds the write end: its death hangs the pipe up
    int status[2] = {-1, -1};
    if (::pipe2(lifeline, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
        ::_exit(127);
    }
    const pid_t init = ::fork();
    if (init == 0) {
        ::close(lifeline[1]);
        ::close(status[0]);
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
        pollfd hangup{lifeline[0], POLLIN, 0};
        if (::poll(&hangup, 1, 0) != 0) {
            ::_exit(128 + SIGKILL); // S died before prctl
        }
        ::close(lifeline[0]);
        ::prctl(PR_SET_NAME, "tfslurm-init");
        namespace_init(exec, status[1]);
    }
    ::close(lifeline[0]);
    ::close(status[1]);
    ::close(exec.report_fd);
    if (init < 0) {
        ::_exit(127);
    }
    int init_status = 0;
    while (::waitpid(init, &init_status, 0) < 0 && errno == EINTR) {
    }
    // I ends only once every process of its namespace is gone.
    int command_status = 0;
    ssize_t got = 0;
    do {
        got = ::read(status[0], &command_status, sizeof command_status);
    } while (got < 0 && errno == EINTR);
    end_like(got == static_cast<ssize_t>(sizeof command_status) ? command_status : init_status);
}

// --- the keeper (Containment::keeper, see spawn.hpp) ------------------------------------------
//
// Like the supervisor: between fork() and exec (or _exit), async-signal-safe calls only, no
// allocation. The descendant walk uses fixed buffers.

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

/// What the keeper needs, prepared before fork().
struct KeeperArgs {
    int lifeline = -1;
    /// Descriptors the keeper keeps (sorted): the report pipe, the lifeline and `inherit_fds`.
    std::vector<int> keep_fds;
};

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
pid_t g_walk[k_max_walk]; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// Append the children of every thread of `pid` (from `/proc/<pid>/task/<tid>/children`) to
/// g_walk[count...]; returns the new count.
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
                            g_walk[count++] = static_cast<pid_t>(number);
                        }
                        number = 0;
                        digits = false;
                    }
                }
            }
            if (digits && count < k_max_walk) {
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
/// `kill(-1)`: only what the walk found.
void kill_descendants(pid_t command, int& command_status, bool& command_ended) noexcept {
    const pid_t self = ::getpid();
    for (;;) {
        std::size_t count = append_children(self, 0);
        for (std::size_t i = 0; i < count && count < k_max_walk; ++i) {
            count = append_children(g_walk[i], count);
        }
        for (std::size_t i = 0; i < count; ++i) {
            ::kill(g_walk[i], SIGKILL);
        }
        if (reap_children(command, command_status, command_ended)) {
            return;
        }
        const timespec pause{0, 1000L * 1000L};
        ::nanosleep(&pause, nullptr);
    }
}

extern "C" void note_child(int /*signo*/) {}

/// The keeper K (see spawn.hpp). A negative errno on `report_fd` tells the caller that K could
/// not become a subreaper; K then execs the command itself.
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
        exec_child(exec, ProcessGroup::new_group, SIGKILL, parent);
    }
    // SIGTERM/SIGINT: T is being stopped. SIGCHLD: a handler that only interrupts ppoll(),
    // blocked outside it, so that no child's end is missed between a reap and the wait.
    struct sigaction action {};
    ::sigemptyset(&action.sa_mask);
    action.sa_handler = note_stop;
    ::sigaction(SIGTERM, &action, nullptr);
    ::sigaction(SIGINT, &action, nullptr);
    action.sa_handler = note_child;
    ::sigaction(SIGCHLD, &action, nullptr);
    sigset_t child_signal;
    ::sigemptyset(&child_signal);
    ::sigaddset(&child_signal, SIGCHLD);
    ::sigprocmask(SIG_BLOCK, &child_signal, nullptr);
    pollfd lifeline{keeper.lifeline, POLLIN, 0};
    if (::getppid() != parent || ::poll(&lifeline, 1, 0) != 0) {
        ::_exit(128 + SIGKILL); // the caller died before we started the command
    }
    const pid_t self = ::getpid();
    const pid_t command = ::fork();
    if (command == 0) {
        ::close(keeper.lifeline);
        exec_child(exec, ProcessGroup::inherit, SIGKILL, self);
    }
    if (command < 0) {
        const int error = errno;
        [[maybe_unused]] const auto written = ::write(exec.report_fd, &error, sizeof error);
        ::_exit(127);
    }
    ::close(exec.report_fd);
    int command_status = 0;
    bool command_ended = false;
    bool settled = false;
    sigset_t during_wait;
    ::sigemptyset(&during_wait);
    for (;;) {
        const bool no_child = reap_children(command, command_status, command_ended);
        if (command_ended) {
            if (g_stopping == 0 && !settled && killed_by_stop_signal(command_status)) {
                await_stop_signal(); // perhaps the step's cancel, which reached T before us
                settled = true;
            }
            if (g_stopping == 0 || no_child) {
                break; // ended by itself (what is left is killed), or stopped and all ended
            }
        }
        lifeline.revents = 0;
        if (::ppoll(&lifeline, 1, nullptr, &during_wait) > 0) {
            // The caller died (its end of the lifeline closed): nothing it started may stay.
            kill_descendants(command, command_status, command_ended);
            ::_exit(128 + SIGKILL);
        }
    }
    kill_descendants(command, command_status, command_ended);
    end_like(command_status);
}

/// The keeper's arguments for `request.inherit_fds`. \throws std::system_error (pipe2).
KeeperArgs keeper_args(const SpawnRequest& request, int report_fd) {
    KeeperArgs keeper;
    keeper.lifeline = lifeline_read_end();
    keeper.keep_fds = request.inherit_fds;
    keeper.keep_fds.push_back(report_fd);
    for (const int fd : {request.stdout_fd, request.stderr_fd}) {
        if (fd >= 0) {
            keeper.keep_fds.push_back(fd);
        }
    }
    keeper.keep_fds.push_back(keeper.lifeline);
    std::sort(keeper.keep_fds.begin(), keeper.keep_fds.end());
    return keeper;
}

/// The supervisor's arguments for the caller's identity and `request.inherit_fds`.
ContainArgs contain_args(const SpawnRequest& request, int report_fd) {
    ContainArgs contain;
    contain.flags = CLONE_NEWPID;
    if (::geteuid() != 0) {
        contain.flags |= CLONE_NEWUSER;
        contain.uid_map = fmt::format("{0} {0} 1", ::geteuid());
        contain.gid_map = fmt::format("{0} {0} 1", ::getegid());
    }
    contain.keep_fds = request.inherit_fds;
    contain.keep_fds.push_back(report_fd);
    for (const int fd : {request.stdout_fd, request.stderr_fd}) {
        if (fd >= 0) {
            contain.keep_fds.push_back(fd);
        }
    }
    std::sort(contain.keep_fds.begin(), contain.keep_fds.end());
    return contain;
}

/// Warn once per process that the command is not contained (`error` is the errno of unshare or
/// of prctl(PR_SET_CHILD_SUBREAPER)).
void warn_not_contained(Containment contain, int error) {
    static bool warned = false;
    const std::string text =
        contain == Containment::pid_namespace
            ? fmt::format(
                  "trainer: cannot start in a PID namespace of its own ({}): a process that "
                  "leaves its process group can outlive a launcher killed by SIGKILL",
                  std::strerror(error))
            : fmt::format("trainer: cannot start under a keeper (prctl(PR_SET_CHILD_SUBREAPER): "
                          "{}): a process that leaves its process group can outlive a launcher "
                          "killed by SIGKILL",
                          std::strerror(error));
    if (warned) {
        logger().debug("{}", text);
    } else {
        warned = true;
        logger().warn("{}", text);
    }
}

/// Read the child's report until EOF (the exec happened): the errno of a failed exec, or 0.
/// A negative value first says that containment failed (see supervise() and keep()).
int read_report(int fd, Containment contain) {
    int child_error = 0;
    for (;;) {
        int value = 0;
        const ssize_t got = ::read(fd, &value, sizeof value);
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got != static_cast<ssize_t>(sizeof value)) {
            break;
        }
        if (value < 0) {
            warn_not_contained(contain, -value);
        } else {
            child_error = value;
        }
    }
    ::close(fd);
    return child_error;
}

} // namespace

std::string find_executable(std::string_view name, std::string_view path_var) {
    if (name.empty()) {
        throw errors::make(
            Errc::spawn_failed, "trainer", "empty command", "give the trainer command after '--'");
    }
    if (name.find('/') != std::string_view::npos) {
        return std::string(name);
    }
    const std::string_view search = path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_var;
    int denied = 0;
    std::string denied_path;
    std::size_t start = 0;
    while (start <= search.size()) {
        std::size_t end = search.find(':', start);
        if (end == std::string_view::npos) {
            end = search.size();
        }
        std::string dir(search.substr(start, end - start));
        std::string candidate = dir.empty() ? std::string(name) : dir + "/" + std::string(name);
        int error = 0;
        if (is_executable_file(candidate, error)) {
            return candidate;
        }
        if (error == EACCES && denied == 0) {
            denied = error;
            denied_path = candidate;
        }
        start = end + 1;
    }
    if (denied != 0) {
        throw cannot_execute(denied, denied_path);
    }
    throw errors::make(Errc::spawn_failed,
                       "trainer",
                       fmt::format("command not found in PATH: {}", quote(name)),
                       "give a path, or check PATH in the job's environment");
}

// Kept whole (~65 lines): the preparation before fork() and the async-signal-safe child code
// after it must be read together: whatever the child uses is built above it.
pid_t spawn_process(const SpawnRequest& request) {
    if (request.argv.empty()) {
        throw errors::make(
            Errc::spawn_failed, "trainer", "empty command", "give the trainer command after '--'");
    }
    std::string path_var;
    for (const auto& entry : request.env) {
        if (entry.rfind("PATH=", 0) == 0) {
            path_var = entry.substr(5);
        }
    }
    const std::string path = find_executable(request.argv.front(), path_var);

    // Everything the child needs is prepared before fork(): between fork and exec only
    // async-signal-safe calls are allowed.
    std::vector<char*> argv = c_strings(request.argv);
    std::vector<char*> envp = c_strings(request.env);

    int report[2] = {-1, -1};
    if (::pipe2(report, O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    std::optional<ContainArgs> contain;
    std::optional<KeeperArgs> keeper;
    try {
        if (request.contain == Containment::pid_namespace) {
            contain = contain_args(request, report[1]);
        } else if (request.contain == Containment::keeper) {
            keeper = keeper_args(request, report[1]);
        }
    } catch (...) {
        ::close(report[0]);
        ::close(report[1]);
        throw;
    }
    const ExecArgs exec{path.c_str(),
                        argv.data(),
                        envp.data(),
                        &request.inherit_fds,
                        report[1],
                        request.stdout_fd,
                        request.stderr_fd};
    const pid_t parent = ::getpid();
    if (request.before_fork) {
        request.before_fork();
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(report[0]);
        if (contain) {
            supervise(exec, *contain, parent);
        }
        if (keeper) {
            keep(exec, *keeper, parent);
        }
        exec_child(exec, request.group, request.death_signal, parent);
    }
    const int fork_error = errno;
    if (request.after_fork) {
        request.after_fork();
    }
    ::close(report[1]);
    if (pid < 0) {
        ::close(report[0]);
        throw std::system_error(fork_error, std::generic_category(), "fork");
    }
    if (request.group == ProcessGroup::new_group || request.contain != Containment::none) {
        // Also done in the child: whichever runs first, the group exists before we signal it.
        // EACCES after the child's exec is expected and harmless.
        ::setpgid(pid, pid);
    }
    const int child_error = read_report(report[0], request.contain);
    if (child_error != 0) {
        int status = 0;
        while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        throw cannot_execute(child_error, path);
    }
    logger().debug("spawned {} as pid {}", quote(path), pid);
    return pid;
}

bool signal_group(pid_t pgid, int signo) noexcept {
    if (pgid <= 0) {
        return false;
    }
    return ::kill(-pgid, signo) == 0 || errno != ESRCH;
}

std::vector<pid_t> list_children(pid_t parent) {
    std::vector<pid_t> children;
    DIR* proc = ::opendir("/proc");
    if (proc == nullptr) {
        return children;
    }
    while (const dirent* entry = ::readdir(proc)) {
        const char* name = entry->d_name;
        if (name[0] < '1' || name[0] > '9') {
            continue;
        }
        std::ifstream stat(std::string("/proc/") + name + "/stat");
        std::string line;
        if (!std::getline(stat, line)) {
            continue;
        }
        // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
        const auto close = line.rfind(')');
        if (close == std::string::npos || close + 4 >= line.size()) {
            continue;
        }
        const char* fields = line.c_str() + close + 4; // skip ") S "
        char* end = nullptr;
        const long ppid = std::strtol(fields, &end, 10);
        if (end != fields && ppid == parent) {
            children.push_back(static_cast<pid_t>(std::strtol(name, nullptr, 10)));
        }
    }
    ::closedir(proc);
    return children;
}

void become_subreaper() {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        throw std::system_error(errno, std::generic_category(), "prctl(PR_SET_CHILD_SUBREAPER)");
    }
}

std::size_t kill_all_children(int max_rounds) noexcept {
    std::size_t killed = 0;
    try {
        const pid_t self = ::getpid();
        for (int round = 0; round < max_rounds; ++round) {
            const auto children = list_children(self);
            for (const pid_t child : children) {
                // The group first: a trainer's grandchildren usually share its group.
                ::kill(-child, SIGKILL);
                if (::kill(child, SIGKILL) == 0) {
                    ++killed;
                }
            }
            bool reaped_any = false;
            int status = 0;
            pid_t reaped = 0;
            while ((reaped = ::waitpid(-1, &status, WNOHANG)) > 0) {
                reaped_any = true;
            }
            if (children.empty() && !reaped_any) {
                break;
            }
            if (!reaped_any) {
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        }
    } catch (...) {
        // Best effort: this runs on the way out, where nothing may throw.
    }
    return killed;
}

} // namespace tfslurm
