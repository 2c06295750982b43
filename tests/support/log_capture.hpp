// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The library's log lines, captured for a test's assertions.

#include <tfslurm/common/log_sink.hpp>

#include <spdlog/sinks/ostream_sink.h>

#include <algorithm>
#include <memory>
#include <sstream>
#include <string>

namespace tfslurm::test {

/// While it lives, the library's log lines at `level` and above are also written here, one
/// `level: text` line each (`warning: coordinator: ...`); the logger's sinks and level are
/// restored when it goes, even when an assertion ends the test early.
class LogCapture {
  public:
    explicit LogCapture(spdlog::level::level_enum level = spdlog_logger().level())
        : m_sink(std::make_shared<spdlog::sinks::ostream_sink_mt>(m_text)),
          m_level(spdlog_logger().level()) {
        m_sink->set_pattern("%l: %v");
        spdlog_logger().sinks().push_back(m_sink);
        spdlog_logger().set_level(level);
    }
    ~LogCapture() {
        auto& sinks = spdlog_logger().sinks();
        sinks.erase(std::remove(sinks.begin(), sinks.end(), m_sink), sinks.end());
        spdlog_logger().set_level(m_level);
    }
    LogCapture(const LogCapture&) = delete;
    LogCapture& operator=(const LogCapture&) = delete;
    LogCapture(LogCapture&&) = delete;
    LogCapture& operator=(LogCapture&&) = delete;

    /// Every line so far.
    [[nodiscard]] std::string text() const { return m_text.str(); }

  private:
    std::ostringstream m_text;
    std::shared_ptr<spdlog::sinks::ostream_sink_mt> m_sink;
    spdlog::level::level_enum m_level;
};

} // namespace tfslurm::test
