// SPDX-License-Identifier: MIT
// A trainer port held by its launcher (src/shell/held_port.cpp): a busy port is seen as busy.
#include <tfslurm/shell/held_port.hpp>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace tfslurm;

TEST_CASE("held_port: a busy TCP port is detected", "[held_port]") {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    socklen_t length = sizeof address;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    const auto port = ntohs(address.sin_port);
    REQUIRE(::listen(fd, 1) == 0);
    CHECK_FALSE(port_is_free(port));
    ::close(fd);
    CHECK(port_is_free(port));
}
