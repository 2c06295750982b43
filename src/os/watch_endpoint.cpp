// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/watch_endpoint.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

namespace tfslurm {

namespace {

constexpr std::size_t k_max_endpoint_file = 4096;

/// A descriptor closed at the end of its scope.
class EndpointFd {
  public:
    explicit EndpointFd(int fd) noexcept : m_fd(fd) {}
    ~EndpointFd() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    EndpointFd(const EndpointFd&) = delete;
    EndpointFd& operator=(const EndpointFd&) = delete;
    [[nodiscard]] int get() const noexcept { return m_fd; }

  private:
    int m_fd;
};
constexpr std::string_view k_endpoint_magic = "tfslurm-watch 1";

[[noreturn]] void endpoint_io(const std::string& path, const std::string& why) {
    throw errors::make(Errc::io, "top", fmt::format("{}: {}", quote(path), why));
}

/// `path` as a directory of this user's only (made with mode 0700 when missing).
void own_directory(const std::string& path) {
    if (::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
        endpoint_io(path, fmt::format("cannot make it: {}", std::strerror(errno)));
    }
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0) {
        endpoint_io(path, std::strerror(errno));
    }
    if (!S_ISDIR(info.st_mode)) {
        endpoint_io(path, "is not a directory (a link?)");
    }
    if (info.st_uid != ::getuid()) {
        endpoint_io(
            path,
            fmt::format("is owned by uid {}, not by this user (uid {})", info.st_uid, ::getuid()));
    }
    if ((info.st_mode & 022) != 0) {
        endpoint_io(path, "is writable by others");
    }
}

} // namespace

std::optional<std::string>
watch_endpoint_path(const Environment& env, std::uint64_t job, std::uint64_t step) {
    const auto home = env.get("HOME");
    if (!home || home->empty()) {
        return std::nullopt;
    }
    return fmt::format("{}/.tfslurm/steps/{}.{}", *home, job, step);
}

std::string format_watch_endpoint(const WatchEndpoint& endpoint) {
    return fmt::format("{} job={} step={} host={} address={} port={} pid={}\n",
                       k_endpoint_magic,
                       endpoint.job,
                       endpoint.step,
                       endpoint.host,
                       endpoint.address,
                       endpoint.port,
                       endpoint.pid);
}

WatchEndpoint parse_watch_endpoint(const std::string& text, const std::string& path) {
    const auto bad = [&]() {
        return errors::invalid_argument(
            "top",
            fmt::format("{} is not a published endpoint (expected \"{} job=J step=S host=H "
                        "address=A port=P pid=N\")",
                        quote(path),
                        k_endpoint_magic),
            text.substr(0, std::min<std::size_t>(text.size(), 200)));
    };
    std::string_view line(text);
    if (!line.empty() && line.back() == '\n') {
        line.remove_suffix(1);
    }
    if (line.substr(0, k_endpoint_magic.size()) != k_endpoint_magic ||
        line.substr(k_endpoint_magic.size(), 1) != " " ||
        line.find('\n') != std::string_view::npos) {
        throw bad();
    }
    std::map<std::string, std::string, std::less<>> fields;
    std::istringstream words{std::string(line.substr(k_endpoint_magic.size()))};
    for (std::string word; words >> word;) {
        const auto equals = word.find('=');
        if (equals == std::string::npos || equals == 0 ||
            !fields.emplace(word.substr(0, equals), word.substr(equals + 1)).second) {
            throw bad();
        }
    }
    const auto number = [&](std::string_view key, std::uint64_t max) {
        const auto it = fields.find(key);
        const auto value = it == fields.end() ? std::nullopt : detail::parse_decimal(it->second);
        if (!value || *value > max) {
            throw bad();
        }
        return *value;
    };
    WatchEndpoint out;
    out.job = number("job", UINT64_MAX);
    out.step = number("step", UINT64_MAX);
    out.port = static_cast<std::uint16_t>(number("port", 65535));
    out.pid = static_cast<std::int64_t>(number("pid", INT32_MAX));
    const auto host = fields.find("host");
    const auto address = fields.find("address");
    if (fields.size() != 6 || host == fields.end() || address == fields.end() ||
        host->second.empty() || address->second.empty() || out.port == 0) {
        throw bad();
    }
    out.host = host->second;
    out.address = address->second;
    return out;
}

std::string publish_watch_endpoint(const Environment& env, const WatchEndpoint& endpoint) {
    const auto path = watch_endpoint_path(env, endpoint.job, endpoint.step);
    if (!path) {
        throw errors::make(Errc::io, "top", "HOME is not set: no place to publish the endpoint");
    }
    const std::string steps = path->substr(0, path->rfind('/'));
    own_directory(steps.substr(0, steps.rfind('/')));
    own_directory(steps);
    const std::string temporary = fmt::format("{}.{}.tmp", *path, ::getpid());
    const EndpointFd fd(
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (fd.get() < 0) {
        endpoint_io(temporary, fmt::format("cannot create it: {}", std::strerror(errno)));
    }
    const std::string line = format_watch_endpoint(endpoint);
    if (::write(fd.get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()) ||
        ::rename(temporary.c_str(), path->c_str()) != 0) {
        const std::string why = std::strerror(errno);
        ::unlink(temporary.c_str());
        endpoint_io(*path, fmt::format("cannot write it: {}", why));
    }
    return *path;
}

void remove_watch_endpoint(const std::string& path) noexcept {
    ::unlink(path.c_str());
}

std::optional<WatchEndpoint>
read_watch_endpoint(const Environment& env, std::uint64_t job, std::uint64_t step) {
    const auto path = watch_endpoint_path(env, job, step);
    if (!path) {
        return std::nullopt;
    }
    const EndpointFd fd(::open(path->c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) {
        if (errno == ENOENT) {
            return std::nullopt;
        }
        endpoint_io(*path, fmt::format("cannot read it: {}", std::strerror(errno)));
    }
    struct stat info {};
    if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode) || info.st_uid != ::getuid()) {
        endpoint_io(*path, "is not a regular file of this user");
    }
    std::string text;
    std::array<char, 1024> buffer{};
    for (ssize_t n = 0; (n = ::read(fd.get(), buffer.data(), buffer.size())) > 0;) {
        text.append(buffer.data(), static_cast<std::size_t>(n));
        if (text.size() > k_max_endpoint_file) {
            endpoint_io(*path, fmt::format("is larger than {} bytes", k_max_endpoint_file));
        }
    }
    return parse_watch_endpoint(text, *path);
}

} // namespace tfslurm
