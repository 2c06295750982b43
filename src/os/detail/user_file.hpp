// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Opening a file that tfslurm writes at a path the user chose (`--output`, `--error`,
/// `--events`): on a shared file system another user may have put a symbolic link or a file of
/// their own there first. Used by the launcher's shell and by the events writer.

#include <string>
#include <string_view>

namespace tfslurm::detail {

/// Whether an existing file is emptied once it is known to be safe, or appended to.
enum class UserFileMode { truncate, append };

/// Open `path` for writing (created with mode 0644 when missing; always O_APPEND, so that
/// several writers' lines do not overwrite each other) and return the descriptor (close-on-exec).
/// Refused, before anything is written or truncated: a symbolic link as the last component
/// (O_NOFOLLOW: tfslurm never writes through one), a regular file of another user (fstat after
/// the open: the file another user made first, or linked to, would receive this job's output),
/// and a regular file with more than one hard link (another user's link to a file of ours, which
/// it could read). Character devices (`/dev/null`) are fine whoever owns them.
/// \throws Error (Errc::io) `<subject>: refusing "<path>": <why>`, e.g.
/// `--output: refusing "/shared/run.log": it is owned by uid 1001, not by this user (uid 1000)`,
/// or `<subject>: cannot open "<path>": <strerror>`.
[[nodiscard]] int
open_user_file(const std::string& path, std::string_view subject, UserFileMode mode);

} // namespace tfslurm::detail
