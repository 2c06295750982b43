// SPDX-License-Identifier: MIT
// `tfslurm events FILE`: the real binary reads an event file and prints its timeline, exactly.
#include "cli_runner.hpp"

#include <catch2/catch.hpp>

#include <string>

using tfslurm::test::Result;
using tfslurm::test::tfslurm_cli;

namespace {

const std::string k_failed_step =
    R"({"v":1,"time":"2026-11-26T13:02:31.004Z","event":"step","job":"94","step":"0","ranks":2,"nodes":"n[1-2]"}
{"v":1,"time":"2026-11-26T13:02:31.016Z","event":"registered","rank":0,"role":"ps","index":0,"host":"n1"}
{"v":1,"time":"2026-11-26T13:02:31.020Z","event":"registered","rank":1,"role":"worker","index":0,"host":"n2"}
{"v":1,"time":"2026-11-26T13:02:32.904Z","event":"exited","rank":1,"role":"worker","index":0,"host":"n2","status":1,"added_later":true}
{"v":1,"time":"2026-11-26T13:02:32.905Z","event":"verdict","verdict":"aborted","status":1,"why":"rank 1 (worker:0) on n2 exited with status 1"}
)";

} // namespace

TEST_CASE("events command: the timeline of a failed step", "[cli][events]") {
    const Result result = tfslurm_cli({"events", "-"}, {}, k_failed_step);
    CHECK(result.err.empty());
    CHECK(result.out == R"(from 2026-11-26 13:02:31.004 UTC
    +0.000 s  step 94.0: 2 ranks on n[1-2]
    +0.012 s  rank 0 (ps:0) on n1: registered
    +0.016 s  rank 1 (worker:0) on n2: registered
    +1.900 s  rank 1 (worker:0) on n2: trainer exited with status 1
    +1.901 s  verdict: aborted, status 1: rank 1 (worker:0) on n2 exited with status 1
)");
    CHECK(result.status == 0);
}

TEST_CASE("events command: --json passes the checked lines through, a cut last line left out",
          "[cli][events]") {
    const Result result =
        tfslurm_cli({"events", "--json", "-"}, {}, k_failed_step + R"({"v":1,"time":"2026)");
    CHECK(result.out == k_failed_step);
    CHECK(result.err == "tfslurm: warning: stdin: its last line is cut short (the step was "
                        "killed while writing it?); left out\n");
    CHECK(result.status == 0);
}

TEST_CASE("events command: a file that is not an event file is refused, naming the line",
          "[cli][events]") {
    const Result result = tfslurm_cli({"events", "-"}, {}, k_failed_step + "garbage\nmore\n");
    CHECK(result.out.empty());
    CHECK(result.err == "tfslurm: error: stdin: line 6: not a JSON object: \"garbage\"\n"
                        "tfslurm: hint: expected the event file that tfslurm run --events "
                        "wrote\n");
    CHECK(result.status == 2);
}

TEST_CASE("events command: a missing file is an I/O error naming it", "[cli][events]") {
    const Result result = tfslurm_cli({"events", "/nonexistent/run.events"});
    CHECK(result.out.empty());
    CHECK(result.err ==
          "tfslurm: error: FILE: cannot open \"/nonexistent/run.events\": No such file or "
          "directory\n");
    CHECK(result.status == 7);
}

TEST_CASE("events command: --startup tells where the start-up time went", "[cli][events]") {
    const std::string record =
        k_failed_step +
        R"({"v":1,"time":"2026-11-26T13:02:33.000Z","event":"startup","rank":0,"role":"ps","index":0,"host":"n1","task":"2026-11-26T13:02:30.990Z","up":"2026-11-26T13:02:31.010Z","registered":"2026-11-26T13:02:31.016Z","started":"2026-11-26T13:02:31.030Z"}
{"v":1,"time":"2026-11-26T13:02:33.000Z","event":"startup","rank":1,"role":"worker","index":0,"host":"n2","task":"2026-11-26T13:02:31.000Z","up":"2026-11-26T13:02:31.015Z","registered":"2026-11-26T13:02:31.020Z","started":"2026-11-26T13:02:31.031Z","progress":"2026-11-26T13:02:32.500Z"}
)";
    const Result result = tfslurm_cli({"events", "--startup", "-"}, {}, record);
    CHECK(result.err.empty());
    CHECK(result.out == R"(start-up of step 94.0: 2 of 2 ranks reported, on n[1-2]
phase                    median       p90       max  slowest
task started            0.000 s   0.010 s   0.010 s  rank 1 (worker:0) on n2
launcher up             0.015 s   0.020 s   0.020 s  rank 0 (ps:0) on n1
registered              0.005 s   0.006 s   0.006 s  rank 0 (ps:0) on n1
trainer started         0.011 s   0.014 s   0.014 s  rank 0 (ps:0) on n1
first progress          1.469 s   1.469 s   1.469 s  rank 1 (worker:0) on n2
slowest nodes to first progress: n2 1.510 s
slowest: rank 1 (worker:0) on n2, 1.510 s from the step's first task to first progress; its first progress took 1.469 s (no other rank reached it)
)");
    CHECK(result.status == 0);
    const Result both = tfslurm_cli({"events", "--startup", "--json", "-"}, {}, record);
    CHECK(both.out.empty());
    CHECK(both.err == "tfslurm: error: events: --json excludes --startup\n"
                      "tfslurm: hint: 'tfslurm events --help' lists the options\n");
    CHECK(both.status != 0);
}
