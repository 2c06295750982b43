// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The spdlog logger behind logger(), for the front-ends that attach sinks and set its level
/// (cli/logging.cpp, the SPANK plugin, the tests' LogCapture). Files that only log include
/// log.hpp.

#include <spdlog/logger.h>

namespace tfslurm {

/// The logger named "tfslurm". Created on first use with no sinks (silent) at level info, and
/// registered with spdlog, so a front-end can attach sinks and set its level. Never throws.
[[nodiscard]] spdlog::logger& spdlog_logger() noexcept;

} // namespace tfslurm
