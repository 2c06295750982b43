// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run_settings.hpp>

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <string>
#include <utility>

namespace tfslurm {

Millis connect_timeout_for(const RunSettings& settings, std::size_t nodes) noexcept {
    if (settings.connect_timeout) {
        return *settings.connect_timeout;
    }
    return k_connect_timeout_base + k_connect_timeout_per_node * static_cast<Millis::rep>(nodes);
}

bool preflight_enabled(const RunSettings& settings) noexcept {
    return settings.preflight || !settings.preflight_command.empty();
}

bool failure_checked(const RunSettings& settings, protocol::FailureCause cause) noexcept {
    return !settings.on_failure_check.empty() &&
           (cause == protocol::FailureCause::trainer || cause == protocol::FailureCause::stalled);
}

bool has_start_barrier(const RunSettings& settings) noexcept {
    return settings.probe == Probe::on || preflight_enabled(settings);
}

void check_run_settings(const RunSettings& settings, std::string_view heartbeat_timeout_text) {
    if (settings.heartbeat_timeout > settings.heartbeat) {
        return;
    }
    std::string given{heartbeat_timeout_text};
    if (given.empty()) { // not given: its default, as a user would write it (`10`, `0.5`)
        const auto ms = settings.heartbeat_timeout.count();
        given = std::to_string(ms / 1000);
        if (ms % 1000 != 0) {
            std::string fraction = fmt::format("{:03}", ms % 1000);
            fraction.erase(fraction.find_last_not_of('0') + 1);
            given += "." + fraction;
        }
    }
    throw errors::invalid_setting("heartbeat_timeout",
                                  "must be longer than " + setting_ref("heartbeat"),
                                  given,
                                  "e.g. " + setting_ref("heartbeat", "1") + " " +
                                      setting_ref("heartbeat_timeout", "10"));
}

Millis parse_seconds(std::string_view text, std::string_view key) {
    const std::string copy{text}; // strtod needs a terminated string
    char* end = nullptr;
    errno = 0;
    const double seconds = std::strtod(copy.c_str(), &end);
    if (copy.empty() || end != copy.c_str() + copy.size() || errno != 0 ||
        !std::isfinite(seconds) || seconds < 0.001 || seconds > 86400) {
        throw errors::invalid_setting(
            key, "expected a number of seconds from 0.001 to 86400", text, "e.g. 10 or 0.5");
    }
    // std::chrono::round, not std::llround: that was the binary's only use of libm (300 KiB
    // of resident memory at every start).
    return std::chrono::round<Millis>(std::chrono::duration<double>(seconds));
}

namespace {

/// The signals parse_signal() knows by name.
constexpr std::array<std::pair<std::string_view, int>, 15> k_signal_names{{
    {"HUP", SIGHUP},
    {"INT", SIGINT},
    {"QUIT", SIGQUIT},
    {"ILL", SIGILL},
    {"TRAP", SIGTRAP},
    {"ABRT", SIGABRT},
    {"BUS", SIGBUS},
    {"FPE", SIGFPE},
    {"KILL", SIGKILL},
    {"USR1", SIGUSR1},
    {"SEGV", SIGSEGV},
    {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},
    {"ALRM", SIGALRM},
    {"TERM", SIGTERM},
}};

} // namespace

int parse_signal(std::string_view text, std::string_view key) {
    std::string name;
    for (const char c : text) {
        name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    }
    if (name.rfind("SIG", 0) == 0) {
        name.erase(0, 3);
    }
    for (const auto& [known, signo] : k_signal_names) {
        if (name == known) {
            return signo;
        }
    }
    const std::string copy{text};
    char* end = nullptr;
    errno = 0;
    const long number = std::strtol(copy.c_str(), &end, 10);
    if (copy.empty() || end != copy.c_str() + copy.size() || errno != 0 || number < 1 ||
        number > 64) {
        throw errors::invalid_setting(
            key, "expected a signal name or number", text, "e.g. ABRT, USR1 or 10");
    }
    return static_cast<int>(number);
}

std::string seconds_text(Millis duration) {
    return fmt::format("{:g}", static_cast<double>(duration.count()) / 1000.0);
}

std::string signal_text(int signo) {
    for (const auto& [name, number] : k_signal_names) {
        if (number == signo) {
            return std::string{name};
        }
    }
    return std::to_string(signo);
}

} // namespace tfslurm
