// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The protocol's JSON writer (issue #33): a payload written straight into its string, the same
/// bytes as nlohmann/json's `dump()` of the same object made (compact, keys in sorted order,
/// only `"`, `\` and control characters escaped, a byte that is not UTF-8 replaced by U+FFFD),
/// without building the object first. The caller writes each object's keys in sorted order;
/// the writer checks it (std::logic_error: a bug of the caller, which every encoding test
/// would meet).
///
///     std::string out;
///     JsonWriter w(out);
///     w.open_object().key("rank").unsigned_number(3).key("type").string("exit").close_object();
///     // out == R"({"rank":3,"type":"exit"})"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfslurm::protocol::detail {

/// Append `text` to `out` as a JSON string, quotes included, as nlohmann/json's dump() with
/// error_handler_t::replace writes it: each maximal piece of `text` that is not well-formed
/// UTF-8 becomes one U+FFFD.
void append_json_string(std::string& out, std::string_view text);

class JsonWriter {
  public:
    explicit JsonWriter(std::string& out) : m_out(out) {}

    JsonWriter& open_object();
    JsonWriter& close_object();
    JsonWriter& open_array();
    JsonWriter& close_array();
    /// The next member's key, after the last one's in byte order. \throws std::logic_error
    /// when it is not (or outside an object).
    JsonWriter& key(std::string_view name);

    JsonWriter& string(std::string_view text);
    JsonWriter& unsigned_number(std::uint64_t value);
    JsonWriter& signed_number(std::int64_t value);
    JsonWriter& boolean(bool value);
    JsonWriter& null();
    /// A value already written as JSON (a relayed message's text), as it is.
    JsonWriter& raw(std::string_view json);

  private:
    struct Level {
        bool object = false;
        bool empty = true;
        std::string_view last_key;
    };
    /// A comma before an array's next element (a member's comma comes with its key).
    void element();
    void push(bool object);
    [[nodiscard]] Level* top() noexcept {
        return m_depth == 0 ? nullptr : &m_levels.at(m_depth - 1);
    }

    std::string& m_out;
    std::array<Level, 8> m_levels{}; ///< deeper than any message nests (4)
    std::size_t m_depth = 0;
};

} // namespace tfslurm::protocol::detail
