// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Small strict text helpers shared by the library's parsers.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::detail {

/// Strict unsigned decimal: one or more ASCII digits, nothing else, no overflow.
/// Input: "42". Output: 42. Input: "+4", " 4", "", "4x". Output: nullopt.
[[nodiscard]] std::optional<std::uint64_t> parse_decimal(std::string_view text) noexcept;

/// Split on `separator`, keeping empty fields. Input: "a,,b". Output: {"a", "", "b"}.
/// Input: "". Output: {""}.
[[nodiscard]] std::vector<std::string_view> split(std::string_view text, char separator);

/// How append_escaped() writes the bytes it does not keep.
enum class Escape {
    json, ///< a JSON string: control characters as `\u00NN`, every other byte as it is
    log,  ///< a log line or a terminal: `\t`, `\n`, `\r`, other non-printable bytes as `\xNN`
};

/// Append byte `c` inside a double-quoted string: `\"` and `\\` in both styles, the rest by
/// `style`. Input: '"', json. Output: `\"`. Input: 0x01, json: `\u0001`; log: `\x01`.
void append_escaped(std::string& out, unsigned char c, Escape style);

/// A hex digit's value (either case), or -1. Input: 'b'. Output: 11. Input: 'g'. Output: -1.
[[nodiscard]] constexpr int hex_digit(char c) noexcept {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/// The length of the well-formed UTF-8 sequence (RFC 3629: no overlong form, no surrogate,
/// nothing past U+10FFFF) of the non-ASCII character at `text[i]`, or 0 (a stray continuation
/// byte, an overlong form, a surrogate, past U+10FFFF, or cut short).
/// Input: "\xc3\xa9", 0. Output: 2. Input: "\xc0\x80", 0. Output: 0.
[[nodiscard]] std::size_t utf8_sequence(std::string_view text, std::size_t i) noexcept;

/// Where utf8_sequence() is 0: the bytes from `text[i]` that one U+FFFD replaces, at least 1: a
/// lead byte and the continuation bytes that fit it, up to the first that does not (which then
/// starts afresh), as nlohmann/json replaces them. Input: "\xe2\x82a", 0. Output: 2.
[[nodiscard]] std::size_t utf8_invalid_piece(std::string_view text, std::size_t i) noexcept;

/// Join with `separator`.
[[nodiscard]] std::string join(const std::vector<std::string>& items, std::string_view separator);

} // namespace tfslurm::detail
