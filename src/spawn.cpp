// SPDX-License-Identifier: MIT
#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/spawn.hpp>

#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
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

/// The child's side of spawn_process(), between fork() and exec: async-signal-safe calls only.
/// On failure the errno of execve goes to `report_fd` and the child exits 127.
[[noreturn]] void exec_child(const SpawnRequest& request,
                             const char* path,
                             char* const* argv,
                             char* const* envp,
                             int report_fd,
                             pid_t parent) noexcept {
    if (request.group == ProcessGroup::new_group) {
        ::setpgid(0, 0);
    }
    if (request.death_signal != 0) {
        ::prctl(PR_SET_PDEATHSIG, request.death_signal);
        if (::getppid() != parent) {
            // The parent died before prctl: the death signal will never come.
            ::_exit(128 + request.death_signal);
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
    for (const int fd : request.inherit_fds) {
        ::fcntl(fd, F_SETFD, 0);
    }
    ::execve(path, argv, envp);
    const int error = errno;
    [[maybe_unused]] const auto written = ::write(report_fd, &error, sizeof error);
    ::_exit(127);
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
    const pid_t parent = ::getpid();
    if (request.before_fork) {
        request.before_fork();
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(report[0]);
        exec_child(request, path.c_str(), argv.data(), envp.data(), report[1], parent);
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
    if (request.group == ProcessGroup::new_group) {
        // Also done in the child: whichever runs first, the group exists before we signal it.
        // EACCES after the child's exec is expected and harmless.
        ::setpgid(pid, pid);
    }
    int child_error = 0;
    ssize_t got = 0;
    do {
        got = ::read(report[0], &child_error, sizeof child_error);
    } while (got < 0 && errno == EINTR);
    ::close(report[0]);
    if (got == static_cast<ssize_t>(sizeof child_error)) {
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
