// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Slurm hostfiles (`SLURM_HOSTFILE` with `srun -m arbitrary`): their grammar, and the one
/// function that reads a file for the resolver.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// The hosts of the first `ntasks` ranks (all names without `ntasks`) in a Slurm hostfile
/// (`SLURM_HOSTFILE` with `srun -m arbitrary`), read as Slurm reads it: comma-separated names on
/// each line, `name*N` for N times the name, `#` starts a comment (`\#` is a literal `#`), blank
/// lines are skipped and every other line must start with a letter or a digit; names after the
/// first `ntasks` are ignored. A name is one host, not a hostlist expression. Spaces and tabs
/// around names and a carriage return at the end of a line are dropped.
///
/// Input: "n2\nn1*2\n# spare\nn3,n1\n", 4. Output: {n2, n1, n1, n3}.
/// \throws Error (Errc::invalid_hostlist) naming `subject` for a malformed line or fewer than
///         `ntasks` names.
[[nodiscard]] std::vector<std::string> parse_hostfile(std::string_view text,
                                                      std::optional<std::uint32_t> ntasks,
                                                      std::string_view subject);

/// Reads a whole file (a hostfile); throws Error (Errc::io) naming `subject` when it cannot.
using FileReader = std::function<std::string(const std::string& path, std::string_view subject)>;

/// The largest file read_text_file() accepts: 16 MiB.
inline constexpr std::size_t k_max_text_file = std::size_t{16} * 1024 * 1024;

/// The FileReader that reads the file system. Reads at most k_max_text_file + 1 bytes whatever
/// the file claims (a device, a FIFO, /proc), so every read is bounded.
/// Input: a file with `n1\nn2\n`. Output: `n1\nn2\n`.
/// \throws Error (Errc::io) `<subject>: cannot open "<path>": <strerror>` or `cannot read`
///         (a directory: `Is a directory`); (Errc::too_large) `<subject>: "<path>" has more
///         than 16777216 bytes`.
[[nodiscard]] std::string read_text_file(const std::string& path, std::string_view subject);

/// The subject of hostfile errors: `SLURM_HOSTFILE (<path>)`, or for a preview
/// setting_ref(`hostfile`) + ` (<path>)` (the CLI renders `--hostfile (<path>)`).
[[nodiscard]] std::string hostfile_subject(std::string_view name, std::string_view path);

} // namespace tfslurm
