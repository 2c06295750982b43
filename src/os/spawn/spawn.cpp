// SPDX-License-Identifier: MIT
#include "os/spawn/spawn_child.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/spawn.hpp>

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

// ExitStatus's constructor from waitpid(): the wait status is the OS's encoding, decoded here,
// where processes are waited for, so that exit_status.cpp stays pure.
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

namespace {

using detail::await_stop_signal;
using detail::close_other_fds;
using detail::end_like;
using detail::exec_child;
using detail::ExecArgs;
using detail::ignore_signals;
using detail::install_stop_handler;
using detail::keep;
using detail::keeper_args;
using detail::KeeperArgs;
using detail::killed_by_stop_signal;
using detail::stop_noted;

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
    /// SpawnRequest::remove_if_orphaned, or null.
    const char* remove_if_orphaned = nullptr;
};

/// What the supervisor's handler of its caller's death needs (set before the handler is
/// installed; the init's pid once it is forked).
struct SupervisorDeath {
    pid_t self = 0;
    pid_t parent = 0;
    pid_t init = 0;
    const char* remove = nullptr;
};
SupervisorDeath g_supervisor; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

/// The supervisor's death signal: its caller died (SIGKILL, say). S removes the caller's file,
/// kills I (the kernel then kills the namespace) and waits until I and with it every process
/// of the namespace are gone, removes the file again (a trainer's `touch` may have made it
/// again meanwhile) and ends as if killed by SIGKILL. The same signal sent to the trainer's
/// group (a forwarded SIGHUP) reaches S too, and I before it resets its handlers: only S,
/// whose caller is gone, acts on it.
constexpr int k_supervisor_death_signal = SIGHUP;

extern "C" void supervisor_caller_died(int /*signo*/) {
    if (::getpid() != g_supervisor.self || ::getppid() == g_supervisor.parent) {
        return;
    }
    if (g_supervisor.remove != nullptr) {
        ::unlink(g_supervisor.remove);
    }
    if (g_supervisor.init > 0) {
        ::kill(g_supervisor.init, SIGKILL);
        int status = 0;
        while (::waitpid(g_supervisor.init, &status, 0) < 0 && errno == EINTR) {
        }
    }
    if (g_supervisor.remove != nullptr) {
        ::unlink(g_supervisor.remove);
    }
    ::_exit(128 + SIGKILL);
}

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
    install_stop_handler();
    const pid_t command = start_command(exec, status_fd);
    std::optional<int> command_status;
    for (;;) {
        int wait_status = 0;
        const pid_t pid = ::waitpid(-1, &wait_status, 0);
        if (pid == command) {
            command_status = wait_status;
            if (!stop_noted() && killed_by_stop_signal(wait_status)) {
                // Perhaps the step's cancel, which reached the command before us.
                await_stop_signal();
            }
            if (!stop_noted()) {
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
        exec_child(exec, /*new_group=*/true, SIGKILL, parent);
    }
    // After unshare: a change of user namespace clears the death signal. SIGKILL, unless the
    // caller's file is to be removed when it dies (supervisor_caller_died()).
    g_supervisor = SupervisorDeath{::getpid(), parent, 0, contain.remove_if_orphaned};
    if (contain.remove_if_orphaned != nullptr) {
        struct sigaction died {};
        died.sa_handler = supervisor_caller_died;
        died.sa_flags = SA_RESTART;
        ::sigfillset(&died.sa_mask);
        ::sigaction(k_supervisor_death_signal, &died, nullptr);
        ::prctl(PR_SET_PDEATHSIG, k_supervisor_death_signal);
    } else {
        ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    }
    if (::getppid() != parent) {
        if (contain.remove_if_orphaned != nullptr) {
            ::unlink(contain.remove_if_orphaned);
        }
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
    g_supervisor.init = init; // the death signal's handler now kills I and waits for it
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
            if (!request.remove_if_orphaned.empty()) {
                contain->remove_if_orphaned = request.remove_if_orphaned.c_str();
            }
        } else if (request.contain == Containment::keeper) {
            keeper =
                keeper_args(request.inherit_fds, request.stdout_fd, request.stderr_fd, report[1]);
            if (!request.remove_if_orphaned.empty()) {
                keeper->remove_if_orphaned = request.remove_if_orphaned.c_str();
            }
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
        exec_child(exec, request.group == ProcessGroup::new_group, request.death_signal, parent);
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

namespace {

/// Append the pids listed in one `/proc/<pid>/task/<tid>/children` file ("12 34 "); nothing
/// when it cannot be opened (the thread ended).
void read_children_file(const std::string& path, std::vector<pid_t>& out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    char text[4096];
    long number = 0;
    bool digits = false;
    ssize_t got = 0;
    while ((got = ::read(fd, text, sizeof text)) > 0) {
        for (ssize_t i = 0; i < got; ++i) {
            if (text[i] >= '0' && text[i] <= '9') {
                number = number * 10 + (text[i] - '0');
                digits = true;
            } else if (digits) {
                out.push_back(static_cast<pid_t>(number));
                number = 0;
                digits = false;
            }
        }
    }
    if (digits) {
        out.push_back(static_cast<pid_t>(number));
    }
    ::close(fd);
}

/// Whether this kernel has `/proc/<pid>/task/<tid>/children` (CONFIG_PROC_CHILDREN).
bool kernel_lists_children() {
    static const bool has = [] {
        const std::string self = std::to_string(::getpid());
        return ::access(("/proc/" + self + "/task/" + self + "/children").c_str(), R_OK) == 0;
    }();
    return has;
}

} // namespace

std::vector<pid_t> list_children_by_scan(pid_t parent) {
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

std::vector<pid_t> list_children(pid_t parent) {
    if (!kernel_lists_children()) {
        return list_children_by_scan(parent);
    }
    // Each thread's children (a child belongs to the thread that forked it), not a pass over
    // every process of the node.
    std::vector<pid_t> children;
    const std::string tasks = "/proc/" + std::to_string(parent) + "/task";
    DIR* dir = ::opendir(tasks.c_str());
    if (dir == nullptr) {
        return children;
    }
    while (const dirent* entry = ::readdir(dir)) {
        if (entry->d_name[0] >= '1' && entry->d_name[0] <= '9') {
            read_children_file(tasks + "/" + entry->d_name + "/children", children);
        }
    }
    ::closedir(dir);
    return children;
}

void become_subreaper() {
    if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
        throw std::system_error(errno, std::generic_category(), "prctl(PR_SET_CHILD_SUBREAPER)");
    }
}

bool await_children(std::chrono::milliseconds within) noexcept {
    try {
        const pid_t self = ::getpid();
        const auto deadline = std::chrono::steady_clock::now() + within;
        for (;;) {
            int status = 0;
            while (::waitpid(-1, &status, WNOHANG) > 0) {
            }
            if (list_children(self).empty()) {
                return true;
            }
            if (std::chrono::steady_clock::now() >= deadline) {
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    } catch (...) {
        return false; // kill_all_children() follows
    }
}

std::size_t kill_all_children(int max_rounds) noexcept {
    std::size_t killed = 0;
    // No child at all, of any of our threads (a subreaper's orphans included): nothing to list,
    // kill or reap, and the walk of /proc is not made. WNOWAIT: nothing is reaped here.
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 && errno == ECHILD) {
        return 0;
    }
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
