// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// What spawn_process()'s children share between fork() and exec (or _exit): the exec itself,
/// the signal and descriptor set-up, ending like the command, the stop signal's note
/// (spawn_child.cpp), and the keeper of Containment::keeper (keeper.cpp). Async-signal-safe
/// calls only, no allocation, no logging, except the parent-side *_args() functions.

#include <sys/types.h>

#include <vector>

namespace tfslurm::detail {

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

/// Code between a fork or clone and the exec, which may run on start_command()'s own stack: an
/// AddressSanitizer build leaves it uninstrumented (ASan does not know that stack, and said so
/// on the trainer's stderr at each start). Nothing for ASan to check there: no allocation.
#define TFSLURM_CHILD_BEFORE_EXEC __attribute__((no_sanitize("address")))

/// The child's side of spawn_process(), between fork() and exec: async-signal-safe calls only.
/// `new_group`: `setpgid(0, 0)` first (ProcessGroup::new_group). On failure the errno of execve
/// goes to `report_fd` and the child exits 127.
[[noreturn]] TFSLURM_CHILD_BEFORE_EXEC void
exec_child(const ExecArgs& exec, bool new_group, int death_signal, pid_t parent) noexcept;

/// A supervisor's start of its command (the keeper's, a namespace's init's): a child that
/// closes `not_inherited` (a descriptor of the supervisor's own) and runs exec_child() in the
/// supervisor's group, killed with the supervisor. The child shares the supervisor's memory
/// until its exec (clone with CLONE_VM | CLONE_VFORK, on a stack of its own; the supervisor,
/// single-threaded, waits meanwhile). A failed clone goes to `report_fd` and the supervisor
/// exits 127; else the supervisor's copy of `report_fd` is closed and the pid returned.
[[nodiscard]] pid_t start_command(const ExecArgs& exec, int not_inherited) noexcept;

/// Every signal but SIGKILL, SIGSTOP and SIGCHLD ignored (SIGCHLD keeps its default so that
/// waitpid still sees the children): the group's signals are for the command, not for us.
void ignore_signals() noexcept;

/// Close every descriptor from 3 up except `keep` (sorted): a supervisor never execs, so it
/// must not hold the caller's sockets open.
void close_other_fds(const std::vector<int>& keep) noexcept;

/// End this process the way `wait_status` says the command ended: the same exit code, or
/// killed by the same signal (without a core file of our own).
[[noreturn]] void end_like(int wait_status) noexcept;

/// The SIGTERM/SIGINT handler of a namespace's init and of a keeper: notes that the command is
/// being stopped (stop_noted()).
void install_stop_handler() noexcept;
/// Whether install_stop_handler()'s handler ran.
[[nodiscard]] bool stop_noted() noexcept;

/// Whether `wait_status` says killed by SIGTERM or SIGINT, the signals that stop a trainer.
[[nodiscard]] bool killed_by_stop_signal(int wait_status) noexcept;

/// Sleep until the stop signal was noted or k_stop_settle_ms passed: slurmstepd signals the
/// processes of a step one by one, children perhaps before their parents (the same window as
/// the launcher's k_settle_window).
void await_stop_signal() noexcept;

/// What the keeper needs, prepared before fork().
struct KeeperArgs {
    int lifeline = -1;
    /// Descriptors the keeper keeps (sorted): the report pipe, the lifeline and `inherit_fds`.
    std::vector<int> keep_fds;
    /// Removed when the caller dies before the keeper (SpawnRequest::remove_if_orphaned), or null.
    const char* remove_if_orphaned = nullptr;
};

/// The keeper's arguments for a request's `inherit_fds`, `stdout_fd` and `stderr_fd` (-1: none).
/// \throws std::system_error (pipe2).
[[nodiscard]] KeeperArgs
keeper_args(const std::vector<int>& inherit_fds, int stdout_fd, int stderr_fd, int report_fd);

/// The parent of `pid` (field 4 of /proc/<pid>/stat), or -1 when it cannot be read (gone).
/// Async-signal-safe. Input: a child of this process. Output: getpid().
[[nodiscard]] pid_t parent_of(pid_t pid) noexcept;

/// SIGKILL `pid` only while it is the process a walk of the keeper's descendants found: a child
/// of `parent`, or an orphan that came to `keeper` (a subreaper). A pid read from /proc may have
/// ended and been given to another process (another user's) by the time of the signal: with a
/// pidfd (Linux 5.3+: pidfd_open, then the check, then pidfd_send_signal) the check and the
/// signal are about one process; without one the check narrows that window. Async-signal-safe;
/// true when the signal was sent.
bool kill_if_child(pid_t pid, pid_t parent, pid_t keeper) noexcept;

/// The keeper K (see spawn.hpp). A negative errno on `report_fd` tells the caller that K could
/// not become a subreaper; K then execs the command itself.
[[noreturn]] void keep(const ExecArgs& exec, const KeeperArgs& keeper, pid_t parent) noexcept;

} // namespace tfslurm::detail
