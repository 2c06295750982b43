// SPDX-License-Identifier: MIT
// The keeper's signals (src/os/spawn/keeper.cpp): a pid read from /proc is signalled only while it
// is the process the walk found, through a pidfd where the kernel has them. The keeper itself (the
// subreaper that kills every descendant) is tested through spawn in test_spawn.cpp.
#include "os/spawn/spawn_child.hpp"

#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

using namespace tfslurm;

TEST_CASE("keeper: a process is killed only while it is where the walk found it", "[keeper]") {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        for (;;) {
            ::pause();
        }
    }
    CHECK(detail::parent_of(child) == ::getpid());
    CHECK(detail::parent_of(1) == 0);
    int status = 0;
    SECTION("found under another parent (its number is now another process's): spared") {
        CHECK_FALSE(detail::kill_if_child(child, 1, 1));
        CHECK(::waitpid(child, &status, WNOHANG) == 0); // still running
        ::kill(child, SIGKILL);
        REQUIRE(::waitpid(child, &status, 0) == child);
    }
    SECTION("still the child of the parent it was found under: killed") {
        CHECK(detail::kill_if_child(child, ::getpid(), 1));
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGKILL);
    }
    SECTION("an orphan that came to the keeper: killed") {
        CHECK(detail::kill_if_child(child, 1, ::getpid()));
        REQUIRE(::waitpid(child, &status, 0) == child);
        CHECK(WTERMSIG(status) == SIGKILL);
    }
    // Gone (reaped): nothing to signal, and no error.
    CHECK(detail::parent_of(child) == -1);
    CHECK_FALSE(detail::kill_if_child(child, ::getpid(), ::getpid()));
}
