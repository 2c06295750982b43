// SPDX-License-Identifier: MIT
// The tests' private munged (tests/support/private_munged.hpp) leaves nothing behind, not even
// when the test process aborts: its watcher stops it and removes its directory.
#include "private_munged.hpp"
#include "process.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

TEST_CASE("private munged: stopped and removed when the test process aborts", "[munge]") {
    if (::geteuid() != 0 || ::access("/usr/sbin/munged", X_OK) != 0) {
        WARN("munged unavailable or not root: nothing to check");
        return;
    }
    int report[2] = {-1, -1};
    // Close-on-exec: the munged the child starts must not hold the write end.
    REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        // A test process of its own: it starts a munged, says which, and aborts (SIGABRT:
        // no destructor runs).
        ::close(report[0]);
        std::signal(SIGABRT, SIG_DFL);
        const tfslurm::test::PrivateMunged munged;
        const std::string said =
            std::to_string(munged.running() ? munged.pid() : -1) + " " + munged.socket() + "\n";
        [[maybe_unused]] const auto written = ::write(report[1], said.data(), said.size());
        ::close(report[1]);
        std::abort();
    }
    ::close(report[1]);
    std::string said;
    char buffer[512];
    ssize_t got = 0;
    while (said.find('\n') == std::string::npos &&
           (got = ::read(report[0], buffer, sizeof buffer)) > 0) {
        said.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(report[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGABRT);

    const auto space = said.find(' ');
    REQUIRE(space != std::string::npos);
    const pid_t munged = std::stoi(said.substr(0, space));
    REQUIRE(munged > 0);
    const std::filesystem::path dir =
        std::filesystem::path(said.substr(space + 1, said.size() - space - 2)).parent_path();
    REQUIRE(dir.string().rfind("/tmp/tfslurm-munge-", 0) == 0);
    bool gone = false;
    for (int i = 0; i < 500 && !gone; ++i) {
        gone = tfslurm::test::ended(munged) && !std::filesystem::exists(dir);
        if (!gone) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    CHECK(gone);
    // Not left behind by this test either.
    if (!tfslurm::test::ended(munged)) {
        ::kill(munged, SIGKILL);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
}
