// SPDX-License-Identifier: MIT
// What spawn_process()'s children share (spawn/spawn_child.hpp): everything here runs between
// fork() and exec (or _exit) in a copy of the caller: async-signal-safe calls only, no
// allocation, no logging.
#include "os/spawn/spawn_child.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <ctime>

namespace {

/// Set when a namespace's init or a keeper receives SIGTERM or SIGINT: the command is being
/// stopped.
volatile sig_atomic_t g_stopping = 0; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

extern "C" void note_stop(int /*signo*/) {
    g_stopping = 1;
}

/// How long await_stop_signal() waits.
constexpr int k_stop_settle_ms = 1000;

/// The stack of start_command()'s child, which runs in the supervisor's memory until its exec
/// (CLONE_VM | CLONE_VFORK, as posix_spawn does). The supervisor is single-threaded and waits
/// meanwhile, so one stack serves every start; 64 KiB leaves room for the dynamic linker's
/// first resolution of a symbol, which saves the CPU's whole register state on it.
constexpr std::size_t k_command_stack_size = std::size_t{64} * 1024;
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
alignas(64) char g_command_stack[k_command_stack_size];

/// What start_command()'s child needs (on the supervisor's stack, which it shares).
struct CommandStart {
    const tfslurm::detail::ExecArgs* exec;
    int not_inherited;
    pid_t parent;
};

extern "C" TFSLURM_CHILD_BEFORE_EXEC int command_main(void* argument) noexcept {
    const auto* start = static_cast<const CommandStart*>(argument);
    ::close(start->not_inherited);
    tfslurm::detail::exec_child(*start->exec, /*new_group=*/false, SIGKILL, start->parent);
}

} // namespace

namespace tfslurm::detail {

[[noreturn]] TFSLURM_CHILD_BEFORE_EXEC void
exec_child(const ExecArgs& exec, bool new_group, int death_signal, pid_t parent) noexcept {
    if (new_group) {
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

pid_t start_command(const ExecArgs& exec, int not_inherited) noexcept {
    // Not fork(): the child shares our memory and we wait until it execs, so no page table is
    // copied and no page of ours faults in again as the child or we write to it (issue #33: the
    // trainer's start is on every rank's path to its first step). Every signal stays blocked
    // across the clone: no handler of ours may run in the child while it shares our memory;
    // exec_child() resets every handler before it unblocks them.
    sigset_t all;
    sigset_t before;
    ::sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, &before);
    CommandStart start{&exec, not_inherited, ::getpid()};
    const pid_t command = ::clone(command_main,
                                  g_command_stack + sizeof g_command_stack,
                                  CLONE_VM | CLONE_VFORK | SIGCHLD,
                                  &start);
    const int error = errno;
    ::sigprocmask(SIG_SETMASK, &before, nullptr);
    if (command < 0) {
        [[maybe_unused]] const auto written = ::write(exec.report_fd, &error, sizeof error);
        ::_exit(127);
    }
    ::close(exec.report_fd);
    return command;
}

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

void install_stop_handler() noexcept {
    // A handler, not SIG_IGN: a namespace's init only receives signals it handles (from the
    // parent namespace too). The command's child resets it to the default before exec.
    struct sigaction stop {};
    stop.sa_handler = note_stop;
    ::sigemptyset(&stop.sa_mask);
    ::sigaction(SIGTERM, &stop, nullptr);
    ::sigaction(SIGINT, &stop, nullptr);
}

bool stop_noted() noexcept {
    return g_stopping != 0;
}

bool killed_by_stop_signal(int wait_status) noexcept {
    return WIFSIGNALED(wait_status) &&
           (WTERMSIG(wait_status) == SIGTERM || WTERMSIG(wait_status) == SIGINT);
}

void await_stop_signal() noexcept {
    constexpr int k_step_ms = 5;
    for (int waited = 0; g_stopping == 0 && waited < k_stop_settle_ms; waited += k_step_ms) {
        const timespec step{0, k_step_ms * 1000L * 1000L};
        ::nanosleep(&step, nullptr);
    }
}

} // namespace tfslurm::detail
