// SPDX-License-Identifier: MIT
// Slurm's hostlist (compression here, expansion in hostlist_parser.cpp), counts-per-node and
// port-list grammars.
#include "resolve/hostlist/hostlist_text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm {
namespace {

using detail::assign_padded;
using detail::decimal_digits;
using detail::increment_decimal;
using detail::increment_digits;
using detail::is_digit;
using detail::k_max_port;
using detail::k_max_ports;
using detail::k_ulong_max;
using detail::saturating_add;
using detail::saturating_mul;

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

/// Append `value` zero-padded to `width` digits.
void append_padded(std::string& out, std::uint64_t value, std::size_t width) {
    std::string digits;
    assign_padded(digits, value, width);
    out += digits;
}

void append_item(std::string& out, std::string_view item) {
    if (!out.empty()) {
        out.push_back(',');
    }
    out += item;
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
            // expand_hostlist() would refuse it: what is written must read back.
            if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
                return "not printable ASCII";
            }
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

namespace {

/// The hosts of a list, as strings (expand_hostlist()).
class HostCollector final : public HostVisitor {
  public:
    void expect(std::uint64_t hosts, std::uint64_t /*bytes*/) override {
        m_hosts.reserve(static_cast<std::size_t>(hosts));
    }
    void host(std::string_view name) override { m_hosts.emplace_back(name); }
    std::vector<std::string> take() { return std::move(m_hosts); }

  private:
    std::vector<std::string> m_hosts;
};

} // namespace

namespace {

/// The lines of write_hostnames(), gathered in a buffer of k_chunk bytes.
class HostLines final : public HostVisitor {
  public:
    static constexpr std::size_t k_chunk = std::size_t{64} * 1024;
    /// Lines up to this long take run()'s fast path (tests/unit/resolve/test_hostlist.cpp straddles
    /// it).
    static constexpr std::size_t k_line = 32;

    explicit HostLines(const std::function<void(std::string_view)>& write)
        : m_write(write), m_buffer(k_chunk, '\0') {}

    void host(std::string_view name) override {
        char* out = reserve(name.size() + 1);
        out = std::copy(name.begin(), name.end(), out);
        *out = '\n';
        m_used += name.size() + 1;
    }

    // The hot loop of `hostnames a[1-1000]b[1-1000]` (~30 lines, kept whole: the fast path
    // and its way out are read together). A line (prefix, digits, newline) is built once per
    // number of digits in a small array and its digits are incremented there; each line is
    // copied into the chunk as k_line bytes, a constant size that compiles to a few moves
    // instead of a call, and the chunk advances by the line's real length. Twice as fast as
    // appending to a std::string: `tfslurm hostnames` of 1,000,000 hosts takes ~5 ms.
    void
    run(std::string_view prefix, std::uint64_t lo, std::uint64_t hi, std::size_t width) override {
        std::string digits;
        for (std::uint64_t value = lo;; ++value) {
            assign_padded(digits, value, width);
            const std::size_t size = prefix.size() + digits.size() + 1;
            if (size > k_line) {
                host(std::string(prefix).append(digits));
            } else {
                std::array<char, k_line> line{};
                std::copy(prefix.begin(), prefix.end(), line.begin());
                std::copy(digits.begin(), digits.end(), line.begin() + prefix.size());
                line[size - 1] = '\n';
                // The last digit is kept aside and patched into each copy, so that the line
                // is not written to (and then read back) on nine lines of ten.
                char* const first = line.data() + prefix.size();
                char* const units = line.data() + size - 2;
                char unit = *units;
                while (true) {
                    char* const out = reserve(k_line);
                    std::memcpy(out, line.data(), k_line);
                    out[size - 2] = unit;
                    m_used += size;
                    if (value == hi) {
                        break;
                    }
                    if (unit != '9') {
                        ++unit;
                    } else if (unit = '0'; !increment_digits(first, units)) {
                        break; // the next value needs one more digit
                    }
                    ++value;
                }
            }
            if (value == hi) {
                return;
            }
        }
    }

    void flush() {
        if (m_used > 0) {
            m_write(std::string_view(m_buffer.data(), m_used));
            m_used = 0;
        }
    }

  private:
    /// Room for `size` more bytes: a full chunk is written first; a line longer than a chunk
    /// makes the chunk larger.
    char* reserve(std::size_t size) {
        if (m_used + size > m_buffer.size()) {
            flush();
            if (size > m_buffer.size()) {
                m_buffer.resize(size);
            }
        }
        return m_buffer.data() + m_used;
    }

    const std::function<void(std::string_view)>& m_write;
    std::string m_buffer; ///< the chunk; its first m_used bytes are lines not yet written
    std::size_t m_used = 0;
};

} // namespace

void write_hostnames(std::string_view list,
                     const std::function<void(std::string_view)>& write,
                     std::string_view subject) {
    HostLines lines(write);
    visit_hostlist(list, lines, subject);
    lines.flush();
}

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view subject) {
    HostCollector collector;
    visit_hostlist(list, collector, subject);
    return collector.take();
}

void HostVisitor::expect(std::uint64_t /*hosts*/, std::uint64_t /*bytes*/) {}

void HostVisitor::run(std::string_view prefix,
                      std::uint64_t lo,
                      std::uint64_t hi,
                      std::size_t width) {
    std::string name;
    std::string digits;
    assign_padded(digits, lo, width);
    for (std::uint64_t value = lo;; ++value) {
        name.assign(prefix);
        name += digits;
        host(name);
        if (value == hi) {
            return;
        }
        increment_decimal(digits);
    }
}

HostlistCompressor::HostlistCompressor(std::string_view subject) : m_subject(subject) {}

void HostlistCompressor::host(std::string_view name) {
    if (const std::string_view reason = unwritable_reason(name); !reason.empty()) {
        throw errors::invalid_argument(
            m_subject,
            fmt::format("host {} cannot be written in a hostlist ({})", m_index, reason),
            name);
    }
    const SplitHost split = split_host(name);
    if (split.digits.empty()) {
        close_group();
        append_item(m_out, name);
        ++m_index;
        return;
    }
    add_numbered(split.prefix, split.value, split.digits.size(), split.digits.front() == '0');
}

// Every value of lo..hi extends the run that lo + 1 leaves open (the padded widths only grow,
// and a value wider than the run's first has no leading zero), so two hosts go through the
// general rule and the rest of the range is folded in one step.
void HostlistCompressor::run(std::string_view prefix,
                             std::uint64_t lo,
                             std::uint64_t hi,
                             std::size_t width) {
    // A prefix ending in a digit would merge with the value; an unwritable one must fail with
    // the host's index: both take the host-by-host path.
    if (prefix.empty() || is_digit(prefix.back()) || !unwritable_reason(prefix).empty()) {
        HostVisitor::run(prefix, lo, hi, width);
        return;
    }
    const auto size = [width](std::uint64_t value) {
        return std::max(width, decimal_digits(value));
    };
    const auto leading_zero = [width](std::uint64_t value) {
        return value == 0 || decimal_digits(value) < width;
    };
    add_numbered(prefix, lo, size(lo), leading_zero(lo));
    if (hi == lo) {
        return;
    }
    add_numbered(prefix, lo + 1, size(lo + 1), leading_zero(lo + 1));
    if (hi - lo >= 2) {
        m_last = hi;
        m_last_size = size(hi);
        m_group_hosts += hi - lo - 1;
        m_index += hi - lo - 1;
    }
}

std::string HostlistCompressor::finish() {
    close_group();
    m_index = 0;
    return std::exchange(m_out, {});
}

// The rule of compress_hostlist(): consecutive numbered hosts with one prefix share a bracket,
// and n, n + 1, ... fold into one run while they print with the width of the run's first.
void HostlistCompressor::add_numbered(std::string_view prefix,
                                      std::uint64_t value,
                                      std::size_t size,
                                      bool leading_zero) {
    ++m_index;
    if (m_in_group && prefix == m_prefix) {
        const bool prints_as_run = size == m_first_size || (size > m_first_size && !leading_zero);
        if (m_last != k_ulong_max && value == m_last + 1 && prints_as_run) {
            ++m_group_hosts;
            m_last = value;
            m_last_size = size;
            return;
        }
        // Behind a `]`, Slurm cuts a group at its commas (`x][5,7]` is `x][5` and `7]`): a
        // prefix with a `]` gets one group per run, `x][5-6],x]8`.
        if (prefix.find(']') == std::string_view::npos) {
            ++m_group_hosts;
            close_run();
            m_first = m_last = value;
            m_first_size = m_last_size = size;
            return;
        }
    }
    close_group();
    m_in_group = true;
    m_prefix.assign(prefix);
    m_group_hosts = 1;
    m_first = m_last = value;
    m_first_size = m_last_size = size;
}

void HostlistCompressor::close_run() {
    if (!m_runs.empty()) {
        m_runs.push_back(',');
    }
    append_padded(m_runs, m_first, m_first_size);
    if (m_last != m_first) {
        m_runs.push_back('-');
        append_padded(m_runs, m_last, m_last_size);
    }
}

void HostlistCompressor::close_group() {
    if (!m_in_group) {
        return;
    }
    if (!m_out.empty()) {
        m_out.push_back(',');
    }
    m_out += m_prefix;
    if (m_group_hosts == 1) {
        append_padded(m_out, m_first, m_first_size);
    } else {
        close_run();
        m_out.push_back('[');
        m_out += m_runs;
        m_out.push_back(']');
    }
    m_in_group = false;
    m_runs.clear();
}

std::string compress_hostlist(const std::vector<std::string>& hosts, std::string_view subject) {
    HostlistCompressor compressor(subject);
    for (const auto& host : hosts) {
        compressor.host(host);
    }
    return compressor.finish();
}

// A hand-written scanner for `v(xN),...` (~65 lines) so that every error names its offset;
// each branch is one grammar rule.
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
