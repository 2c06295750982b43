// SPDX-License-Identifier: MIT
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tfslurm::cli {

/// The most standard input read_stdin() accepts: 256 MiB (more host names than a hostlist may
/// expand to).
inline constexpr std::size_t k_max_stdin = std::size_t{256} * 1024 * 1024;

/// All of standard input, at most k_max_stdin bytes. \throws Error (Errc::io) on a read error,
/// (Errc::too_large) past the limit.
[[nodiscard]] std::string read_stdin();

/// All of the file `path`, at most k_max_stdin bytes; `subject` names it in errors.
/// \throws Error (Errc::io) when it cannot be opened or read, (Errc::too_large) past the limit.
[[nodiscard]] std::string read_file(const std::string& path, std::string_view subject);

/// Whether standard input is a terminal (a command that would wait there for input refuses).
[[nodiscard]] bool stdin_is_terminal();

/// Write all of `data` to standard output. \throws Error (Errc::io), e.g. on a closed pipe.
void write_stdout(std::string_view data);

} // namespace tfslurm::cli
