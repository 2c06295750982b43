// SPDX-License-Identifier: MIT
// A node's health checks in a child process (src/os/preflight/node_check.cpp): what the child
// writes to its pipe and how the launcher reads it, a cut or foreign text included, and one real
// run of the child on an io_context.
#include "os/preflight/node_check.hpp"
#include "temp_dir.hpp"

#include <tfslurm/os/preflight.hpp>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

using tfslurm::PreflightCheck;
using tfslurm::detail::decode_checks;
using tfslurm::detail::encode_checks;
using namespace std::chrono_literals;

namespace {

using Result = PreflightCheck::Result;

/// `name result detail` of each check, for exact comparisons.
std::vector<std::string> lines_of(const std::vector<PreflightCheck>& checks) {
    std::vector<std::string> lines;
    for (const auto& check : checks) {
        const char* result = check.result == Result::passed   ? "passed"
                             : check.result == Result::failed ? "failed"
                                                              : "skipped";
        lines.push_back(check.name + " " + result + " " + check.detail);
    }
    return lines;
}

const std::string k_lost =
    "preflight failed the checks ended without a result (their process was killed?)";

} // namespace

TEST_CASE("node_check: the child's checks cross the pipe as written", "[node_check]") {
    const std::vector<PreflightCheck> checks{
        {"interface", Result::skipped, "no interface chosen"},
        {"tmpdir", Result::passed, "/tmp: 12 GiB free"},
        {"command", Result::failed, R"("false" exited with status 1)"},
    };
    const std::string text = encode_checks(checks);
    CHECK(text ==
          R"([{"detail":"no interface chosen","name":"interface","result":"skipped"},)"
          R"({"detail":"/tmp: 12 GiB free","name":"tmpdir","result":"passed"},)"
          R"({"detail":"\"false\" exited with status 1","name":"command","result":"failed"}])");
    CHECK(lines_of(decode_checks(text)) == lines_of(checks));
    // A detail that is not UTF-8 (a site command's output) is written, replaced, not dropped.
    const auto odd = decode_checks(encode_checks({{"command", Result::failed, "bad \xff byte"}}));
    REQUIRE(odd.size() == 1);
    CHECK(odd[0].detail == "bad \xef\xbf\xbd byte");
}

TEST_CASE("node_check: a cut or foreign text is one failed `preflight` check", "[node_check]") {
    const std::string text = GENERATE(as<std::string>{},
                                      "",
                                      "[",
                                      "[]",
                                      "{}",
                                      "[1]",
                                      R"([{"detail":"x","name":"tmpdir","result":"passed"})",
                                      R"([{"name":"tmpdir","result":"passed"}])",
                                      R"([{"detail":"x","name":"tmpdir","result":"maybe"}])",
                                      R"([{"detail":"x","name":"","result":"passed"}])",
                                      R"([{"detail":1,"name":"tmpdir","result":"passed"}])");
    CAPTURE(text);
    CHECK(lines_of(decode_checks(text)) == std::vector<std::string>{k_lost});
}

TEST_CASE("node_check: the checks run in a child, the loop gets their result", "[node_check]") {
    const tfslurm::test::TempDir dir("node-check");
    tfslurm::PreflightSettings settings;
    settings.tmpdir = dir.path;
    settings.tmp_free_bytes = 1;
    settings.command = "echo checked > " + dir.path + "/ran; exit 3";
    boost::asio::io_context io;
    tfslurm::detail::NodeCheck check(io);
    std::optional<std::vector<PreflightCheck>> result;
    check.start(settings, [&](std::vector<PreflightCheck> checks) { result = std::move(checks); });
    io.run_for(30s);
    // The child is the test's to reap (a launcher's reaper does it under `tfslurm run`).
    int status = 0;
    while (::waitpid(-1, &status, 0) > 0 || errno == EINTR) {
    }
    REQUIRE(result);
    const PreflightCheck* failed = tfslurm::first_failure(*result);
    REQUIRE(failed != nullptr);
    CHECK(failed->name == "command");
    CHECK(failed->detail.rfind("\"echo checked > ", 0) == 0);
    CHECK(failed->detail.find("\" exited with status 3") != std::string::npos);
    CHECK(tfslurm::test::file_text(dir.path + "/ran") == "checked\n");
}
