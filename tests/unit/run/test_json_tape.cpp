// SPDX-License-Identifier: MIT
// The protocol's JSON reader (src/run/detail/json_tape.hpp): what it reads, what it refuses,
// and that it agrees with nlohmann/json (tests/fuzz/fuzz_json.hpp) on the fuzz seeds and
// thousands of their mutations.
#include "../fuzz/fuzz_json.hpp"
#include "run/detail/json_tape.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

using tfslurm::protocol::detail::JsonTape;
using TapeOutcome = JsonTape::Outcome;

namespace {

/// A value as the tests spell it: u7 (an integer without a sign), i-3 (a negative one), n1.5
/// (another number, its text), s"text", b1, null, [..], {key:..}.
std::string render(const JsonTape::Value& value) {
    switch (value.kind()) {
    case JsonTape::Kind::null:
        return "null";
    case JsonTape::Kind::boolean:
        return value.as_boolean() ? "b1" : "b0";
    case JsonTape::Kind::number:
        if (value.is_unsigned()) {
            return fmt::format("u{}", value.as_unsigned());
        }
        if (value.is_signed()) {
            return fmt::format("i{}", value.as_signed());
        }
        return fmt::format("n{}", value.text());
    case JsonTape::Kind::string:
        return fmt::format("s\"{}\"", value.as_string());
    case JsonTape::Kind::array: {
        std::vector<std::string> parts;
        for (const auto element : value.elements()) {
            parts.push_back(render(element));
        }
        return fmt::format("[{}]", fmt::join(parts, ","));
    }
    case JsonTape::Kind::object: {
        std::vector<std::string> parts;
        for (const auto& [key, member] : value.members()) {
            parts.push_back(fmt::format("{}:{}", key, render(member)));
        }
        return fmt::format("{{{}}}", fmt::join(parts, ","));
    }
    }
    return "?";
}

std::string read_rendered(const std::string& text, int depth = 8) {
    JsonTape tape;
    const TapeOutcome outcome = tape.read(text, depth);
    switch (outcome) {
    case TapeOutcome::ok:
        return render(tape.root());
    case TapeOutcome::invalid:
        return "invalid";
    case TapeOutcome::repeated_key:
        return "repeated key";
    case TapeOutcome::too_deep:
        return "too deep";
    }
    return "?";
}

/// xorshift64: the same mutations on every run.
class Mutations {
  public:
    std::string operator()(const std::string& seed) {
        std::string out = seed;
        const std::uint64_t edits = 1 + next() % 4;
        for (std::uint64_t i = 0; i < edits; ++i) {
            static constexpr std::string_view k_bytes =
                "{}[],:\"\\/ 0123456789-+.eEtrufalsn\x01\x7f\x80\xc3\xa9\xed\xa0\xf4\x90u";
            const std::size_t at = out.empty() ? 0 : next() % (out.size() + 1);
            const char byte = k_bytes[next() % k_bytes.size()];
            switch (next() % 4) {
            case 0:
                out.insert(out.begin() + static_cast<std::ptrdiff_t>(at), byte);
                break;
            case 1:
                if (at < out.size()) {
                    out.erase(at, 1);
                }
                break;
            case 2:
                if (at < out.size()) {
                    out[at] = byte;
                }
                break;
            default: {
                // A piece of the text again, elsewhere: repeated members, deeper nesting.
                const std::size_t from = out.empty() ? 0 : next() % out.size();
                const std::string piece = out.substr(from, next() % 24);
                out.insert(at, piece);
            }
            }
        }
        return out;
    }

  private:
    std::uint64_t next() {
        m_state ^= m_state << 13U;
        m_state ^= m_state >> 7U;
        m_state ^= m_state << 17U;
        return m_state;
    }
    std::uint64_t m_state = 0x9E3779B97F4A7C15ULL;
};

std::vector<std::string> files_in(const std::filesystem::path& dir) {
    std::vector<std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().filename().string().rfind("README", 0) == 0) {
            continue;
        }
        std::ifstream file(entry.path(), std::ios::binary);
        out.emplace_back(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
    }
    return out;
}

} // namespace

TEST_CASE("json tape: reads every kind of value", "[json_tape]") {
    const auto [text, expected] = GENERATE(table<std::string, std::string>({
        {"{}", "{}"},
        {"[]", "[]"},
        {" \t\r\n{ } \n", "{}"},
        {"7", "u7"},
        {"\"x\"", "s\"x\""},
        {"true", "b1"},
        {"false", "b0"},
        {"null", "null"},
        {R"({"v":7,"type":"exit","ranks":[1,2,3]})", R"({v:u7,type:s"exit",ranks:[u1,u2,u3]})"},
        {R"({ "a" : [ { } , [ ] , null ] , "b" : { "c" : -1 } })", "{a:[{},[],null],b:{c:i-1}}"},
        {"[0,-0,1.5,-2e3,1E+2,0.0]", "[u0,i0,n1.5,n-2e3,n1E+2,n0.0]"},
        {"[18446744073709551615,18446744073709551616]",
         "[u18446744073709551615,n18446744073709551616]"},
        {"[-9223372036854775808,-9223372036854775809]",
         "[i-9223372036854775808,n-9223372036854775809]"},
        {R"(["\"\\\/\b\f\n\r\t"])", "[s\"\"\\/\b\f\n\r\t\"]"},
        {R"(["\u0041\u00e9\u20ac\ud83d\ude00"])", "[s\"A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]"},
        {"[\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]",
         "[s\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"]"},
        {R"({"k\u0065y":1})", "{key:u1}"},
        // Numbers beyond 64 bits are kept while a double holds them (nlohmann's rule), and so
        // are those too small for anything but zero.
        {"[1.7976931348623157e308,1e-400,-0.0000e-999999999999]",
         "[n1.7976931348623157e308,n1e-400,n-0.0000e-999999999999]"},
        {R"(["\u0000"])", std::string("[s\"\0\"]", 6)},
    }));
    CAPTURE(text);
    CHECK(read_rendered(text) == expected);
}

TEST_CASE("json tape: a string's special byte is met wherever it falls in a word", "[json_tape]") {
    // Strings are scanned eight bytes at a time: each byte that ends a run of plain characters,
    // at every offset from a string's start, read as nlohmann/json reads it.
    const auto [special, accepted] = GENERATE(table<std::string, bool>({
        {"\\n", true},
        {"\\\"", true},
        {"\xc3\xa9", true},
        {"\x7f", true},
        {" ", true},
        {"\x1f", false},
        {"\x80", false},
        {"\xff", false},
        {std::string(1, '\0'), false},
        {"\"", false},
    }));
    for (std::size_t offset = 0; offset < 18; ++offset) {
        const std::string input =
            "[\"" + std::string(offset, 'a') + special + std::string(9, 'b') + "\"]";
        CAPTURE(offset, input);
        REQUIRE(tfslurm::fuzz::check_json(input).empty());
        JsonTape tape;
        CHECK((tape.read(input, 8) == TapeOutcome::ok) == accepted);
    }
}

TEST_CASE("json tape: refuses what RFC 8259 refuses", "[json_tape]") {
    const std::string text = GENERATE(as<std::string>{},
                                      "",
                                      " ",
                                      "{",
                                      "}",
                                      "{\"a\"}",
                                      "{\"a\":}",
                                      "{\"a\":1,}",
                                      "{,}",
                                      "{a:1}",
                                      "{'a':1}",
                                      "[1,]",
                                      "[,1]",
                                      "[1 2]",
                                      "{} {}",
                                      "{}x",
                                      "01",
                                      "-",
                                      "1.",
                                      ".5",
                                      "1e",
                                      "1e400",
                                      "-1.8e308",
                                      "0.001e99999999999999999999",
                                      "1" + std::string(400, '0'),
                                      "1e+",
                                      "+1",
                                      "0x10",
                                      "NaN",
                                      "tru",
                                      "nul",
                                      "True",
                                      "\"a",
                                      "\"\\x\"",
                                      "\"\\u12\"",
                                      "\"\\u12G4\"",
                                      "\"\\ud83d\"",
                                      "\"\\ud83d\\u0041\"",
                                      "\"\\ude00\"",
                                      "\"tab\there\"",
                                      "\"\x7f\x01\"",
                                      "\"\xff\"",
                                      "\"\xc0\x80\"",
                                      "\"\xe0\x80\x80\"",
                                      "\"\xed\xa0\x80\"",
                                      "\"\xf4\x90\x80\x80\"",
                                      "\"\xc3\"",
                                      "\"\xe2\x82\"",
                                      "\xef\xbb\xbf{}",
                                      "/* c */ {}",
                                      "{} // c");
    CAPTURE(text);
    CHECK(read_rendered(text) == "invalid");
}

TEST_CASE("json tape: an object that repeats a key is refused", "[json_tape]") {
    CHECK(read_rendered(R"({"a":1,"a":2})") == "repeated key");
    CHECK(read_rendered(R"({"a":1,"\u0061":2})") == "repeated key");
    CHECK(read_rendered(R"([{"x":{"a":1,"b":2,"a":3}}])") == "repeated key");
    // The same key in two objects is no repetition.
    CHECK(read_rendered(R"([{"a":1},{"a":2}])") == "[{a:u1},{a:u2}]");
    // A large object (a cluster's addresses) is checked by sorting its keys.
    std::string many = "{";
    for (int i = 0; i < 100; ++i) {
        many += fmt::format("\"n{}\":{},", i, i);
    }
    CHECK(read_rendered(many + "\"n99\":0}") == "repeated key");
    CHECK(read_rendered(many + "\"n100\":0}").rfind("{n0:u0,n1:u1,", 0) == 0);
}

TEST_CASE("json tape: nesting deeper than the limit is refused as it is met", "[json_tape]") {
    CHECK(read_rendered("[[[1]]]", 3) == "[[[u1]]]");
    CHECK(read_rendered("[[[[1]]]]", 3) == "too deep");
    CHECK(read_rendered(R"({"a":{"b":{"c":{}}}})", 3) == "too deep");
    // Brackets in strings do not count.
    CHECK(read_rendered(R"(["[[[[{{{{"])", 1) == "[s\"[[[[{{{{\"]");
    // No recursion: a deep text costs no stack, valid or not.
    const std::string deep(1'000'000, '[');
    CHECK(read_rendered(deep, std::numeric_limits<int>::max()) == "invalid");
    CHECK(read_rendered(deep, 8) == "too deep");
}

TEST_CASE("json tape: integers fit 64 bits or are other numbers", "[json_tape]") {
    JsonTape tape;
    REQUIRE(tape.read("[9223372036854775807,9223372036854775808,-9223372036854775808]", 2) ==
            TapeOutcome::ok);
    std::vector<JsonTape::Value> n;
    for (const auto value : tape.root().elements()) {
        n.push_back(value);
    }
    REQUIRE(n.size() == 3);
    CHECK(n[0].is_unsigned());
    CHECK(n[0].is_signed());
    CHECK(n[0].as_signed() == std::numeric_limits<std::int64_t>::max());
    CHECK(n[1].is_unsigned());
    CHECK_FALSE(n[1].is_signed());
    CHECK_FALSE(n[2].is_unsigned());
    CHECK(n[2].is_signed());
    CHECK(n[2].as_signed() == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("json tape: a value's text is its bytes in what was read", "[json_tape]") {
    JsonTape tape;
    const std::string text = R"(  {"msg" : { "type":"x" ,"v":7 } ,"ranks":[ 1 ],"s":"a\nb"} )";
    REQUIRE(tape.read(text, 8) == TapeOutcome::ok);
    const auto root = tape.root();
    CHECK(root.text() == R"({"msg" : { "type":"x" ,"v":7 } ,"ranks":[ 1 ],"s":"a\nb"})");
    CHECK(root.find("msg")->text() == R"({ "type":"x" ,"v":7 })");
    CHECK(root.find("ranks")->text() == "[ 1 ]");
    CHECK(root.find("s")->text() == R"("a\nb")");
    CHECK(root.find("s")->as_string() == "a\nb");
    CHECK(root.size() == 3);
    CHECK_FALSE(root.find("type").has_value());
    CHECK_FALSE(root.find("ranks")->find("x").has_value());
    CHECK(root.find("ranks")->members().begin() == root.find("ranks")->members().end());
    CHECK(root.elements().begin() == root.elements().end());
}

TEST_CASE("json tape: a tape read again holds only the new text", "[json_tape]") {
    JsonTape tape;
    std::string big = R"({"a":[)";
    for (int i = 0; i < 5000; ++i) {
        big += fmt::format(R"("\u00e9{}",)", i);
    }
    big += "0]}";
    REQUIRE(tape.read(big, 8) == TapeOutcome::ok);
    CHECK(tape.root().find("a")->size() == 5001);
    tape.trim();
    REQUIRE(tape.read(R"({"b":"\u00e9"})", 8) == TapeOutcome::ok);
    CHECK(render(tape.root()) == "{b:s\"\xc3\xa9\"}");
    REQUIRE(tape.read("[1", 8) == TapeOutcome::invalid);
    REQUIRE(tape.read("[2]", 8) == TapeOutcome::ok);
    CHECK(render(tape.root()) == "[u2]");
}

TEST_CASE("json tape: agrees with nlohmann/json on the fuzz seeds and their mutations",
          "[json_tape]") {
    const auto seeds =
        files_in(std::filesystem::path(tfslurm::test::paths::fuzz_dir) / "corpus" / "protocol");
    REQUIRE(seeds.size() >= 10);
    Mutations mutate;
    std::size_t accepted = 0;
    std::size_t inputs = 0;
    for (const std::string& seed : seeds) {
        for (int i = 0; i < 2000; ++i) {
            const std::string input = i == 0 ? seed : mutate(seed);
            CAPTURE(input);
            REQUIRE(tfslurm::fuzz::check_json(input).empty());
            JsonTape tape;
            accepted += tape.read(input, tfslurm::fuzz::k_json_depth) == TapeOutcome::ok ? 1U : 0U;
            ++inputs;
        }
    }
    // The mutations reach both sides of the grammar.
    CHECK(accepted > inputs / 20);
    CHECK(accepted < inputs - inputs / 20);
}

TEST_CASE("json tape: fuzz regressions replay without violations", "[json_tape]") {
    for (const std::string& input : files_in(std::filesystem::path(tfslurm::test::paths::fuzz_dir) /
                                             "regressions" / "protocol")) {
        CAPTURE(input);
        CHECK(tfslurm::fuzz::check_json(input).empty());
    }
}
