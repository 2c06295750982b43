// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Starting and ending processes: fork/exec of an argv (no shell) into its own process group,
/// decoding wait statuses, signalling process groups, and reaping or killing whatever children
/// a launcher (a child subreaper) has inherited. This component and the Asio shells of `run`
/// (launcher, local_run) are the only parts of libtfslurm that start or stop processes.

#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/run/run.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Whether the child gets a process group of its own.
enum class ProcessGroup {
    inherit,  ///< stay in the parent's group
    new_group ///< `setpgid(0, 0)`: the child leads a new group (pgid == pid)
};

/// What to start and how.
struct SpawnRequest {
    /// argv[0] is looked up in `PATH` (from `env`, like execvp) unless it contains a `/`.
    std::vector<std::string> argv;
    /// The complete environment, `NAME=value` strings.
    std::vector<std::string> env;
    ProcessGroup group = ProcessGroup::new_group;
    /// `prctl(PR_SET_PDEATHSIG)` in the child: sent to it when the parent dies; 0 = none.
    int death_signal = 0;
    /// Keep everything the command starts (setsid daemons included) from outliving the caller,
    /// even one killed by SIGKILL. See "Containment" below. `group` and `death_signal` are then
    /// new_group and SIGKILL.
    Containment contain = Containment::none;
    /// Descriptors that become the command's stdout and stderr (`--label`: pipes the caller
    /// reads); -1: inherited. The caller closes them after spawn_process().
    int stdout_fd = -1;
    int stderr_fd = -1;
    /// Descriptors that the child keeps across exec (every other one is expected to be
    /// CLOEXEC already); their CLOEXEC flag is cleared in the child only.
    std::vector<int> inherit_fds;
    /// A file of the caller's that the keeper (Containment::keeper) or the supervisor
    /// (Containment::pid_namespace) removes when the caller dies before it (the trainer's
    /// progress file, which the caller removes itself otherwise); empty: none. Without
    /// containment, or when no namespace could be made, nothing is left to remove it.
    std::string remove_if_orphaned;
    /// Called in the parent right before fork() and right after it (e.g. to call
    /// `io_context::notify_fork`). Optional.
    std::function<void()> before_fork;
    std::function<void()> after_fork;
};

/// Resolve a command like execvp: a name containing `/` is used as is; otherwise the first
/// executable regular file found in the `:`-separated `path_var` (an empty entry is the
/// current directory; an empty `path_var` means `/usr/local/bin:/usr/bin:/bin`).
/// Input: `sh`, `/usr/bin:/bin`. Output: `/usr/bin/sh`.
/// \throws Error (Errc::spawn_failed) `trainer: command not found in PATH: "<name>"`.
[[nodiscard]] std::string find_executable(std::string_view name, std::string_view path_var);

/// Containment::keeper: the returned pid is a keeper K, a forked copy of the caller that never
/// execs and is a child subreaper (`PR_SET_CHILD_SUBREAPER`): every orphan the command leaves
/// (a daemon's double fork, setsid or not) is re-parented to K. K forks and execs the command
/// T (`PR_SET_PDEATHSIG(SIGKILL)` on K); both share K's process group, so signalling the group
/// reaches T and its children; K ignores every signal but SIGKILL, SIGTERM and SIGINT, which only
/// tell it that T is being stopped. K holds the read end of a pipe whose write end only the
/// caller holds (made once per process, close-on-exec): its EOF says the caller died, even of
/// SIGKILL; K then kills every descendant (read from `/proc/<pid>/task/<tid>/children`, again and
/// again until it has no child left; never `kill(-1)`) and ends. When T ends by itself, K kills
/// what is left the same way and ends like T (same exit code, or killed by the same signal);
/// when T ends after K received SIGTERM or SIGINT, K first waits until every descendant has
/// ended (the same grace as the PID namespace's below; the caller's SIGKILL of the group ends
/// the wait, and what left the group is then the caller's: a launcher is a child subreaper
/// too). T keeps its real pid: programs that name files after it, CUDA IPC between ranks and
/// `pidfd_getfd` work as without containment. When K cannot become a subreaper,
/// spawn_process() warns once (then debug lines) and K execs the command directly.
///
/// Containment::pid_namespace: the returned pid is a supervisor S, a forked copy of the
/// caller that never execs, with `PR_SET_PDEATHSIG(SIGKILL)` (`SIGHUP` with a handler when it
/// has `remove_if_orphaned` to remove: the file, then I killed and waited for, the file again,
/// and S ends as if killed; a SIGHUP sent to the group while the caller lives is ignored). S enters
/// a new PID namespace (as root: `unshare(CLONE_NEWPID)`; otherwise together with a user namespace
/// that maps the caller's uid and gid to themselves) and forks its init I
/// (`PR_SET_PDEATHSIG(SIGKILL)` on S), which forks and execs the command T. When the caller dies,
/// the kernel kills S, then I, then every process of the namespace. S, I and T share S's process
/// group, so signalling the group reaches T and its children; S ignores every signal but SIGKILL, I
/// every one but SIGKILL, SIGTERM and SIGINT, which only tell it that T is being stopped. I reaps
/// the namespace's orphans and hands T's wait status to S, which ends with it (same exit code, or
/// killed by the same signal): the caller sees T's status. When T ends by itself, I ends and the
/// kernel kills what is left in the namespace at once; when T ends after I received SIGTERM or
/// SIGINT (T is being stopped: a wrapper shell that dies at once), I first waits until every
/// process of the namespace has ended, so that the rest of T's group gets the same grace as T (the
/// caller's SIGKILL of the group ends the wait); T killed by SIGTERM or SIGINT before I received
/// its own copy counts as stopped when that copy comes within 1 s (slurmstepd may signal T before
/// I). T is pid 2 in its namespace, which costs whatever names a peer process by its pid (UCX
/// refuses CUDA IPC across PID namespaces). When no namespace can be made (EPERM, no user
/// namespaces), spawn_process() warns (once per process, then debug lines) and S execs the command
/// directly, as without containment (and without that grace).
///
/// fork() + exec of `request.argv` without a shell. stdin/stdout/stderr are inherited, the
/// signal mask and every signal disposition are reset to the defaults in the child. Whether
/// exec succeeded is known on return (a CLOEXEC pipe carries the child's errno).
/// Input: argv {"true"}. Output: the child's pid (leader of its own process group).
/// \throws Error (Errc::spawn_failed) `trainer: command not found in PATH: "<name>"` or
///         `trainer: cannot execute (<strerror>): "<path>"`; std::system_error when fork fails.
[[nodiscard]] pid_t spawn_process(const SpawnRequest& request);

/// `kill(-pgid, signo)`, ignoring ESRCH (the group is already gone). Returns false when no
/// process of the group was left.
bool signal_group(pid_t pgid, int signo) noexcept;

/// The pids whose parent is `parent` (zombies included), read from each of its threads'
/// `/proc/<parent>/task/<tid>/children`; on a kernel without those files, from every process's
/// `/proc/<pid>/stat` (list_children_by_scan()).
[[nodiscard]] std::vector<pid_t> list_children(pid_t parent);

/// The same from every process's `/proc/<pid>/stat`: a pass over the whole node.
[[nodiscard]] std::vector<pid_t> list_children_by_scan(pid_t parent);

/// Make this process a child subreaper (`PR_SET_CHILD_SUBREAPER`): orphaned descendants are
/// re-parented to it instead of init, so they can be reaped and killed.
/// \throws std::system_error when prctl fails.
void become_subreaper();

/// Reap this process's children as they end by themselves, for at most `within`: true when
/// none is left. For a subreaper whose adopted orphans end on their own (a keeper whose caller
/// died), before kill_all_children().
bool await_children(std::chrono::milliseconds within) noexcept;

/// SIGKILL every child of this process (and, as they die, the orphans re-parented to it),
/// reaping all of them; repeats until no child is left or `max_rounds` rounds passed.
/// Returns the number of processes signalled. Used by a launcher right before it exits so that
/// no trainer, grandchild or zombie outlives it. Without any child (waitid: ECHILD) it returns 0
/// at once, without a walk of /proc.
std::size_t kill_all_children(int max_rounds = 50) noexcept;

} // namespace tfslurm
