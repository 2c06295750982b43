// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <fmt/format.h>

#include <limits>

namespace tfslurm::detail {

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
