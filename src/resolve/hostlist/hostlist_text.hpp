// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Limits and small text helpers shared by the hostlist parser (hostlist_parser.cpp) and the
/// compressors and other list grammars (hostlist.cpp).

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::detail {

// Slurm parses bounds as `unsigned long`, 64 bits on every platform Slurm supports.
inline constexpr std::uint64_t k_ulong_max = std::numeric_limits<std::uint64_t>::max();
// Slurm's MAX_RANGES: more items than this in one bracket make Slurm abort (fatal()).
inline constexpr std::size_t k_max_ranges_per_group = 65536;
// Slurm's MAX_PREFIX_CNT: at most this many values in one bracket group of a prefix.
inline constexpr std::uint64_t k_max_prefix_values = 65536;
// tfslurm's cap on the total text of an expansion (Slurm has none): 4M hosts of 64 bytes.
inline constexpr std::uint64_t k_max_expanded_bytes = std::uint64_t{1} << 28;
// Longest range item quoted verbatim inside an error message.
inline constexpr std::size_t k_max_shown_item = 40;
// Most entries a port list may expand to.
inline constexpr std::uint64_t k_max_ports = 65536;
inline constexpr std::uint64_t k_max_port = 65535;

// ---------------------------------------------------------------------------------------------
// Small helpers

inline bool is_separator(char c) noexcept {
    return c == '\t' || c == ',' || c == ' ' || c == '\n';
}

// isspace() in the C locale, which is what strtoul() skips.
inline bool is_c_space(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

inline bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
    return a > k_ulong_max - b ? k_ulong_max : a + b;
}

inline std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
    if (a != 0 && b > k_ulong_max / a) {
        return k_ulong_max;
    }
    return a * b;
}

inline std::size_t decimal_digits(std::uint64_t value) noexcept {
    std::size_t digits = 1;
    while (value >= 10) {
        value /= 10;
        ++digits;
    }
    return digits;
}

/// Zero-padded decimal text of `value`, like printf("%0*lu", width, value).
inline void assign_padded(std::string& out, std::uint64_t value, std::size_t width) {
    std::array<char, 20> buffer{};
    std::size_t pos = buffer.size();
    do {
        buffer[--pos] = static_cast<char>('0' + value % 10);
        value /= 10;
    } while (value != 0);
    const std::size_t digits = buffer.size() - pos;
    out.assign(width > digits ? width - digits : 0, '0');
    out.append(buffer.data() + pos, digits);
}

/// Add one to the decimal text [first, last) in place. Returns false when the carry leaves it
/// (`99` became `00`: the value needs one more digit).
inline bool increment_digits(char* first, char* last) noexcept {
    for (char* c = last; c != first;) {
        --c;
        if (*c != '9') {
            ++*c;
            return true;
        }
        *c = '0';
    }
    return false;
}

/// Add one to a zero-padded decimal text; the padding absorbs carries, `99` becomes `100`.
inline void increment_decimal(std::string& digits) {
    if (!increment_digits(digits.data(), digits.data() + digits.size())) {
        digits.insert(digits.begin(), '1');
    }
}

/// An item of a message: control characters escaped, long items cut.
inline std::string shown_item(std::string_view text) {
    std::string out;
    const std::size_t shown = std::min(text.size(), k_max_shown_item);
    for (std::size_t i = 0; i < shown; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    if (shown < text.size()) {
        out += "...";
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// strtoul(3) in base 10, without locale: leading C whitespace, an optional sign, then at least
// one digit. Overflow gives ULONG_MAX; a minus sign negates modulo 2^64.

struct Conversion {
    std::uint64_t value = 0;
    std::size_t end = 0; ///< index just past the last digit
    bool converted = false;
};

inline Conversion c_strtoul(std::string_view text) noexcept {
    std::size_t i = 0;
    while (i < text.size() && is_c_space(text[i])) {
        ++i;
    }
    bool negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
        negative = text[i] == '-';
        ++i;
    }
    const std::size_t first_digit = i;
    std::uint64_t value = 0;
    bool overflow = false;
    for (; i < text.size() && is_digit(text[i]); ++i) {
        const auto digit = static_cast<std::uint64_t>(text[i] - '0');
        if (!overflow) {
            if (value > (k_ulong_max - digit) / 10) {
                overflow = true;
            } else {
                value = value * 10 + digit;
            }
        }
    }
    if (i == first_digit) {
        return {};
    }
    if (overflow) {
        value = k_ulong_max;
    } else if (negative) {
        value = ~value + 1;
    }
    return {value, i, true};
}

} // namespace tfslurm::detail
