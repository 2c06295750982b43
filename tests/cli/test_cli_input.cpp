// SPDX-License-Identifier: MIT
// Every input gets an honest answer: malformed environment values, files and streams are
// errors that name what the user typed, with the documented exit status, and never a hang.
#include "cli_runner.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using tfslurm::test::Result;
using tfslurm::test::tfslurm_cli;

TEST_CASE("cli: TFSLURM_LOG_LEVEL is a level or an error", "[cli]") {
    SECTION("a misspelt level is an error that names the variable") {
        const Result r = tfslurm_cli({"hostnames", "n1"}, {"TFSLURM_LOG_LEVEL=bogus"});
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK(r.err == "tfslurm: error: TFSLURM_LOG_LEVEL: expected trace, debug, info, warning, "
                       "error, critical or off: \"bogus\"\n"
                       "tfslurm: hint: or use -v, -vv or -q\n");
    }
    SECTION("any case is accepted and warning means warnings") {
        const Result r = tfslurm_cli({"plan", "--nodelist", "n[2,1]", "--layout", "tf-compat"},
                                     {"TFSLURM_LOG_LEVEL=WARNING"});
        CHECK(r.status == 0);
        CHECK(r.err.find("tfslurm: warning: tf-compat layout: rank 0") == 0);
    }
    SECTION("off silences warnings") {
        const Result r = tfslurm_cli({"plan", "--nodelist", "n[2,1]", "--layout", "tf-compat"},
                                     {"TFSLURM_LOG_LEVEL=off"});
        CHECK(r.status == 0);
        CHECK(r.err.empty());
    }
}

TEST_CASE("cli: NO_COLOR turns colour off on a terminal", "[cli]") {
    // script(1) gives tfslurm a pseudo-terminal as stderr, where it would colour the level.
    const std::string command = std::string{TFSLURM_CLI_PATH} + " -v plan --nodelist n1";
    const Result coloured =
        tfslurm::test::run({{"/usr/bin/script", "-qec", command, "/dev/null"}, {"TERM=xterm"}});
    REQUIRE(coloured.status == 0);
    CHECK(coloured.out.find("tfslurm: \x1b[36mdebug\x1b[m: plan: 1 tasks on 1 nodes") !=
          std::string::npos);
    const Result plain = tfslurm::test::run(
        {{"/usr/bin/script", "-qec", command, "/dev/null"}, {"TERM=xterm", "NO_COLOR=1"}});
    REQUIRE(plain.status == 0);
    CHECK(plain.out.find("tfslurm: debug: plan: 1 tasks on 1 nodes") != std::string::npos);
    CHECK(plain.out.find('\x1b') == std::string::npos);
}

TEST_CASE("cli: hostlist - reads standard input like hostnames -", "[cli]") {
    const Result r = tfslurm_cli({"hostlist", "m1", "-"}, {}, "n1 n2\nn3\n");
    CHECK(r.status == 0);
    CHECK(r.out == "m1,n[1-3]\n");
    CHECK(r.err.empty());
}

TEST_CASE("cli: hostfiles are read with their limit enforced", "[cli]") {
    const std::vector<std::string> preview{
        "plan", "--nodelist", "n1", "--distribution", "arbitrary", "--hostfile"};
    SECTION("an endless device is refused after 16 MiB, not read forever") {
        auto args = preview;
        args.emplace_back("/dev/zero");
        const Result r = tfslurm_cli(args);
        CHECK(r.status == 6);
        CHECK(r.err == "tfslurm: error: --hostfile (/dev/zero): \"/dev/zero\" has more than "
                       "16777216 bytes\n"
                       "tfslurm: hint: a hostfile names one host per task; is this the right "
                       "file?\n");
    }
    SECTION("a directory is reported as a directory") {
        auto args = preview;
        args.emplace_back("/");
        const Result r = tfslurm_cli(args);
        CHECK(r.status == 7);
        CHECK(r.err.find("tfslurm: error: --hostfile (/): cannot read \"/\": Is a directory\n") ==
              0);
    }
}

TEST_CASE("cli: run asks munged where Slurm says it listens, and says where that came from",
          "[cli]") {
    const std::string dir = std::filesystem::temp_directory_path() /
                            ("tfslurm-test-slurmconf-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string conf = dir + "/slurm.conf";
    std::ofstream{conf} << "ClusterName=test\nAuthType=auth/munge\n"
                           "AuthInfo=socket=/nonexistent/tfslurm-test.sock # site munged\n";
    const std::vector<std::string> run{"run", "--local", "1", "--auth", "munge", "--", "true"};
    const std::string hint =
        "tfslurm: hint: is munged running on this node? Slurm's AuthInfo=socket=... in "
        "slurm.conf names its socket; TFSLURM_MUNGE_SOCKET overrides it\n";
    SECTION("AuthInfo in the slurm.conf that SLURM_CONF names") {
        const Result r = tfslurm_cli(run, {"PATH=/usr/bin:/bin", "SLURM_CONF=" + conf});
        CHECK(r.status == 7);
        CHECK(r.err.rfind("tfslurm: error: --auth munge: munged at /nonexistent/tfslurm-test.sock "
                          "(AuthInfo in " +
                              conf + ") is not reachable: ",
                          0) == 0);
        CHECK(r.err.size() > hint.size());
        CHECK(r.err.substr(r.err.size() - hint.size()) == hint);
    }
    SECTION("TFSLURM_MUNGE_SOCKET overrides it") {
        const Result r = tfslurm_cli(run,
                                     {"PATH=/usr/bin:/bin",
                                      "SLURM_CONF=" + conf,
                                      "TFSLURM_MUNGE_SOCKET=/nonexistent/override.sock"});
        CHECK(r.status == 7);
        CHECK(r.err.rfind("tfslurm: error: --auth munge: munged at /nonexistent/override.sock "
                          "(TFSLURM_MUNGE_SOCKET) is not reachable: ",
                          0) == 0);
    }
    std::filesystem::remove_all(dir);
}
