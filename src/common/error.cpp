// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>

#include <fmt/format.h>

#include <utility>

namespace tfslurm {

std::string_view to_string(Errc code) noexcept {
    switch (code) {
    case Errc::invalid_hostlist:
        return "invalid_hostlist";
    case Errc::invalid_tasks_per_node:
        return "invalid_tasks_per_node";
    case Errc::invalid_ports:
        return "invalid_ports";
    case Errc::missing_env:
        return "missing_env";
    case Errc::inconsistent_allocation:
        return "inconsistent_allocation";
    case Errc::invalid_argument:
        return "invalid_argument";
    case Errc::too_large:
        return "too_large";
    case Errc::spawn_failed:
        return "spawn_failed";
    case Errc::protocol:
        return "protocol";
    case Errc::auth:
        return "auth";
    case Errc::io:
        return "io";
    }
    return "unknown";
}

int exit_status(Errc code) noexcept {
    // Keep in sync with EXIT STATUS in man/tfslurm.1.
    switch (code) {
    case Errc::invalid_argument:
        return 2;
    case Errc::missing_env:
        return 3;
    case Errc::invalid_hostlist:
    case Errc::invalid_tasks_per_node:
    case Errc::invalid_ports:
        return 4;
    case Errc::inconsistent_allocation:
        return 5;
    case Errc::too_large:
        return 6;
    case Errc::io:
    case Errc::protocol:
    case Errc::auth:
        return 7;
    case Errc::spawn_failed:
        return 127;
    }
    return 1;
}

namespace {

constexpr char k_ref_begin = '\x02';
constexpr char k_ref_value = '\x1f';
constexpr char k_ref_end = '\x03';

/// The key of a setting reference at the very start of `text`, or empty.
std::string leading_setting(std::string_view text) {
    if (text.empty() || text.front() != k_ref_begin) {
        return {};
    }
    const auto end = text.find_first_of(std::string_view{"\x1f\x03", 2}, 1);
    return end == std::string_view::npos ? std::string{} : std::string{text.substr(1, end - 1)};
}

} // namespace

std::string setting_ref(std::string_view key, std::string_view value) {
    std::string out;
    out.reserve(key.size() + value.size() + 3);
    out.push_back(k_ref_begin);
    out += key;
    if (!value.empty()) {
        out.push_back(k_ref_value);
        out += value;
    }
    out.push_back(k_ref_end);
    return out;
}

std::string render_settings(std::string_view text, const SettingNamer& name) {
    std::string out;
    out.reserve(text.size());
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto begin = text.find(k_ref_begin, pos);
        const auto end = begin == std::string_view::npos ? begin : text.find(k_ref_end, begin);
        if (end == std::string_view::npos) {
            out += text.substr(pos);
            break;
        }
        out += text.substr(pos, begin - pos);
        const auto ref = text.substr(begin + 1, end - begin - 1);
        const auto split = ref.find(k_ref_value);
        out += split == std::string_view::npos ? name(ref, {})
                                               : name(ref.substr(0, split), ref.substr(split + 1));
        pos = end + 1;
    }
    return out;
}

std::string neutral_setting_name(std::string_view key, std::string_view value) {
    return value.empty() ? std::string{key} : fmt::format("{}={}", key, value);
}

Error::Error(Errc code, const std::string& message, std::string hint)
    : std::runtime_error(render_settings(message, neutral_setting_name)), m_code(code),
      m_message_template(message), m_hint_template(std::move(hint)),
      m_hint(render_settings(m_hint_template, neutral_setting_name)),
      m_setting(leading_setting(message)) {}

Error Error::rendered(const SettingNamer& name) const {
    Error out{
        m_code, render_settings(m_message_template, name), render_settings(m_hint_template, name)};
    out.m_setting = m_setting;
    return out;
}

std::string quote(std::string_view value) {
    constexpr std::size_t k_max_quoted = 200;
    std::string out;
    out.reserve(std::min(value.size(), k_max_quoted) + 16);
    out.push_back('"');
    const std::size_t shown = std::min(value.size(), k_max_quoted);
    for (std::size_t i = 0; i < shown;) {
        const auto c = static_cast<unsigned char>(value[i]);
        // Well-formed UTF-8 is kept (names may be non-ASCII), except the C1 controls U+0080 to
        // U+009F, which some terminals obey; every other byte >= 0x80 is escaped, so that a
        // message stays valid UTF-8 text whatever it quotes.
        const std::size_t length = c < 0x80 ? 0 : detail::utf8_sequence(value, i);
        if (length > 0 && !(c == 0xc2 && static_cast<unsigned char>(value[i + 1]) < 0xa0)) {
            out.append(value.substr(i, length));
            i += length;
        } else {
            detail::append_escaped(out, c, detail::Escape::log);
            ++i;
        }
    }
    out.push_back('"');
    if (shown < value.size()) {
        out += fmt::format("... ({} bytes)", value.size());
    }
    return out;
}

namespace errors {
namespace {
std::string
format_message(std::string_view subject, std::string_view problem, std::string_view input) {
    return fmt::format("{}: {}: {}", subject, problem, quote(input));
}
} // namespace

Error invalid_hostlist(std::string_view subject, std::string_view problem, std::string_view input) {
    return {Errc::invalid_hostlist, format_message(subject, problem, input)};
}

Error invalid_counts(std::string_view subject, std::string_view problem, std::string_view input) {
    return {Errc::invalid_tasks_per_node, format_message(subject, problem, input)};
}

Error invalid_ports(std::string_view subject, std::string_view problem, std::string_view input) {
    return {Errc::invalid_ports, format_message(subject, problem, input)};
}

Error missing_env(std::string_view variable, std::string hint) {
    return {Errc::missing_env, fmt::format("{}: not set", variable), std::move(hint)};
}

Error inconsistent_allocation(std::string_view subject,
                              std::string_view problem,
                              std::string_view input,
                              std::string hint) {
    return {
        Errc::inconsistent_allocation, format_message(subject, problem, input), std::move(hint)};
}

Error invalid_argument(std::string_view subject,
                       std::string_view problem,
                       std::string_view input,
                       std::string hint) {
    return {Errc::invalid_argument, format_message(subject, problem, input), std::move(hint)};
}

Error invalid_setting(std::string_view key,
                      std::string_view problem,
                      std::string_view input,
                      std::string hint) {
    return invalid_argument(setting_ref(key), problem, input, std::move(hint));
}

Error too_large(std::string_view subject, std::string_view problem, std::string hint) {
    return {Errc::too_large, fmt::format("{}: {}", subject, problem), std::move(hint)};
}

Error make(Errc code, std::string_view subject, std::string_view problem, std::string hint) {
    return {code, fmt::format("{}: {}", subject, problem), std::move(hint)};
}

} // namespace errors
} // namespace tfslurm
