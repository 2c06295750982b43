// SPDX-License-Identifier: MIT
// Nobody gets in, in either direction: a process that holds the control port first cannot pass
// for the coordinator; rank 0's coordinator listens on a fallback candidate, where every
// launcher finds it.
#include "cli_runner.hpp"

#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

using tfslurm::test::Result;
using tfslurm::test::tfslurm_cli;
namespace protocol = tfslurm::protocol;

namespace {

/// Each test its own job id (--local's own, the parent's pid, is any number). The impostor
/// holds the control port, so every launcher falls back to the job's fallback control ports
/// (control_port_candidates()); two tests that ctest runs at once must not share one, or a
/// rank reaches the other test's coordinator, which rightly rejects it with a warning. These
/// ids have pairwise disjoint fallback ports.
std::string impostor_job_id(std::size_t test) {
    static const std::vector<std::uint64_t> k_ids = [] {
        std::vector<std::uint64_t> ids;
        std::vector<std::uint16_t> used;
        for (std::uint64_t id = 990000; ids.size() < 8 && id < 991000; ++id) {
            tfslurm::Plan plan;
            plan.job_id = id;
            plan.step_id = 0;
            auto candidates = tfslurm::control_port_candidates(plan);
            candidates.erase(candidates.begin()); // the plan's own control port
            if (std::none_of(candidates.begin(), candidates.end(), [&](std::uint16_t port) {
                    return std::find(used.begin(), used.end(), port) != used.end();
                })) {
                used.insert(used.end(), candidates.begin(), candidates.end());
                ids.push_back(id);
            }
        }
        return ids;
    }();
    return std::to_string(k_ids.at(test));
}

/// Whether a trainer could listen on `port` (as the launcher checks it: any address).
bool bindable(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    const bool ok = ::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return ok;
}

/// A listening socket on 127.0.0.1 whose three ports below are free: the tests put the
/// trainers' ports there. The port is drawn from 10000-19999, below the derived ports
/// (20000-31999), the fallback control ports (32000-32767) and the kernel's ephemeral range
/// (32768 and up): the outgoing connections of tests running alongside cannot take one of the
/// four between this check and the launchers' binds. Returns the socket; `port` is its port.
int listen_below_free_ports(int& port) {
    std::mt19937 random(std::random_device{}());
    std::uniform_int_distribution<int> pick(10003, 19999);
    for (int attempt = 0; attempt < 1000; ++attempt) {
        port = pick(random);
        if (!bindable(port - 1) || !bindable(port - 2) || !bindable(port - 3)) {
            continue;
        }
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(static_cast<std::uint16_t>(port));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0 &&
            ::listen(fd, 16) == 0) {
            return fd;
        }
        ::close(fd);
    }
    FAIL("no free port with three free ports below it in 10000-19999");
    return -1;
}

/// What a process holding the control port answers to a launcher's connection.
enum class Answer {
    bad_proof,   ///< a challenge, then a welcome whose credential proves nothing, then a stop
    old_version, ///< a challenge of protocol version 3 (a coordinator of an older tfslurm)
    garbage,     ///< a greeting of another protocol (an SSH server's banner)
    reject,      ///< a challenge, then a `refused` reject (a squatter's word, unproven)
    early_stop,  ///< a `stop` instead of a challenge
    bad_frame,   ///< a challenge, then a frame that is not JSON
};

/// A fake coordinator on 127.0.0.1 (any free port): it answers every connection as `answer`
/// says.
class Impostor {
  public:
    explicit Impostor(Answer answer = Answer::bad_proof) : m_answer(answer) {
        m_fd = listen_below_free_ports(m_port);
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
            answer(client);
        }
    }
    void answer(int client) const {
        const std::string challenge =
            protocol::encode_frame(protocol::Challenge{std::string(64, 'a')});
        switch (m_answer) {
        case Answer::old_version:
            send_raw(
                client,
                frame(R"({"nonce":")" + std::string(64, 'a') + R"(","type":"challenge","v":3})"));
            return;
        case Answer::garbage:
            send_raw(client, "SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n");
            return;
        case Answer::early_stop:
            send_raw(client,
                     protocol::encode_frame(protocol::Stop{protocol::StopReason::done, 0, 0}));
            return;
        default:
            break;
        }
        send_raw(client, challenge);
        pollfd q{client, POLLIN, 0};
        if (::poll(&q, 1, 5000) > 0) {
            std::array<char, 4096> hello{};
            [[maybe_unused]] const auto n = ::recv(client, hello.data(), hello.size(), 0);
        }
        if (m_answer == Answer::reject) {
            send_raw(
                client,
                protocol::encode_frame(protocol::Reject{protocol::RejectCode::refused, "go away"}));
        } else if (m_answer == Answer::bad_frame) {
            send_raw(client, frame("not json"));
        } else {
            send_raw(client, protocol::encode_frame(protocol::Welcome{2, std::string(64, '0')}));
            // Never believed.
            send_raw(client,
                     protocol::encode_frame(protocol::Stop{protocol::StopReason::done, 0, 0}));
        }
    }
    /// A frame around any payload: its 4-byte big-endian length, then the payload.
    static std::string frame(const std::string& payload) {
        const auto size = static_cast<std::uint32_t>(payload.size());
        std::string out;
        out.push_back(static_cast<char>((size >> 24U) & 0xffU));
        out.push_back(static_cast<char>((size >> 16U) & 0xffU));
        out.push_back(static_cast<char>((size >> 8U) & 0xffU));
        out.push_back(static_cast<char>(size & 0xffU));
        return out + payload;
    }
    static void send_raw(int fd, const std::string& bytes) {
        [[maybe_unused]] const auto n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    }

    Answer m_answer;
    int m_fd = -1;
    int m_port = 0;
    std::atomic<bool> m_stop{false};
    std::atomic<int> m_connections{0};
    std::vector<int> m_clients;
    std::thread m_thread;
};

/// `tfslurm run --local <ntasks> -- true`, as job impostor_job_id(test) with a secret and its
/// ports from `port_base` (the trainers', then the control port).
Result run_true(int ntasks, std::size_t test, int port_base) {
    return tfslurm_cli({"run",
                        "--local",
                        std::to_string(ntasks),
                        "--job-id",
                        impostor_job_id(test),
                        "--auth",
                        "secret",
                        "--port-base",
                        std::to_string(port_base),
                        "--",
                        "true"},
                       {"PATH=/usr/bin:/bin", "TFSLURM_SECRET=" + std::string(64, '5')});
}

} // namespace

TEST_CASE("run: a process holding the control port cannot pass for the coordinator",
          "[run][integration]") {
    Impostor impostor;
    // Two tasks on one node: trainer ports base and base + 1, the control port base + 2.
    const int base = impostor.port() - 2;
    const Result r = run_true(2, 0, base);
    // Rank 0 cannot listen there and takes the next candidate; rank 1 is welcomed by the
    // impostor first, does not believe it (nor its stop), says why and finds the coordinator.
    INFO(r.err);
    CHECK(r.status == 0);
    const std::string control = "127.0.0.1:" + std::to_string(impostor.port());
    CHECK(r.err.find("tfslurm: warning: coordinator: cannot listen on " + control +
                     " (Address already in use): listening on fallback port ") !=
          std::string::npos);
    CHECK(r.err.find("tfslurm: warning: rank 1 (worker:1): " + control +
                     " did not prove that it is job ") != std::string::npos);
    CHECK(r.err.find("'s coordinator: bad secret proof; trying the next control port\n") !=
          std::string::npos);
    CHECK(r.err.find("error") == std::string::npos);
    CHECK(impostor.connections() >= 1);
    CHECK(r.out.empty());
}

TEST_CASE("run: a listener that never answers on the control port does not stop the step",
          "[run][integration]") {
    // A plain listener that never accepts: connections complete in its backlog and stay silent.
    int port = 0;
    const int fd = listen_below_free_ports(port);
    const Result r = run_true(3, 1, port - 3);
    ::close(fd);
    // Rank 0 listens on a fallback (the first, unless something else on the machine holds that
    // port: it is derived from the job id, and may be in the ephemeral range); ranks 1 and 2
    // wait for a challenge on the held port in vain, then try the next candidates and register.
    CHECK(r.status == 0);
    CHECK_THAT(r.err,
               Catch::Matches("tfslurm: warning: coordinator: cannot listen on 127\\.0\\.0\\.1:" +
                              std::to_string(port) +
                              " \\(Address already in use\\): listening on fallback port "
                              "32[0-7][0-9][0-9] \\([1-7] of 7\\)\n"));
    CHECK(r.out.empty());
}

TEST_CASE("run: a process holding the control port that speaks something else does not stop "
          "the step",
          "[run][integration]") {
    // Each answer that is not a coordinator's proof for this job and step sends rank 1 to the
    // next candidate, where rank 0's coordinator listens; none ends the step.
    const auto [answer, why] = GENERATE(table<Answer, std::string>({
        {Answer::old_version,
         R"(protocol: protocol version 3 (this tfslurm speaks version 7): "{\"nonce\":\")" +
             std::string(64, 'a') + R"(\",\"type\":\"challenge\",\"v\":3}")"},
        {Answer::garbage,
         R"(protocol: frame of 1397966893 bytes exceeds the 65536-byte limit: "SSH-")"},
        {Answer::reject, "it rejected rank 1 (worker:1): go away"},
        {Answer::early_stop, "stop before the welcome"},
        {Answer::bad_frame, R"(protocol: not valid JSON: "not json")"},
    }));
    Impostor impostor(answer);
    const int base = impostor.port() - 2;
    const Result r = run_true(2, 2, base);
    INFO(r.err);
    CHECK(r.status == 0);
    const std::string control = "127.0.0.1:" + std::to_string(impostor.port());
    // The job id of --local is the parent's pid: any number.
    CHECK(r.err.find("tfslurm: warning: rank 1 (worker:1): " + control +
                     " did not prove that it is job ") != std::string::npos);
    CHECK(r.err.find("'s coordinator: " + why + "; trying the next control port\n") !=
          std::string::npos);
    CHECK(r.err.find("error") == std::string::npos);
    CHECK(impostor.connections() >= 1);
    CHECK(r.out.empty());
}
