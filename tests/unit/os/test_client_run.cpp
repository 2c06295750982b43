// SPDX-License-Identifier: MIT
// A Slurm client run by the launcher's job control (src/os/job_control.cpp, run_client()): its
// output, its status, and the bounds on both, with scripts in a PATH of the test's own standing
// in for scontrol.
#include "os/detail/client_run.hpp"
#include "process.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <string>
#include <thread>

using namespace tfslurm;
using detail::run_client;

namespace {

/// PATH is `dir` alone (then /usr/bin:/bin for the shell's own commands) until the end of
/// the scope.
class PathScope {
  public:
    explicit PathScope(const std::string& dir) {
        if (const char* old = std::getenv("PATH")) {
            m_old = old;
        }
        ::setenv("PATH", (dir + ":/usr/bin:/bin").c_str(), 1);
    }
    ~PathScope() { ::setenv("PATH", m_old.c_str(), 1); }
    PathScope(const PathScope&) = delete;
    PathScope& operator=(const PathScope&) = delete;
    PathScope(PathScope&&) = delete;
    PathScope& operator=(PathScope&&) = delete;

  private:
    std::string m_old;
};

} // namespace

TEST_CASE("client run: output, status and a missing client", "[client_run]") {
    test::TempDir dir("client-run");
    const PathScope path(dir.path);
    static_cast<void>(dir.write(
        "fake-ok", "#!/bin/sh\necho \"JobState=RUNNING $1\"\necho warn >&2\necho ' '\n", 0755));
    static_cast<void>(
        dir.write("fake-fail", "#!/bin/sh\necho 'Invalid job id specified'\nexit 3\n", 0755));
    static_cast<void>(dir.write("fake-silent-fail", "#!/bin/sh\nexit 1\n", 0755));
    static_cast<void>(dir.write("fake-killed", "#!/bin/sh\nkill -9 $$\n", 0755));

    auto run = run_client({"fake-ok", "Restarts=0"});
    CHECK(run.why.empty());
    CHECK(run.output ==
          "JobState=RUNNING Restarts=0\nwarn"); // stdout and stderr, trailing blanks cut

    run = run_client({"fake-fail"});
    CHECK(run.why == "fake-fail exited with status 3: Invalid job id specified");
    CHECK(run.output == "Invalid job id specified");

    CHECK(run_client({"fake-silent-fail"}).why == "fake-silent-fail exited with status 1");
    CHECK(run_client({"fake-killed"}).why == "fake-killed was killed by signal 9");
    CHECK(run_client({"tfslurm-no-such-client"}).why == "tfslurm-no-such-client not found in PATH");
}

TEST_CASE("client run: at most 64 KiB of output is kept", "[client_run]") {
    test::TempDir dir("client-run");
    const PathScope path(dir.path);
    // 1 MiB of 'x' lines, more than 16 pipes' worth.
    static_cast<void>(
        dir.write("fake-chatty", "#!/bin/sh\nhead -c 1048576 /dev/zero | tr '\\0' 'x'\n", 0755));
    const auto run = run_client({"fake-chatty"});
    CHECK(run.why.empty());
    CHECK(run.output.size() == 65536);
    CHECK(run.output.find_first_not_of('x') == std::string::npos);
}

TEST_CASE("client run: a child that keeps the pipe and writes on does not hold the caller",
          "[client_run]") {
    test::TempDir dir("client-run");
    const PathScope path(dir.path);
    const std::string pid_file = dir.path + "/writer.pid";
    // The client exits at once; the writer it leaves behind writes to the pipe until the pipe
    // is closed (then `yes` fails with EPIPE or dies of SIGPIPE).
    static_cast<void>(
        dir.write("fake-leaves-writer",
                  "#!/bin/sh\nyes tfslurm-client-run-test &\necho $! >" + pid_file + "\nexit 0\n",
                  0755));
    const auto run = run_client({"fake-leaves-writer"});
    CHECK(run.why.empty());
    CHECK(run.output.size() <= 65536);
    // The writer ends once run_client() closed its end; stopped by its pid if it did not.
    const pid_t writer = std::stoi(test::file_text(pid_file));
    bool gone = false;
    for (int i = 0; i < 500 && !gone; ++i) {
        // A zombie has ended too (its new parent reaps it in its own time).
        gone = test::ended(writer);
        if (!gone) {
            std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
    }
    if (!gone) {
        ::kill(writer, SIGKILL);
    }
    CHECK(gone);
}

TEST_CASE("client run: a status the kernel threw away is no success", "[client_run]") {
    test::TempDir dir("client-run");
    const PathScope path(dir.path);
    static_cast<void>(dir.write("fake-fail", "#!/bin/sh\necho 'Invalid job id'\nexit 3\n", 0755));
    // With SIGCHLD ignored the kernel reaps the client itself: waitpid() fails with ECHILD and
    // the status (3) is lost.
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigemptyset(&ignore.sa_mask);
    struct sigaction before {};
    ::sigaction(SIGCHLD, &ignore, &before);
    const auto run = run_client({"fake-fail"});
    ::sigaction(SIGCHLD, &before, nullptr);
    CHECK(run.why == "cannot learn how fake-fail ended: No child processes");
}
