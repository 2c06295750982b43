// SPDX-License-Identifier: MIT
// Every input gets an honest answer: malformed environment values, files and streams are
// errors that name what the user typed, with the documented exit status, and never a hang.
#include "cli_runner.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstddef>
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
    const std::string command = std::string{tfslurm::test::paths::cli} + " -v plan --nodelist n1";
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

TEST_CASE("cli: numeric options are decimal, as the SLURM_* variables are", "[cli]") {
    // CLI11 alone reads 010 as octal 8; SLURM_JOB_ID=010 is job 10.
    const Result option = tfslurm_cli({"plan", "--nodelist", "n1", "--job-id", "010"});
    const Result variable = tfslurm_cli(
        {"plan"}, {"SLURM_STEP_NODELIST=n1", "SLURM_STEP_TASKS_PER_NODE=1", "SLURM_JOB_ID=010"});
    CHECK(option.status == 0);
    CHECK(option.out.rfind("# job 10, step -: 1 tasks on 1 nodes (n1), native layout\n", 0) == 0);
    CHECK(variable.out.rfind("# job 10, step -: 1 tasks on 1 nodes (n1), native layout\n", 0) == 0);
}

TEST_CASE("cli: -V is --version, and --help and --version exit 0", "[cli]") {
    const Result short_name = tfslurm_cli({"-V"});
    const Result long_name = tfslurm_cli({"--version"});
    CHECK(short_name.status == 0);
    CHECK(long_name.status == 0);
    CHECK(!long_name.out.empty());
    CHECK(short_name.out == long_name.out);
    const Result help = tfslurm_cli({"plan", "--help"});
    CHECK(help.status == 0);
    CHECK(help.err.empty());
}

namespace {

std::size_t widest_line(const std::string& text) {
    std::size_t widest = 0;
    std::size_t start = 0;
    while (start < text.size()) {
        const auto end = std::min(text.find('\n', start), text.size());
        widest = std::max(widest, end - start);
        start = end + 1;
    }
    return widest;
}

} // namespace

TEST_CASE("cli: --help is the same text whichever CLI11 builds it", "[cli]") {
    // CLI11 2.5 and later re-wrap the description at 80 columns, drop "Usage:", title the
    // groups OPTIONS and SUBCOMMANDS and show a counting flag's default (-v [0]).
    const Result r = tfslurm_cli({"--help"}, {"COLUMNS=100"});
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.rfind("tfslurm: exact TF_CONFIG, torch and tf4slurm settings for every task of a "
                      "Slurm step, and a launcher\nthat ends the step when the training is "
                      "done.\nUsage: tfslurm [OPTIONS] SUBCOMMAND\n\nOptions:\n"
                      "  -h, --help                  Print this help message and exit\n"
                      "  -V, --version               Display program version information and "
                      "exit\n"
                      "  -v, --verbose               More log output on stderr (-vv for trace)\n"
                      "  -q, --quiet                 Only errors on stderr\n\n"
                      "Subcommands:\n"
                      "  hostnames                   Expand a Slurm hostlist, one host per line,",
                      0) == 0);
    CHECK(r.out.size() > 2);
    CHECK(r.out.substr(r.out.size() - 2) == ".\n");
    CHECK(r.out.find("\n\nRun 'tfslurm <command> --help' for a command's options; man tfslurm for "
                     "the whole story.\n") != std::string::npos);
}

TEST_CASE("cli: --help wraps at COLUMNS and reads like tfslurm's options", "[cli]") {
    for (const std::vector<std::string>& args : {std::vector<std::string>{"--help"},
                                                 std::vector<std::string>{"plan", "--help"},
                                                 std::vector<std::string>{"env", "--help"},
                                                 std::vector<std::string>{"run", "--help"}}) {
        CAPTURE(args);
        const Result narrow = tfslurm_cli(args, {"COLUMNS=60"});
        REQUIRE(narrow.status == 0);
        CHECK(widest_line(narrow.out) <= 60);
        // Without COLUMNS and without a terminal: 80.
        const Result piped = tfslurm_cli(args);
        CHECK(widest_line(piped.out) <= 80);
        CHECK(widest_line(piped.out) > 60);
    }
    const Result plan = tfslurm_cli({"plan", "--help"}, {"COLUMNS=100"});
    CHECK(plan.out.find("  --chief/--no-chief") != std::string::npos);
    CHECK(plan.out.find("{1}") == std::string::npos);
    CHECK(plan.out.find("  --job-id ID ") != std::string::npos);
    CHECK(plan.out.find("  --ntasks N ") != std::string::npos);
    CHECK(plan.out.find("  --rank N ") != std::string::npos);
    CHECK(plan.out.find("  -f, --format FORMAT") == std::string::npos); // env only
    const Result env = tfslurm_cli({"env", "--help"}, {"COLUMNS=100"});
    CHECK(env.out.find("  -f, --format FORMAT") != std::string::npos);
}

TEST_CASE("cli: run asks munged where Slurm says it listens, and says where that came from",
          "[cli]") {
    const tfslurm::test::TempDir dir("slurmconf");
    const std::string conf =
        dir.write("slurm.conf",
                  "ClusterName=test\nAuthType=auth/munge\n"
                  "AuthInfo=socket=/nonexistent/tfslurm-test.sock # site munged\n");
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
}
