// SPDX-License-Identifier: MIT
// How a child's end is told (src/common/exit_status.cpp): wait statuses decoded like a shell's.
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/os/spawn.hpp>

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cerrno>
#include <string>

using namespace tfslurm;

namespace {

/// How `sh -c script` ended, as spawn_process() and waitpid() tell it.
ExitStatus run_sh(const std::string& script) {
    SpawnRequest request;
    request.argv = {"sh", "-c", script};
    request.env = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
    const pid_t pid = spawn_process(request);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ExitStatus::from_wait_status(status);
}

} // namespace

TEST_CASE("exit_status: wait statuses are decoded like a shell", "[exit_status]") {
    CHECK(run_sh("exit 0") == ExitStatus::exited(0));
    CHECK(run_sh("exit 3") == ExitStatus::exited(3));
    const auto killed = run_sh("kill -9 $$");
    CHECK(killed == ExitStatus::signaled(9));
    CHECK(killed.shell_status() == 137);
    CHECK_FALSE(killed.success());
    CHECK(describe(killed) == "was killed by signal 9 (Killed)");
    CHECK(describe(ExitStatus::exited(3)) == "exited with status 3");
    CHECK(describe(ExitStatus::signaled(15)) == "was killed by signal 15 (Terminated)");
    CHECK(signal_description(200) == "Unknown signal 200");
}
