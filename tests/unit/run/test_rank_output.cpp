// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/rank_output.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <tuple>

using namespace tfslurm;

TEST_CASE("rank output: placeholders expand to the rank's own name", "[rank_output]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [pattern, name] = GENERATE(table<std::string, std::string>({
        Row{"train-%r.log", "train-5.log"},
        Row{"logs/%j.%s-%R%i-%3r.out", "logs/94.0-worker4-005.out"},
        Row{"%h/%R-%i.err", "n3/worker-4.err"},
        Row{"%R.%2i.log", "worker.04.log"},
        Row{"100%%-%r", "100%-5"},
        Row{"%0r", "5"},
        Row{"%r", "5"},
    }));
    const RankOutputFields fields{5, Member{Role::worker, 4, "n3"}, "94", "0"};
    CHECK(expand_rank_pattern(pattern, "output", fields) == name);
}

TEST_CASE("rank output: outside Slurm the job and step are `local`", "[rank_output]") {
    const RankOutputFields fields{0, Member{Role::ps, 0, "laptop"}, "", ""};
    CHECK(expand_rank_pattern("%j.%s.%r", "output", fields) == "local.local.0");
}

TEST_CASE("rank output: a bad pattern names the setting, says why and quotes it", "[rank_output]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [pattern, message] = GENERATE(table<std::string, std::string>({
        Row{"", R"(output: empty (expected a file name pattern such as train-%r.log): "")"},
        Row{"log-%x-%r",
            R"(output: unknown placeholder %x (expected %r, %R, %i, %h, %j, %s or %%): "log-%x-%r")"},
        Row{"log-%r-%",
            R"(output: a % at the end names no placeholder (write %% for a %): "log-%r-%")"},
        Row{"log-%r-%3",
            R"(output: a % at the end names no placeholder (write %% for a %): "log-%r-%3")"},
        Row{"log-%3h-%r", R"(output: a width goes only with %r and %i, not %h: "log-%3h-%r")"},
        Row{"log-%12r", R"(output: a width is one digit, 0 to 9: "log-%12r")"},
        Row{"log-%h.txt",
            R"(output: every rank would write the same file (put %r, or %R and %i, in the name): "log-%h.txt")"},
        Row{"log-%R.txt",
            R"(output: every rank would write the same file (put %r, or %R and %i, in the name): "log-%R.txt")"},
        Row{"log-%\x1b-%r",
            R"(output: unknown placeholder % followed by "\x1b" (expected %r, %R, %i, %h, %j, %s or %%): "log-%\x1b-%r")"},
    }));
    CAPTURE(pattern);
    try {
        check_rank_pattern(pattern, "output");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::invalid_argument);
        CHECK(std::string(e.what()) == message);
    }
}
