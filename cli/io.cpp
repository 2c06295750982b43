// SPDX-License-Identifier: MIT
#include "io.hpp"

#include <tfslurm/common/error.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace tfslurm::cli {

namespace {

/// Everything `fd` holds, at most k_max_stdin bytes.
std::string read_all(int fd, std::string_view subject) {
    std::string data;
    std::array<char, 65536> buffer{};
    while (true) {
        if (data.size() > k_max_stdin) {
            throw errors::too_large(subject,
                                    fmt::format("more than {} bytes", k_max_stdin),
                                    "give the hosts as a hostlist instead of one name per line");
        }
        const auto got = ::read(fd, buffer.data(), buffer.size());
        if (got == 0) {
            return data;
        }
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw errors::make(Errc::io, subject, std::strerror(errno));
        }
        data.append(buffer.data(), static_cast<std::size_t>(got));
    }
}

} // namespace

std::string read_stdin() {
    return read_all(STDIN_FILENO, "stdin");
}

std::string read_file(const std::string& path, std::string_view subject) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); // NOLINT(*-vararg)
    if (fd < 0) {
        throw errors::make(Errc::io,
                           subject,
                           fmt::format("cannot open {}: {}", quote(path), std::strerror(errno)));
    }
    try {
        auto data = read_all(fd, subject);
        ::close(fd);
        return data;
    } catch (...) {
        ::close(fd);
        throw;
    }
}

bool stdin_is_terminal() {
    return ::isatty(STDIN_FILENO) == 1;
}

void write_stdout(std::string_view data) {
    while (!data.empty()) {
        const auto put = ::write(STDOUT_FILENO, data.data(), data.size());
        if (put < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw errors::make(Errc::io, "stdout", std::strerror(errno));
        }
        data.remove_prefix(static_cast<std::size_t>(put));
    }
}

} // namespace tfslurm::cli
