// SPDX-License-Identifier: MIT
// Per-rank log file names from a pattern (tfslurm/run/rank_output.hpp).
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/rank_output.hpp>

#include <fmt/format.h>

#include <cstddef>
#include <string>

namespace tfslurm {

namespace {

/// The widest zero padding a placeholder takes (srun's limit is 9 too).
constexpr std::size_t k_max_width = 9;

[[nodiscard]] Error
bad_pattern(std::string_view key, std::string_view problem, std::string_view pattern) {
    return errors::invalid_setting(key, problem, pattern);
}

/// Walk `pattern`, calling `literal(text)` and `placeholder(letter, width)`. Checks the syntax.
template <typename Literal, typename Placeholder>
void walk(std::string_view pattern,
          std::string_view key,
          Literal literal,
          Placeholder placeholder) {
    std::size_t at = 0;
    while (at < pattern.size()) {
        const auto percent = pattern.find('%', at);
        literal(pattern.substr(
            at, percent == std::string_view::npos ? std::string_view::npos : percent - at));
        if (percent == std::string_view::npos) {
            return;
        }
        std::size_t next = percent + 1;
        std::size_t width = 0;
        std::size_t digits = 0;
        while (next < pattern.size() && pattern[next] >= '0' && pattern[next] <= '9') {
            width = width * 10 + static_cast<std::size_t>(pattern[next] - '0');
            ++digits;
            ++next;
        }
        if (next == pattern.size()) {
            throw bad_pattern(
                key, "a % at the end names no placeholder (write %% for a %)", pattern);
        }
        const char letter = pattern[next];
        const std::string_view known = "rRihjs%";
        if (known.find(letter) == std::string_view::npos) {
            // A letter as it is; anything else (a control character, a byte of UTF-8) quoted.
            const bool plain = letter > ' ' && letter < '\x7f';
            const std::string shown =
                plain ? fmt::format("%{}", letter)
                      : fmt::format("% followed by {}", quote(std::string_view(&letter, 1)));
            throw bad_pattern(key,
                              fmt::format("unknown placeholder {} (expected %r, %R, %i, %h, %j, "
                                          "%s or %%)",
                                          shown),
                              pattern);
        }
        if (digits > 0 && letter != 'r' && letter != 'i') {
            throw bad_pattern(
                key, fmt::format("a width goes only with %r and %i, not %{}", letter), pattern);
        }
        if (digits > 1 || width > k_max_width) {
            throw bad_pattern(
                key, fmt::format("a width is one digit, 0 to {}", k_max_width), pattern);
        }
        placeholder(letter, width);
        at = next + 1;
    }
}

} // namespace

void check_rank_pattern(std::string_view pattern, std::string_view key) {
    if (pattern.empty()) {
        throw bad_pattern(
            key, "empty (expected a file name pattern such as train-%r.log)", pattern);
    }
    bool rank = false;
    bool role = false;
    bool index = false;
    walk(
        pattern,
        key,
        [](std::string_view) {},
        [&](char letter, std::size_t) {
            rank = rank || letter == 'r';
            role = role || letter == 'R';
            index = index || letter == 'i';
        });
    if (!rank && !(role && index)) {
        throw bad_pattern(key,
                          "every rank would write the same file (put %r, or %R and %i, in the "
                          "name)",
                          pattern);
    }
}

std::string expand_rank_pattern(std::string_view pattern,
                                std::string_view key,
                                const RankOutputFields& fields) {
    check_rank_pattern(pattern, key);
    std::string name;
    walk(
        pattern,
        key,
        [&name](std::string_view text) { name += text; },
        [&name, &fields](char letter, std::size_t width) {
            switch (letter) {
            case 'r':
                name += fmt::format("{:0{}}", fields.rank, width);
                break;
            case 'i':
                name += fmt::format("{:0{}}", fields.member.index, width);
                break;
            case 'R':
                name += to_string(fields.member.role);
                break;
            case 'h':
                name += fields.member.host;
                break;
            case 'j':
                name += fields.job.empty() ? std::string("local") : fields.job;
                break;
            case 's':
                name += fields.step.empty() ? std::string("local") : fields.step;
                break;
            default:
                name += '%';
                break;
            }
        });
    return name;
}

} // namespace tfslurm
