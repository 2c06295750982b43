// SPDX-License-Identifier: MIT
// Nobody gets in, in either direction: a process that holds the control port first cannot pass
// for the coordinator, and rank 0 fails at once, naming the port, when it cannot listen there.
#include "cli_runner.hpp"

#include <tfslurm/auth.hpp>
#include <tfslurm/protocol.hpp>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

using tfslurm::test::Result;
using tfslurm::test::tfslurm_cli;
namespace protocol = tfslurm::protocol;

namespace {

/// A fake coordinator on 127.0.0.1 (any free port): it challenges every connection, reads the
/// hello, and answers with a welcome whose credential proves nothing.
class Impostor {
  public:
    Impostor() {
        m_fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        ::setsockopt(m_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(m_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
        REQUIRE(::listen(m_fd, 16) == 0);
        socklen_t size = sizeof address;
        REQUIRE(::getsockname(m_fd, reinterpret_cast<sockaddr*>(&address), &size) == 0);
        m_port = ntohs(address.sin_port);
        m_thread = std::thread([this] { serve(); });
    }
    ~Impostor() {
        m_stop = true;
        m_thread.join();
        for (const int fd : m_clients) {
            ::close(fd);
        }
        ::close(m_fd);
    }
    Impostor(const Impostor&) = delete;
    Impostor& operator=(const Impostor&) = delete;

    [[nodiscard]] int port() const noexcept { return m_port; }
    [[nodiscard]] int connections() const noexcept { return m_connections; }

  private:
    void serve() {
        while (!m_stop) {
            pollfd p{m_fd, POLLIN, 0};
            if (::poll(&p, 1, 50) <= 0) {
                continue;
            }
            const int client = ::accept4(m_fd, nullptr, nullptr, SOCK_CLOEXEC);
            if (client < 0) {
                continue;
            }
            ++m_connections;
            m_clients.push_back(client);
            send(client, protocol::Challenge{std::string(64, 'a')});
            pollfd q{client, POLLIN, 0};
            if (::poll(&q, 1, 5000) > 0) {
                std::array<char, 4096> hello{};
                [[maybe_unused]] const auto n = ::recv(client, hello.data(), hello.size(), 0);
            }
            send(client, protocol::Welcome{2, std::string(64, '0')});
            send(client, protocol::Stop{protocol::StopReason::done, 0, 0}); // never believed
        }
    }
    static void send(int fd, const protocol::Message& message) {
        const std::string frame = protocol::encode_frame(message);
        [[maybe_unused]] const auto n = ::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL);
    }

    int m_fd = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_connections{0};
    std::vector<int> m_clients;
    std::thread m_thread;
};

} // namespace

TEST_CASE("run: a process holding the control port cannot pass for the coordinator",
          "[run][integration]") {
    Impostor impostor;
    // Two tasks on one node: trainer ports base and base + 1, the control port base + 2.
    const std::string base = std::to_string(impostor.port() - 2);
    const Result r = tfslurm_cli(
        {"run", "--local", "2", "--auth", "secret", "--port-base", base, "--", "sleep", "30"},
        {"PATH=/usr/bin:/bin", "TFSLURM_SECRET=" + std::string(64, '5')});
    CHECK(r.status == 7);
    const std::string control = "127.0.0.1:" + std::to_string(impostor.port());
    // Rank 0 cannot listen there, and says so at once; rank 1 is welcomed by the impostor but
    // does not believe it (nor its stop), and says why.
    CHECK(r.err.find("tfslurm: error: coordinator: cannot listen on " + control +
                     " (Address already in use)\n"
                     "tfslurm: hint: another job or a stale launcher holds the control port; "
                     "choose another --port-base\n") != std::string::npos);
    CHECK(r.err.find("tfslurm: error: coordinator: " + control +
                     " did not prove that it is job ") != std::string::npos);
    CHECK(r.err.find("'s coordinator: bad secret proof\n"
                     "tfslurm: hint: another process holds the control port (any user of the "
                     "node can bind it); rank 0's launcher reports why it could not listen "
                     "there\n") != std::string::npos);
    CHECK(impostor.connections() >= 1);
    CHECK(r.out.empty());
}
