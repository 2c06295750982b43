// SPDX-License-Identifier: MIT
#include "emulate_slurm.hpp"

#include "scontrol.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace tfslurm::diff {

std::vector<std::string> tokenize_slurm(const std::string& list, std::string_view separators) {
    std::vector<std::string> tokens;
    std::size_t pos = 0;
    while (true) {
        pos = list.find_first_not_of(separators, pos);
        if (pos == std::string::npos) {
            return tokens;
        }
        const std::size_t start = pos;
        std::size_t parse = pos;
        std::size_t end = pos;
        bool scanning = true;
        while (scanning) {
            end = std::min(list.find_first_of(separators, end), list.size());
            while (true) {
                const std::size_t open = list.find('[', parse);
                const std::size_t close = list.find(']', parse);
                if (open == std::string::npos || open > end || close == std::string::npos ||
                    close < open) {
                    scanning = false;
                    break;
                }
                if (close < end) {
                    parse = close + 1;
                    continue;
                }
                end = close;
                break;
            }
        }
        tokens.push_back(list.substr(start, end - start));
        pos = end;
    }
}

std::string literal_slurm(const std::string& host, Emulation& emulation) {
    std::size_t start = host.size();
    while (start > 0 && host[start - 1] >= '0' && host[start - 1] <= '9') {
        --start;
    }
    std::uint64_t value = 0;
    for (std::size_t i = start; i < host.size(); ++i) {
        const auto digit = static_cast<std::uint64_t>(host[i] - '0');
        if (value > (UINT64_MAX - digit) / 10) {
            emulation.overflow = true;
            const std::string max = std::to_string(UINT64_MAX);
            const std::size_t width = host.size() - start;
            return host.substr(0, start) + std::string(width - max.size(), '0') + max;
        }
        value = value * 10 + digit;
    }
    return host;
}

namespace {

/// Where the bracket group of a given depth sits in `token` (depth 0: the final range list,
/// 1: the group before it, ...), following Slurm's right-to-left search.
struct Span {
    std::size_t open = std::string::npos;
    std::size_t close = std::string::npos;
};

std::vector<Span> group_spans(const std::string& token) {
    std::vector<Span> spans;
    std::size_t open = token.rfind('[');
    spans.push_back({open, token.find(']', open + 1)});
    while (open > 0) {
        const std::size_t group_open = token.rfind('[', open - 1);
        const std::size_t group_close = token.rfind(']', open - 1);
        if (group_open == std::string::npos || group_close == std::string::npos ||
            group_close < group_open) {
            break;
        }
        spans.push_back({group_open, group_close});
        open = group_open;
    }
    return spans;
}

int group_depth(const std::string& token, std::size_t offset) {
    const auto spans = group_spans(token);
    for (std::size_t depth = 0; depth < spans.size(); ++depth) {
        if (offset >= spans[depth].open && offset <= spans[depth].close) {
            return static_cast<int>(depth);
        }
    }
    return -1;
}

/// The items of a group that Slurm still emits before its MAX_PREFIX_CNT check fails.
std::string items_within_prefix_limit(const std::string& group_text) {
    std::string kept;
    std::size_t total = 0;
    std::size_t start = 0;
    while (start <= group_text.size()) {
        std::size_t end = group_text.find(',', start);
        if (end == std::string::npos) {
            end = group_text.size();
        }
        const std::string item = group_text.substr(start, end - start);
        total += tfslurm::expand_hostlist("n[" + item + "]").size();
        if (total > 65536) {
            break;
        }
        kept += (kept.empty() ? "" : ",") + item;
        start = end + 1;
    }
    return kept;
}

std::size_t error_offset(const std::string& message) {
    const std::size_t at = message.find("at offset ");
    return at == std::string::npos ? std::string::npos
                                   : std::stoul(message.substr(at + std::strlen("at offset ")));
}

/// Hosts of a token, Slurm's way (one host may span lines: 22.05 does not
/// split at newlines). Returns false when the token makes the whole list invalid.
bool expand_token_slurm(std::string token, Emulation& emulation) {
    const bool has_newline = token.find('\n') != std::string::npos;
    if (has_newline) {
        // Keep the token one token: inside brackets '\v' (C whitespace like '\n', which
        // strtoul skips, but no separator); outside, where tfslurm refuses control bytes in
        // host names, '~' (never generated).
        if (token.find_first_of("\v~") != std::string::npos) {
            emulation.complete = false;
            return false;
        }
        bool inside = false;
        for (auto& c : token) {
            inside = c == '[' ? true : c == ']' ? false : inside;
            if (c == '\n') {
                c = inside ? '\v' : '~';
            }
        }
    }
    try {
        for (auto host : tfslurm::expand_hostlist(token)) {
            if (has_newline) {
                std::replace(host.begin(), host.end(), '\v', '\n');
                std::replace(host.begin(), host.end(), '~', '\n');
            }
            for (auto& line : split_lines(host + "\n")) {
                emulation.lines.push_back(std::move(line));
            }
        }
        return true;
    } catch (const tfslurm::Error& error) {
        if (error.code() == tfslurm::Errc::too_large) {
            emulation.complete = false;
            return false;
        }
        // Slurm (22.05 to 26.05) keeps only the first prefix level's errors (`rc = MAX(rc, rc1)`
        // drops the -1 of deeper levels): an invalid range list there silently yields no host at
        // all, and a group over MAX_PREFIX_CNT silently stops after its last range that fits.
        const std::size_t offset = error_offset(error.what());
        const int depth = offset == std::string::npos ? -1 : group_depth(token, offset);
        if (depth < 2) {
            return false;
        }
        emulation.swallowed = true;
        if (std::string_view(error.what()).find("expands to more than") == std::string::npos) {
            return true;
        }
        const Span span = group_spans(token)[static_cast<std::size_t>(depth)];
        std::string truncated =
            token.substr(0, span.open + 1) +
            items_within_prefix_limit(token.substr(span.open + 1, span.close - span.open - 1)) +
            token.substr(span.close);
        if (has_newline) {
            std::replace(truncated.begin(), truncated.end(), '\v', '\n');
            std::replace(truncated.begin(), truncated.end(), '~', '\n');
        }
        return expand_token_slurm(truncated, emulation);
    }
}

} // namespace

Emulation emulate_slurm(const std::string& list, bool before_2302) {
    Emulation emulation;
    const auto tokens = tokenize_slurm(list, before_2302 ? "\t, " : "\t, \n");
    for (const auto& token : tokens) {
        emulation.newline = emulation.newline || token.find('\n') != std::string::npos;
        const std::size_t open = token.rfind('[');
        std::string literal;
        if (open == std::string::npos) {
            literal = literal_slurm(token, emulation);
        } else if (const std::size_t close = token.find(']', open + 1);
                   close == std::string::npos) {
            if (!before_2302) {
                emulation.valid = false;
                return emulation;
            }
            emulation.repaired = true;
            literal = literal_slurm(open > 0 ? token.substr(0, open) + "]" : token.substr(open + 1),
                                    emulation);
        } else if (close + 1 != token.size() && before_2302) {
            emulation.suffix = true;
            emulation.valid = false;
            return emulation;
        } else {
            if (!expand_token_slurm(token, emulation)) {
                emulation.valid = false;
                return emulation;
            }
            continue;
        }
        for (auto& line : split_lines(literal + "\n")) {
            emulation.lines.push_back(std::move(line));
        }
    }
    return emulation;
}

bool has_ulong_sized_number(const std::string& list) {
    std::size_t run = 0;
    for (const char c : list) {
        run = c >= '0' && c <= '9' ? run + 1 : 0;
        if (run >= 20) {
            return true;
        }
    }
    return false;
}

} // namespace tfslurm::diff
