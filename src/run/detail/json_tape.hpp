// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The protocol's JSON reader (issue #33): one JSON text read into a flat array of values (a
/// tape), which protocol.cpp's decoders walk instead of a document of heap nodes. Strings are
/// views of the text (or of one buffer, when they hold escapes), numbers are read as they are
/// met, and reading a tape again reuses its memory: decoding a relayed hello makes no
/// allocation of its own, where nlohmann/json made a map and a string per field.
///
/// Strict RFC 8259, as nlohmann/json's parser (which the tests compare it with): UTF-8 checked,
/// `\u` escapes and surrogate pairs decoded, no comments, nothing but white space after the
/// value. Stricter in two ways: an object that repeats a key is refused (nlohmann kept the last;
/// a peer's message means one thing), and so is nesting deeper than a limit, met as it reads
/// (without recursion). Texts of up to 4 GiB.
///
///     JsonTape tape;
///     tape.read(R"({"v":7,"ranks":[1,2]})", 8);              // JsonTape::Outcome::ok
///     tape.root().find("v")->as_unsigned();                  // 7
///     for (auto rank : tape.root().find("ranks")->elements()) { ... }

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm::protocol::detail {

class JsonTape {
  public:
    enum class Kind : std::uint8_t { null, boolean, number, string, array, object };
    /// What a number is: an integer without a sign that fits 64 bits (`unsigned_integer`), a
    /// negative one that fits (`signed_integer`: "-0" is one, as for nlohmann), anything else
    /// (a fraction, an exponent, too large: `other`).
    enum class Number : std::uint8_t { unsigned_integer, signed_integer, other };
    /// ok; not JSON; an object that repeats a key; nesting deeper than the limit.
    enum class Outcome : std::uint8_t { ok, invalid, repeated_key, too_deep };

    /// Read `text`, replacing what this tape held. Values stay valid until the next read and
    /// refer to `text`, which must outlive them.
    Outcome read(std::string_view text, int max_depth);
    /// Give back memory beyond what a small message needs (after a large `cluster`).
    void trim() noexcept;

    class Value;
    class ElementIterator;
    class MemberIterator;
    template <typename It> class Range;
    using Elements = Range<ElementIterator>;
    using Members = Range<MemberIterator>;
    /// The value read. Only after read() returned Outcome::ok.
    [[nodiscard]] Value root() const noexcept;

  private:
    struct Node {
        std::uint32_t begin = 0;      ///< of the value's text
        std::uint32_t end = 0;        ///< one past it
        std::uint32_t span = 1;       ///< nodes in this value's subtree, itself included
        std::uint32_t count = 0;      ///< a container's elements or members
        std::uint64_t number = 0;     ///< an integer's magnitude; a boolean's value
        const char* string = nullptr; ///< a string's (or key's) characters, unescaped
        std::uint32_t length = 0;     ///< and their number
        Kind kind = Kind::null;
        Number number_kind = Number::other;
    };
    class Reader;

    std::vector<Node> m_nodes;            ///< depth first; an object's members are key, value
    std::string m_unescaped;              ///< the strings that held escapes, decoded
    std::vector<std::string_view> m_keys; ///< scratch of the duplicate-key check
    std::string_view m_text;
};

/// Two keys the same, compared in line (keys are a few bytes; a call to memcmp costs more):
/// the tape's own lookups and duplicate check, and the protocol's field index.
[[nodiscard]] inline bool same_key(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    for (std::size_t i = 0; i < a.size(); ++i) {
        if (a[i] != b[i]) {
            return false;
        }
    }
    return true;
}

/// One value of a tape (a cheap handle: a tape and an index).
class JsonTape::Value {
  public:
    Value(const JsonTape* tape, std::uint32_t index) noexcept : m_tape(tape), m_index(index) {}
    /// No value yet: a slot to assign one to, left as it is (an index of members is filled
    /// without clearing it first); nothing may be asked of it.
    Value() noexcept = default; // NOLINT(cppcoreguidelines-pro-type-member-init)

    [[nodiscard]] Kind kind() const noexcept { return node().kind; }
    [[nodiscard]] bool is_object() const noexcept { return kind() == Kind::object; }
    [[nodiscard]] bool is_array() const noexcept { return kind() == Kind::array; }
    [[nodiscard]] bool is_string() const noexcept { return kind() == Kind::string; }
    [[nodiscard]] bool is_boolean() const noexcept { return kind() == Kind::boolean; }
    [[nodiscard]] bool is_null() const noexcept { return kind() == Kind::null; }
    /// An integer without a sign that fits 64 bits.
    [[nodiscard]] bool is_unsigned() const noexcept {
        return kind() == Kind::number && node().number_kind == Number::unsigned_integer;
    }
    /// A negative integer that fits 64 bits signed, or an unsigned one up to INT64_MAX.
    [[nodiscard]] bool is_signed() const noexcept;

    /// Only when is_unsigned() / is_signed() / is_boolean() / is_string().
    [[nodiscard]] std::uint64_t as_unsigned() const noexcept { return node().number; }
    [[nodiscard]] std::int64_t as_signed() const noexcept;
    [[nodiscard]] bool as_boolean() const noexcept { return node().number != 0; }
    [[nodiscard]] std::string_view as_string() const noexcept {
        return {node().string, node().length};
    }

    /// The value's own text in what was read (an object's braces and all).
    [[nodiscard]] std::string_view text() const noexcept;
    /// Elements of an array, members of an object; 0 otherwise.
    [[nodiscard]] std::size_t size() const noexcept { return node().count; }
    /// An object's member `key` (none for another kind).
    [[nodiscard]] std::optional<Value> find(std::string_view key) const noexcept;
    /// An array's elements (none for another kind).
    [[nodiscard]] Elements elements() const noexcept;
    /// An object's members, as (key, value) pairs in the text's order (none for another kind).
    [[nodiscard]] Members members() const noexcept;

  private:
    friend class JsonTape;
    friend class ElementIterator;
    friend class MemberIterator;
    [[nodiscard]] const Node& node() const noexcept { return m_tape->m_nodes[m_index]; }
    /// The value after this one at the same level.
    [[nodiscard]] std::uint32_t next() const noexcept { return m_index + node().span; }

    const JsonTape* m_tape;
    std::uint32_t m_index;
};

/// An array's elements, one after the other.
class JsonTape::ElementIterator {
  public:
    // NOLINTBEGIN(readability-identifier-naming): the names std::iterator_traits reads
    using iterator_category = std::forward_iterator_tag;
    using value_type = Value;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Value;
    // NOLINTEND(readability-identifier-naming)

    ElementIterator(const JsonTape* tape, std::uint32_t index) noexcept : m_value(tape, index) {}
    [[nodiscard]] Value operator*() const noexcept { return m_value; }
    ElementIterator& operator++() noexcept {
        m_value.m_index = m_value.next();
        return *this;
    }
    ElementIterator operator++(int) noexcept {
        ElementIterator before = *this;
        ++*this;
        return before;
    }
    [[nodiscard]] bool operator==(const ElementIterator& other) const noexcept {
        return m_value.m_index == other.m_value.m_index;
    }
    [[nodiscard]] bool operator!=(const ElementIterator& other) const noexcept {
        return !(*this == other);
    }

  private:
    Value m_value;
};

/// An object's members, one after the other: each a key and its value.
class JsonTape::MemberIterator {
  public:
    // NOLINTBEGIN(readability-identifier-naming): the names std::iterator_traits reads
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::pair<std::string_view, Value>;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = value_type;
    // NOLINTEND(readability-identifier-naming)

    MemberIterator(const JsonTape* tape, std::uint32_t index) noexcept
        : m_tape(tape), m_index(index) {}
    [[nodiscard]] value_type operator*() const noexcept {
        return {Value(m_tape, m_index).as_string(), Value(m_tape, m_index + 1)};
    }
    MemberIterator& operator++() noexcept {
        m_index = Value(m_tape, m_index + 1).next();
        return *this;
    }
    MemberIterator operator++(int) noexcept {
        MemberIterator before = *this;
        ++*this;
        return before;
    }
    [[nodiscard]] bool operator==(const MemberIterator& other) const noexcept {
        return m_index == other.m_index;
    }
    [[nodiscard]] bool operator!=(const MemberIterator& other) const noexcept {
        return !(*this == other);
    }

  private:
    const JsonTape* m_tape;
    std::uint32_t m_index; ///< of a member's key
};

/// Nodes [first, last) of a tape, walked by `It`: an array's elements, an object's members.
template <typename It> class JsonTape::Range {
  public:
    Range(const JsonTape* tape, std::uint32_t first, std::uint32_t last) noexcept
        : m_tape(tape), m_first(first), m_last(last) {}
    [[nodiscard]] It begin() const noexcept { return {m_tape, m_first}; }
    [[nodiscard]] It end() const noexcept { return {m_tape, m_last}; }

  private:
    const JsonTape* m_tape;
    std::uint32_t m_first;
    std::uint32_t m_last;
};

// In line: the decoders walk an object's members for every field they look up.
inline JsonTape::Elements JsonTape::Value::elements() const noexcept {
    if (kind() != Kind::array) {
        return {m_tape, m_index, m_index};
    }
    return {m_tape, m_index + 1, next()};
}

inline JsonTape::Members JsonTape::Value::members() const noexcept {
    if (kind() != Kind::object) {
        return {m_tape, m_index, m_index};
    }
    return {m_tape, m_index + 1, next()};
}

} // namespace tfslurm::protocol::detail
