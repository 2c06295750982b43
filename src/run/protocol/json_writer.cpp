// SPDX-License-Identifier: MIT
// The protocol's JSON writer (run/detail/json_writer.hpp).
#include "run/detail/json_writer.hpp"

#include "common/detail/text.hpp"

#include <array>
#include <charconv>
#include <stdexcept>

namespace tfslurm::protocol::detail {

namespace {

/// An integer as nlohmann/json writes one: its decimal digits, a minus sign before them.
template <typename Int> void append_decimal(std::string& out, Int value) {
    std::array<char, 24> digits{};
    const auto result = std::to_chars(digits.data(), digits.data() + digits.size(), value);
    out.append(digits.data(), result.ptr);
}

bool plain(unsigned char c) noexcept {
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

} // namespace

void append_json_string(std::string& out, std::string_view text) {
    out += '"';
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t run = at;
        while (run < text.size() && plain(static_cast<unsigned char>(text[run]))) {
            ++run;
        }
        out.append(text.data() + at, run - at);
        at = run;
        if (at == text.size()) {
            break;
        }
        const auto c = static_cast<unsigned char>(text[at]);
        if (c >= 0x80) {
            if (const std::size_t length = tfslurm::detail::utf8_sequence(text, at); length != 0) {
                out.append(text.data() + at, length);
                at += length;
            } else {
                out += "\xEF\xBF\xBD";
                at += tfslurm::detail::utf8_invalid_piece(text, at);
            }
            continue;
        }
        switch (c) {
        case '"':
            out += "\\\"";
            break;
        case '\\':
            out += "\\\\";
            break;
        case '\b':
            out += "\\b";
            break;
        case '\f':
            out += "\\f";
            break;
        case '\n':
            out += "\\n";
            break;
        case '\r':
            out += "\\r";
            break;
        case '\t':
            out += "\\t";
            break;
        default: {
            constexpr std::string_view k_hex = "0123456789abcdef";
            out += "\\u00";
            out += k_hex[c >> 4U];
            out += k_hex[c & 0xFU];
        }
        }
        ++at;
    }
    out += '"';
}

JsonWriter& JsonWriter::open_object() {
    element();
    m_out += '{';
    push(true);
    return *this;
}

JsonWriter& JsonWriter::close_object() {
    m_out += '}';
    --m_depth;
    return *this;
}

JsonWriter& JsonWriter::open_array() {
    element();
    m_out += '[';
    push(false);
    return *this;
}

JsonWriter& JsonWriter::close_array() {
    m_out += ']';
    --m_depth;
    return *this;
}

void JsonWriter::push(bool object) {
    if (m_depth == m_levels.size()) {
        throw std::logic_error("JsonWriter: nested deeper than any message");
    }
    m_levels.at(m_depth++) = Level{object, true, {}};
}

JsonWriter& JsonWriter::key(std::string_view name) {
    if (top() == nullptr || !top()->object) {
        throw std::logic_error("JsonWriter: a key outside an object");
    }
    Level& level = *top();
    if (!level.empty && name <= level.last_key) {
        // nlohmann/json's objects are sorted maps: the wire's bytes depend on it.
        throw std::logic_error("JsonWriter: key \"" + std::string(name) + "\" after \"" +
                               std::string(level.last_key) + "\"");
    }
    if (!level.empty) {
        m_out += ',';
    }
    level.empty = false;
    level.last_key = name;
    append_json_string(m_out, name);
    m_out += ':';
    return *this;
}

JsonWriter& JsonWriter::string(std::string_view text) {
    element();
    append_json_string(m_out, text);
    return *this;
}

JsonWriter& JsonWriter::unsigned_number(std::uint64_t value) {
    element();
    append_decimal(m_out, value);
    return *this;
}

JsonWriter& JsonWriter::signed_number(std::int64_t value) {
    element();
    append_decimal(m_out, value);
    return *this;
}

JsonWriter& JsonWriter::boolean(bool value) {
    element();
    m_out += value ? "true" : "false";
    return *this;
}

JsonWriter& JsonWriter::null() {
    element();
    m_out += "null";
    return *this;
}

JsonWriter& JsonWriter::raw(std::string_view json) {
    element();
    m_out += json;
    return *this;
}

void JsonWriter::element() {
    Level* level = top();
    if (level == nullptr || level->object) {
        return;
    }
    if (!level->empty) {
        m_out += ',';
    }
    level->empty = false;
}

} // namespace tfslurm::protocol::detail
