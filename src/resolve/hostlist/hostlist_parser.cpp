// SPDX-License-Identifier: MIT
// The hostlist parser behind visit_hostlist() (and so expand_hostlist()).
//
// The hostlist rules are Slurm's since 23.02.5 (the same in 24.11 and 26.05), re-derived from
// its observable behaviour and checked against each release's `scontrol` by tests/diff; the
// man page (HOSTLISTS) lists where tfslurm refuses what Slurm would expand. Visiting runs in
// two passes: the first validates every token and computes the exact number of hosts and
// bytes, so that a list that is too large fails before any host is handed out; the second
// hands the hosts to the visitor, a whole range at a time where a bracket group ends the name.
#include "resolve/hostlist/hostlist_text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm::detail {
namespace {

// ---------------------------------------------------------------------------------------------
// Parsed form of a hostlist

struct Range {
    std::uint64_t lo = 0;
    std::uint64_t hi = 0;
    std::size_t width = 0; ///< length of the text of `lo`: the zero-padding width
};

struct Group {
    std::size_t range_begin = 0; ///< index into HostlistParser::m_ranges
    std::size_t range_end = 0;
    std::uint64_t count = 0; ///< number of values
    std::uint64_t chars = 0; ///< total length of all values' text
};

/// One token: texts[0] G1 texts[1] G2 ... Gk texts[k], where Gk is the final range list and
/// texts[k] the suffix. With k = 0 the token is the literal host texts[0].
struct Token {
    std::size_t text_begin = 0; ///< index into HostlistParser::m_texts (k + 1 entries)
    std::size_t group_begin = 0;
    std::size_t group_count = 0;
};

/// Number of hosts of a range, with ULONG_MAX standing for "more than fits".
std::uint64_t range_count(const Range& range) noexcept {
    return range.hi - range.lo == k_ulong_max ? k_ulong_max : range.hi - range.lo + 1;
}

/// Total length of the texts of every value of a range: sum of max(width, digits(v)).
std::uint64_t range_chars(const Range& range) noexcept {
    std::uint64_t total = 0;
    std::uint64_t value = range.lo;
    while (true) {
        const std::size_t digits = decimal_digits(value);
        std::uint64_t last_with_digits = k_ulong_max;
        if (digits < 20) {
            last_with_digits = 1;
            for (std::size_t i = 0; i < digits; ++i) {
                last_with_digits *= 10;
            }
            --last_with_digits;
        }
        const std::uint64_t stop = std::min(last_with_digits, range.hi);
        const std::uint64_t length = std::max<std::uint64_t>(range.width, digits);
        total = saturating_add(total, saturating_mul(stop - value + 1, length));
        if (stop == range.hi) {
            return total;
        }
        value = stop + 1;
    }
}

/// Walks the values of one bracket group in order, as zero-padded text.
class ValueCursor {
  public:
    ValueCursor(const Range* begin, const Range* end) : m_begin(begin), m_end(end) { reset(); }

    void reset() {
        m_range = m_begin;
        load();
    }

    /// Move to the next value; false (and unchanged) after the last one.
    bool next() {
        if (m_left > 0) {
            --m_left;
            increment_decimal(m_text);
            return true;
        }
        if (m_range + 1 == m_end) {
            return false;
        }
        ++m_range;
        load();
        return true;
    }

    [[nodiscard]] const std::string& text() const noexcept { return m_text; }

  private:
    void load() {
        assign_padded(m_text, m_range->lo, m_range->width);
        m_left = m_range->hi - m_range->lo;
    }

    const Range* m_begin;
    const Range* m_end;
    const Range* m_range = nullptr;
    std::uint64_t m_left = 0;
    std::string m_text;
};

class HostlistParser {
  public:
    HostlistParser(std::string_view input, std::string_view subject)
        : m_input(input), m_subject(subject) {}

    void visit(HostVisitor& visitor) {
        check_bytes();
        std::uint64_t total_hosts = 0;
        std::size_t pos = 0;
        while (next_token(pos)) {
            total_hosts = saturating_add(total_hosts, m_tokens.back().count);
        }
        if (total_hosts > k_max_expanded_hosts) {
            throw errors::too_large(
                m_subject,
                fmt::format("expands to more than {} hosts", k_max_expanded_hosts),
                "split the list");
        }
        std::uint64_t total_bytes = 0;
        for (const auto& token : m_tokens) {
            total_bytes = saturating_add(total_bytes, token_bytes(token.token));
        }
        if (total_bytes > k_max_expanded_bytes) {
            throw errors::too_large(
                m_subject,
                fmt::format("expands to more than {} bytes", k_max_expanded_bytes),
                "split the list");
        }
        visitor.expect(total_hosts, total_bytes);
        for (const auto& token : m_tokens) {
            emit(token.token, visitor);
        }
    }

  private:
    /// Host names are printable ASCII (Slurm's node names, DNS names): a control character or
    /// a byte of 0x7f and above (not valid UTF-8, or valid but not a host name) would reach
    /// TF_CONFIG, JSON and tables raw. Separators are the only other bytes allowed.
    /// Inside brackets, C whitespace stays allowed: strtoul() skips it before a number, as
    /// Slurm does (`n[\v1]` is n1).
    void check_bytes() const {
        bool inside = false;
        for (std::size_t i = 0; i < m_input.size(); ++i) {
            const char c = m_input[i];
            inside = c == '[' ? true : c == ']' ? false : inside;
            const auto byte = static_cast<unsigned char>(c);
            if ((byte <= 0x20 || byte >= 0x7f) && !is_separator(c) && !(inside && is_c_space(c))) {
                fail(fmt::format("host names are printable ASCII: byte 0x{:02x} at offset {}",
                                 static_cast<unsigned>(byte),
                                 i));
            }
        }
    }

    struct CountedToken {
        Token token;
        std::uint64_t count = 0;
    };

    [[noreturn]] void fail(const std::string& problem) const {
        throw errors::invalid_hostlist(m_subject, problem, m_input);
    }

    /// Find the next token at or after `pos`, parse it and advance `pos` past it.
    /// Separators inside a matched `[...]` do not split.
    bool next_token(std::size_t& pos) {
        const std::size_t size = m_input.size();
        while (pos < size && is_separator(m_input[pos])) {
            ++pos;
        }
        if (pos == size) {
            return false;
        }
        const std::size_t start = pos;
        const auto separator_from = [&](std::size_t from) {
            while (from < size && !is_separator(m_input[from])) {
                ++from;
            }
            return from;
        };
        std::size_t scan = pos;
        std::size_t end = separator_from(scan);
        std::size_t stray =
            std::string_view::npos; // a `]` before the group's `[`, as Slurm sees it
        while (true) {
            const std::size_t open = m_input.substr(scan, end - scan).find('[');
            if (open == std::string_view::npos) {
                break;
            }
            // Slurm pairs the `[` with the first `]` after the last group, not after the `[`:
            // when that `]` comes first, the group does not hold the separator (`c][1,2]` is
            // cut at the comma, and then has an unterminated `[`).
            const std::size_t close = next_close(scan);
            if (close == std::string_view::npos) {
                break;
            }
            if (close < scan + open) {
                stray = close;
                break;
            }
            // The `]` may lie beyond the separator: the token then runs on past it.
            scan = close + 1;
            if (scan > end) {
                end = separator_from(scan);
            }
        }
        pos = end;
        parse_token(start, end, stray);
        return true;
    }

    /// The first `]` at or after `from`. Queries only move forward, so an answer still ahead
    /// is reused: the rest of the input is never searched twice.
    std::size_t next_close(std::size_t from) {
        if (m_close_valid && (m_close == std::string_view::npos || m_close >= from)) {
            return m_close;
        }
        m_close = m_input.find(']', from);
        m_close_valid = true;
        return m_close;
    }

    // One pass over a token, bracket group by bracket group, with the counting that makes the
    // size checks exact; kept whole (~65 lines) because its offsets feed every error message.
    void parse_token(std::size_t start, std::size_t end, std::size_t stray) {
        const std::string_view token = m_input.substr(start, end - start);
        CountedToken counted;
        counted.token.text_begin = m_texts.size();
        counted.token.group_begin = m_groups.size();

        const std::size_t open = token.rfind('[');
        if (open == std::string_view::npos) {
            m_texts.push_back(token);
            counted.count = 1;
            m_tokens.push_back(counted);
            return;
        }
        const std::size_t close = token.find(']', open + 1);
        if (close == std::string_view::npos) {
            if (stray != std::string_view::npos && end < m_input.size()) {
                fail(fmt::format("unterminated '[' at offset {} (the ']' at offset {} closes no "
                                 "'[', so the separator at offset {} ends the host, as in Slurm)",
                                 start + open,
                                 stray,
                                 end));
            }
            fail(fmt::format("unterminated '[' at offset {}", start + open));
        }
        // Text after the group, a `]` included, is the hosts' suffix (`n[1-2]]` is n1] n2]).
        const std::string_view suffix = token.substr(close + 1);
        const Group final_group = parse_range_list(start + open + 1, close - open - 1);

        // Bracket groups of the prefix, right to left: the last `[` and the last `]` after it.
        // Each substitution only rewrites text to the right, so every group of the prefix is
        // found in the original text, right to left. They are stored right to left, then
        // reversed in place.
        m_texts.push_back(suffix);
        std::size_t right = open; // the prefix is token[0, right)
        while (true) {
            const std::string_view prefix = token.substr(0, right);
            const std::size_t group_open = prefix.rfind('[');
            if (group_open == std::string_view::npos) {
                break;
            }
            const std::size_t group_close = prefix.rfind(']');
            if (group_close == std::string_view::npos || group_close < group_open) {
                break;
            }
            const Group group =
                parse_range_list(start + group_open + 1, group_close - group_open - 1);
            if (group.count > k_max_prefix_values) {
                fail(fmt::format("bracket group at offset {} expands to more than {} values",
                                 start + group_open,
                                 k_max_prefix_values));
            }
            m_texts.push_back(prefix.substr(group_close + 1));
            m_groups.push_back(group);
            right = group_open;
        }
        m_texts.push_back(token.substr(0, right));
        const auto text_begin = static_cast<std::ptrdiff_t>(counted.token.text_begin);
        const auto group_begin = static_cast<std::ptrdiff_t>(counted.token.group_begin);
        std::reverse(m_texts.begin() + text_begin, m_texts.end());
        std::reverse(m_groups.begin() + group_begin, m_groups.end());
        m_groups.push_back(final_group);
        counted.token.group_count = m_groups.size() - counted.token.group_begin;

        std::uint64_t count = 1;
        for (std::size_t i = 0; i < counted.token.group_count; ++i) {
            count = saturating_mul(count, m_groups[counted.token.group_begin + i].count);
        }
        counted.count = count;
        m_tokens.push_back(counted);
    }

    /// Parse the comma-separated items of m_input[offset, offset + length).
    Group parse_range_list(std::size_t offset, std::size_t length) {
        Group group;
        group.range_begin = m_ranges.size();
        const std::string_view list = m_input.substr(offset, length);
        std::size_t item_start = 0;
        std::size_t items = 0;
        while (true) {
            if (items == k_max_ranges_per_group) {
                fail(fmt::format("bracket group at offset {} has more than {} ranges",
                                 offset - 1,
                                 k_max_ranges_per_group));
            }
            std::size_t item_end = list.find(',', item_start);
            if (item_end == std::string_view::npos) {
                item_end = list.size();
            }
            const Range range =
                parse_range(list.substr(item_start, item_end - item_start), offset + item_start);
            m_ranges.push_back(range);
            group.count = saturating_add(group.count, range_count(range));
            group.chars = saturating_add(group.chars, range_chars(range));
            ++items;
            if (item_end == list.size()) {
                break;
            }
            item_start = item_end + 1;
        }
        group.range_end = m_ranges.size();
        return group;
    }

    /// One `lo` or `lo-hi` item, with the checks (and their order) of Slurm's
    /// _parse_single_range().
    [[nodiscard]] Range parse_range(std::string_view item, std::size_t offset) const {
        const auto invalid = [&](std::string_view reason) {
            fail(fmt::format(
                "invalid range '{}' at offset {} ({})", shown_item(item), offset, reason));
        };
        if (item.empty()) {
            invalid("empty");
        }
        if (item.find('x') != std::string_view::npos) {
            invalid("'x' boxes are not supported");
        }
        const std::size_t dash = item.find('-');
        const std::string_view low_text = item.substr(0, dash);
        std::string_view high_text;
        if (dash != std::string_view::npos) {
            high_text = item.substr(dash + 1);
            if (!high_text.empty() && high_text.front() == '-') {
                invalid("negative bound");
            }
        }
        Range range;
        range.width = low_text.size();
        const Conversion low = c_strtoul(low_text);
        if (!low.converted) {
            invalid(low_text.empty() && !high_text.empty() ? "negative bound" : "not a number");
        }
        range.lo = low.value;
        if (!high_text.empty()) {
            // Slurm tolerates garbage after the low bound here, but not after the high one.
            const Conversion high = c_strtoul(high_text);
            if (!high.converted) {
                invalid("not a number");
            }
            if (high.end != high_text.size()) {
                invalid("trailing characters");
            }
            range.hi = high.value;
        } else {
            if (low.end != low_text.size()) {
                invalid("trailing characters");
            }
            range.hi = range.lo;
        }
        if (range.lo > range.hi) {
            invalid("low bound above high bound");
        }
        if (range.hi - range.lo >= k_max_range_hosts) {
            fail(fmt::format("range '{}' at offset {} has more than {} hosts",
                             shown_item(item),
                             offset,
                             k_max_range_hosts));
        }
        return range;
    }

    /// Exact number of bytes of text a token expands to (saturating).
    [[nodiscard]] std::uint64_t token_bytes(const Token& token) const noexcept {
        std::uint64_t count = 1;
        for (std::size_t i = 0; i < token.group_count; ++i) {
            count = saturating_mul(count, m_groups[token.group_begin + i].count);
        }
        std::uint64_t literal = 0;
        for (std::size_t i = 0; i <= token.group_count; ++i) {
            literal = saturating_add(literal, m_texts[token.text_begin + i].size());
        }
        std::uint64_t bytes = saturating_mul(count, literal);
        for (std::size_t i = 0; i < token.group_count; ++i) {
            const Group& group = m_groups[token.group_begin + i];
            // Every value of this group appears once with each combination of the others.
            bytes = saturating_add(bytes, saturating_mul(group.chars, count / group.count));
        }
        return bytes;
    }

    [[nodiscard]] ValueCursor cursor(const Group& group) const {
        return {m_ranges.data() + group.range_begin, m_ranges.data() + group.range_end};
    }

    /// Hand the hosts of a token to `visitor` in Slurm's order: G(k-1) outermost, then
    /// G(k-2) ... G1, and the final range list Gk innermost. Without a suffix, each range of
    /// Gk goes out as one run.
    void emit(const Token& token, HostVisitor& visitor) const {
        const std::string_view* texts = m_texts.data() + token.text_begin;
        if (token.group_count == 0) {
            visitor.host(texts[0]);
            return;
        }
        const Group* groups = m_groups.data() + token.group_begin;
        const std::size_t prefix_count = token.group_count - 1;
        const std::string_view suffix = texts[token.group_count];

        std::vector<ValueCursor> prefix_cursors;
        prefix_cursors.reserve(prefix_count);
        for (std::size_t i = 0; i < prefix_count; ++i) {
            prefix_cursors.push_back(cursor(groups[i]));
        }
        const Group& final_group = groups[prefix_count];
        ValueCursor final_cursor = cursor(final_group);

        std::string host;
        while (true) {
            host.assign(texts[0]);
            for (std::size_t i = 0; i < prefix_count; ++i) {
                host += prefix_cursors[i].text();
                host += texts[i + 1];
            }
            if (suffix.empty()) {
                for (std::size_t r = final_group.range_begin; r < final_group.range_end; ++r) {
                    visitor.run(host, m_ranges[r].lo, m_ranges[r].hi, m_ranges[r].width);
                }
            } else {
                emit_with_suffix(host, final_cursor, suffix, visitor);
            }

            // Odometer over the prefix groups: G1 turns fastest, G(k-1) slowest.
            std::size_t level = 0;
            while (level < prefix_count && !prefix_cursors[level].next()) {
                prefix_cursors[level].reset();
                ++level;
            }
            if (level == prefix_count) {
                return;
            }
        }
    }

    /// The hosts `prefix` + value + `suffix` for every value of the final group.
    static void emit_with_suffix(std::string& prefix,
                                 ValueCursor& values,
                                 std::string_view suffix,
                                 HostVisitor& visitor) {
        const std::size_t base = prefix.size();
        values.reset();
        do {
            prefix.resize(base);
            prefix += values.text();
            prefix += suffix;
            visitor.host(prefix);
        } while (values.next());
        prefix.resize(base);
    }

    std::string_view m_input;
    std::string_view m_subject;
    std::vector<CountedToken> m_tokens;
    std::vector<std::string_view> m_texts;
    std::vector<Group> m_groups;
    std::vector<Range> m_ranges;
    std::size_t m_close = std::string_view::npos;
    bool m_close_valid = false;
};

} // namespace

} // namespace tfslurm::detail

namespace tfslurm {

void visit_hostlist(std::string_view list, HostVisitor& visitor, std::string_view subject) {
    detail::HostlistParser(list, subject).visit(visitor);
}

} // namespace tfslurm
