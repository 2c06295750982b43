// SPDX-License-Identifier: MIT
// The protocol's JSON writer (run/detail/json_writer.hpp).
#include "run/detail/json_writer.hpp"

#include <array>
#include <charconv>
#include <stdexcept>

namespace tfslurm::protocol::detail {

namespace {

/// The bytes a well-formed UTF-8 sequence starting with `lead` needs after it, and the range of
/// the first of them (RFC 3629: no overlong form, no surrogate, nothing above U+10FFFF); need 0
/// for a byte that starts none.
struct Lead {
    unsigned need = 0;
    unsigned low = 0x80;
    unsigned high = 0xBF;
};

Lead lead_of(unsigned lead) noexcept {
    if (lead >= 0xC2 && lead <= 0xDF) {
        return {1, 0x80, 0xBF};
    }
    if (lead >= 0xE0 && lead <= 0xEF) {
        return {2, lead == 0xE0 ? 0xA0U : 0x80U, lead == 0xED ? 0x9FU : 0xBFU};
    }
    if (lead >= 0xF0 && lead <= 0xF4) {
        return {3, lead == 0xF0 ? 0x90U : 0x80U, lead == 0xF4 ? 0x8FU : 0xBFU};
    }
    return {};
}

/// At `at`, a byte >= 0x80: the length of the well-formed sequence there (`valid`), or of the
/// piece that stands for one U+FFFD: its lead and the continuation bytes that fit it, before the
/// first that does not (which starts afresh, as nlohmann/json reads it).
std::size_t sequence_at(std::string_view text, std::size_t at, bool& valid) noexcept {
    const Lead lead = lead_of(static_cast<unsigned char>(text[at]));
    std::size_t length = 1;
    for (unsigned i = 0; i < lead.need; ++i) {
        if (at + length >= text.size()) {
            valid = false;
            return length;
        }
        const unsigned byte = static_cast<unsigned char>(text[at + length]);
        const unsigned low = i == 0 ? lead.low : 0x80U;
        const unsigned high = i == 0 ? lead.high : 0xBFU;
        if (byte < low || byte > high) {
            valid = false;
            return length;
        }
        ++length;
    }
    valid = lead.need > 0;
    return length;
}

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
            bool valid = false;
            const std::size_t length = sequence_at(text, at, valid);
            if (valid) {
                out.append(text.data() + at, length);
            } else {
                out += "\xEF\xBF\xBD";
            }
            at += length;
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
