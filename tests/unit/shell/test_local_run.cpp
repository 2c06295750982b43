// SPDX-License-Identifier: MIT
// The pure parts of `tfslurm run --local` (src/shell/local_run.cpp): the task environments and the
// status channel. The runs of the real CLI are integration tests: tests/cli/test_run_local*.cpp.
#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/shell/local_run.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;

TEST_CASE("run: local task environments look like one Slurm node", "[run]") {
    const Environment base{{"PATH", "/bin"},
                           {"SLURM_JOB_ID", "7"},
                           {"SLURMD_NODENAME", "n9"},
                           {"SLURM_STEP_RESV_PORTS", "1-2"},
                           {"TFSLURM_HOST_PATTERN", "{host}-ib0"}};
    const Environment env = local_task_environment(base, 3, 2, 4242);
    CHECK(env.get("PATH") == "/bin");
    CHECK(env.get("SLURM_JOB_ID") == "4242");
    CHECK(env.get("SLURM_STEP_ID") == "0");
    CHECK(env.get("SLURM_STEP_NODELIST") == "localhost");
    CHECK(env.get("SLURM_STEP_TASKS_PER_NODE") == "3");
    CHECK(env.get("SLURM_STEP_NUM_TASKS") == "3");
    CHECK(env.get("SLURM_PROCID") == "2");
    CHECK(env.get("SLURM_LOCALID") == "2");
    CHECK(env.get("SLURM_NODEID") == "0");
    CHECK(env.get("SLURM_GTIDS") == "0,1,2");
    CHECK(env.get("SLURMD_NODENAME") == "localhost");
    CHECK(env.get("TFSLURM_ADDRESS") == "ip");
    CHECK_FALSE(env.contains("SLURM_STEP_RESV_PORTS"));
    CHECK_FALSE(env.contains("TFSLURM_HOST_PATTERN"));
    // An explicit address mode is kept.
    CHECK(local_task_environment(Environment{{"TFSLURM_ADDRESS", "name"}}, 1, 0, 1)
              .get("TFSLURM_ADDRESS") == "name");
}

TEST_CASE("run: local reports are one line each way", "[run]") {
    using Row = std::tuple<LocalReport, std::string>;
    const auto [report, line] = GENERATE(table<LocalReport, std::string>({
        Row{{3, Outcome::aborted, 3, {}}, "3 aborted 3"},
        Row{{0, Outcome::done, 0, {}}, "0 done 0"},
        Row{{1, Outcome::interrupted, 143, {}}, "1 interrupted 143"},
        Row{{4294967295U, Outcome::coordinator_lost, 255, {}}, "4294967295 coordinator_lost 255"},
        Row{{3, Outcome::aborted, 3, "aborting: rank 3 (worker:2) on n2 exited with status 3"},
            "3 aborted 3 aborting: rank 3 (worker:2) on n2 exited with status 3"},
        Row{{1, Outcome::interrupted, 130, " two  spaces "}, "1 interrupted 130  two  spaces "},
    }));
    CHECK(format_local_report(report) == line + "\n");
    const LocalReport parsed = parse_local_report(line);
    CHECK(parsed.rank == report.rank);
    CHECK(parsed.outcome == report.outcome);
    CHECK(parsed.step_status == report.step_status);
    CHECK(parsed.message == report.message);
}

TEST_CASE("run: a local report's message stays on its line", "[run]") {
    CHECK(format_local_report({2, Outcome::aborted, 7, "a\nb"}) == "2 aborted 7 a b\n");
}

TEST_CASE("run: local reports are parsed strictly", "[run]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [line, message] = GENERATE(table<std::string, std::string>({
        Row{"", R"(local report: expected "<rank> <outcome> <step_status>": "")"},
        Row{"3 aborted", R"(local report: expected "<rank> <outcome> <step_status>": "3 aborted")"},
        Row{"3 aborted 3x", R"(local report: bad step status (expected 0 to 255): "3 aborted 3x")"},
        Row{"3 aborted 3 ", R"(local report: empty message after the step status: "3 aborted 3 ")"},
        Row{"3 aborted 256",
            R"(local report: bad step status (expected 0 to 255): "3 aborted 256")"},
        Row{"3 aborted -1", R"(local report: bad step status (expected 0 to 255): "3 aborted -1")"},
        Row{"3 aborted 03", R"(local report: bad step status (expected 0 to 255): "3 aborted 03")"},
        Row{"3  aborted 3", R"(local report: unknown outcome "": "3  aborted 3")"},
        Row{"3 finished 3", R"(local report: unknown outcome "finished": "3 finished 3")"},
        Row{"3 Aborted 3", R"(local report: unknown outcome "Aborted": "3 Aborted 3")"},
        Row{"-3 aborted 3", R"(local report: bad rank: "-3 aborted 3")"},
        Row{"+3 aborted 3", R"(local report: bad rank: "+3 aborted 3")"},
        Row{" 3 aborted 3", R"(local report: bad rank: " 3 aborted 3")"},
        Row{"4294967296 done 0", R"(local report: bad rank: "4294967296 done 0")"},
        Row{"x done 0", R"(local report: bad rank: "x done 0")"},
    }));
    INFO(line);
    try {
        (void)parse_local_report(line);
        FAIL("accepted");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::protocol);
        CHECK(std::string(e.what()) == message);
    }
}

TEST_CASE("run: the local status channel is written by the launcher, read by the parent", "[run]") {
    int fds[2] = {-1, -1};
    REQUIRE(::pipe(fds) == 0);
    const int write_end = fds[1];
    CHECK((::fcntl(write_end, F_GETFD) & FD_CLOEXEC) == 0);
    const auto channel = local_status_channel(
        Environment{{std::string(k_local_status_variable), std::to_string(write_end)}});
    REQUIRE(channel == write_end);
    // The trainer must not inherit it.
    CHECK((::fcntl(write_end, F_GETFD) & FD_CLOEXEC) != 0);
    write_local_report(*channel, {2, Outcome::aborted, 137, {}});
    ::close(write_end);
    std::array<char, 64> buffer{};
    const ssize_t n = ::read(fds[0], buffer.data(), buffer.size());
    ::close(fds[0]);
    REQUIRE(n > 0);
    CHECK(std::string(buffer.data(), static_cast<std::size_t>(n)) == "2 aborted 137\n");

    // Anything but an open descriptor >= 3 is not a channel (write_end is closed now).
    for (const std::string& value : std::vector<std::string>{
             "", "1", "2", "x", "05", "99999", "-4", std::to_string(write_end)}) {
        INFO(value);
        CHECK_FALSE(
            local_status_channel(Environment{{std::string(k_local_status_variable), value}}));
    }
    CHECK_FALSE(local_status_channel(Environment{}));
}
