// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// What the `protocol` fuzz target checks for one input (as fuzz_checks.hpp for the Slurm
/// grammars): the protocol's JSON reader (src/run/detail/json_tape.hpp) against nlohmann/json's
/// parser, and the protocol's decoders on the same bytes.
///
/// - Both accept or both refuse the input, except where the reader is meant to be stricter: an
///   object that repeats a key, a leading byte-order mark (nlohmann skips one), a NUL byte
///   (nlohmann's end of input: it reads `{}` in `{}\0garbage`; no JSON text holds one).
/// - When both accept, they read the same value: the same kinds (an integer without a sign, a
///   negative one, any other number), the same strings after escapes, the same members in the
///   same order, and each value's text() reads back as that value.
/// - decode_payload(), decode_unwrapped(), decode_batch(), check_relayable() and
///   decode_snapshot() (what `tfslurm top` reads) throw nothing but tfslurm::Error.
/// - The protocol's writer (src/run/detail/json_writer.hpp) writes the input as a string with
///   the bytes nlohmann/json's dump() makes of it (escapes, U+FFFD for what is not UTF-8).

#include "run/detail/json_tape.hpp"
#include "run/detail/json_writer.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/snapshot.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::fuzz {

/// Deeper than any fuzz input (-max_len=4096) nests: nlohmann has no limit to compare with.
inline constexpr int k_json_depth = 1 << 16;

/// nlohmann's SAX events, to see whether a text it accepts repeats a key in an object.
class RepeatedKeys : public nlohmann::json_sax<nlohmann::json> {
  public:
    bool null() override { return true; }
    bool boolean(bool /*value*/) override { return true; }
    bool number_integer(number_integer_t /*value*/) override { return true; }
    bool number_unsigned(number_unsigned_t /*value*/) override { return true; }
    bool number_float(number_float_t /*value*/, const string_t& /*text*/) override { return true; }
    bool string(string_t& /*value*/) override { return true; }
    bool binary(binary_t& /*value*/) override { return true; }
    bool start_object(std::size_t /*size*/) override {
        m_keys.emplace_back();
        return true;
    }
    bool key(string_t& value) override {
        if (!m_keys.back().insert(value).second) {
            repeated = true;
        }
        return true;
    }
    bool end_object() override {
        m_keys.pop_back();
        return true;
    }
    bool start_array(std::size_t /*size*/) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t /*position*/,
                     const std::string& /*last_token*/,
                     const nlohmann::detail::exception& /*error*/) override {
        return false;
    }

    bool repeated = false;

  private:
    std::vector<std::set<std::string>> m_keys;
};

/// The first difference between a value of the tape and nlohmann's, or empty.
inline std::string json_difference(const protocol::detail::JsonTape::Value& mine,
                                   const nlohmann::json& theirs,
                                   const std::string& where) {
    using Kind = protocol::detail::JsonTape::Kind;
    switch (mine.kind()) {
    case Kind::null:
        return theirs.is_null() ? std::string() : where + ": null";
    case Kind::boolean:
        return theirs.is_boolean() && theirs.get<bool>() == mine.as_boolean() ? std::string()
                                                                              : where + ": boolean";
    case Kind::number:
        if (mine.is_unsigned()) {
            return theirs.is_number_unsigned() && theirs.get<std::uint64_t>() == mine.as_unsigned()
                       ? std::string()
                       : where + ": unsigned integer";
        }
        if (mine.is_signed()) {
            return theirs.is_number_integer() && !theirs.is_number_unsigned() &&
                           theirs.get<std::int64_t>() == mine.as_signed()
                       ? std::string()
                       : where + ": negative integer";
        }
        return theirs.is_number_float() ? std::string() : where + ": other number";
    case Kind::string:
        return theirs.is_string() && theirs.get_ref<const std::string&>() == mine.as_string()
                   ? std::string()
                   : where + ": string";
    case Kind::array: {
        if (!theirs.is_array() || theirs.size() != mine.size()) {
            return where + ": array";
        }
        std::size_t i = 0;
        for (const auto element : mine.elements()) {
            if (auto d = json_difference(element, theirs[i], where + "[" + std::to_string(i) + "]");
                !d.empty()) {
                return d;
            }
            ++i;
        }
        return {};
    }
    case Kind::object: {
        if (!theirs.is_object() || theirs.size() != mine.size()) {
            return where + ": object";
        }
        for (const auto& [key, value] : mine.members()) {
            const auto it = theirs.find(std::string(key));
            if (it == theirs.end()) {
                return where + ": member " + std::string(key);
            }
            if (auto d = json_difference(value, *it, where + "." + std::string(key)); !d.empty()) {
                return d;
            }
        }
        return {};
    }
    }
    return where + ": unknown kind";
}

/// The reader against nlohmann/json on `input`, then the decoders (see the file's comment).
inline std::string check_json(std::string_view input) {
    using protocol::detail::JsonTape;
    JsonTape tape;
    const JsonTape::Outcome outcome = tape.read(input, k_json_depth);
    const nlohmann::json theirs = nlohmann::json::parse(input, nullptr, false);
    const bool bom = input.substr(0, 3) == "\xEF\xBB\xBF";
    const bool nul = input.find('\0') != std::string_view::npos;
    if (outcome == JsonTape::Outcome::too_deep) {
        return "too deep at a depth no fuzz input reaches";
    }
    if (nul && outcome == JsonTape::Outcome::ok) {
        return "the reader accepts a NUL byte";
    }
    if (outcome == JsonTape::Outcome::ok && theirs.is_discarded()) {
        return "the reader accepts what nlohmann refuses";
    }
    if (outcome != JsonTape::Outcome::ok && !theirs.is_discarded() && !bom && !nul) {
        RepeatedKeys keys;
        nlohmann::json::sax_parse(input, &keys);
        if (!keys.repeated) {
            return "the reader refuses what nlohmann accepts";
        }
        if (outcome != JsonTape::Outcome::repeated_key) {
            return "a repeated key refused as something else";
        }
    }
    if (outcome == JsonTape::Outcome::ok) {
        if (auto d = json_difference(tape.root(), theirs, "$"); !d.empty()) {
            return "the reader reads another value than nlohmann at " + d;
        }
        const std::string_view text = tape.root().text();
        if (nlohmann::json::parse(text, nullptr, false) != theirs) {
            return "the root's text reads back as another value";
        }
        for (const auto& [key, value] : tape.root().members()) {
            if (nlohmann::json::parse(value.text(), nullptr, false) !=
                theirs.at(std::string(key))) {
                return "a member's text reads back as another value";
            }
        }
    }
    std::string written;
    protocol::detail::append_json_string(written, input);
    if (written != nlohmann::json(std::string(input))
                       .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)) {
        return "the writer writes the input as a string unlike nlohmann: " + written;
    }
    try {
        static_cast<void>(protocol::decode_payload(input));
    } catch (const Error&) {
    }
    try {
        static_cast<void>(protocol::decode_unwrapped(input));
    } catch (const Error&) {
    }
    try {
        static_cast<void>(protocol::decode_batch(input));
    } catch (const Error&) {
    }
    try {
        protocol::check_relayable(input);
    } catch (const Error&) {
    }
    try {
        static_cast<void>(decode_snapshot(input));
    } catch (const Error&) {
    }
    return {};
}

} // namespace tfslurm::fuzz
