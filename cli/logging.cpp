// SPDX-License-Identifier: MIT
#include "logging.hpp"

#include <tfslurm/log.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdlib>
#include <memory>

namespace tfslurm::cli {

void setup_logging(int verbosity, bool quiet) {
    auto& log = logger();
    if (log.sinks().empty()) {
        std::shared_ptr<spdlog::sinks::sink> sink;
        if (::isatty(STDERR_FILENO) != 0) {
            sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
        } else {
            sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
        }
        // "tfslurm: warning: ..." like other command-line tools; colour marks the level.
        sink->set_pattern("tfslurm: %^%l%$: %v");
        log.sinks().push_back(sink);
    }
    if (quiet) {
        log.set_level(spdlog::level::err);
    } else if (verbosity >= 2) {
        log.set_level(spdlog::level::trace);
    } else if (verbosity == 1) {
        log.set_level(spdlog::level::debug);
    } else if (const char* level = std::getenv("TFSLURM_LOG_LEVEL"); level != nullptr) {
        log.set_level(spdlog::level::from_str(level));
    } else if (const char* global = std::getenv("SPDLOG_LEVEL"); global != nullptr) {
        log.set_level(spdlog::level::from_str(global));
    } else {
        log.set_level(spdlog::level::info);
    }
}

} // namespace tfslurm::cli
