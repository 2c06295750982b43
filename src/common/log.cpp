// SPDX-License-Identifier: MIT
#include <tfslurm/common/log.hpp>
#include <tfslurm/common/log_sink.hpp>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <iterator>
#include <memory>

namespace tfslurm {

static_assert(static_cast<int>(LogLevel::trace) == spdlog::level::trace &&
                  static_cast<int>(LogLevel::err) == spdlog::level::err &&
                  static_cast<int>(LogLevel::off) == spdlog::level::off,
              "LogLevel follows spdlog's order");

namespace {

spdlog::level::level_enum to_spdlog(LogLevel level) noexcept {
    return static_cast<spdlog::level::level_enum>(level);
}

} // namespace

spdlog::logger& spdlog_logger() noexcept {
    // A function-local static: created once, thread-safe, no sinks until a front-end adds them.
    static const std::shared_ptr<spdlog::logger> instance = [] {
        auto created = std::make_shared<spdlog::logger>("tfslurm");
        created->set_level(spdlog::level::info);
        return created;
    }();
    return *instance;
}

bool Logger::should_log(LogLevel level) const noexcept {
    return spdlog_logger().should_log(to_spdlog(level));
}

void Logger::write(LogLevel level, fmt::string_view format, fmt::format_args args) noexcept {
    try {
        fmt::memory_buffer text;
        fmt::vformat_to(std::back_inserter(text), format, args);
        spdlog_logger().log(to_spdlog(level), spdlog::string_view_t(text.data(), text.size()));
    } catch (...) { // NOLINT(bugprone-empty-catch): a line that cannot be written is dropped
    }
}

const Logger& logger() noexcept {
    static const Logger instance;
    return instance;
}

} // namespace tfslurm
