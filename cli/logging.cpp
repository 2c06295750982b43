// SPDX-License-Identifier: MIT
#include "logging.hpp"

#include "plan_args.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log_sink.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace tfslurm::cli {
namespace {

/// Hands each line to the terminal sink with the library's setting_ref()s spelled as this
/// invocation gave them (`--checkpoint-before 50`, or the variable a value came from), as
/// cli_error() does for errors.
class SettingNamesSink final : public spdlog::sinks::sink {
  public:
    explicit SettingNamesSink(std::shared_ptr<spdlog::sinks::sink> terminal)
        : m_terminal(std::move(terminal)) {}

    void log(const spdlog::details::log_msg& msg) override {
        const std::string text =
            render_settings(std::string_view(msg.payload.data(), msg.payload.size()),
                            [](std::string_view key, std::string_view value) {
                                return cli_setting_name(key, value, invocation_origins());
                            });
        spdlog::details::log_msg rendered(msg);
        rendered.payload = spdlog::string_view_t(text.data(), text.size());
        m_terminal->log(rendered);
    }
    void flush() override { m_terminal->flush(); }
    void set_pattern(const std::string& pattern) override { m_terminal->set_pattern(pattern); }
    void set_formatter(std::unique_ptr<spdlog::formatter> formatter) override {
        m_terminal->set_formatter(std::move(formatter));
    }

  private:
    std::shared_ptr<spdlog::sinks::sink> m_terminal;
};

} // namespace

spdlog::level::level_enum parse_log_level(std::string_view text, std::string_view subject) {
    std::string lower{text};
    std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) {
        return static_cast<char>(std::tolower(c));
    });
    constexpr std::array<std::pair<std::string_view, spdlog::level::level_enum>, 9> k_levels{{
        {"trace", spdlog::level::trace},
        {"debug", spdlog::level::debug},
        {"info", spdlog::level::info},
        {"warning", spdlog::level::warn},
        {"warn", spdlog::level::warn},
        {"error", spdlog::level::err},
        {"err", spdlog::level::err},
        {"critical", spdlog::level::critical},
        {"off", spdlog::level::off},
    }};
    for (const auto& [name, level] : k_levels) {
        if (lower == name) {
            return level;
        }
    }
    throw errors::invalid_argument(subject,
                                   "expected trace, debug, info, warning, error, critical or off",
                                   text,
                                   "or use -v, -vv or -q");
}

void setup_logging(int verbosity, bool quiet) {
    auto& log = spdlog_logger();
    if (log.sinks().empty()) {
        std::shared_ptr<spdlog::sinks::sink> sink;
        // NO_COLOR (https://no-color.org): present and not empty means no colour.
        const char* no_color = std::getenv("NO_COLOR");
        const bool colour_off = no_color != nullptr && *no_color != '\0';
        if (::isatty(STDERR_FILENO) != 0 && !colour_off) {
            sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
        } else {
            sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
        }
        // "tfslurm: warning: ..." like other command-line tools; colour marks the level.
        sink->set_pattern("tfslurm: %^%l%$: %v");
        log.sinks().push_back(std::make_shared<SettingNamesSink>(std::move(sink)));
    }
    if (quiet) {
        log.set_level(spdlog::level::err);
    } else if (verbosity >= 2) {
        log.set_level(spdlog::level::trace);
    } else if (verbosity == 1) {
        log.set_level(spdlog::level::debug);
    } else if (const char* level = std::getenv("TFSLURM_LOG_LEVEL"); level != nullptr) {
        log.set_level(parse_log_level(level, "TFSLURM_LOG_LEVEL"));
    } else if (const char* global = std::getenv("SPDLOG_LEVEL"); global != nullptr) {
        log.set_level(spdlog::level::from_str(global));
    } else {
        log.set_level(spdlog::level::info);
    }
}

} // namespace tfslurm::cli
