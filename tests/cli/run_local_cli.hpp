// SPDX-License-Identifier: MIT
// `tfslurm run --local` under test (test_run_local*.cpp): the real CLI in a process group of its
// own, its output captured, and every process it started found again by a marker in their
// environment, so that a test checks that none survives and kills what a failed test left.
#pragma once

#include "process.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

#include <tfslurm/common/exit_status.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::test {

inline const std::string k_cli = tfslurm::test::paths::cli;
inline const std::string k_trainer = tfslurm::test::paths::trainer;

/// The job id of test `test`: ids pick the derived port windows (derive_port_base(), a hash of
/// job and step), and two tests that ctest runs at once must not share a port. Distinct ids
/// alone do not promise that (the ids of tests 3 and 6 used to share 26636-26639): test N gets
/// the N-th id of a fixed sequence in which no two ids' windows overlap, for every window size a
/// test uses (1 to 8 tasks per node, plus the control port), far from the ids other test files
/// use. Each test of test_run_local*.cpp takes a number of its own. Two copies of the suite at
/// once share every id, hence every port: each needs a loopback of its own
/// (scripts/lib/own-network, as the test command runs the copies beside its suites).
std::uint64_t job_id(int test);

/// How many times `needle` occurs in `text`.
std::size_t count(const std::string& text, const std::string& needle);

using ExtraEnv = std::vector<std::pair<std::string, std::string>>;

/// One run of the CLI: its own process group, output captured, a generous timeout. The
/// environment is this process' without SLURM_* and TFSLURM_*, plus `extra_env`.
class Cli {
  public:
    explicit Cli(const std::vector<std::string>& args, const ExtraEnv& extra_env = {});
    ~Cli();
    Cli(const Cli&) = delete;
    Cli& operator=(const Cli&) = delete;
    Cli(Cli&&) = delete;
    Cli& operator=(Cli&&) = delete;

    /// Wait for the exit (at most `timeout`, then kill: a hang is a failure).
    int wait(std::chrono::seconds timeout = std::chrono::seconds{30});

    [[nodiscard]] std::string output() const;
    [[nodiscard]] pid_t pid() const noexcept { return m_process->pid(); }
    [[nodiscard]] const std::string& dir() const noexcept { return m_dir.path; }

    /// No process of this run is left (polling briefly: the kernel may still be tearing down),
    /// and no file of tfslurm's (`tfslurm-*`) in the TMPDIR the run was given.
    void check_nothing_left() const;

  private:
    TempDir m_dir;
    std::string m_marker;
    std::string m_tmpdir; ///< the run's TMPDIR, unless the test gave its own
    std::string m_output;
    std::optional<Process> m_process;
    std::optional<ExitStatus> m_status;
};

/// A run of the CLI to its end: its exit status and its whole output.
struct Ran {
    int status = 0;
    std::string output;
};

/// Run the CLI with `args` to its end (Cli::wait) and check that nothing of it is left.
Ran run_to_end(const std::vector<std::string>& args, const ExtraEnv& extra_env = {});

/// The pid a sh trainer of `rank` wrote to `<dir>/<name>.<rank>`.
pid_t read_pid(const std::string& dir, const std::string& name, int rank, const Cli& cli);

/// `run --local <ntasks> --job-id <job_id(test)>`, fast heartbeats (0.1 s, timeout 2 s), a 2 s
/// grace, then `rest`.
std::vector<std::string> local(int ntasks, int test, std::vector<std::string> rest);

/// `run --local <ntasks> --job-id <job_id(test)>`, then `rest`: every other setting at its
/// default.
std::vector<std::string> local_defaults(int ntasks, int test, std::vector<std::string> rest);

/// Shell code that sets `me` to the trainer's pid and `launcher` to its launcher's, as the host
/// sees them: the trainer runs under its launcher's keeper (tfslurm-keeper), or with --contain
/// in a PID namespace of its own ($$ is 2, $PPID 1) under the launcher's supervisors
/// (tfslurm-super, tfslurm-init); /proc is the host's.
extern const char* const k_find_launcher;

/// A sh trainer: ps sleep forever, workers run `worker_body` (by default, sleep a little and exit
/// 0); each writes its launcher's pid (see k_find_launcher) to `<dir>/launcher.<rank>` and its
/// own to `<dir>/trainer.<rank>` first, and says INHERITED-SOCKET if it inherited a socket.
std::string sh_trainer(const std::string& dir, const std::string& worker_body = "sleep 0.2");

} // namespace tfslurm::test
