// SPDX-License-Identifier: MIT
// Tests of src/resolve/hostlist/hostlist.cpp: hostlist compression, the visitor and its writer, the
// properties that tie compression to expansion, and the counts and port-list grammars. Expansion
// and its errors: test_hostlist_parser.cpp.
#include "../fuzz/fuzz_checks.hpp"
#include "fixtures.hpp"
#include "hostlist_table.hpp"
#include "test_paths.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using Hosts = std::vector<std::string>;
using Example = tfslurm::test::HostlistExample;
using Expect = Example::Expect;
using tfslurm::test::expand_nodelist;
using tfslurm::test::hostlist_examples;
using tfslurm::test::table_place;
using tfslurm::test::thrown_by;

// ---------------------------------------------------------------------------------------------
// Compression

void check_compression(const Example& example) {
    CAPTURE(table_place(example), example.list);
    CHECK(tfslurm::compress_hostlist(example.hosts) == example.list);
    CHECK(expand_nodelist(example.list) == example.hosts);
}

} // namespace

TEST_CASE("hostlist: compression matches scontrol show hostlist", "[hostlist]") {
    // Slurm's documented edge cases, and scontrol 22.05.8 outputs checked by hand.
    check_compression(GENERATE(from_range(hostlist_examples("compress", Expect::hosts))));
}

TEST_CASE("hostlist: compression keeps odd but writable hosts literal", "[hostlist]") {
    check_compression(GENERATE(from_range(hostlist_examples("compress-literal", Expect::hosts))));
}

TEST_CASE("hostlist: compression of nothing is empty", "[hostlist]") {
    CHECK(tfslurm::compress_hostlist({}).empty());
}

TEST_CASE("hostlist: compression rejects hosts that cannot be written", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"", "empty"},
        {"n[1", "contains '['"},
        {"a,b", "contains ','"},
        {"a b", "contains a space"},
        {"a\tb", "contains a tab"},
        {"a\nb", "contains a newline"},
        {"n1\r", "not printable ASCII"},
        {"n\xff", "not printable ASCII"},
    }));
    const Hosts hosts{"n1", std::get<0>(row)};
    const tfslurm::test::Thrown failure =
        thrown_by([&] { static_cast<void>(tfslurm::compress_hostlist(hosts, "--nodes")); });
    CHECK(failure.code == "invalid_argument");
    CHECK(failure.message == "--nodes: host 1 cannot be written in a hostlist (" +
                                 std::get<1>(row) + "): " + tfslurm::quote(std::get<0>(row)));
}

// ---------------------------------------------------------------------------------------------
// Properties (seeded, so reproducible)

namespace {

/// A generated hostlist together with the hosts Slurm expands it to, computed independently
/// of src/resolve/hostlist/hostlist.cpp (plain recursion in Slurm's order).
struct Generated {
    std::string list;
    Hosts hosts;
    std::size_t range_sizes = 0; ///< sum over tokens of the product of their range-list sizes
};

class ListGenerator {
  public:
    explicit ListGenerator(std::uint32_t seed) : m_rng(seed) {}

    std::size_t below(std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(m_rng);
    }

    static std::string padded(std::uint64_t value, std::size_t width) {
        std::string digits = std::to_string(value);
        return digits.size() < width ? std::string(width - digits.size(), '0') + digits : digits;
    }

    /// One bracket group: its text and the texts of its values, in order.
    std::pair<std::string, Hosts> group() {
        std::string text = "[";
        Hosts values;
        const std::size_t items = 1 + below(3);
        for (std::size_t i = 0; i < items; ++i) {
            const std::uint64_t low = below(4) == 0 ? below(1000) : below(20);
            const std::uint64_t high = low + below(5);
            const std::size_t width = std::to_string(low).size() + (below(3) == 0 ? below(3) : 0);
            text += (i > 0 ? "," : "") + padded(low, width);
            if (high != low || below(2) == 0) {
                text += "-" + std::to_string(high);
            }
            for (std::uint64_t v = low; v <= high; ++v) {
                values.push_back(padded(v, width));
            }
        }
        return {text + "]", values};
    }

    std::string name() {
        static const std::vector<std::string> names = {"n", "node-", "gpu", "r1n", "x.", "", "a-b"};
        return names[below(names.size())];
    }

    Generated list() {
        Generated out;
        const std::size_t tokens = 1 + below(4);
        for (std::size_t t = 0; t < tokens; ++t) {
            if (t > 0) {
                out.list += below(4) == 0 ? " " : ",";
            }
            if (below(5) == 0) {
                const std::string literal =
                    name() + (below(2) == 0 ? std::to_string(below(100)) : "z");
                out.list += literal;
                out.hosts.push_back(literal);
                out.range_sizes += 1;
                continue;
            }
            // texts[0] G1 texts[1] ... Gk texts[k]
            const std::size_t groups = 1 + (below(3) == 0 ? below(3) : 0);
            std::vector<std::string> texts{name()};
            std::vector<Hosts> values;
            std::size_t product = 1;
            std::string token = texts[0];
            for (std::size_t g = 0; g < groups; ++g) {
                auto [text, group_values] = group();
                product *= group_values.size();
                values.push_back(group_values);
                texts.push_back(g + 1 == groups ? (below(4) == 0 ? "-ib" : "") : name() + "z");
                token += text + texts.back();
            }
            out.list += token;
            out.range_sizes += product;
            // Slurm's order: G(k-1) outermost, then G(k-2) ... G1, Gk innermost.
            std::vector<std::string> chosen(groups);
            const std::function<void(std::size_t)> walk = [&](std::size_t level) {
                if (level == 0) {
                    for (const auto& last : values[groups - 1]) {
                        std::string host = texts[0];
                        for (std::size_t g = 0; g + 1 < groups; ++g) {
                            host += chosen[g] + texts[g + 1];
                        }
                        out.hosts.push_back(host + last + texts[groups]);
                    }
                    return;
                }
                const std::size_t g = level - 1; // level L walks group G_L (0-based G_{L-1})
                for (const auto& value : values[g]) {
                    chosen[g] = value;
                    walk(level - 1);
                }
            };
            walk(groups - 1);
        }
        return out;
    }

    /// Hosts as a compressor sees them: runs, padding, duplicates, shuffles and literals.
    Hosts hosts() {
        static const std::vector<std::string> prefixes = {
            "n", "node-", "", "x]", "a1-", "c.", "n01-"};
        Hosts out;
        const std::size_t pieces = 1 + below(5);
        for (std::size_t p = 0; p < pieces; ++p) {
            if (below(6) == 0) {
                out.push_back(below(2) == 0 ? "login" : "n" + std::string(21, '9'));
                continue;
            }
            const std::string& prefix = prefixes[below(prefixes.size())];
            std::uint64_t value = below(4) == 0 ? 95 + below(10) : below(15);
            const std::size_t width = below(3) == 0 ? 1 + below(4) : 0;
            const std::size_t length = 1 + below(10);
            for (std::size_t i = 0; i < length; ++i) {
                out.push_back(prefix + padded(value, width));
                const std::size_t step = below(8);
                value = step < 5   ? value + 1
                        : step < 7 ? value + below(4)
                                   : value - (value > 0 ? 1 : 0);
            }
            if (below(4) == 0) {
                out.push_back(out[below(out.size())]);
            }
        }
        return out;
    }

  private:
    std::mt19937 m_rng;
};

} // namespace

TEST_CASE("hostlist: order, duplicates and zero padding are kept (property)", "[hostlist]") {
    ListGenerator generator(20240905);
    for (int i = 0; i < 1500; ++i) {
        const Generated generated = generator.list();
        CAPTURE(generated.list);
        REQUIRE(expand_nodelist(generated.list) == generated.hosts);
    }
}

TEST_CASE("hostlist: the count is the sum of range sizes (property)", "[hostlist]") {
    ListGenerator generator(7);
    for (int i = 0; i < 1500; ++i) {
        const Generated generated = generator.list();
        CAPTURE(generated.list);
        REQUIRE(expand_nodelist(generated.list).size() == generated.range_sizes);
    }
}

TEST_CASE("hostlist: expand_nodelist(compress(hosts)) == hosts (property)", "[hostlist]") {
    ListGenerator generator(11);
    for (int i = 0; i < 3000; ++i) {
        const Hosts hosts = i % 2 == 0 ? generator.hosts() : generator.list().hosts;
        const std::string compressed = tfslurm::compress_hostlist(hosts);
        CAPTURE(compressed);
        REQUIRE(expand_nodelist(compressed) == hosts);
    }
}

namespace {

/// Every call a visitor receives, as text.
class RecordingVisitor final : public tfslurm::HostVisitor {
  public:
    void expect(std::uint64_t hosts, std::uint64_t bytes) override {
        calls.push_back("expect " + std::to_string(hosts) + " " + std::to_string(bytes));
    }
    void host(std::string_view name) override { calls.push_back("host " + std::string(name)); }
    void
    run(std::string_view prefix, std::uint64_t lo, std::uint64_t hi, std::size_t width) override {
        calls.push_back("run " + std::string(prefix) + " " + std::to_string(lo) + "-" +
                        std::to_string(hi) + " width " + std::to_string(width));
    }
    std::vector<std::string> calls;
};

std::string compress_visiting(std::string_view list) {
    tfslurm::HostlistCompressor compressor;
    tfslurm::visit_hostlist(list, compressor);
    return compressor.finish();
}

} // namespace

TEST_CASE("hostlist: a visitor gets the count, then hosts and whole runs in order", "[hostlist]") {
    RecordingVisitor visitor;
    tfslurm::visit_hostlist("n[1-2]x,m[3-4,08-10],login,a[1-2]b[7-8]", visitor);
    CHECK(visitor.calls == Hosts{"expect 12 40",
                                 "host n1x",
                                 "host n2x",
                                 "run m 3-4 width 1",
                                 "run m 8-10 width 2",
                                 "host login",
                                 "run a1b 7-8 width 1",
                                 "run a2b 7-8 width 1"});
}

TEST_CASE("hostlist: write_hostnames hands out whole lines in bounded chunks", "[hostlist]") {
    std::vector<std::string> chunks;
    const auto collect = [&chunks](std::string_view chunk) { chunks.emplace_back(chunk); };
    tfslurm::write_hostnames("a[1-1000]b[1-100],login", collect);
    std::string all;
    for (const auto& chunk : chunks) {
        CHECK(chunk.size() <= 64 * 1024 + 64);
        CHECK(chunk.back() == '\n');
        all += chunk;
    }
    CHECK(chunks.size() > 10);
    std::string expected;
    for (const auto& host : expand_nodelist("a[1-1000]b[1-100],login")) {
        expected += host + "\n";
    }
    CHECK(all == expected);

    chunks.clear();
    CHECK_THROWS_AS(tfslurm::write_hostnames("n[1-3],m[", collect), tfslurm::Error);
    CHECK(chunks.empty());
}

TEST_CASE("hostlist: write_hostnames writes what expand_hostlist returns", "[hostlist]") {
    // run()'s fast path: digits growing (9 -> 10, 99 -> 100), padding, a range ending right at
    // a carry, one-host ranges, lines at and over its 32-byte limit (HostLines::k_line), the
    // largest values.
    // 29 + 2 + 1 = 32 bytes: every line fast; 30 + 2 + 1 = 33: "8" and "9" fast, then slow.
    const std::string prefix29(29, 'p');
    const std::string prefix30(30, 'p');
    for (const std::string& list :
         std::vector<std::string>{"n[8-12]",
                                  "n[098-101]",
                                  "n[99-99],n[0-0],n[9-10]",
                                  "n[0998-1000]x",
                                  "a[9-10]b[99-100]",
                                  prefix29 + "[8-11]",
                                  prefix30 + "[8-11]",
                                  prefix30 + "[8-11]" + prefix29 + "[9-10]",
                                  std::string("n[18446744073709551613-18446744073709551615]")}) {
        INFO(list);
        std::string written;
        tfslurm::write_hostnames(list, [&written](std::string_view chunk) { written += chunk; });
        std::string expected;
        for (const auto& host : expand_nodelist(list)) {
            expected += host + "\n";
        }
        CHECK(written == expected);
    }
}

TEST_CASE("hostlist: write_hostnames writes a line longer than a chunk whole", "[hostlist]") {
    std::vector<std::string> chunks;
    const auto collect = [&chunks](std::string_view chunk) { chunks.emplace_back(chunk); };
    const std::string long_name(70000, 'h');
    tfslurm::write_hostnames("n1," + long_name + "," + long_name + "[8-9],n2", collect);
    REQUIRE(chunks.size() == 5);
    CHECK(chunks[0] == "n1\n");
    CHECK(chunks[1] == long_name + "\n");
    CHECK(chunks[2] == long_name + "8\n");
    CHECK(chunks[3] == long_name + "9\n");
    CHECK(chunks[4] == "n2\n");
}

TEST_CASE("hostlist: a visit reports every error before the first host", "[hostlist]") {
    RecordingVisitor visitor;
    CHECK_THROWS_AS(tfslurm::visit_hostlist("n[1-3],m[2-1]", visitor), tfslurm::Error);
    CHECK(visitor.calls.empty());
}

TEST_CASE("hostlist: compressing a visited list never expands runs", "[hostlist]") {
    const std::string big = compress_visiting("a[1-1000]b[1-1000]");
    CHECK(big.rfind("a1b[1-1000],a2b[1-1000],", 0) == 0);
    CHECK(big == tfslurm::compress_hostlist(expand_nodelist("a[1-1000]b[1-1000]")));
    CHECK(compress_visiting("n[1-65536]") == "n[1-65536]");
    CHECK(compress_visiting("n[0-3],n[00-03],n[9-11],n[000-2]") == "n[0-3,00-03,9-11,000-002]");
    CHECK(compress_visiting("n1[0-5],n[7-9]x,n[8-12],n[08-12]") ==
          "n[10-15],n7x,n8x,n9x,n[8-12,08-12]");
}

TEST_CASE("hostlist: compressing a visit equals compressing the expansion (property)",
          "[hostlist]") {
    ListGenerator generator(20261123);
    for (int i = 0; i < 3000; ++i) {
        const Generated generated = generator.list();
        CAPTURE(generated.list);
        REQUIRE(compress_visiting(generated.list) ==
                tfslurm::compress_hostlist(expand_nodelist(generated.list)));
    }
}

TEST_CASE("hostlist: a run folds like its hosts one by one (property)", "[hostlist]") {
    // Runs of every width after hosts of every width: the case the fast path reasons about.
    std::mt19937 rng(99);
    const auto below = [&rng](std::uint64_t n) {
        return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng);
    };
    for (int i = 0; i < 3000; ++i) {
        tfslurm::HostlistCompressor by_run;
        Hosts hosts;
        std::string trace;
        for (std::uint64_t piece = 0, pieces = 1 + below(4); piece < pieces; ++piece) {
            const std::string prefix = below(5) == 0 ? "m" : "n";
            const std::uint64_t lo = below(3) == 0 ? 95 + below(10) : below(12);
            const std::uint64_t hi = lo + below(below(2) == 0 ? 3 : 1200);
            const std::size_t width = below(4);
            trace += prefix + " " + std::to_string(lo) + "-" + std::to_string(hi) + " w" +
                     std::to_string(width) + "; ";
            by_run.run(prefix, lo, hi, width);
            for (std::uint64_t value = lo; value <= hi; ++value) {
                std::string digits = std::to_string(value);
                std::string host(prefix);
                host.append(width > digits.size() ? width - digits.size() : 0, '0');
                host += digits;
                hosts.push_back(std::move(host));
            }
        }
        CAPTURE(trace);
        REQUIRE(by_run.finish() == tfslurm::compress_hostlist(hosts));
    }
}

TEST_CASE("hostlist: random input only ever throws tfslurm::Error (property)", "[hostlist]") {
    std::mt19937 rng(42);
    const std::string alphabet = "[[]],,--0123456789 \t\nnx+a.";
    for (int i = 0; i < 20000; ++i) {
        std::string input(std::uniform_int_distribution<std::size_t>(0, 40)(rng), '\0');
        for (char& c : input) {
            c = std::uniform_int_distribution<int>(0, 7)(rng) == 0
                    ? static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng))
                    : alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(
                          rng)];
        }
        CAPTURE(input);
        REQUIRE(tfslurm::fuzz::check_hostlist(input).empty());
        REQUIRE(tfslurm::fuzz::check_counts(input).empty());
        REQUIRE(tfslurm::fuzz::check_ports(input).empty());
    }
}

TEST_CASE("hostlist: pathological inputs finish", "[hostlist]") {
    // Each of these once could be quadratic; they must stay linear.
    const auto input = GENERATE(
        as<std::string>{},
        std::string(200000, '['),
        std::string(200000, ']'),
        [] {
            std::string s;
            for (int i = 0; i < 50000; ++i) {
                s += "a[,";
            }
            return s;
        }(),
        [] {
            std::string s;
            for (int i = 0; i < 50000; ++i) {
                s += "[1]";
            }
            return s;
        }(),
        [] {
            std::string s = "n";
            for (int i = 0; i < 50000; ++i) {
                s += "]x[";
            }
            return s + "1]";
        }());
    CHECK(tfslurm::fuzz::check_hostlist(input).empty());
}

TEST_CASE("hostlist: fuzz regressions replay without violations", "[hostlist][counts][ports]") {
    namespace fs = std::filesystem;
    const std::vector<std::pair<std::string, std::function<std::string(std::string_view)>>>
        targets = {
            {"hostlist", tfslurm::fuzz::check_hostlist},
            {"counts", tfslurm::fuzz::check_counts},
            {"ports", tfslurm::fuzz::check_ports},
        };
    for (const auto& [target, check] : targets) {
        const fs::path dir = fs::path(tfslurm::test::paths::fuzz_dir) / "regressions" / target;
        REQUIRE(fs::is_directory(dir));
        for (const auto& entry : fs::directory_iterator(dir)) {
            if (entry.path().filename().string().rfind("README", 0) == 0) {
                continue;
            }
            std::ifstream file(entry.path(), std::ios::binary);
            const std::string input{std::istreambuf_iterator<char>(file),
                                    std::istreambuf_iterator<char>()};
            CAPTURE(entry.path().string());
            CHECK(check(input).empty());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counts per node

namespace {

using Counts = std::vector<std::uint32_t>;

tfslurm::test::Thrown counts_failure(const std::string& text) {
    return thrown_by(
        [&] { static_cast<void>(tfslurm::expand_counts(text, "SLURM_TASKS_PER_NODE")); });
}

} // namespace

TEST_CASE("counts: TensorFlow vectors TFT1-TFT5", "[counts]") {
    const auto row = GENERATE(table<std::string, Counts>({
        {"2", {2}},
        {"2,1,3", {2, 1, 3}},
        {"3(x2),2,1", {3, 3, 2, 1}},
        {"3(x2),2,11(x4)", {3, 3, 2, 11, 11, 11, 11}},
        {"13(x10)", {13, 13, 13, 13, 13, 13, 13, 13, 13, 13}},
        {"0", {0}},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(tfslurm::expand_counts(std::get<0>(row), "SLURM_STEP_TASKS_PER_NODE") ==
          std::get<1>(row));
}

TEST_CASE("counts: Slurm's encoding examples work both ways", "[counts]") {
    const auto row = GENERATE(table<Counts, std::string>({
        {{2, 2, 2, 1}, "2(x3),1"},
        {{1}, "1"},
        {{3, 3, 2, 1}, "3(x2),2,1"},
        {{1, 2, 1}, "1,2,1"},
        {{4, 4, 4, 4}, "4(x4)"},
        {{1, 1, 2, 2}, "1(x2),2(x2)"},
        {Counts(10, 13), "13(x10)"},
        {{2, 1, 1, 3}, "2,1(x2),3"},
        // observed on the test cluster
        {{2, 2, 2}, "2(x3)"},
        {{2, 1, 1}, "2,1(x2)"},
        {{3, 2, 2}, "3,2(x2)"},
        {{4, 2, 2, 2}, "4,2(x3)"},
        {{4294967295U, 4294967295U}, "4294967295(x2)"},
    }));
    CAPTURE(std::get<1>(row));
    CHECK(tfslurm::compress_counts(std::get<0>(row)) == std::get<1>(row));
    CHECK(tfslurm::expand_counts(std::get<1>(row), "SLURM_TASKS_PER_NODE") == std::get<0>(row));
}

TEST_CASE("counts: compress of nothing is empty, (x1) is accepted but never written", "[counts]") {
    CHECK(tfslurm::compress_counts({}).empty());
    CHECK(tfslurm::expand_counts("5(x1),5", "C") == Counts{5, 5});
    CHECK(tfslurm::compress_counts({5, 5}) == "5(x2)");
}

TEST_CASE("counts: every error has its exact message", "[counts]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"", "empty list"},
        {"2(x)", "expected a number at offset 3"},
        {"(x2)", "expected a number at offset 0"},
        {"2x3", "expected '(x' or ',' at offset 1"},
        {" 2", "expected a number at offset 0"},
        {"2 ,1", "expected '(x' or ',' at offset 1"},
        {"2(x3),", "expected a number at offset 6"},
        {",1", "expected a number at offset 0"},
        {"1,,2", "expected a number at offset 2"},
        {"-1", "expected a number at offset 0"},
        {"+1", "expected a number at offset 0"},
        {"2(3)", "expected '(x' or ',' at offset 1"},
        {"2(", "expected '(x' or ',' at offset 1"},
        {"2(x0)", "repetition must be at least 1 at offset 3"},
        {"2(x3", "expected ')' at offset 4"},
        {"2(x3]", "expected ')' at offset 4"},
        {"2(x3)1", "expected ',' at offset 5"},
        {"2(x3)(x2)", "expected ',' at offset 5"},
        {"4294967296", "number too large at offset 0"},
        {"1,99999999999999999999999", "number too large at offset 2"},
        {"1(x4294967296)", "number too large at offset 3"},
    }));
    const std::string& input = std::get<0>(row);
    CAPTURE(input);
    const tfslurm::test::Thrown failure = counts_failure(input);
    CHECK(failure.code == "invalid_tasks_per_node");
    CHECK(failure.message ==
          "SLURM_TASKS_PER_NODE: " + std::get<1>(row) + ": " + tfslurm::quote(input));
}

TEST_CASE("counts: the total cap fails fast with too_large", "[counts]") {
    CHECK(tfslurm::expand_counts("1(x4194303),2", "C").size() == 4194304);
    const auto input = GENERATE(
        as<std::string>{}, "1(x4194305)", "1(x4194304),1", "1(x4294967295),1(x4294967295)");
    const tfslurm::test::Thrown failure = counts_failure(input);
    CHECK(failure.code == "too_large");
    CHECK(failure.message == "SLURM_TASKS_PER_NODE: expands to more than 4194304 entries");
}

TEST_CASE("counts: compress(expand_nodelist(text)) normalizes and round-trips (property)",
          "[counts]") {
    std::mt19937 rng(3);
    for (int i = 0; i < 2000; ++i) {
        Counts counts(std::uniform_int_distribution<std::size_t>(1, 12)(rng));
        for (auto& count : counts) {
            count = std::uniform_int_distribution<std::uint32_t>(0, 3)(rng);
        }
        const std::string text = tfslurm::compress_counts(counts);
        CAPTURE(text);
        REQUIRE(tfslurm::expand_counts(text, "C") == counts);
    }
}

// ---------------------------------------------------------------------------------------------
// Port lists

namespace {

using Ports = std::vector<std::uint16_t>;

tfslurm::test::Thrown ports_failure(const std::string& text) {
    return thrown_by(
        [&] { static_cast<void>(tfslurm::expand_ports(text, "SLURM_STEP_RESV_PORTS")); });
}

} // namespace

TEST_CASE("ports: SLURM_STEP_RESV_PORTS values expand", "[ports]") {
    const auto row = GENERATE(table<std::string, Ports>({
        {"12000-12003", {12000, 12001, 12002, 12003}},
        {"12000,12005-12006", {12000, 12005, 12006}},
        {"12000", {12000}},
        {"1,65535", {1, 65535}},
        {"7,7,5-6", {7, 7, 5, 6}},
        {"65535-65535", {65535}},
        {"00080", {80}},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(tfslurm::expand_ports(std::get<0>(row), "SLURM_STEP_RESV_PORTS") == std::get<1>(row));
}

TEST_CASE("ports: a list of 65536 ports is accepted", "[ports]") {
    const Ports ports = tfslurm::expand_ports("1-65535,1", "P");
    REQUIRE(ports.size() == 65536);
    CHECK(ports.front() == 1);
    CHECK(ports[65534] == 65535);
    CHECK(ports.back() == 1);
}

TEST_CASE("ports: every error has its exact message", "[ports]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"", "empty list"},
        {"0", "port out of range 1-65535 at offset 0"},
        {"65536", "port out of range 1-65535 at offset 0"},
        {"1-70000", "port out of range 1-65535 at offset 2"},
        {"99999999999999999999999", "port out of range 1-65535 at offset 0"},
        {"12001-12000", "reversed range at offset 0"},
        {"1,12001-12000", "reversed range at offset 2"},
        {"12000,", "expected a number at offset 6"},
        {",12000", "expected a number at offset 0"},
        {"12000,,1", "expected a number at offset 6"},
        {"12000 ,1", "expected '-' or ',' at offset 5"},
        {" 12000", "expected a number at offset 0"},
        {"1-2-3", "expected ',' at offset 3"},
        {"1-", "expected a number at offset 2"},
        {"a", "expected a number at offset 0"},
        {"-1", "expected a number at offset 0"},
        {"[12000-12001]", "expected a number at offset 0"},
        {"12000x", "expected '-' or ',' at offset 5"},
    }));
    const std::string& input = std::get<0>(row);
    CAPTURE(input);
    const tfslurm::test::Thrown failure = ports_failure(input);
    CHECK(failure.code == "invalid_ports");
    CHECK(failure.message ==
          "SLURM_STEP_RESV_PORTS: " + std::get<1>(row) + ": " + tfslurm::quote(input));
}

TEST_CASE("ports: more than 65536 entries fail with too_large", "[ports]") {
    const tfslurm::test::Thrown failure = ports_failure("1-65535,1-2");
    CHECK(failure.code == "too_large");
    CHECK(failure.message == "SLURM_STEP_RESV_PORTS: expands to more than 65536 ports");
}
