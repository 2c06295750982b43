// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <fmt/format.h>

#include <limits>

namespace tfslurm::detail {

namespace {

/// A UTF-8 lead byte: how many continuation bytes follow it, and the range of the first (which
/// excludes overlong forms, surrogates and code points past U+10FFFF); need 0 for a byte that
/// leads nothing.
struct Utf8Lead {
    std::size_t need = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xbf;
};

Utf8Lead utf8_lead(unsigned char lead) noexcept {
    if (lead >= 0xc2 && lead <= 0xdf) {
        return {1, 0x80, 0xbf};
    }
    if (lead >= 0xe0 && lead <= 0xef) {
        return {2,
                static_cast<unsigned char>(lead == 0xe0 ? 0xa0 : 0x80),
                static_cast<unsigned char>(lead == 0xed ? 0x9f : 0xbf)};
    }
    if (lead >= 0xf0 && lead <= 0xf4) {
        return {3,
                static_cast<unsigned char>(lead == 0xf0 ? 0x90 : 0x80),
                static_cast<unsigned char>(lead == 0xf4 ? 0x8f : 0xbf)};
    }
    return {};
}

/// The bytes from text[i] that fit the sequence its lead starts (1 for a byte that leads
/// nothing); `complete` says whether they are the whole sequence.
std::size_t utf8_fitting(std::string_view text, std::size_t i, bool& complete) noexcept {
    const Utf8Lead lead = utf8_lead(static_cast<unsigned char>(text[i]));
    std::size_t length = 1;
    for (std::size_t k = 0; k < lead.need; ++k, ++length) {
        if (i + length >= text.size()) {
            complete = false;
            return length;
        }
        const auto byte = static_cast<unsigned char>(text[i + length]);
        if (byte < (k == 0 ? lead.low : 0x80) || byte > (k == 0 ? lead.high : 0xbf)) {
            complete = false;
            return length;
        }
    }
    complete = lead.need > 0;
    return length;
}

} // namespace

std::size_t utf8_sequence(std::string_view text, std::size_t i) noexcept {
    bool complete = false;
    const std::size_t length = utf8_fitting(text, i, complete);
    return complete ? length : 0;
}

std::size_t utf8_invalid_piece(std::string_view text, std::size_t i) noexcept {
    bool complete = false;
    return utf8_fitting(text, i, complete);
}

std::optional<std::uint64_t> parse_decimal(std::string_view text) noexcept {
    if (text.empty()) {
        return std::nullopt;
    }
    std::uint64_t value = 0;
    for (const char c : text) {
        if (c < '0' || c > '9') {
            return std::nullopt;
        }
        const auto digit = static_cast<std::uint64_t>(c - '0');
        if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
            return std::nullopt;
        }
        value = value * 10 + digit;
    }
    return value;
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> fields;
    std::size_t start = 0;
    while (true) {
        const auto end = text.find(separator, start);
        if (end == std::string_view::npos) {
            fields.push_back(text.substr(start));
            return fields;
        }
        fields.push_back(text.substr(start, end - start));
        start = end + 1;
    }
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
    std::string out;
    for (std::size_t i = 0; i < items.size(); ++i) {
        if (i != 0) {
            out += separator;
        }
        out += items[i];
    }
    return out;
}

void append_escaped(std::string& out, unsigned char c, Escape style) {
    if (c == '"' || c == '\\') {
        out.push_back('\\');
        out.push_back(static_cast<char>(c));
    } else if (style == Escape::json) {
        if (c < 0x20) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
            out.push_back(static_cast<char>(c));
        }
    } else if (c == '\t' || c == '\n' || c == '\r') {
        out.push_back('\\');
        out.push_back(c == '\t' ? 't' : c == '\n' ? 'n' : 'r');
    } else if (c < 0x20 || c >= 0x7f) {
        out += fmt::format("\\x{:02x}", c);
    } else {
        out.push_back(static_cast<char>(c));
    }
}

} // namespace tfslurm::detail
