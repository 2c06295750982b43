// SPDX-License-Identifier: MIT
#pragma once

// Slurm's own hostlist rules, re-applied token by token, where they make Slurm's answer differ
// from tfslurm's: 22.05's older rules, and the rules every release up to 26.05 still has (an
// error in an earlier bracket group is dropped, a literal host number above ULONG_MAX is
// re-printed). The tokenizer is re-implemented here on purpose (independently of
// src/resolve/hostlist/hostlist_parser.cpp); the expansion of one well-formed token is the same in
// Slurm and in tfslurm, so it is delegated to expand_hostlist().

#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::diff {

/// Slurm's tokenizer (every release): the first ']' after the token start (or after the last
/// group) is used, and one that lies before the '[' ends the scan (`c][1,2]` splits at the
/// comma).
[[nodiscard]] std::vector<std::string> tokenize_slurm(const std::string& list,
                                                      std::string_view separators);

/// What Slurm makes of a list, and which of its rules made a difference to tfslurm.
struct Emulation {
    bool valid = true;
    bool complete = true; ///< false when a token could not be emulated
    std::vector<std::string> lines;
    bool newline = false;   ///< 22.05: a newline is not a separator
    bool repaired = false;  ///< 22.05: a missing ']' is repaired
    bool suffix = false;    ///< 22.05: text after ']' is refused
    bool overflow = false;  ///< a literal host number above ULONG_MAX is re-printed
    bool swallowed = false; ///< an error in an earlier bracket group drops its hosts
};

/// How Slurm prints a literal host: its trailing number goes through strtoul() and "%0*lu".
[[nodiscard]] std::string literal_slurm(const std::string& host, Emulation& emulation);

/// The hosts Slurm prints for `list` (or that it rejects it), with the rules that applied;
/// `before_2302`: 22.05's rules (missing ']' repaired, suffix refused, newline not a
/// separator), else those of 23.02.5 to 26.05.
[[nodiscard]] Emulation emulate_slurm(const std::string& list, bool before_2302);

/// True when `list` holds a number of 20 digits or more (ULONG_MAX has 20).
[[nodiscard]] bool has_ulong_sized_number(const std::string& list);

} // namespace tfslurm::diff
