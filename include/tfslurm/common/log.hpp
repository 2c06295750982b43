// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The library's logger. libtfslurm logs through it but never adds sinks or sets levels:
/// the executable (cli/logging.cpp) or the embedding program does that, through
/// log_sink.hpp.
///
/// A thin front to spdlog: a file that logs includes fmt's core alone, and the line is
/// formatted and handed to spdlog in src/common/log.cpp. spdlog's implementation (header-only
/// over Debian's packages) is then compiled in the few files that configure the logger instead
/// of in every file that logs: about 8 s of compile time per translation unit.

#include <fmt/core.h>

namespace tfslurm {

/// A log line's level, in spdlog's order (src/common/log.cpp converts one to the other).
enum class LogLevel { trace, debug, info, warn, err, critical, off };

/// The library's logger: `logger().debug("{} registered", rank_label)`. Formatting and writing
/// never throw: a line that cannot be formatted or written is dropped, as spdlog does.
class Logger {
  public:
    /// Whether a line at `level` would be written (to skip costly arguments).
    [[nodiscard]] bool should_log(LogLevel level) const noexcept;

    template <typename... Args>
    void log(LogLevel level, fmt::format_string<Args...> format, Args&&... args) const noexcept {
        if (should_log(level)) {
            write(level, format, fmt::make_format_args(args...));
        }
    }
    template <typename... Args>
    void trace(fmt::format_string<Args...> format, Args&&... args) const noexcept {
        log(LogLevel::trace, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void debug(fmt::format_string<Args...> format, Args&&... args) const noexcept {
        log(LogLevel::debug, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void info(fmt::format_string<Args...> format, Args&&... args) const noexcept {
        log(LogLevel::info, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void warn(fmt::format_string<Args...> format, Args&&... args) const noexcept {
        log(LogLevel::warn, format, std::forward<Args>(args)...);
    }
    template <typename... Args>
    void error(fmt::format_string<Args...> format, Args&&... args) const noexcept {
        log(LogLevel::err, format, std::forward<Args>(args)...);
    }

  private:
    static void write(LogLevel level, fmt::string_view format, fmt::format_args args) noexcept;
};

/// The library's logger (the spdlog logger named "tfslurm" behind it is silent until a
/// front-end attaches a sink). Never throws.
[[nodiscard]] const Logger& logger() noexcept;

} // namespace tfslurm
