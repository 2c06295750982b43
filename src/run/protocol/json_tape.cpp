// SPDX-License-Identifier: MIT
// The protocol's JSON reader (run/detail/json_tape.hpp): one pass over the text, no recursion,
// a node per value appended to a vector that the next read reuses.
#include "run/detail/json_tape.hpp"

#include "common/detail/text.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <system_error>

namespace tfslurm::protocol::detail {

namespace {

/// Below this many members an object's keys are compared pairwise; above, sorted (a `cluster`'s
/// `addresses` has a member per node).
constexpr std::uint32_t k_pairwise_keys = 16;
/// A tape keeps at most this many nodes' memory after trim().
constexpr std::size_t k_kept_nodes = 1024;
/// And this many bytes of unescaped strings.
constexpr std::size_t k_kept_unescaped = std::size_t{16} * 1024;

bool is_space(char c) noexcept {
    return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

/// plain() of each byte, looked up: one load a byte where four compares were (keys are short,
/// walked byte by byte).
constexpr std::array<bool, 256> k_plain = [] {
    std::array<bool, 256> table{};
    for (std::size_t byte = 0x20; byte < 0x80; ++byte) {
        table[byte] = byte != '"' && byte != '\\';
    }
    return table;
}();

/// A string's character that stands for itself and is one byte: neither a quote, a backslash,
/// a control character nor part of a UTF-8 sequence.
bool plain(char c) noexcept {
    return k_plain[static_cast<unsigned char>(c)];
}

/// Where the run of plain() characters from `at` ends: eight bytes at a time while none of them
/// is a quote, a backslash, below 0x20 or from 0x80, then byte by byte. In a word with a hit
/// the lowest flagged byte is exact: a borrow starts only at a hit, so none crosses the plain
/// bytes before the first one (a byte above it may be flagged wrongly, never one below). Where
/// the first byte in memory is the word's lowest, that byte is the run's end (its bit counted);
/// elsewhere the word is walked. A hello is mostly such runs.
std::size_t plain_run(std::string_view text, std::size_t at) noexcept {
    constexpr std::uint64_t k_ones = 0x0101010101010101ULL;
    constexpr std::uint64_t k_highs = k_ones * 0x80U;
    const auto has_zero = [](std::uint64_t word) { return (word - k_ones) & ~word; };
    while (at + 8 <= text.size()) {
        std::uint64_t word = 0;
        std::memcpy(&word, text.data() + at, sizeof word);
        const std::uint64_t below_space = (word - k_ones * 0x20U) & ~word;
        const std::uint64_t hits = (below_space | has_zero(word ^ (k_ones * '"')) |
                                    has_zero(word ^ (k_ones * '\\')) | word) &
                                   k_highs;
        if (hits != 0) {
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            return at + static_cast<std::size_t>(__builtin_ctzll(hits)) / 8;
#else
            break;
#endif
        }
        at += 8;
    }
    while (at < text.size() && plain(text[at])) {
        ++at;
    }
    return at;
}

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

/// The power of ten of a number's first significant digit (its text met the grammar and is
/// not zero): 2 for 123.4, -3 for 0.00125e0, 402 for 1e400.
std::int64_t decimal_exponent(std::string_view number) noexcept {
    constexpr std::int64_t k_saturated = std::int64_t{1} << 40U;
    std::size_t at = number[0] == '-' ? 1 : 0;
    std::int64_t integer_digits = 0;
    std::int64_t first = -1; ///< the first significant digit's power, before the exponent
    for (; at < number.size() && is_digit(number[at]); ++at, ++integer_digits) {
        if (first < 0 && number[at] != '0') {
            first = integer_digits;
        }
    }
    std::int64_t power = first >= 0 ? integer_digits - 1 - first : 0;
    if (at < number.size() && number[at] == '.') {
        std::int64_t place = 0;
        for (++at; at < number.size() && is_digit(number[at]); ++at) {
            ++place;
            if (first < 0 && number[at] != '0') {
                first = 0;
                power = -place;
            }
        }
    }
    std::int64_t exponent = 0;
    if (at < number.size() && (number[at] == 'e' || number[at] == 'E')) {
        ++at;
        const bool negative = at < number.size() && number[at] == '-';
        if (at < number.size() && (number[at] == '-' || number[at] == '+')) {
            ++at;
        }
        for (; at < number.size(); ++at) {
            exponent = std::min(exponent * 10 + (number[at] - '0'), k_saturated);
        }
        exponent = negative ? -exponent : exponent;
    }
    return power + exponent;
}

/// Whether a number that is not a 64-bit integer is finite as a double: nlohmann/json refuses
/// one that is not (`1e400`: "number overflow"), and so did the protocol before this reader. One
/// that is too small to be anything but zero is kept, as nlohmann keeps it.
bool finite_double(std::string_view number) noexcept {
    double value = 0;
    const auto result = std::from_chars(number.data(), number.data() + number.size(), value);
    return result.ec != std::errc::result_out_of_range || decimal_exponent(number) < 0;
}

void append_utf8(std::string& out, std::uint32_t code) {
    if (code < 0x80) {
        out += static_cast<char>(code);
    } else if (code < 0x800) {
        out += static_cast<char>(0xC0 | (code >> 6U));
        out += static_cast<char>(0x80 | (code & 0x3FU));
    } else if (code < 0x10000) {
        out += static_cast<char>(0xE0 | (code >> 12U));
        out += static_cast<char>(0x80 | ((code >> 6U) & 0x3FU));
        out += static_cast<char>(0x80 | (code & 0x3FU));
    } else {
        out += static_cast<char>(0xF0 | (code >> 18U));
        out += static_cast<char>(0x80 | ((code >> 12U) & 0x3FU));
        out += static_cast<char>(0x80 | ((code >> 6U) & 0x3FU));
        out += static_cast<char>(0x80 | (code & 0x3FU));
    }
}

} // namespace

/// One read: the text, where it is, and the containers open around it.
class JsonTape::Reader {
  public:
    Reader(JsonTape& tape, std::string_view text, int max_depth)
        : m_tape(tape), m_nodes(tape.m_nodes), m_text(text),
          m_max_depth(static_cast<std::size_t>(std::max(max_depth, 0))) {}

    // The grammar as a loop: read a value; after it, a `,` (then the next key and value) or the
    // end of the container it is in, which completes a value in turn; nothing after the last.
    Outcome run() {
        for (;;) {
            skip_space();
            if (m_at >= m_text.size()) {
                return Outcome::invalid;
            }
            const char c = m_text[m_at];
            if (c == '{' || c == '[') {
                if (m_open.size() >= m_max_depth) {
                    return Outcome::too_deep;
                }
                m_open.push_back(add(c == '{' ? Kind::object : Kind::array));
                ++m_at;
                skip_space();
                if (m_at < m_text.size() && m_text[m_at] == (c == '{' ? '}' : ']')) {
                    // Empty: completed as it opens.
                } else {
                    if (c == '{' && !key()) {
                        return Outcome::invalid;
                    }
                    continue;
                }
            } else if (!scalar()) {
                return Outcome::invalid;
            }
            // After a value: close what it completes, until a `,` asks for another.
            for (;;) {
                skip_space();
                if (m_open.empty()) {
                    return m_at == m_text.size() ? Outcome::ok : Outcome::invalid;
                }
                if (m_at >= m_text.size()) {
                    return Outcome::invalid;
                }
                Node& open = m_nodes[m_open.back()];
                const bool object = open.kind == Kind::object;
                const char next = m_text[m_at];
                if (next == ',') {
                    ++open.count;
                    ++m_at;
                    if (object && !key()) {
                        return Outcome::invalid;
                    }
                    break;
                }
                if (next != (object ? '}' : ']')) {
                    return Outcome::invalid;
                }
                // A container closed with no element yet is empty; with some, its last counts.
                if (m_nodes.size() > m_open.back() + 1) {
                    ++open.count;
                }
                ++m_at;
                open.end = static_cast<std::uint32_t>(m_at);
                open.span = static_cast<std::uint32_t>(m_nodes.size() - m_open.back());
                if (object && !distinct_keys(m_open.back())) {
                    return Outcome::repeated_key;
                }
                m_open.pop_back();
            }
        }
    }

  private:
    std::uint32_t add(Kind kind) {
        // Made in place: a Node built aside and copied in cost a stall on every string.
        Node& node = m_nodes.emplace_back();
        node.kind = kind;
        node.begin = static_cast<std::uint32_t>(m_at);
        return static_cast<std::uint32_t>(m_nodes.size() - 1);
    }

    void skip_space() noexcept {
        while (m_at < m_text.size() && is_space(m_text[m_at])) {
            ++m_at;
        }
    }

    /// A member's key and its colon, white space around them.
    bool key() {
        skip_space();
        if (m_at >= m_text.size() || m_text[m_at] != '"' || !string()) {
            return false;
        }
        skip_space();
        if (m_at >= m_text.size() || m_text[m_at] != ':') {
            return false;
        }
        ++m_at;
        return true;
    }

    bool scalar() {
        const char c = m_text[m_at];
        if (c == '"') {
            return string();
        }
        if (c == 't') {
            return literal("true", Kind::boolean, 1);
        }
        if (c == 'f') {
            return literal("false", Kind::boolean, 0);
        }
        if (c == 'n') {
            return literal("null", Kind::null, 0);
        }
        return number();
    }

    bool literal(std::string_view word, Kind kind, std::uint64_t value) {
        if (m_text.substr(m_at, word.size()) != word) {
            return false;
        }
        const std::uint32_t index = add(kind);
        m_at += word.size();
        m_nodes[index].end = static_cast<std::uint32_t>(m_at);
        m_nodes[index].number = value;
        return true;
    }

    // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; integers that fit 64 bits keep their
    // magnitude, any other number only its text.
    bool number() {
        const std::uint32_t index = add(Kind::number);
        const bool negative = m_text[m_at] == '-';
        if (negative) {
            ++m_at;
        }
        if (m_at >= m_text.size() || !is_digit(m_text[m_at])) {
            return false;
        }
        std::uint64_t magnitude = 0;
        bool fits = true;
        if (m_text[m_at] == '0') {
            ++m_at;
        } else {
            while (m_at < m_text.size() && is_digit(m_text[m_at])) {
                const auto digit = static_cast<std::uint64_t>(m_text[m_at] - '0');
                if (magnitude > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
                    fits = false;
                }
                magnitude = magnitude * 10 + digit;
                ++m_at;
            }
        }
        bool integer = true;
        if (m_at < m_text.size() && m_text[m_at] == '.') {
            integer = false;
            if (!digits()) {
                return false;
            }
        }
        if (m_at < m_text.size() && (m_text[m_at] == 'e' || m_text[m_at] == 'E')) {
            integer = false;
            if (m_at + 1 < m_text.size() && (m_text[m_at + 1] == '+' || m_text[m_at + 1] == '-')) {
                ++m_at;
            }
            if (!digits()) {
                return false;
            }
        }
        Node& node = m_nodes[index];
        node.end = static_cast<std::uint32_t>(m_at);
        constexpr std::uint64_t k_most_negative = std::uint64_t{1} << 63U;
        if (integer && fits && !negative) {
            node.number_kind = Number::unsigned_integer;
            node.number = magnitude;
        } else if (integer && fits && magnitude <= k_most_negative) {
            node.number_kind = Number::signed_integer;
            node.number = magnitude;
        } else if (!finite_double(m_text.substr(node.begin, node.end - node.begin))) {
            return false;
        }
        return true;
    }

    /// One or more digits after the character at m_at (a `.`, an exponent's letter or sign).
    bool digits() noexcept {
        ++m_at;
        const std::size_t first = m_at;
        while (m_at < m_text.size() && is_digit(m_text[m_at])) {
            ++m_at;
        }
        return m_at > first;
    }

    // A string in place when it holds no escape (most do); else decoded into the tape's buffer,
    // which was reserved to the text's size: no string decodes longer than it is written, so
    // the views into the buffer stay valid.
    bool string() {
        const std::uint32_t index = add(Kind::string);
        const std::size_t first = ++m_at;
        std::string* decoded = nullptr; ///< from the first escape on
        std::size_t start = 0;          ///< of this string in *decoded
        for (;;) {
            const std::size_t run = plain_run(m_text, m_at); // in one piece
            if (decoded != nullptr) {
                decoded->append(m_text.data() + m_at, run - m_at);
            }
            m_at = run;
            if (m_at >= m_text.size()) {
                return false;
            }
            const auto c = static_cast<unsigned char>(m_text[m_at]);
            if (c == '"') {
                break;
            }
            if (c < 0x20) {
                return false;
            }
            if (c == '\\') {
                if (decoded == nullptr) {
                    decoded = &unescaped();
                    start = decoded->size();
                    decoded->append(m_text.data() + first, m_at - first);
                }
                if (!escape(*decoded)) {
                    return false;
                }
                continue;
            }
            const std::size_t n = c < 0x80 ? 1 : tfslurm::detail::utf8_sequence(m_text, m_at);
            if (n == 0) {
                return false;
            }
            if (decoded != nullptr) {
                decoded->append(m_text.data() + m_at, n);
            }
            m_at += n;
        }
        Node& node = m_nodes[index];
        node.string = decoded == nullptr ? m_text.data() + first : decoded->data() + start;
        node.length =
            static_cast<std::uint32_t>(decoded == nullptr ? m_at - first : decoded->size() - start);
        ++m_at;
        node.end = static_cast<std::uint32_t>(m_at);
        return true;
    }

    /// The tape's buffer of decoded strings, reserved once per read to the text's size before
    /// the first view into it is taken.
    std::string& unescaped() {
        std::string& out = m_tape.m_unescaped;
        if (out.capacity() < m_text.size()) {
            out.reserve(m_text.size());
        }
        return out;
    }

    /// One escape at m_at (its backslash), appended decoded.
    bool escape(std::string& out) {
        if (m_at + 1 >= m_text.size()) {
            return false;
        }
        const char what = m_text[m_at + 1];
        m_at += 2;
        switch (what) {
        case '"':
        case '\\':
        case '/':
            out += what;
            return true;
        case 'b':
            out += '\b';
            return true;
        case 'f':
            out += '\f';
            return true;
        case 'n':
            out += '\n';
            return true;
        case 'r':
            out += '\r';
            return true;
        case 't':
            out += '\t';
            return true;
        case 'u':
            break;
        default:
            return false;
        }
        std::uint32_t code = 0;
        if (!hex4(code)) {
            return false;
        }
        if (code >= 0xDC00 && code <= 0xDFFF) {
            return false; // a low surrogate without its high one
        }
        if (code >= 0xD800 && code <= 0xDBFF) {
            std::uint32_t low = 0;
            if (m_at + 1 >= m_text.size() || m_text[m_at] != '\\' || m_text[m_at + 1] != 'u') {
                return false;
            }
            m_at += 2;
            if (!hex4(low) || low < 0xDC00 || low > 0xDFFF) {
                return false;
            }
            code = 0x10000 + ((code - 0xD800) << 10U) + (low - 0xDC00);
        }
        append_utf8(out, code);
        return true;
    }

    bool hex4(std::uint32_t& code) noexcept {
        if (m_at + 4 > m_text.size()) {
            return false;
        }
        for (std::size_t i = 0; i < 4; ++i) {
            const int digit = tfslurm::detail::hex_digit(m_text[m_at + i]);
            if (digit < 0) {
                return false;
            }
            code = code * 16 + static_cast<std::uint32_t>(digit);
        }
        m_at += 4;
        return true;
    }

    /// No key twice among the members of the object at `index`.
    bool distinct_keys(std::uint32_t index) {
        const Value object(&m_tape, index);
        // The keys side by side first (the tape's scratch, kept between reads): compared pairwise
        // there, a few instructions each, or sorted when there are many.
        std::vector<std::string_view>& keys = m_tape.m_keys;
        keys.clear();
        for (const auto& [key, value] : object.members()) {
            keys.push_back(key);
        }
        if (keys.size() <= k_pairwise_keys) {
            for (std::size_t a = 0; a < keys.size(); ++a) {
                for (std::size_t b = a + 1; b < keys.size(); ++b) {
                    if (same_key(keys[a], keys[b])) {
                        return false;
                    }
                }
            }
            return true;
        }
        std::sort(keys.begin(), keys.end());
        return std::adjacent_find(keys.begin(), keys.end()) == keys.end();
    }

    JsonTape& m_tape;
    std::vector<Node>& m_nodes;
    std::string_view m_text;
    std::size_t m_max_depth;
    std::size_t m_at = 0;
    std::vector<std::uint32_t> m_open; ///< nodes of the containers open around m_at
};

JsonTape::Outcome JsonTape::read(std::string_view text, int max_depth) {
    m_nodes.clear();
    m_unescaped.clear();
    m_text = text;
    if (text.size() >= std::numeric_limits<std::uint32_t>::max()) {
        return Outcome::invalid;
    }
    return Reader(*this, text, max_depth).run();
}

void JsonTape::trim() noexcept {
    if (m_nodes.capacity() > k_kept_nodes) {
        std::vector<Node>().swap(m_nodes);
    }
    if (m_unescaped.capacity() > k_kept_unescaped) {
        std::string().swap(m_unescaped);
    }
    if (m_keys.capacity() > k_kept_nodes) {
        std::vector<std::string_view>().swap(m_keys);
    }
}

JsonTape::Value JsonTape::root() const noexcept {
    return {this, 0};
}

bool JsonTape::Value::is_signed() const noexcept {
    if (kind() != Kind::number) {
        return false;
    }
    return node().number_kind == Number::signed_integer ||
           (node().number_kind == Number::unsigned_integer &&
            node().number <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
}

std::int64_t JsonTape::Value::as_signed() const noexcept {
    const std::uint64_t magnitude = node().number;
    if (node().number_kind != Number::signed_integer) {
        return static_cast<std::int64_t>(magnitude);
    }
    // -magnitude without overflow, INT64_MIN included.
    return static_cast<std::int64_t>(~magnitude + 1);
}

std::string_view JsonTape::Value::text() const noexcept {
    return m_tape->m_text.substr(node().begin, node().end - node().begin);
}

std::optional<JsonTape::Value> JsonTape::Value::find(std::string_view key) const noexcept {
    for (const auto& [name, value] : members()) {
        if (same_key(name, key)) {
            return value;
        }
    }
    return std::nullopt;
}

} // namespace tfslurm::protocol::detail
