// SPDX-License-Identifier: MIT
// The phases of a rank's start and the progress a trainer reports (tfslurm/run/startup.hpp).
#include "common/detail/text.hpp"

#include <tfslurm/run/startup.hpp>

#include <algorithm>

namespace tfslurm {

namespace {

constexpr std::array<std::string_view, k_startup_phases> k_phase_names{
    "task", "up", "registered", "cluster", "started", "progress"};
constexpr std::array<std::string_view, k_startup_phases> k_phase_descriptions{"task started",
                                                                              "launcher up",
                                                                              "registered",
                                                                              "addresses exchanged",
                                                                              "trainer started",
                                                                              "first progress"};

} // namespace

std::string_view to_string(StartupPhase phase) noexcept {
    return k_phase_names.at(static_cast<std::size_t>(phase));
}

std::string_view describe(StartupPhase phase) noexcept {
    return k_phase_descriptions.at(static_cast<std::size_t>(phase));
}

bool StartupTimes::empty() const noexcept {
    return std::none_of(at.begin(), at.end(), [](const auto& time) { return time.has_value(); });
}

std::optional<std::uint64_t> progress_step(std::string_view text) noexcept {
    text = text.substr(0, text.find('\n'));
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) {
        text.remove_prefix(1);
    }
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) {
        text.remove_suffix(1);
    }
    return detail::parse_decimal(text);
}

} // namespace tfslurm
