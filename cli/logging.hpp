// SPDX-License-Identifier: MIT
#pragma once

#include <spdlog/common.h>

#include <string_view>

namespace tfslurm::cli {

/// A log level as users write it, any case: trace, debug, info, warning (warn), error (err),
/// critical or off. Input: `WARNING`. Output: spdlog::level::warn.
/// \throws Error (Errc::invalid_argument) naming `subject` for anything else.
[[nodiscard]] spdlog::level::level_enum parse_log_level(std::string_view text,
                                                        std::string_view subject);

/// Attach a stderr sink to the library logger (colour only on a TTY, and never when NO_COLOR
/// is set and not empty; the library's setting_ref()s spelled as cli_error() spells them) and
/// set its level:
/// `-v` debug, `-vv` trace, `-q` errors only; otherwise TFSLURM_LOG_LEVEL, then SPDLOG_LEVEL,
/// then info.
/// \throws Error (Errc::invalid_argument) for a TFSLURM_LOG_LEVEL that is not a level.
void setup_logging(int verbosity, bool quiet);

} // namespace tfslurm::cli
