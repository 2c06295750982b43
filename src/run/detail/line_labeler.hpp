// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `--label`: one stream of a trainer's output (its stdout or its stderr) with every line
/// prefixed by its rank (`3: `), as `srun -l` does. Pure: bytes in, labelled text out; the
/// launcher reads the trainer's pipes and writes what comes out.

#include <cstddef>
#include <string>
#include <string_view>

namespace tfslurm::detail {

/// The longest line kept whole: longer ones are cut into labelled pieces of this size (a line
/// of the trainer never holds more memory than this).
inline constexpr std::size_t k_max_labeled_line = 65536;

/// Labels the lines of one stream. Complete lines come out at once, in order; an incomplete
/// one is held until its newline comes, until it reaches k_max_labeled_line, or until
/// finish() (the stream's end).
class LineLabeler {
  public:
    /// `prefix`: put before every line, e.g. `3: `.
    explicit LineLabeler(std::string prefix) : m_prefix(std::move(prefix)) {}

    /// The labelled complete lines among what was held and `bytes`.
    /// Input: prefix `3: `, bytes `a\nb`. Output: `3: a\n` (`b` is held).
    [[nodiscard]] std::string feed(std::string_view bytes);

    /// The held incomplete line, labelled and ended with a newline; empty when none.
    /// Input: after feed(`a\nb`). Output: `3: b\n`.
    [[nodiscard]] std::string finish();

  private:
    std::string m_prefix;
    std::string m_line; ///< the incomplete line held
};

} // namespace tfslurm::detail
