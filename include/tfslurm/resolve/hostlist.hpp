// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Slurm's compressed list grammars: hostlists (`n[01-03],gpu-a[1-2]-b[01-03]`), counts per
/// node (`2(x3),1`) and port lists (`12000,12005-12006`). Pure functions; every rejection is a
/// tfslurm::Error whose message names `subject` (the variable or option the text came from),
/// says what is wrong and where, and quotes the input.

#include <cstddef>
#include <cstdint>
#include <functional>
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

/// Expand a hostlist exactly as `scontrol show hostnames` of Slurm 23.02.5 to 26.05 does (text
/// after `]` is a suffix, a missing `]` is an error, a `]` before a group's `[` leaves its
/// separators unprotected). Order and duplicates are kept. Where Slurm's answer is not the
/// list's hosts, tfslurm refuses instead: an error in the third-from-last bracket group of a
/// host or one left of it (Slurm drops those hosts), bytes that are not printable ASCII, more
/// than k_max_expanded_hosts (man page, HOSTLISTS).
///
/// Input: `n[1-2],m[3-4]`. Output: {"n1", "n2", "m3", "m4"}.
/// Input: `""` or only separators. Output: {}.
/// \throws Error (Errc::invalid_hostlist) on a malformed list, (Errc::too_large) past
///         k_max_expanded_hosts.
[[nodiscard]] std::vector<std::string> expand_hostlist(std::string_view list,
                                                       std::string_view subject = "hostlist");

/// Receives the hosts of a hostlist in order, one host or one run of hosts at a time, so that
/// a list is never expanded in memory (visit_hostlist()).
class HostVisitor {
  public:
    HostVisitor() = default;
    HostVisitor(const HostVisitor&) = delete;
    HostVisitor& operator=(const HostVisitor&) = delete;
    HostVisitor(HostVisitor&&) = delete;
    HostVisitor& operator=(HostVisitor&&) = delete;
    virtual ~HostVisitor() = default;

    /// Called once, before any host: exactly how many hosts, and bytes of names, will follow.
    virtual void expect(std::uint64_t hosts, std::uint64_t bytes);

    /// One host.
    virtual void host(std::string_view name) = 0;

    /// The hosts `prefix` + v for v = lo, lo + 1, ..., hi, each v in decimal zero-padded to
    /// `width` digits (printf `%0*lu`): the values of one range of the bracket group that ends
    /// a host name. The default calls host() once per value.
    ///
    /// Input: ("n", 8, 10, 2). Hosts: n08, n09, n10.
    virtual void
    run(std::string_view prefix, std::uint64_t lo, std::uint64_t hi, std::size_t width);
};

/// Check `list` exactly as expand_hostlist() does (same errors, same limits, all reported
/// before the first host), then hand its hosts to `visitor` in expand_hostlist()'s order.
/// Memory grows with the text of `list`, not with the number of hosts it names.
///
/// Input: `n[1-2]x,m[3-4]`. Calls: expect(4, 10), host("n1x"), host("n2x"), run("m", 3, 4, 1).
/// \throws Error as expand_hostlist(), and whatever `visitor` throws.
void visit_hostlist(std::string_view list,
                    HostVisitor& visitor,
                    std::string_view subject = "hostlist");

/// Expand `list` as expand_hostlist() does (same errors, all before the first output), as
/// text: one host per line, handed to `write` in chunks of about 64 KiB, each ending at a line
/// end. Memory stays flat whatever the number of hosts (`tfslurm hostnames`).
///
/// Input: `n[1-2]`. Calls: write("n1\nn2\n").
/// \throws Error as expand_hostlist(), and whatever `write` throws.
void write_hostnames(std::string_view list,
                     const std::function<void(std::string_view)>& write,
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

/// compress_hostlist() fed one host, or one run of hosts, at a time: visiting
/// `a[1-1000]b[1-1000]` with it folds 1,000 runs, never 1,000,000 names. The result is the
/// same as compressing the expanded hosts.
///
/// Input: host("n1"), run("n", 2, 1000, 1), host("login"). Output of finish(): `n[1-1000],login`.
class HostlistCompressor final : public HostVisitor {
  public:
    explicit HostlistCompressor(std::string_view subject = "hostlist");

    /// \throws Error (Errc::invalid_argument) as compress_hostlist() for an unwritable host.
    void host(std::string_view name) override;
    void
    run(std::string_view prefix, std::uint64_t lo, std::uint64_t hi, std::size_t width) override;

    /// The hostlist of every host visited since the last finish().
    [[nodiscard]] std::string finish();

  private:
    void
    add_numbered(std::string_view prefix, std::uint64_t value, std::size_t size, bool leading_zero);
    void close_run();
    void close_group();

    std::string m_subject;
    std::string m_out;
    std::uint64_t m_index = 0; ///< hosts seen: the index named in errors
    // The open group: consecutive numbered hosts with one prefix.
    bool m_in_group = false;
    std::string m_prefix;
    std::string m_runs; ///< the group's finished runs, comma-separated
    std::uint64_t m_group_hosts = 0;
    // The open run of the group: m_first ... m_last, written with their own widths.
    std::uint64_t m_first = 0;
    std::uint64_t m_last = 0;
    std::size_t m_first_size = 0;
    std::size_t m_last_size = 0;
};

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
