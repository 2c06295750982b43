// SPDX-License-Identifier: MIT
#pragma once

namespace tfslurm::cli {

/// Attach a stderr sink to the library logger (colour only on a TTY) and set its level:
/// `-v` debug, `-vv` trace, `-q` errors only; otherwise TFSLURM_LOG_LEVEL, then SPDLOG_LEVEL,
/// then info.
void setup_logging(int verbosity, bool quiet);

} // namespace tfslurm::cli
