// SPDX-License-Identifier: MIT
#pragma once

#include <string>
#include <string_view>

namespace tfslurm::cli {

/// All of standard input. \throws Error (Errc::io) on a read error.
[[nodiscard]] std::string read_stdin();

/// Write all of `data` to standard output. \throws Error (Errc::io), e.g. on a closed pipe.
void write_stdout(std::string_view data);

} // namespace tfslurm::cli
