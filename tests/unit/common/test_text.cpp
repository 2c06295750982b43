// SPDX-License-Identifier: MIT
// The library's strict text helpers (src/common/text.cpp): a decimal is digits only and never
// overflows; split keeps empty fields; join is its inverse.
#include "common/detail/text.hpp"

#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

using tfslurm::detail::join;
using tfslurm::detail::parse_decimal;
using tfslurm::detail::split;

TEST_CASE("text: parse_decimal takes ASCII digits only, up to 2^64 - 1", "[text]") {
    using Row = std::tuple<std::string, std::optional<std::uint64_t>>;
    const auto [text, value] = GENERATE(table<std::string, std::optional<std::uint64_t>>({
        Row{"0", 0},
        Row{"42", 42},
        Row{"007", 7},
        Row{"18446744073709551615", UINT64_MAX},
        Row{"18446744073709551616", std::nullopt}, // one more: overflow
        Row{"99999999999999999999", std::nullopt},
        Row{"", std::nullopt},
        Row{"+4", std::nullopt},
        Row{"-4", std::nullopt},
        Row{" 4", std::nullopt},
        Row{"4 ", std::nullopt},
        Row{"4x", std::nullopt},
        Row{"0x10", std::nullopt},
        Row{"\xd9\xa3", std::nullopt}, // an Arabic-Indic digit is not ASCII
    }));
    CAPTURE(text);
    CHECK(parse_decimal(text) == value);
}

TEST_CASE("text: split keeps every field, join puts them back", "[text]") {
    using Fields = std::vector<std::string_view>;
    CHECK(split("a,b,c", ',') == Fields{"a", "b", "c"});
    CHECK(split("a,,b", ',') == Fields{"a", "", "b"});
    CHECK(split(",a,", ',') == Fields{"", "a", ""});
    CHECK(split("", ',') == Fields{""});
    CHECK(split("abc", ',') == Fields{"abc"});
    CHECK(split("a:b,c", ':') == Fields{"a", "b,c"});
    for (const std::string text : {"a,b,c", "a,,b", ",a,", "", "abc"}) {
        CAPTURE(text);
        std::vector<std::string> fields;
        for (const auto field : split(text, ',')) {
            fields.emplace_back(field);
        }
        CHECK(join(fields, ",") == text);
    }
    CHECK(join({}, ", ").empty());
    CHECK(join({"x"}, ", ") == "x");
    CHECK(join({"x", "y", "z"}, ", ") == "x, y, z");
}

TEST_CASE("text: append_escaped writes JSON or a log line's escapes", "[text]") {
    using tfslurm::detail::append_escaped;
    using tfslurm::detail::Escape;
    const auto escaped = [](std::string_view text, Escape style) {
        std::string out;
        for (const char c : text) {
            append_escaped(out, static_cast<unsigned char>(c), style);
        }
        return out;
    };
    const std::string input = std::string("a\"b\\c\td\ne\x01") + "\x7f\xc3";
    CHECK(escaped(input, Escape::json) == "a\\\"b\\\\c\\u0009d\\u000ae\\u0001\x7f\xc3");
    CHECK(escaped(input, Escape::log) == "a\\\"b\\\\c\\td\\ne\\x01\\x7f\\xc3");
}
