// SPDX-License-Identifier: MIT
// `tfslurm top`: the real binary finding a step through Slurm's clients, here stand-ins on PATH
// (shell scripts that print what scontrol and squeue print), and each way of not finding one,
// with its exact line and status. Watching a live step: test_coordinator_server.cpp (the
// connection) and e2e_run_top (a real cluster).
#include "cli_runner.hpp"
#include "temp_dir.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <string>
#include <vector>

using tfslurm::test::Result;
using tfslurm::test::TempDir;
using tfslurm::test::tfslurm_cli;

namespace {

/// A PATH with `scontrol` and `squeue` stand-ins: scontrol prints `job_line` for any job (or
/// fails like Slurm's for job 404), squeue prints `steps` for `-s` and `jobs` for `--me`.
class TopSlurm {
  public:
    TopSlurm(const std::string& job_line, const std::string& steps, const std::string& jobs)
        : m_dir("top-cli") {
        (void)m_dir.write("scontrol",
                          fmt::format("#!/bin/sh\n"
                                      "case \"$*\" in *\" 404\") echo 'slurm_load_jobs error: "
                                      "Invalid job id specified'; exit 1;; esac\n"
                                      "echo '{}'\n",
                                      job_line),
                          0755);
        (void)m_dir.write("squeue",
                          fmt::format("#!/bin/sh\n"
                                      "case \"$*\" in *--me*) printf '{}';; *) printf '{}';; "
                                      "esac\n",
                                      jobs,
                                      steps),
                          0755);
        ::mkdir((m_dir.path + "/home").c_str(), 0700);
    }
    [[nodiscard]] std::vector<std::string> env() const {
        return {"PATH=" + m_dir.path + ":/usr/bin:/bin", "HOME=" + m_dir.path + "/home"};
    }
    [[nodiscard]] const std::string& home_parent() const { return m_dir.path; }

  private:
    TempDir m_dir;
};

/// The stand-ins' environment with munged at a socket where none listens.
std::vector<std::string> slurm_env_without_munge(const TopSlurm& slurm) {
    std::vector<std::string> env = slurm.env();
    env.emplace_back("TFSLURM_MUNGE_SOCKET=/nonexistent/munge.socket");
    return env;
}

std::string job_line(std::uint64_t uid, const std::string& state) {
    return fmt::format("JobId=12 JobName=train x UserId=alice({}) GroupId=g(1) JobState={} "
                       "Restarts=0 EndTime=Unknown NodeList=n[1-2] Comment=a b",
                       uid,
                       state);
}

} // namespace

TEST_CASE("top command: a job that is not JOB or JOB.STEP", "[cli][top]") {
    const Result result = tfslurm_cli({"top", "--once", "12x"});
    CHECK(result.out.empty());
    CHECK(result.err == "tfslurm: error: top: expected JOB or JOB.STEP (numbers, e.g. 12345 or "
                        "12345.0): \"12x\"\n");
    CHECK(result.status == 2);
}

TEST_CASE("top command: the live view needs a terminal", "[cli][top]") {
    const Result result = tfslurm_cli({"top", "12"});
    CHECK(result.err == "tfslurm: error: top: the live view needs a terminal (standard input and "
                        "output)\ntfslurm: hint: use --once or --json for one snapshot\n");
    CHECK(result.status == 2);
}

TEST_CASE("top command: without Slurm's clients", "[cli][top]") {
    const Result result = tfslurm_cli({"top", "--once", "12"}, {"PATH=/nonexistent"});
    CHECK(result.err == "tfslurm: error: top: cannot read job 12: scontrol not found in PATH\n");
    CHECK(result.status == 7);
}

TEST_CASE("top command: each way a step is not there to watch", "[cli][top]") {
    const auto uid = static_cast<std::uint64_t>(::getuid());
    SECTION("no such job") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.0\n", "");
        const Result result = tfslurm_cli({"top", "--once", "404"}, slurm.env());
        CHECK(result.err == "tfslurm: error: top: job 404 not found: slurm_load_jobs error: "
                            "Invalid job id specified: \"404\"\n");
        CHECK(result.status == 2);
    }
    SECTION("another user's job") {
        const TopSlurm slurm(job_line(uid + 1, "RUNNING"), "12.0\n", "");
        const Result result = tfslurm_cli({"top", "--json", "12"}, slurm.env());
        CHECK(result.err ==
              fmt::format("tfslurm: error: top: job 12 is not yours: it belongs to alice (uid {}); "
                          "a step is watched by its own user only: \"12\"\n",
                          uid + 1));
        CHECK(result.status == 2);
    }
    SECTION("a job that ended") {
        const TopSlurm slurm(job_line(uid, "COMPLETED"), "", "");
        const Result result = tfslurm_cli({"top", "--once", "12"}, slurm.env());
        CHECK(result.err == "tfslurm: error: top: job 12 is not running (state COMPLETED)\n");
        CHECK(result.status == 7);
    }
    SECTION("a step that does not run, the running ones named") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.batch\n12.0\n12.extern\n12.2\n", "");
        const Result result = tfslurm_cli({"top", "--once", "12.1"}, slurm.env());
        CHECK(result.err == "tfslurm: error: top: step 12.1 is not running (running: 12.0, "
                            "12.2): \"12.1\"\n");
        CHECK(result.status == 2);
    }
    SECTION("a job that runs no step") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.batch\n12.extern\n", "");
        const Result result = tfslurm_cli({"top", "--once", "12"}, slurm.env());
        CHECK(result.err == "tfslurm: error: top: job 12 runs no step to watch now (no srun is "
                            "running in it): \"12\"\n");
        CHECK(result.status == 2);
    }
    SECTION("the newest step published no endpoint") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.0\n12.2\n", "");
        const Result result = tfslurm_cli({"top", "--once", "12"}, slurm.env());
        CHECK(result.err ==
              fmt::format("tfslurm: error: top: step 12.2 published no endpoint in "
                          "\"{}/home/.tfslurm/steps/12.2\": it is not a step of tfslurm run, or "
                          "its rank 0 could not write there, or it is only starting\n"
                          "tfslurm: hint: name its coordinator with --control HOST:PORT\n",
                          slurm.home_parent()));
        CHECK(result.status == 7);
    }
    SECTION("nothing listens at the endpoint named") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.0\n", "");
        // The step's secret (no munged here): the proof is made, the connection refused.
        std::vector<std::string> env = slurm.env();
        env.emplace_back("TFSLURM_SECRET=" + std::string(64, 'c'));
        const Result result = tfslurm_cli({"top", "--once", "--control", "127.0.0.1:1", "12"}, env);
        CHECK(result.err == "tfslurm: error: top: cannot reach step 12.0's coordinator at "
                            "127.0.0.1 (127.0.0.1:1): Connection refused\n");
        CHECK(result.status == 7);
    }
    SECTION("neither munged nor the step's secret") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.0\n", "");
        std::vector<std::string> env = slurm_env_without_munge(slurm);
        const Result result = tfslurm_cli({"top", "--once", "--control", "127.0.0.1:1", "12"}, env);
        CHECK(result.err.rfind(
                  "tfslurm: error: top: cannot prove who you are: no authentication "
                  "available: munged at /nonexistent/munge.socket (TFSLURM_MUNGE_SOCKET) is not "
                  "reachable",
                  0) == 0);
        CHECK(result.err.find("tfslurm: hint: start munged, or set TFSLURM_SECRET to the step's "
                              "secret\n") != std::string::npos);
        CHECK(result.status == 7);
    }
    SECTION("an endpoint that is not HOST:PORT") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.0\n", "");
        const Result result =
            tfslurm_cli({"top", "--once", "--control", "n1:http", "12"}, slurm.env());
        CHECK(result.err == "tfslurm: error: --control: expected HOST:PORT (a port from 1 to "
                            "65535): \"n1:http\"\n");
        CHECK(result.status == 2);
    }
    SECTION("no job named, several running") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "12.0\n", "12\n13\n");
        const Result result = tfslurm_cli({"top", "--once"}, slurm.env());
        CHECK(result.err == "tfslurm: error: top: you have 2 running jobs: 12, 13; name one\n"
                            "tfslurm: hint: tfslurm top JOB[.STEP]\n");
        CHECK(result.status == 2);
    }
    SECTION("no job named, none running") {
        const TopSlurm slurm(job_line(uid, "RUNNING"), "", "");
        const Result result = tfslurm_cli({"top", "--once"}, slurm.env());
        CHECK(result.err == "tfslurm: error: top: you have no running job to watch\n"
                            "tfslurm: hint: tfslurm top JOB[.STEP]\n");
        CHECK(result.status == 2);
    }
}

TEST_CASE("top command: --timeout takes seconds", "[cli][top]") {
    const Result result = tfslurm_cli({"top", "--once", "--timeout", "soon", "12"});
    CHECK(result.err == "tfslurm: error: --timeout: expected a number of seconds from 0.001 to "
                        "86400: \"soon\"\ntfslurm: hint: e.g. 10 or 0.5\n");
    CHECK(result.status == 2);
}
