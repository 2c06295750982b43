// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The registry's pieces shared by its two files: plan_settings.cpp (the plan and output rows,
/// the layering) and run_setting_rows.cpp (the rows of `tfslurm run`), and the value parsers
/// their rows share.

#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <fmt/format.h>

#include <string_view>
#include <vector>

namespace tfslurm::detail {

/// A flag's value: empty (a bare plugin key, `--key`), 1/yes/true/on or 0/no/false/off.
/// Input: `off`. Output: false. \throws Error (Errc::invalid_argument) naming setting `key`.
[[nodiscard]] bool parse_bool(std::string_view value, std::string_view key);

/// An integer from `low` to `high`, read by the strict decimal reader (no sign, no base).
/// Input: `3`, 0, 10. Output: 3. \throws Error (Errc::invalid_argument) naming setting `key`:
/// `ps: expected an integer from 0 to 4194304: "x"`.
template <typename T> T parse_number(std::string_view value, std::string_view key, T low, T high) {
    const auto parsed = parse_decimal(value);
    if (!parsed || *parsed < low || *parsed > high) {
        throw errors::invalid_setting(
            key, fmt::format("expected an integer from {} to {}", low, high), value);
    }
    return static_cast<T>(*parsed);
}

/// The rows of `tfslurm run`'s settings (SettingGroup::launcher), in `--help` order: the
/// registry's last rows.
[[nodiscard]] std::vector<SettingSpec> run_setting_rows();

} // namespace tfslurm::detail
