// SPDX-License-Identifier: MIT
// Slurm's hostlist, counts-per-node and port-list grammars.
//
// The hostlist rules follow Slurm >= 23.02.5 (`src/common/hostlist.c`), re-derived from its
// observable behaviour and checked against `scontrol` by tests/diff. Expansion runs in two
// passes: the first validates every token and computes the exact number of hosts and bytes,
// so that a list that is too large fails before anything is allocated; the second writes the
// hosts, incrementing zero-padded decimal text in place instead of formatting each number.
#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm {
namespace {

// Slurm parses bounds as `unsigned long`, 64 bits on every platform Slurm supports.
constexpr std::uint64_t k_ulong_max = std::numeric_limits<std::uint64_t>::max();
// Slurm's MAX_RANGES: more items than this in one bracket make Slurm abort (fatal()).
constexpr std::size_t k_max_ranges_per_group = 65536;
// Slurm's MAX_PREFIX_CNT: at most this many values in one bracket group of a prefix.
constexpr std::uint64_t k_max_prefix_values = 65536;
// tfslurm's cap on the total text of an expansion (Slurm has none): 4M hosts of 64 bytes.
constexpr std::uint64_t k_max_expanded_bytes = std::uint64_t{1} << 28;
// Longest range item quoted verbatim inside an error message.
constexpr std::size_t k_max_shown_item = 40;
// Most entries a port list may expand to.
constexpr std::uint64_t k_max_ports = 65536;
constexpr std::uint64_t k_max_port = 65535;

// ---------------------------------------------------------------------------------------------
// Small helpers

bool is_separator(char c) noexcept {
    return c == '\t' || c == ',' || c == ' ' || c == '\n';
}

// isspace() in the C locale, which is what strtoul() skips.
bool is_c_space(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
    return a > k_ulong_max - b ? k_ulong_max : a + b;
}

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) noexcept {
    if (a != 0 && b > k_ulong_max / a) {
        return k_ulong_max;
    }
    return a * b;
}

std::size_t decimal_digits(std::uint64_t value) noexcept {
    std::size_t digits = 1;
    while (value >= 10) {
        value /= 10;
        ++digits;
    }
    return digits;
}

/// Zero-padded decimal text of `value`, like printf("%0*lu", width, value).
void assign_padded(std::string& out, std::uint64_t value, std::size_t width) {
    std::array<char, 20> buffer{};
    std::size_t pos = buffer.size();
    do {
        buffer[--pos] = static_cast<char>('0' + value % 10);
        value /= 10;
    } while (value != 0);
    const std::size_t digits = buffer.size() - pos;
    out.assign(width > digits ? width - digits : 0, '0');
    out.append(buffer.data() + pos, digits);
}

/// Add one to a zero-padded decimal text; the padding absorbs carries, `99` becomes `100`.
void increment_decimal(std::string& digits) {
    for (std::size_t i = digits.size(); i > 0; --i) {
        char& c = digits[i - 1];
        if (c != '9') {
            ++c;
            return;
        }
        c = '0';
    }
    digits.insert(digits.begin(), '1');
}

/// An item of a message: control characters escaped, long items cut.
std::string shown_item(std::string_view text) {
    std::string out;
    const std::size_t shown = std::min(text.size(), k_max_shown_item);
    for (std::size_t i = 0; i < shown; ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\\') {
            out += "\\\\";
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    if (shown < text.size()) {
        out += "...";
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// strtoul(3) in base 10, without locale: leading C whitespace, an optional sign, then at least
// one digit. Overflow gives ULONG_MAX; a minus sign negates modulo 2^64.

struct Conversion {
    std::uint64_t value = 0;
    std::size_t end = 0; ///< index just past the last digit
    bool converted = false;
};

Conversion c_strtoul(std::string_view text) noexcept {
    std::size_t i = 0;
    while (i < text.size() && is_c_space(text[i])) {
        ++i;
    }
    bool negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
        negative = text[i] == '-';
        ++i;
    }
    const std::size_t first_digit = i;
    std::uint64_t value = 0;
    bool overflow = false;
    for (; i < text.size() && is_digit(text[i]); ++i) {
        const auto digit = static_cast<std::uint64_t>(text[i] - '0');
        if (!overflow) {
            if (value > (k_ulong_max - digit) / 10) {
                overflow = true;
            } else {
                value = value * 10 + digit;
            }
        }
    }
    if (i == first_digit) {
        return {};
    }
    if (overflow) {
        value = k_ulong_max;
    } else if (negative) {
        value = ~value + 1;
    }
    return {value, i, true};
}

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

    std::vector<std::string> expand() {
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
        std::vector<std::string> hosts;
        hosts.reserve(static_cast<std::size_t>(total_hosts));
        for (const auto& token : m_tokens) {
            emit(token.token, hosts);
        }
        return hosts;
    }

  private:
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
        while (true) {
            const std::size_t open = m_input.substr(scan, end - scan).find('[');
            if (open == std::string_view::npos) {
                break;
            }
            const std::size_t close = next_close(scan + open + 1);
            if (close == std::string_view::npos) {
                break;
            }
            // The `]` may lie beyond the separator: the token then runs on past it.
            scan = close + 1;
            if (scan > end) {
                end = separator_from(scan);
            }
        }
        pos = end;
        parse_token(start, end);
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

    void parse_token(std::size_t start, std::size_t end) {
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
            fail(fmt::format("unterminated '[' at offset {}", start + open));
        }
        const std::string_view suffix = token.substr(close + 1);
        if (const std::size_t extra = suffix.find(']'); extra != std::string_view::npos) {
            fail(fmt::format("unexpected ']' at offset {}", start + close + 1 + extra));
        }
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

    /// Write the hosts of a token in Slurm's order: G(k-1) outermost, then G(k-2) ... G1,
    /// and the final range list Gk innermost.
    void emit(const Token& token, std::vector<std::string>& hosts) const {
        const std::string_view* texts = m_texts.data() + token.text_begin;
        if (token.group_count == 0) {
            hosts.emplace_back(texts[0]);
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
        ValueCursor final_cursor = cursor(groups[prefix_count]);

        std::string host;
        while (true) {
            host.assign(texts[0]);
            for (std::size_t i = 0; i < prefix_count; ++i) {
                host += prefix_cursors[i].text();
                host += texts[i + 1];
            }
            const std::size_t base = host.size();
            final_cursor.reset();
            do {
                host.resize(base);
                host += final_cursor.text();
                host += suffix;
                hosts.push_back(host);
            } while (final_cursor.next());

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

    std::string_view m_input;
    std::string_view m_subject;
    std::vector<CountedToken> m_tokens;
    std::vector<std::string_view> m_texts;
    std::vector<Group> m_groups;
    std::vector<Range> m_ranges;
    std::size_t m_close = std::string_view::npos;
    bool m_close_valid = false;
};

// ---------------------------------------------------------------------------------------------
// Compression

/// A host split into a prefix and its trailing decimal number (when it has one that fits).
struct SplitHost {
    std::string_view prefix;
    std::string_view digits; ///< empty: a literal host
    std::uint64_t value = 0;
};

SplitHost split_host(std::string_view host) noexcept {
    std::size_t start = host.size();
    while (start > 0 && is_digit(host[start - 1])) {
        --start;
    }
    SplitHost split{host, {}, 0};
    if (start == host.size()) {
        return split;
    }
    std::uint64_t value = 0;
    for (std::size_t i = start; i < host.size(); ++i) {
        const auto digit = static_cast<std::uint64_t>(host[i] - '0');
        if (value > (k_ulong_max - digit) / 10) {
            return split; // does not fit an unsigned long: keep it literal
        }
        value = value * 10 + digit;
    }
    return {host.substr(0, start), host.substr(start), value};
}

/// True when printf("%0*lu", width, value) gives back exactly `digits` (value's own text).
bool prints_as(std::string_view digits, std::size_t width) noexcept {
    return digits.size() == width || (digits.size() > width && digits.front() != '0');
}

std::string_view unwritable_reason(std::string_view host) noexcept {
    if (host.empty()) {
        return "empty";
    }
    for (const char c : host) {
        switch (c) {
        case '[':
            return "contains '['";
        case ',':
            return "contains ','";
        case ' ':
            return "contains a space";
        case '\t':
            return "contains a tab";
        case '\n':
            return "contains a newline";
        default:
            break;
        }
    }
    return {};
}

// ---------------------------------------------------------------------------------------------
// Counts and ports: small strict grammars

/// A run of decimal digits at `pos` (saturating at ULONG_MAX); false when there is none.
bool read_number(std::string_view text, std::size_t& pos, std::uint64_t& value) noexcept {
    const std::size_t start = pos;
    value = 0;
    while (pos < text.size() && is_digit(text[pos])) {
        const auto digit = static_cast<std::uint64_t>(text[pos] - '0');
        value = saturating_add(saturating_mul(value, 10), digit);
        ++pos;
    }
    return pos != start;
}

struct CountItem {
    std::uint32_t value = 0;
    std::uint32_t repeat = 1;
};

} // namespace

// ---------------------------------------------------------------------------------------------

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view subject) {
    return HostlistParser(list, subject).expand();
}

std::string compress_hostlist(const std::vector<std::string>& hosts, std::string_view subject) {
    std::vector<SplitHost> split;
    split.reserve(hosts.size());
    std::size_t capacity = 0;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
        if (const std::string_view reason = unwritable_reason(hosts[i]); !reason.empty()) {
            throw errors::invalid_argument(
                subject,
                fmt::format("host {} cannot be written in a hostlist ({})", i, reason),
                hosts[i]);
        }
        split.push_back(split_host(hosts[i]));
        capacity += hosts[i].size() + 1;
    }

    std::string out;
    out.reserve(capacity);
    const auto same_group = [&](std::size_t i, std::string_view prefix) {
        return !split[i].digits.empty() && split[i].prefix == prefix;
    };
    std::size_t i = 0;
    while (i < split.size()) {
        if (!out.empty()) {
            out.push_back(',');
        }
        if (split[i].digits.empty()) {
            out += hosts[i];
            ++i;
            continue;
        }
        // Consecutive hosts with this prefix share one bracket; inside it, runs n, n+1, ...
        // that print with the width of their first host fold into lo-hi.
        const std::string_view prefix = split[i].prefix;
        const std::size_t group_start = i;
        std::string runs;
        std::size_t run_count = 0;
        while (i < split.size() && same_group(i, prefix)) {
            const std::size_t width = split[i].digits.size();
            std::size_t last = i;
            while (last + 1 < split.size() && same_group(last + 1, prefix) &&
                   split[last].value != k_ulong_max &&
                   split[last + 1].value == split[last].value + 1 &&
                   prints_as(split[last + 1].digits, width)) {
                ++last;
            }
            if (run_count > 0) {
                runs.push_back(',');
            }
            runs += split[i].digits;
            if (last != i) {
                runs.push_back('-');
                runs += split[last].digits;
            }
            ++run_count;
            i = last + 1;
        }
        if (i == group_start + 1) {
            out += hosts[group_start];
        } else {
            out += prefix;
            out.push_back('[');
            out += runs;
            out.push_back(']');
        }
    }
    return out;
}

std::vector<std::uint32_t> expand_counts(std::string_view text, std::string_view subject) {
    const auto fail = [&](std::string_view problem, std::size_t offset) {
        throw errors::invalid_counts(
            subject, fmt::format("{} at offset {}", problem, offset), text);
    };
    if (text.empty()) {
        throw errors::invalid_counts(subject, "empty list", text);
    }
    constexpr std::uint64_t k_max_count = std::numeric_limits<std::uint32_t>::max();
    std::vector<CountItem> items;
    std::uint64_t total = 0;
    std::size_t pos = 0;
    while (true) {
        const std::size_t value_start = pos;
        std::uint64_t value = 0;
        if (!read_number(text, pos, value)) {
            fail("expected a number", pos);
        }
        if (value > k_max_count) {
            fail("number too large", value_start);
        }
        CountItem item{static_cast<std::uint32_t>(value), 1};
        if (pos < text.size() && text[pos] == '(') {
            if (pos + 1 >= text.size() || text[pos + 1] != 'x') {
                fail("expected '(x' or ','", pos);
            }
            pos += 2;
            const std::size_t repeat_start = pos;
            std::uint64_t repeat = 0;
            if (!read_number(text, pos, repeat)) {
                fail("expected a number", pos);
            }
            if (repeat > k_max_count) {
                fail("number too large", repeat_start);
            }
            if (repeat == 0) {
                fail("repetition must be at least 1", repeat_start);
            }
            if (pos >= text.size() || text[pos] != ')') {
                fail("expected ')'", pos);
            }
            ++pos;
            item.repeat = static_cast<std::uint32_t>(repeat);
            if (pos < text.size() && text[pos] != ',') {
                fail("expected ','", pos);
            }
        } else if (pos < text.size() && text[pos] != ',') {
            fail("expected '(x' or ','", pos);
        }
        items.push_back(item);
        total = saturating_add(total, item.repeat);
        if (pos == text.size()) {
            break;
        }
        ++pos; // the ','
    }
    if (total > k_max_expanded_hosts) {
        throw errors::too_large(
            subject, fmt::format("expands to more than {} entries", k_max_expanded_hosts), {});
    }
    std::vector<std::uint32_t> counts;
    counts.reserve(static_cast<std::size_t>(total));
    for (const auto& item : items) {
        counts.insert(counts.end(), item.repeat, item.value);
    }
    return counts;
}

std::string compress_counts(const std::vector<std::uint32_t>& counts) {
    std::string out;
    std::size_t i = 0;
    while (i < counts.size()) {
        std::size_t end = i + 1;
        while (end < counts.size() && counts[end] == counts[i]) {
            ++end;
        }
        if (!out.empty()) {
            out.push_back(',');
        }
        out += std::to_string(counts[i]);
        if (end - i >= 2) {
            out += "(x";
            out += std::to_string(end - i);
            out.push_back(')');
        }
        i = end;
    }
    return out;
}

std::vector<std::uint16_t> expand_ports(std::string_view text, std::string_view subject) {
    const auto fail = [&](std::string_view problem, std::size_t offset) {
        throw errors::invalid_ports(subject, fmt::format("{} at offset {}", problem, offset), text);
    };
    if (text.empty()) {
        throw errors::invalid_ports(subject, "empty list", text);
    }
    const auto read_port = [&](std::size_t& pos) {
        const std::size_t start = pos;
        std::uint64_t value = 0;
        if (!read_number(text, pos, value)) {
            fail("expected a number", pos);
        }
        if (value < 1 || value > k_max_port) {
            fail(fmt::format("port out of range 1-{}", k_max_port), start);
        }
        return value;
    };
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    std::uint64_t total = 0;
    std::size_t pos = 0;
    while (true) {
        const std::size_t low_start = pos;
        const std::uint64_t low = read_port(pos);
        std::uint64_t high = low;
        if (pos < text.size() && text[pos] == '-') {
            ++pos;
            high = read_port(pos);
            if (high < low) {
                fail("reversed range", low_start);
            }
            if (pos < text.size() && text[pos] != ',') {
                fail("expected ','", pos);
            }
        } else if (pos < text.size() && text[pos] != ',') {
            fail("expected '-' or ','", pos);
        }
        ranges.emplace_back(low, high);
        total += high - low + 1;
        if (pos == text.size()) {
            break;
        }
        ++pos; // the ','
    }
    if (total > k_max_ports) {
        throw errors::too_large(
            subject, fmt::format("expands to more than {} ports", k_max_ports), {});
    }
    std::vector<std::uint16_t> ports;
    ports.reserve(static_cast<std::size_t>(total));
    for (const auto& [low, high] : ranges) {
        for (std::uint64_t port = low; port <= high; ++port) {
            ports.push_back(static_cast<std::uint16_t>(port));
        }
    }
    return ports;
}

} // namespace tfslurm
