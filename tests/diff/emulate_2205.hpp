// SPDX-License-Identifier: MIT
#pragma once

// Slurm 22.05's rules, re-applied token by token. The tokenizers are re-implemented here on
// purpose (independently of src/hostlist.cpp); the expansion of one well-formed token is the
// same in 22.05 and in tfslurm, so it is delegated to expand_hostlist().

#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::diff {

/// The tokenizer tfslurm follows (Slurm >= 23.02): separators tab, comma, space, newline; a
/// '[' before the separator whose first ']' lies beyond it extends the token to that ']'.
[[nodiscard]] std::vector<std::string> tokenize(const std::string& list);

/// The 22.05 tokenizer: the first ']' after the token start is used, and one that lies before
/// the '[' ends the scan (`c][1,2]` splits at the comma).
[[nodiscard]] std::vector<std::string> tokenize_2205(const std::string& list,
                                                     std::string_view separators);

/// What 22.05 makes of a list, and which of its rules made a difference to tfslurm.
struct Emulation {
    bool valid = true;
    bool complete = true; ///< false when a token could not be emulated
    std::vector<std::string> lines;
    bool newline = false;
    bool tokenizer = false;
    bool repaired = false;
    bool suffix = false;
    bool overflow = false;
    bool swallowed = false;
};

/// How 22.05 prints a literal host: its trailing number goes through strtoul() and "%0*lu".
[[nodiscard]] std::string literal_2205(const std::string& host, Emulation& emulation);

/// The hosts 22.05 prints for `list` (or that it rejects it), with the rules that applied.
[[nodiscard]] Emulation emulate_2205(const std::string& list);

/// True when `list` holds a number of 20 digits or more (ULONG_MAX has 20).
[[nodiscard]] bool has_ulong_sized_number(const std::string& list);

} // namespace tfslurm::diff
