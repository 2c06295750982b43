// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Per-rank log files (`tfslurm run --output PATTERN`, `--error PATTERN`): the file name of
/// one rank's trainer output, from a pattern like srun's `-o`. Pure.

#include <tfslurm/run/run.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace tfslurm {

/// What a pattern's placeholders stand for, for one rank.
struct RankOutputFields {
    std::uint32_t rank = 0;
    Member member;    ///< role (`%R`), index in its role (`%i`) and host (`%h`)
    std::string job;  ///< `%j`; empty outside Slurm (`--local`): `local`
    std::string step; ///< `%s`; empty outside Slurm: `local`
};

/// Check a pattern without expanding it: every `%` starts a known placeholder (`%r`, `%R`,
/// `%i`, `%h`, `%j`, `%s`, `%%`, with an optional zero-padding width before `r` and `i`, as in
/// `%3r`), and the name differs between any two ranks (it holds `%r`, or `%R` and `%i`).
/// `key` is the setting (`output`, `error`) named in errors.
/// \throws Error (Errc::invalid_argument): `output: unknown placeholder %x (expected %r, %R,
///         %i, %h, %j, %s or %%): "log-%x.txt"`.
void check_rank_pattern(std::string_view pattern, std::string_view key);

/// The file name of one rank. Input: `logs/%j.%s-%R%i-%3r.out` for rank 5, worker 4, job 94,
/// step 0. Output: `logs/94.0-worker4-005.out`.
/// \throws Error as check_rank_pattern().
[[nodiscard]] std::string
expand_rank_pattern(std::string_view pattern, std::string_view key, const RankOutputFields& fields);

} // namespace tfslurm
