// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Helpers of step reading (src/resolve/step.cpp) that placement uses too.

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tfslurm::detail {

/// The sum of `counts`. \throws Error (Errc::too_large) naming `subject` past
/// k_max_expanded_hosts tasks.
[[nodiscard]] std::uint32_t checked_total(const std::vector<std::uint32_t>& counts,
                                          std::string_view subject);

/// Host name -> node index (the first, should a name repeat). Views into `hosts`.
[[nodiscard]] std::unordered_map<std::string_view, std::uint32_t>
node_index(const std::vector<std::string>& hosts);

} // namespace tfslurm::detail
