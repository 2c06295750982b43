// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Slurm's compressed list grammars: hostlists (`n[01-03],gpu-a[1-2]-b[01-03]`), counts per
/// node (`2(x3),1`) and port lists (`12000,12005-12006`). Pure functions; every rejection is a
/// tfslurm::Error whose message names `subject` (the variable or option the text came from),
/// says what is wrong and where, and quotes the input.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Slurm's MAX_RANGE: at most this many hosts in one `lo-hi` range (`n[1-65536]` is accepted).
inline constexpr std::uint64_t k_max_range_hosts = 65536;

/// tfslurm's own cap on the total number of hosts one list may expand to (Slurm has none and
/// runs out of memory instead). `n[1-1000][1-1000]` (1,000,000 hosts) is accepted. The host
/// names of one expansion are also capped at 256 MiB in total.
inline constexpr std::size_t k_max_expanded_hosts = std::size_t{1} << 22;

/// Expand a hostlist exactly as `scontrol show hostnames` does (Slurm >= 23.02.5 semantics:
/// text after `]` is a suffix, a missing `]` is an error). Order and duplicates are kept.
///
/// Input: `n[1-2],m[3-4]`. Output: {"n1", "n2", "m3", "m4"}.
/// Input: `""` or only separators. Output: {}.
/// \throws Error (Errc::invalid_hostlist) on a malformed list, (Errc::too_large) past
///         k_max_expanded_hosts.
[[nodiscard]] std::vector<std::string> expand_hostlist(std::string_view list,
                                                       std::string_view subject = "hostlist");

/// Compress hosts into a list that expand_hostlist() turns back into exactly `hosts` (same
/// order, same duplicates). Like `scontrol show hostlist`: order kept, only the last numeric
/// field folded, zero padding kept.
///
/// Input: {"n1", "n2", "n3", "n5"}. Output: `n[1-3,5]`.
/// Input: {"n3", "n1", "n2", "n1"}. Output: `n[3,1-2,1]`.
/// \throws Error (Errc::invalid_argument) for a host that cannot be written in a hostlist
///         (empty, or containing `[`, `,`, space, tab or newline).
[[nodiscard]] std::string compress_hostlist(const std::vector<std::string>& hosts,
                                            std::string_view subject = "hostlist");

/// Expand a counts-per-node string (`SLURM_TASKS_PER_NODE`, `SLURM_JOB_CPUS_PER_NODE`).
/// Grammar: `item ("," item)*`, `item := uint [ "(x" uint ")" ]`, repetition >= 1.
///
/// Input: `2(x3),1`. Output: {2, 2, 2, 1}.
/// \throws Error (Errc::invalid_tasks_per_node) on malformed text, (Errc::too_large) past
///         k_max_expanded_hosts entries.
[[nodiscard]] std::vector<std::uint32_t> expand_counts(std::string_view text,
                                                       std::string_view subject);

/// The inverse of expand_counts(), as Slurm writes it: runs of 2 or more equal values become
/// `v(xN)`.
///
/// Input: {2, 2, 2, 1}. Output: `2(x3),1`. Input: {}. Output: "".
[[nodiscard]] std::string compress_counts(const std::vector<std::uint32_t>& counts);

/// Expand a port list (`SLURM_STEP_RESV_PORTS`): comma-separated `port` or `lo-hi`, each
/// port in 1..65535, lo <= hi. Order and duplicates are kept.
///
/// Input: `12000,12005-12006`. Output: {12000, 12005, 12006}.
/// \throws Error (Errc::invalid_ports) on malformed text.
[[nodiscard]] std::vector<std::uint16_t> expand_ports(std::string_view text,
                                                      std::string_view subject);

} // namespace tfslurm
