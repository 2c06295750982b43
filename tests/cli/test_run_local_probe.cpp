// SPDX-License-Identifier: MIT
// `tfslurm run --local` with the barrier before the start: --probe and --preflight.
#include "run_local_cli.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::test;

TEST_CASE("run: --probe starts the trainers once every peer is reachable, else names the pair",
          "[run][probe]") {
    const std::string id = std::to_string(job_id(72));
    const std::string show = R"(echo "started $TFSLURM_RANK")";
    // Each trainer prints, then waits until all 3 have printed: the workers' exit stops the ps,
    // which must not happen before it printed (a loaded machine may start it late).
    const TempDir barrier;
    const std::string show_all = show + "; touch " + barrier.path + "/$TFSLURM_RANK; while [ " +
                                 "$(ls " + barrier.path + " | wc -l) -lt 3 ]; do sleep 0.05; done";
    // Exact mode (--iface lo): each launcher listens on the port it holds.
    const Ran reachable = run_to_end(local_defaults(
        3,
        72,
        {"--ps", "1", "--iface", "lo", "--port-base", "24700", "--probe", "sh", "-c", show_all}));
    INFO(reachable.output);
    CHECK(reachable.status == 0);
    for (const std::string rank : {"0", "1", "2"}) {
        CHECK(count(reachable.output, "started " + rank + "\n") == 1);
    }

    // Rank 1's port is bound by another process, not listening: nothing answers there, and
    // its own launcher cannot listen on it. Ranks 0 and 2 cannot reach rank 1 (two votes).
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(24711);
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    const Ran cut = run_to_end(local_defaults(3,
                                              72,
                                              {"--ps",
                                               "1",
                                               "--port-base",
                                               "24710",
                                               "--probe",
                                               "--probe-timeout",
                                               "1",
                                               "sh",
                                               "-c",
                                               show}));
    INFO(cut.output);
    CHECK(cut.status == 12);
    ::close(fd);
    CHECK(cut.output == "tfslurm: error: aborting: rank 0 (ps:0) on localhost cannot reach "
                        "rank 1 (worker:0) at localhost:24711: Connection refused\n");

    const Ran bad = run_to_end({"run", "--local", "1", "--probe-timeout", "0", "true"});
    INFO(bad.output);
    CHECK(bad.status == exit_status(Errc::invalid_argument));
    CHECK_THAT(bad.output,
               Catch::StartsWith("tfslurm: error: --probe-timeout: expected a "
                                 "number of seconds from 0.001 to 86400: \"0\""));
}

// --- health before start (--preflight)
// ----------------------------------------------------------------------------

TEST_CASE("run: --preflight checks the node once, then the trainers run", "[run][preflight]") {
    TempDir dir;
    // The site command appends a line per run: one node (localhost), one run, whatever the ranks.
    const std::string command = "echo checked >> " + dir.path + "/checks";
    // Workers only: each one ends by itself (a ps might be stopped before it printed).
    const Ran ran = run_to_end(local(3,
                                     91,
                                     {"--preflight",
                                      "--preflight-command",
                                      command,
                                      "--",
                                      "sh",
                                      "-c",
                                      "echo \"ran $TFSLURM_RANK\""}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    for (const std::string rank : {"0", "1", "2"}) {
        CHECK(count(ran.output, "ran " + rank + "\n") == 1);
    }
    CHECK(count(ran.output, "tfslurm:") == 0);
    CHECK(file_text(dir.path + "/checks") == "checked\n");
}

TEST_CASE("run: a failed preflight check aborts before any trainer starts, naming the node",
          "[run][preflight]") {
    TempDir dir;
    // The trainer notes that it started: none may.
    const std::string started = "touch " + dir.path + "/started.$TFSLURM_RANK";
    SECTION("the site's command fails; what it left running goes with it") {
        const Ran ran = run_to_end(local(
            3,
            92,
            {"--ps", "1", "--preflight-command", "sleep 300 & exit 3", "--", "sh", "-c", started}));
        INFO(ran.output);
        CHECK(ran.status == k_status_preflight);
        CHECK(ran.output == "tfslurm: error: aborting: preflight failed on localhost (rank 0, "
                            "ps:0): command: \"sleep 300 & exit 3\" exited with status 3\n");
    }
    SECTION("TMPDIR is not writable") {
        const Ran ran = run_to_end(local(2, 93, {"--preflight", "--", "sh", "-c", started}),
                                   {{"TMPDIR", dir.path + "/none"}});
        INFO(ran.output);
        CHECK(ran.status == k_status_preflight);
        CHECK(ran.output == "tfslurm: error: aborting: preflight failed on localhost (rank 0, "
                            "worker:0): tmpdir: \"" +
                                dir.path + "/none\" is not writable: No such file or directory\n");
    }
    SECTION("with --probe too: one barrier, the check named") {
        const Ran ran = run_to_end(
            local(2, 94, {"--probe", "--preflight-command", "false", "--", "sh", "-c", started}));
        INFO(ran.output);
        CHECK(ran.status == k_status_preflight);
        CHECK(ran.output == "tfslurm: error: aborting: preflight failed on localhost (rank 0, "
                            "worker:0): command: \"false\" exited with status 1\n");
    }
    for (const std::string rank : {"0", "1", "2"}) {
        CHECK_FALSE(std::filesystem::exists(dir.path + "/started." + rank));
    }
}

TEST_CASE("run: --preflight with --probe passes as one barrier", "[run][preflight]") {
    const Ran ran = run_to_end(
        local(2, 95, {"--probe", "--preflight", "--", "sh", "-c", "echo \"ran $TFSLURM_RANK\""}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "ran 0\n") == 1);
    CHECK(count(ran.output, "ran 1\n") == 1);
    CHECK(count(ran.output, "tfslurm:") == 0);
}

TEST_CASE("run: --preflight-command needs a command", "[run][preflight]") {
    const Ran ran = run_to_end({"run", "--local", "1", "--preflight-command", "", "--", "true"});
    INFO(ran.output);
    CHECK(ran.status == exit_status(Errc::invalid_argument));
    CHECK(ran.output == "tfslurm: error: --preflight-command: expected CMD: \"\"\n");
}
