// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Where `tfslurm top` finds a step's coordinator: rank 0's launcher publishes its control
/// endpoint in a small file of the user's own, `$HOME/.tfslurm/steps/<job>.<step>` (a home
/// directory is shared by the login and compute nodes of most sites), and removes it when the
/// step's coordinator finishes. The file is a hint, never trusted: the watcher proves who it is
/// to whatever listens there and checks the coordinator's proof (watch_client.hpp).
///
/// Written safely in a directory that another user could share: both directories are made with
/// mode 0700 and must be the user's own directories, not links; the file is written under a
/// temporary name (O_EXCL, O_NOFOLLOW, mode 0600) and renamed. Read: O_NOFOLLOW, the user's own
/// regular file, at most 4 KiB.
///
/// Format, one line: `tfslurm-watch 1 job=<job> step=<step> host=<rank 0's node>
/// address=<what launchers dial> port=<the bound control port> pid=<rank 0's launcher>`.

#include <tfslurm/common/env.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace tfslurm {

/// A step's published control endpoint.
struct WatchEndpoint {
    std::uint64_t job = 0;
    std::uint64_t step = 0;
    std::string host;
    std::string address;
    std::uint16_t port = 0;
    std::int64_t pid = 0;
};

/// The file of step job.step: `$HOME/.tfslurm/steps/<job>.<step>`; nullopt without HOME.
[[nodiscard]] std::optional<std::string>
watch_endpoint_path(const Environment& env, std::uint64_t job, std::uint64_t step);

/// The file's line for `endpoint`. Input: {12, 0, n1, 10.0.0.1, 21865, 4242}. Output:
/// `tfslurm-watch 1 job=12 step=0 host=n1 address=10.0.0.1 port=21865 pid=4242\n`.
[[nodiscard]] std::string format_watch_endpoint(const WatchEndpoint& endpoint);

/// Parse a file's text. \throws Error (Errc::invalid_argument) naming `path`, quoting the text,
/// when it is not one such line.
[[nodiscard]] WatchEndpoint parse_watch_endpoint(const std::string& text, const std::string& path);

/// Write the file (see the file comment); returns its path. \throws Error (Errc::io) naming the
/// directory or file and why (`HOME is not set`, `"/home/u/.tfslurm" is owned by uid 1001`).
std::string publish_watch_endpoint(const Environment& env, const WatchEndpoint& endpoint);

/// Remove the file at `path` (published by this process); a missing file is fine.
void remove_watch_endpoint(const std::string& path) noexcept;

/// The published endpoint of job.step; nullopt when there is no such file.
/// \throws Error (Errc::io) for a file that is not the user's own regular file or cannot be
/// read; (Errc::invalid_argument) for a malformed one.
[[nodiscard]] std::optional<WatchEndpoint>
read_watch_endpoint(const Environment& env, std::uint64_t job, std::uint64_t step);

} // namespace tfslurm
