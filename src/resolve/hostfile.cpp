// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostfile.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>

namespace tfslurm {
namespace {

/// Drop spaces, tabs and carriage returns at both ends.
std::string_view trim_blanks(std::string_view text) {
    const auto first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) {
        return {};
    }
    return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

} // namespace

/// `SLURM_HOSTFILE (<path>)` or setting_ref(`hostfile`) + ` (<path>)`: the subject of hostfile
/// errors.
std::string hostfile_subject(std::string_view name, std::string_view path) {
    return fmt::format("{} ({})", name, path);
}

std::vector<std::string> parse_hostfile(std::string_view text,
                                        std::optional<std::uint32_t> ntasks,
                                        std::string_view subject) {
    const auto wanted = ntasks.value_or(k_max_expanded_hosts);
    std::vector<std::string> hosts;
    std::size_t line_number = 0;
    std::size_t pos = 0;
    while (hosts.size() < wanted && pos < text.size()) {
        const auto end = text.find('\n', pos);
        const auto raw = text.substr(pos, end == std::string_view::npos ? end : end - pos);
        pos = end == std::string_view::npos ? text.size() : end + 1;
        ++line_number;
        // '#' starts a comment unless written as '\#'.
        std::string line;
        for (const char c : raw) {
            if (c == '#') {
                if (!line.empty() && line.back() == '\\') {
                    line.back() = '#';
                    continue;
                }
                break;
            }
            line += c;
        }
        const auto content = trim_blanks(line);
        if (content.empty()) {
            continue;
        }
        const auto first = static_cast<unsigned char>(content.front());
        if (std::isalnum(first) == 0) {
            throw errors::invalid_hostlist(
                subject,
                fmt::format("line {}: a host name must start with a letter or a digit",
                            line_number),
                raw);
        }
        for (const auto field : detail::split(content, ',')) {
            const auto entry = trim_blanks(field);
            if (entry.empty()) {
                continue;
            }
            auto name = entry;
            std::uint64_t count = 1;
            if (const auto star = entry.find('*'); star != std::string_view::npos) {
                const auto repeat = detail::parse_decimal(entry.substr(star + 1));
                name = trim_blanks(entry.substr(0, star));
                if (!repeat || *repeat == 0 || name.empty()) {
                    throw errors::invalid_hostlist(
                        subject,
                        fmt::format("line {}: expected NAME or NAME*COUNT with a count of at "
                                    "least 1",
                                    line_number),
                        entry);
                }
                count = *repeat;
            }
            const auto take = std::min<std::uint64_t>(count, wanted - hosts.size());
            hosts.insert(hosts.end(), static_cast<std::size_t>(take), std::string{name});
            if (hosts.size() == wanted) {
                break;
            }
        }
    }
    if (hosts.empty() || (ntasks && hosts.size() < *ntasks)) {
        throw errors::invalid_hostlist(
            subject,
            ntasks ? fmt::format("names {} hosts for {} tasks", hosts.size(), *ntasks)
                   : std::string{"names no host"},
            text);
    }
    return hosts;
}

std::string read_text_file(const std::string& path, std::string_view subject) {
    // Read, never trust a size: /dev/zero, a FIFO or /proc files report none (or a wrong one),
    // and a directory's "size" is meaningless. At most k_max_text_file + 1 bytes are read.
    const auto io_error = [&](std::string_view what, int error) {
        return errors::make(Errc::io,
                            subject,
                            fmt::format("{} {}: {}", what, quote(path), std::strerror(error)),
                            "check the path and its permissions; with srun -m arbitrary the file "
                            "must stay readable on every node while the step runs");
    };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        throw io_error("cannot open", errno);
    }
    // Straight into the string, which doubles from 4 KiB as it fills: no buffer on the stack
    // (a zeroed 64 KiB one cost every launcher 16 page faults to read its 2 KiB slurm.conf).
    std::string text(4096, '\0');
    std::size_t used = 0;
    int error = 0;
    struct stat info {};
    if (::fstat(fd, &info) == 0 && S_ISDIR(info.st_mode)) {
        error = EISDIR;
    }
    while (error == 0 && used <= k_max_text_file) {
        if (used == text.size()) {
            text.resize(std::min(2 * text.size(), k_max_text_file + 1));
        }
        const ssize_t got = ::read(fd, text.data() + used, text.size() - used);
        if (got == 0) {
            break;
        }
        if (got < 0) {
            if (errno != EINTR) {
                error = errno;
            }
            continue;
        }
        used += static_cast<std::size_t>(got);
    }
    ::close(fd);
    text.resize(used);
    if (error != 0) {
        throw io_error("cannot read", error);
    }
    if (text.size() > k_max_text_file) {
        throw errors::too_large(
            subject,
            fmt::format("{} has more than {} bytes", quote(path), k_max_text_file),
            "a hostfile names one host per task; is this the right file?");
    }
    return text;
}

} // namespace tfslurm
