// SPDX-License-Identifier: MIT
// A step's failure told in one line (protocol_describe.cpp).
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace tfslurm;
using namespace tfslurm::protocol;

TEST_CASE("protocol_describe: failures are described in one line", "[protocol][describe]") {
    Failure failure;
    failure.rank = 3;
    failure.role = Role::worker;
    failure.index = 2;
    failure.host = "n2";
    failure.status = ExitStatus::exited(3);
    CHECK(describe(failure) == "rank 3 (worker:2) on n2 exited with status 3");
    failure.status = ExitStatus::signaled(9);
    CHECK(describe(failure) == "rank 3 (worker:2) on n2 was killed by signal 9 (Killed)");
    failure.cause = FailureCause::lost;
    failure.detail = "no heartbeat for 10 s";
    CHECK(describe(failure) == "rank 3 (worker:2) on n2 launcher lost (no heartbeat for 10 s)");
    failure.cause = FailureCause::start;
    failure.detail = R"(trainer: command not found in PATH: "pyhton")";
    CHECK(
        describe(failure) ==
        R"(rank 3 (worker:2) on n2 could not start its trainer: trainer: command not found in PATH: "pyhton")");
    failure.cause = FailureCause::unregistered;
    failure.detail = "60 s";
    failure.missing = 1;
    CHECK(describe(failure) == "rank 3 (worker:2) on n2 did not register within 60 s");
    failure.missing = 4;
    CHECK(describe(failure) ==
          "rank 3 (worker:2) on n2 did not register within 60 s (4 ranks missing)");
    failure.ranks = "2-3,9";
    failure.host = "n[2,5]";
    CHECK(describe(failure) == "ranks 2-3,9 on n[2,5] did not register within 60 s");
    failure.cause = FailureCause::stalled;
    failure.host = "n2";
    failure.detail = "300 s";
    CHECK(describe(failure) == "rank 3 (worker:2) on n2 is stuck: no progress for 300 s");
}
