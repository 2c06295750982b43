// SPDX-License-Identifier: MIT
// A trainer port held by its launcher (include/tfslurm/shell/held_port.hpp): plain BSD sockets.
#include <tfslurm/shell/held_port.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

namespace tfslurm {

bool port_is_free(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return true; // cannot tell; the trainer will report it
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    const bool free =
        ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 ||
        errno != EADDRINUSE;
    ::close(fd);
    return free;
}

HeldPort::HeldPort(HeldPort&& other) noexcept
    : m_fd(std::exchange(other.m_fd, -1)), m_port(other.m_port) {}

HeldPort& HeldPort::operator=(HeldPort&& other) noexcept {
    if (this != &other) {
        release();
        m_fd = std::exchange(other.m_fd, -1);
        m_port = other.m_port;
    }
    return *this;
}

HeldPort::~HeldPort() {
    release();
}

void HeldPort::release() noexcept {
    if (m_fd >= 0) {
        ::close(m_fd);
        m_fd = -1;
    }
}

int HeldPort::listen() noexcept {
    if (m_fd < 0) {
        errno = EBADF;
        return -1;
    }
    if (::listen(m_fd, SOMAXCONN) != 0) {
        return -1;
    }
    return ::fcntl(m_fd, F_DUPFD_CLOEXEC, 0);
}

namespace {

/// A TCP socket bound to `port` on every IPv4 address, -1 when it cannot be bound.
int bind_port(std::uint16_t port, bool reuse_address) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    const int one = 1;
    if (reuse_address) {
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
        const int error = errno;
        ::close(fd);
        errno = error;
        return -1;
    }
    return fd;
}

} // namespace

HeldPort HeldPort::first_free(const std::vector<std::uint16_t>& candidates) {
    HeldPort held;
    for (const std::uint16_t port : candidates) {
        if (port == 0) {
            continue; // the kernel's pick, not a port anyone planned
        }
        // Without SO_REUSEADDR no other socket can bind the port while we hold it, whatever its
        // own options. Not listening: a peer's trainer that connects before ours listens is
        // refused and retries, where a backlog would accept it and our close reset it.
        int fd = bind_port(port, false);
        if (fd < 0 && errno == EADDRINUSE) {
            // Only connections in TIME_WAIT (an earlier job's, on the same port) refuse the
            // first bind but not this one, as they would not refuse the trainer's (servers set
            // SO_REUSEADDR). Held this way, a server that sets SO_REUSEADDR could still bind it.
            fd = bind_port(port, true);
        }
        if (fd >= 0) {
            held.m_fd = fd;
            held.m_port = port;
            return held;
        }
    }
    return held;
}

} // namespace tfslurm
