// SPDX-License-Identifier: MIT
// Files written at a path the user chose (detail/user_file.hpp): open without following a
// symbolic link, then judge what was opened by its descriptor (fstat: no window between a check
// and the open), and only then truncate.
#include "os/detail/user_file.hpp"

#include <tfslurm/common/error.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tfslurm::detail {

namespace {

/// Why the opened file `info` is not this user's to write, or empty when it is.
std::string user_file_refusal(const struct stat& info) {
    const uid_t self = ::geteuid();
    if (S_ISCHR(info.st_mode)) {
        return {}; // /dev/null, a terminal: only root makes device nodes
    }
    if (info.st_uid != self) {
        return fmt::format("it is owned by uid {}, not by this user (uid {})", info.st_uid, self);
    }
    if (S_ISREG(info.st_mode) && info.st_nlink > 1) {
        return fmt::format("it has {} hard links (another name of it could be another user's)",
                           info.st_nlink);
    }
    return {};
}

} // namespace

int open_user_file(const std::string& path, std::string_view subject, UserFileMode mode) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open() is variadic by definition
    const int fd = ::open(
        path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0644);
    if (fd < 0) {
        const int error = errno;
        if (error == ELOOP) {
            throw errors::make(Errc::io,
                               subject,
                               fmt::format("refusing {}: it is a symbolic link", quote(path)),
                               "tfslurm never writes through a link: name the file itself");
        }
        throw errors::make(Errc::io,
                           subject,
                           fmt::format("cannot open {}: {}", quote(path), std::strerror(error)));
    }
    struct stat info {};
    std::string refusal =
        ::fstat(fd, &info) != 0 ? std::string(std::strerror(errno)) : user_file_refusal(info);
    if (refusal.empty() && mode == UserFileMode::truncate && S_ISREG(info.st_mode) &&
        info.st_size > 0 && ::ftruncate(fd, 0) != 0) {
        refusal = fmt::format("cannot truncate it: {}", std::strerror(errno));
    }
    if (!refusal.empty()) {
        ::close(fd);
        throw errors::make(Errc::io,
                           subject,
                           fmt::format("refusing {}: {}", quote(path), refusal),
                           "another user may have made it first: remove it, or choose a path "
                           "in a directory only you can write");
    }
    return fd;
}

} // namespace tfslurm::detail
