// SPDX-License-Identifier: MIT
// `tfslurm run --local` with --output, --error and --label: each rank's trainer output.
#include "run_local_cli.hpp"

#include <tfslurm/common/error.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

using namespace tfslurm;
using namespace tfslurm::test;

TEST_CASE("run: --output and --error give each rank's trainer files of its own", "[run][output]") {
    TempDir dir;
    const std::string script = R"(echo "out $TFSLURM_RANK"; echo "err $TFSLURM_RANK" >&2)";
    SECTION("stdout and stderr to one file per rank, by pattern") {
        const Ran ran = run_to_end(
            local(2, 82, {"--output", dir.path + "/%j.%s-%R%i-%2r.log", "--", "sh", "-c", script}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        const std::string id = std::to_string(job_id(82));
        for (const std::string rank : {"0", "1"}) {
            const std::string text =
                file_text(dir.path + "/" + id + ".0-worker" + rank + "-0" + rank + ".log");
            CHECK(text == "out " + rank + "\nerr " + rank + "\n");
        }
        CHECK(count(ran.output, "out ") == 0); // nothing of the trainers' on ours
    }
    SECTION("--error apart, labelled with --label") {
        const Ran ran = run_to_end(local(1,
                                         83,
                                         {"--label",
                                          "--output",
                                          dir.path + "/%r.out",
                                          "--error",
                                          dir.path + "/%r.err",
                                          "--",
                                          "sh",
                                          "-c",
                                          script}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        std::ifstream out(dir.path + "/0.out");
        std::ifstream err(dir.path + "/0.err");
        CHECK(std::string{std::istreambuf_iterator<char>{out}, std::istreambuf_iterator<char>{}} ==
              "0: out 0\n");
        CHECK(std::string{std::istreambuf_iterator<char>{err}, std::istreambuf_iterator<char>{}} ==
              "0: err 0\n");
    }
    SECTION("a pattern two ranks would share is refused before anything starts") {
        const Ran ran =
            run_to_end(local(2, 49, {"--output", dir.path + "/all.log", "--", "sh", "-c", script}));
        INFO(ran.output);
        CHECK(ran.status == exit_status(Errc::invalid_argument));
        CHECK(ran.output == "tfslurm: error: --output: every rank would write the same file (put "
                            "%r, or %R and %i, in the name): \"" +
                                dir.path + "/all.log\"\n");
    }
    SECTION("a file that cannot be opened fails the trainer's start, naming it as typed") {
        // The error crosses the wire (rank 0's exit report, then the abort) with its setting
        // reference intact: the CLI names the option, or the variable it came from.
        const Ran ran =
            run_to_end(local(1, 50, {"--output", dir.path + "/missing/%r.log", "--", "true"}));
        INFO(ran.output);
        CHECK(ran.status == exit_status(Errc::io));
        CHECK(ran.output == "tfslurm: error: aborting: rank 0 (worker:0) on localhost could not "
                            "start its trainer: --output: cannot open \"" +
                                dir.path + "/missing/0.log\": No such file or directory\n");
        const Ran variable = run_to_end(local(2, 90, {"--", "true"}),
                                        {{"TFSLURM_OUTPUT", dir.path + "/missing/%r.log"}});
        INFO(variable.output);
        CHECK(variable.status == exit_status(Errc::io));
        CHECK(count(variable.output, "tfslurm: error: aborting: rank ") == 1);
        CHECK(count(variable.output,
                    " could not start its trainer: TFSLURM_OUTPUT: cannot open \"" + dir.path +
                        "/missing/") == 1);
    }
}

TEST_CASE("run: --label prefixes every line of each trainer's stdout and stderr with its rank",
          "[run][label]") {
    // Two lines on stdout, one on stderr, and a last line without a newline.
    const std::string script =
        "echo out $TFSLURM_RANK; echo err $TFSLURM_RANK >&2; echo second; printf partial";
    const Ran ran = run_to_end(local(2, 77, {"--label", "--", "sh", "-c", script}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(ran.output, rank + ": out " + rank + "\n") == 1);
        CHECK(count(ran.output, rank + ": err " + rank + "\n") == 1);
        CHECK(count(ran.output, rank + ": second\n") == 1);
        CHECK(count(ran.output, rank + ": partial\n") == 1);
        // One stream's lines in order.
        CHECK(ran.output.find(rank + ": out " + rank + "\n") <
              ran.output.find(rank + ": second\n"));
        CHECK(ran.output.find(rank + ": second\n") < ran.output.find(rank + ": partial\n"));
    }
    // Nothing else: every line is labelled, and a normal end prints no line of tfslurm's.
    CHECK(count(ran.output, "\n") == 8);

    SECTION("without --label the lines are the trainer's own") {
        const Ran plain = run_to_end(local(1, 78, {"--", "sh", "-c", script}));
        INFO(plain.output);
        CHECK(plain.status == 0);
        CHECK(count(plain.output, "out 0\n") == 1);
        CHECK(count(plain.output, ": ") == 0);
        CHECK(plain.output.substr(plain.output.size() - 7) == "partial");
    }
}
