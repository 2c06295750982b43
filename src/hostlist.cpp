// SPDX-License-Identifier: MIT
// Slurm's hostlist (compression here, expansion in hostlist_parser.cpp), counts-per-node and
// port-list grammars.
#include "detail/hostlist_text.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm {
namespace {

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

std::vector<std::string> expand_hostlist(std::string_view list, std::string_view subject) {
    return detail::expand_hostlist_text(list, subject);
}

// Kept whole (~65 lines): the split, the run detection and the writing share one set of
// indices, and splitting them would pass all of it around.
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
