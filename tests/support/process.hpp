// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The one way tests start a program: an exact argv and environment, stdin given as a string,
/// stdout and stderr captured (or sent to a file), a timeout, and the exit status. No shell,
/// no PATH lookup: argv[0] is the program's path.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::test {

/// What to run.
struct Command {
    Command(std::vector<std::string> arguments,
            std::vector<std::string> environment,
            std::string stdin_text = {},
            std::chrono::milliseconds time_limit = std::chrono::seconds(30))
        : argv(std::move(arguments)), env(std::move(environment)), input(std::move(stdin_text)),
          timeout(time_limit) {}

    std::vector<std::string> argv; ///< argv[0] is the program's path
    std::vector<std::string> env;  ///< the whole environment, `NAME=value` entries
    std::string input;             ///< written to stdin, which is then closed
    std::chrono::milliseconds timeout;
};

/// How a run() ended.
struct Result {
    int status = -1;        ///< exit status, or 128 + signal number
    int wait_status = 0;    ///< the raw waitpid() status
    bool timed_out = false; ///< killed with SIGKILL when the timeout expired
    std::string out;
    std::string err;
};

/// Run `command` to its end and capture stdout and stderr. At the timeout the child is killed
/// (SIGKILL) and the result says `timed_out`. Throws std::system_error when the program cannot
/// be started (posix_spawn fails: missing file, no permission) or a pipe cannot be made.
///
/// Example: run({{"/bin/sh", "-c", "echo hi; exit 3"}, {}}) -> {status 3, out "hi\n"}
[[nodiscard]] Result run(const Command& command);

/// Whether process `pid` has ended: /proc has no process of that number, or it is a zombie
/// that its parent (init, a subreaper) has not reaped yet.
[[nodiscard]] bool ended(pid_t pid);

/// The environment of this process without the variables whose names start with one of
/// `prefixes`, e.g. environment_without({"SLURM_", "TFSLURM_"}).
[[nodiscard]] std::vector<std::string>
environment_without(const std::vector<std::string>& prefixes);

/// A program running in the background in its own process group, stdin inherited, stdout and
/// stderr both written to one file (readable while it runs). The destructor kills the group
/// (SIGKILL) and reaps the child when nobody waited for it.
class Process {
  public:
    /// Start `command` (its input and timeout are not used). Throws std::system_error when it
    /// cannot be started.
    Process(const Command& command, const std::string& output_file);
    ~Process();
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;
    Process(Process&&) = delete;
    Process& operator=(Process&&) = delete;

    /// The raw waitpid() status once the process has exited, or nothing when it is still
    /// running after `timeout` (it is then left running: see kill_group()).
    [[nodiscard]] std::optional<int> wait_for(std::chrono::milliseconds timeout);

    /// Send `signal` to the whole process group.
    void kill_group(int signal) const noexcept;

    [[nodiscard]] pid_t pid() const noexcept { return m_pid; }

  private:
    pid_t m_pid = -1;
    bool m_reaped = false;
};

} // namespace tfslurm::test
