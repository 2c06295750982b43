// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Small strict text helpers shared by the library's parsers.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::detail {

/// Strict unsigned decimal: one or more ASCII digits, nothing else, no overflow.
/// Input: "42". Output: 42. Input: "+4", " 4", "", "4x". Output: nullopt.
[[nodiscard]] std::optional<std::uint64_t> parse_decimal(std::string_view text) noexcept;

/// Split on `separator`, keeping empty fields. Input: "a,,b". Output: {"a", "", "b"}.
/// Input: "". Output: {""}.
[[nodiscard]] std::vector<std::string_view> split(std::string_view text, char separator);

/// Join with `separator`.
[[nodiscard]] std::string join(const std::vector<std::string>& items, std::string_view separator);

} // namespace tfslurm::detail
