// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// What the fuzz targets check for one input, shared by the libFuzzer binaries, the replay
/// binaries and the unit test that replays tests/fuzz/regressions. Each check runs one parser
/// on the input; a tfslurm::Error is an expected outcome, any other exception escapes (and
/// crashes the fuzzer). On success the result's invariants are checked; the return value
/// describes the first violated invariant, or is empty.

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::fuzz {

/// Round trips are only checked below this many entries, to keep every input fast.
inline constexpr std::size_t k_round_trip_limit = 20000;

inline bool writable_host(const std::string& host) {
    return !host.empty() && host.find_first_of("[, \t\n") == std::string::npos;
}

/// expand_hostlist(): the count is capped, and compress_hostlist() of a writable result
/// expands back to exactly the same hosts.
inline std::string check_hostlist(std::string_view input) {
    std::vector<std::string> hosts;
    try {
        hosts = expand_hostlist(input, "FUZZ");
    } catch (const Error&) {
        return {};
    }
    if (hosts.size() > k_max_expanded_hosts) {
        return "more hosts than k_max_expanded_hosts";
    }
    if (hosts.size() > k_round_trip_limit ||
        !std::all_of(hosts.begin(), hosts.end(), writable_host)) {
        return {};
    }
    std::string compressed;
    try {
        compressed = compress_hostlist(hosts, "FUZZ");
    } catch (const Error& error) {
        return std::string("compress_hostlist rejected writable hosts: ") + error.what();
    }
    try {
        if (expand_hostlist(compressed, "FUZZ") != hosts) {
            return "compress_hostlist output does not expand back: " + compressed;
        }
    } catch (const Error& error) {
        return "compress_hostlist output is invalid: " + compressed + ": " + error.what();
    }
    return {};
}

/// expand_counts(): at least one entry, capped, and compress_counts() round-trips.
inline std::string check_counts(std::string_view input) {
    std::vector<std::uint32_t> counts;
    try {
        counts = expand_counts(input, "FUZZ");
    } catch (const Error&) {
        return {};
    }
    if (counts.empty() || counts.size() > k_max_expanded_hosts) {
        return "entry count out of bounds";
    }
    if (counts.size() > k_round_trip_limit) {
        return {};
    }
    const std::string compressed = compress_counts(counts);
    try {
        if (expand_counts(compressed, "FUZZ") != counts) {
            return "compress_counts output does not expand back: " + compressed;
        }
    } catch (const Error& error) {
        return "compress_counts output is invalid: " + compressed + ": " + error.what();
    }
    return {};
}

/// expand_ports(): between 1 and 65536 ports, each in 1..65535.
inline std::string check_ports(std::string_view input) {
    std::vector<std::uint16_t> ports;
    try {
        ports = expand_ports(input, "FUZZ");
    } catch (const Error&) {
        return {};
    }
    if (ports.empty() || ports.size() > 65536) {
        return "port count out of bounds";
    }
    if (std::find(ports.begin(), ports.end(), std::uint16_t{0}) != ports.end()) {
        return "port 0 accepted";
    }
    return {};
}

/// For the fuzzers: report a violated invariant and abort, so libFuzzer saves the input.
inline void require(const std::string& violation, std::string_view input) {
    if (!violation.empty()) {
        std::fprintf(stderr,
                     "invariant violated: %s\ninput (%zu bytes): %.*s\n",
                     violation.c_str(),
                     input.size(),
                     static_cast<int>(std::min<std::size_t>(input.size(), 2000)),
                     input.data());
        std::abort();
    }
}

} // namespace tfslurm::fuzz
