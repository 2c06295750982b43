// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The library's logger. libtfslurm logs through it but never adds sinks or sets levels:
/// the executable (cli/logging.cpp) or the embedding program does that.

#include <spdlog/logger.h>

namespace tfslurm {

/// The logger named "tfslurm". Created on first use with no sinks (silent) and registered with
/// spdlog, so a front-end can attach sinks and set its level. Never throws.
[[nodiscard]] spdlog::logger& logger() noexcept;

} // namespace tfslurm
