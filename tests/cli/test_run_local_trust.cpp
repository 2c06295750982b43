// SPDX-License-Identifier: MIT
// `tfslurm run --local` on a node that other users share (docs/protocol.md, "Threat model"): the
// secret stays with tfslurm, and the files it writes at the user's paths are never another
// user's. The other user's file is made by root (chown to nobody), as that user would have made
// it on a shared file system.
#include "run_local_cli.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::test;

namespace {

void write_text(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
}

/// A file another user (nobody) made first and left writable for everyone; false when this
/// process cannot make one (not root).
bool make_foreign_file(const std::string& path, const std::string& text) {
    write_text(path, text);
    return ::geteuid() == 0 && ::chown(path.c_str(), 65534, 65534) == 0 &&
           ::chmod(path.c_str(), 0666) == 0;
}

} // namespace

TEST_CASE("run: no program tfslurm starts gets TFSLURM_SECRET", "[run][trust]") {
    // The preflight command fails when it sees the secret; each trainer says what it sees.
    const Ran ran = run_to_end(local(2,
                                     96,
                                     {"--auth",
                                      "secret",
                                      "--preflight-command",
                                      "test -z \"${TFSLURM_SECRET+set}\"",
                                      "--",
                                      "sh",
                                      "-c",
                                      "echo \"rank $TFSLURM_RANK: ${TFSLURM_SECRET-no secret}\""}),
                               {{"TFSLURM_SECRET", std::string(64, '7')}});
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "rank 0: no secret\n") == 1);
    CHECK(count(ran.output, "rank 1: no secret\n") == 1);
    CHECK(count(ran.output, "tfslurm:") == 0);
}

TEST_CASE("run: --output never writes through a link or into another user's file", "[run][trust]") {
    TempDir dir;
    const std::string victim = dir.path + "/victim";
    write_text(victim, "precious\n");
    const std::string pattern = dir.path + "/out-%r.log";
    const std::string file = dir.path + "/out-0.log";
    const std::string line = "tfslurm: error: aborting: rank 0 (worker:0) on localhost could not "
                             "start its trainer: --output: refusing \"" +
                             file + "\": ";
    SECTION("a symbolic link to a file of the victim's") {
        REQUIRE(::symlink(victim.c_str(), file.c_str()) == 0);
        const Ran ran = run_to_end(local(1, 97, {"--output", pattern, "--", "echo", "hello"}));
        INFO(ran.output);
        CHECK(ran.status == exit_status(Errc::io));
        CHECK(ran.output == line + "it is a symbolic link\n");
        CHECK(file_text(victim) == "precious\n");
    }
    SECTION("another user's file, made first to receive the job's output") {
        if (!make_foreign_file(file, "theirs\n")) {
            WARN("needs root to make a file of another user (nobody): not run");
            return;
        }
        const Ran ran = run_to_end(local(1, 98, {"--output", pattern, "--", "echo", "hello"}));
        INFO(ran.output);
        CHECK(ran.status == exit_status(Errc::io));
        CHECK(ran.output == line + "it is owned by uid 65534, not by this user (uid 0)\n");
        CHECK(file_text(file) == "theirs\n");
    }
}

TEST_CASE("run: --events refuses another user's file, and the step runs without a record",
          "[run][trust]") {
    TempDir dir;
    const std::string events = dir.path + "/run.events";
    if (!make_foreign_file(events, "theirs\n")) {
        WARN("needs root to make a file of another user (nobody): not run");
        return;
    }
    const Ran ran = run_to_end(local(2, 99, {"--events", events, "--", "true"}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(ran.output == "tfslurm: warning: --events: refusing \"" + events +
                            "\": it is owned by uid 65534, not by this user (uid 0); the step "
                            "runs without a record\n");
    CHECK(file_text(events) == "theirs\n");
}
