// SPDX-License-Identifier: MIT
// The coordinator server over real loopback sockets: a connection flood, quoted peers, its
// fallback ports and the tree's leaders. Its pure admission and noise rules:
// test_connection_limits.cpp.
#include "log_capture.hpp"
#include "private_munged.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/snapshot.hpp>
#include <tfslurm/shell/coordinator_server.hpp>
#include <tfslurm/shell/watch_client.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

/// What a test launcher knows of its connection, by descriptor (connect_to() starts one): its
/// handshake so far and, from its welcome on, its channel. receive() and send_frame() act as a
/// launcher does: every frame after the welcome is sealed and checked, with the session keys of
/// the secret "c" x 64 (LiveServer's).
struct Link {
    std::uint16_t port = 0;
    std::string challenge;
    std::optional<protocol::Hello> hello;
    bool welcomed = false;
    std::optional<protocol::Channel> channel;
};

std::map<int, Link>& links() {
    static std::map<int, Link> all;
    return all;
}

/// The channel of `fd` once it was welcomed (made at first use: a MUNGE test that stops at the
/// welcome checks the welcome's credential itself, which munged decodes only once).
protocol::Channel* channel_of(int fd) {
    Link& link = links()[fd];
    if (!link.welcomed) {
        return nullptr;
    }
    if (!link.channel) {
        REQUIRE(link.hello);
        REQUIRE(link.hello->auth == protocol::AuthMethod::secret);
        const auto secret = protocol::Authenticator::create(
            {protocol::AuthMethod::secret, std::string(64, 'c'), "/nonexistent/munge.socket"});
        link.channel.emplace(
            secret.session_keys(protocol::AuthMethod::secret,
                                {},
                                {},
                                link.challenge,
                                link.hello->nonce,
                                protocol::StepId{link.hello->job, link.hello->step},
                                link.hello->rank,
                                protocol::tcp_endpoint(link.port)),
            protocol::End::launcher);
    }
    return &*link.channel;
}

int connect_to(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    links()[fd] = Link{port, {}, {}, false, {}};
    return fd;
}

/// The next frame on `fd` within 5 s (opened with its channel after the welcome).
std::optional<protocol::Message> receive(int fd, protocol::FrameDecoder& decoder) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
        if (auto payload = decoder.next()) {
            if (auto* channel = channel_of(fd)) {
                payload = channel->open(std::move(*payload));
            }
            auto message = protocol::decode_payload(*payload);
            Link& link = links()[fd];
            if (const auto* challenge = std::get_if<protocol::Challenge>(&message)) {
                link.challenge = challenge->nonce;
            } else if (std::holds_alternative<protocol::Welcome>(message) && link.hello) {
                link.welcomed = true;
                decoder.set_limit(protocol::k_max_trusted_frame + protocol::k_tag_size);
            }
            return message;
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) {
            continue;
        }
        std::array<char, 4096> buffer{};
        const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
        if (n <= 0) {
            return std::nullopt;
        }
        decoder.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    }
    return std::nullopt;
}

/// Write `bytes` as they are.
void send_raw(int fd, const std::string& bytes) {
    REQUIRE(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
            static_cast<ssize_t>(bytes.size()));
}

/// Write `frame` (encode_frame()'s): sealed after the welcome, as a launcher does; a hello is
/// remembered for the session keys.
void send_frame(int fd, const std::string& frame) {
    const std::string payload = frame.substr(protocol::k_header_size);
    if (auto* channel = channel_of(fd)) {
        send_raw(fd, channel->seal(payload, protocol::k_max_relay_frame));
        return;
    }
    try {
        auto message = protocol::decode_payload(payload);
        if (const auto* hello = std::get_if<protocol::Hello>(&message)) {
            links()[fd].hello = *hello;
        }
    } catch (const Error&) {
        // not a message: sent as it is
    }
    send_raw(fd, frame);
}

/// A coordinator server of job 7, step 0, on a free port of 127.0.0.1 with the secret "c" x 64,
/// run by a thread of its own until stop() or the object's end.
class LiveServer {
  public:
    explicit LiveServer(const CoordinatorSettings& settings)
        : LiveServer(settings,
                     protocol::Authenticator::create({protocol::AuthMethod::secret,
                                                      std::string(64, 'c'),
                                                      "/nonexistent/munge.socket"})) {}
    /// The same with `auth` (a munged's, say).
    LiveServer(const CoordinatorSettings& settings, protocol::Authenticator auth)
        : m_auth(std::move(auth)),
          m_server(m_io, settings, m_auth, protocol::StepId{7, 0}, "127.0.0.1", 0),
          m_runner([this] { m_io.run(); }) {}
    ~LiveServer() { stop(); }
    LiveServer(const LiveServer&) = delete;
    LiveServer& operator=(const LiveServer&) = delete;
    LiveServer(LiveServer&&) = delete;
    LiveServer& operator=(LiveServer&&) = delete;

    /// Run `last` in the server's thread (when given), close the server and wait for the thread.
    void stop(const std::function<void(CoordinatorServer&)>& last = {}) {
        if (!m_runner.joinable()) {
            return;
        }
        boost::asio::post(m_io, [&] {
            if (last) {
                last(m_server);
            }
            m_server.close();
            m_io.stop();
        });
        m_runner.join();
    }

    [[nodiscard]] std::uint16_t port() const { return m_server.port(); }
    [[nodiscard]] const protocol::Authenticator& auth() const noexcept { return m_auth; }
    [[nodiscard]] CoordinatorServer& server() noexcept { return m_server; }

  private:
    boost::asio::io_context m_io;
    protocol::Authenticator m_auth;
    CoordinatorServer m_server;
    std::thread m_runner;
};

} // namespace

TEST_CASE("coordinator_server: a connection flood does not lock out a late launcher",
          "[coordinator_server]") {
    // Capture the library's log lines to count the warnings.
    const test::LogCapture log(spdlog::level::warn);

    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "localhost"}};
    s.hello_timeout = 60s; // idle intruders are not timed out: only the pool can make room
    LiveServer live(s);
    const std::uint16_t port = live.port();

    // 1,100 idle connections from this address: more than the 256 one peer may hold, and more
    // than the 1,024 + ranks that used to fill every slot and lock the launcher out.
    rlimit files{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
    if (files.rlim_cur < 4096 && files.rlim_max >= 4096) {
        files.rlim_cur = 4096;
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &files) == 0);
    }
    REQUIRE((files.rlim_cur == RLIM_INFINITY || files.rlim_cur >= 2500));
    std::vector<int> flood;
    flood.reserve(1100);
    for (int i = 0; i < 1100; ++i) {
        flood.push_back(connect_to(port));
    }
    // The late launcher connects after the flood and registers.
    const int fd = connect_to(port);
    protocol::FrameDecoder decoder;
    const auto challenge = receive(fd, decoder);
    REQUIRE(challenge);
    protocol::Hello hello;
    hello.job = 7;
    hello.rank = 0;
    hello.role = Role::worker;
    hello.host = "localhost";
    hello.auth = protocol::AuthMethod::secret;
    hello.nonce = std::string(64, 'a');
    hello.credential = live.auth().prove(std::get<protocol::Challenge>(*challenge).nonce,
                                         protocol::StepId{7, 0},
                                         0,
                                         protocol::tcp_endpoint(port));
    send_frame(fd, protocol::encode_frame(hello));
    const auto welcome = receive(fd, decoder);
    REQUIRE(welcome);
    CHECK(std::holds_alternative<protocol::Welcome>(*welcome));

    live.stop();
    ::close(fd);
    for (const int f : flood) {
        ::close(f);
    }

    // 844 connections were closed to make room, but only 10 lines say so.
    const std::string text = log.text();
    std::size_t lines = 0;
    for (std::size_t pos = 0;
         (pos = text.find("too many connections without a hello", pos)) != std::string::npos;
         ++pos) {
        ++lines;
    }
    CHECK(lines == 10);
}

TEST_CASE("coordinator_server: a peer's host name is quoted in the log", "[coordinator_server]") {
    const test::LogCapture log;

    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "localhost"}};
    LiveServer live(s);
    const int fd = connect_to(live.port());
    protocol::FrameDecoder decoder;
    REQUIRE(receive(fd, decoder));
    protocol::Hello hello;
    hello.job = 7;
    hello.host = "n1\ntfslurm: error: aborting: forged\x1b[2J";
    hello.auth = protocol::AuthMethod::secret;
    hello.nonce = std::string(64, 'a');
    hello.credential = std::string(64, '0');
    send_frame(fd, protocol::encode_frame(hello));
    const auto reject = receive(fd, decoder);
    REQUIRE(reject);
    CHECK(std::holds_alternative<protocol::Reject>(*reject));
    live.stop();
    ::close(fd);

    const std::string text = log.text();
    CHECK(text.find(R"(on "n1\ntfslurm: error: aborting: forged\x1b[2J"): bad secret proof)") !=
          std::string::npos);
    CHECK(text.find('\x1b') == std::string::npos);
    CHECK(std::count(text.begin(), text.end(), '\n') == 1);
}

namespace {

/// A loopback listener on a free port; closed with the object.
class HeldPort {
  public:
    HeldPort() : m_fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
        REQUIRE(m_fd >= 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(m_fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
        REQUIRE(::listen(m_fd, 1) == 0);
        socklen_t size = sizeof address;
        REQUIRE(::getsockname(m_fd, reinterpret_cast<sockaddr*>(&address), &size) == 0);
        m_port = ntohs(address.sin_port);
    }
    ~HeldPort() { ::close(m_fd); }
    HeldPort(const HeldPort&) = delete;
    HeldPort& operator=(const HeldPort&) = delete;
    [[nodiscard]] std::uint16_t port() const noexcept { return m_port; }

  private:
    int m_fd;
    std::uint16_t m_port = 0;
};

} // namespace

TEST_CASE("coordinator_server: listens on the first free candidate port, or names them all",
          "[coordinator_server]") {
    const test::LogCapture log;
    const HeldPort first;
    const HeldPort second;
    boost::asio::io_context io;
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "localhost"}};
    const auto auth = protocol::Authenticator::create(
        {protocol::AuthMethod::secret, std::string(64, 'c'), "/nonexistent/munge.socket"});
    {
        CoordinatorServer server(io,
                                 s,
                                 auth,
                                 protocol::StepId{7, 0},
                                 "127.0.0.1",
                                 std::vector<std::uint16_t>{first.port(), 0});
        CHECK(server.port() != first.port());
        CHECK(server.port() != 0);
        CHECK(log.text() == fmt::format("warning: coordinator: cannot listen on 127.0.0.1:{} "
                                        "(Address already in use): listening on fallback "
                                        "port {} (1 of 1)\n",
                                        first.port(),
                                        server.port()));
    }
    try {
        const CoordinatorServer server(io,
                                       s,
                                       auth,
                                       protocol::StepId{7, 0},
                                       "127.0.0.1",
                                       std::vector<std::uint16_t>{first.port(), second.port()});
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::io);
        CHECK(std::string(e.what()) ==
              fmt::format("coordinator: cannot listen on 127.0.0.1:{} (Address already in use) "
                          "nor on its fallback ports {}",
                          first.port(),
                          second.port()));
    }
}

namespace {

/// The hello of worker `rank` of step 7.0 answering `challenge` at 127.0.0.1:`port`, proved by
/// `auth` with its own method (a MUNGE proof carries key material for the session).
protocol::Hello proved_hello(const std::optional<protocol::Message>& challenge,
                             const protocol::Authenticator& auth,
                             std::uint32_t rank,
                             std::uint16_t port) {
    protocol::Hello hello;
    hello.job = 7;
    hello.rank = rank;
    hello.role = Role::worker;
    hello.host = "n";
    hello.auth = auth.method();
    hello.nonce = std::string(64, 'a');
    hello.credential = auth.prove(std::get<protocol::Challenge>(*challenge).nonce,
                                  protocol::StepId{7, 0},
                                  rank,
                                  protocol::tcp_endpoint(port),
                                  hello.auth == protocol::AuthMethod::munge
                                      ? std::string(protocol::k_key_material_size, 'k')
                                      : std::string());
    return hello;
}

/// Connect and register `rank` (a node leader when `relay`); returns the descriptor.
int register_rank(std::uint16_t port,
                  const protocol::Authenticator& auth,
                  std::uint32_t rank,
                  protocol::FrameDecoder& decoder,
                  bool relay,
                  const std::string& address = {}) {
    const int fd = connect_to(port);
    const auto challenge = receive(fd, decoder);
    REQUIRE(challenge);
    protocol::Hello hello = proved_hello(challenge, auth, rank, port);
    hello.address = address;
    hello.relay = relay;
    send_frame(fd, protocol::encode_frame(hello));
    const auto welcome = receive(fd, decoder);
    REQUIRE(welcome);
    REQUIRE(std::holds_alternative<protocol::Welcome>(*welcome));
    return fd;
}

/// Ranks 0-2 on n1 (0 leads), 3 alone on n2 (flat).
CoordinatorSettings node_of_three() {
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "n1"},
               Member{Role::worker, 1, "n1"},
               Member{Role::worker, 2, "n1"},
               Member{Role::worker, 3, "n2"}};
    return s;
}

/// A relayed hello of `rank` (its proof was checked by the leader's relay).
protocol::Relay relayed_hello(std::uint32_t rank) {
    protocol::Hello hello;
    hello.job = 7;
    hello.rank = rank;
    hello.role = Role::worker;
    hello.host = "n";
    hello.auth = protocol::AuthMethod::secret;
    hello.nonce = std::string(64, 'b');
    hello.credential = std::string(64, '0');
    return protocol::Relay{{rank}, protocol::encode_payload(hello), {}};
}

} // namespace

TEST_CASE("coordinator_server: a node leader registers and speaks for its node",
          "[coordinator_server][tree]") {
    LiveServer live(node_of_three());
    const protocol::Authenticator& auth = live.auth();
    CoordinatorServer& server = live.server();
    const auto exit0 = protocol::encode_payload(protocol::Exit{ExitStatus::exited(0), ""});

    protocol::FrameDecoder leader_in;
    const int leader = register_rank(server.port(), auth, 0, leader_in, true);
    SECTION("its node's ranks register through it; a verdict reaches the node once") {
        for (const std::uint32_t rank : {1U, 2U}) {
            send_frame(leader, protocol::encode_frame(relayed_hello(rank)));
            const auto answer = receive(leader, leader_in);
            REQUIRE(answer);
            const auto& relay = std::get<protocol::Relay>(*answer);
            CHECK(relay.ranks == std::vector<std::uint32_t>{rank});
            CHECK(
                std::holds_alternative<protocol::Welcome>(protocol::decode_payload(relay.message)));
        }
        // A relayed heartbeat is answered to that rank, through the leader.
        send_frame(leader,
                   protocol::encode_frame(
                       protocol::Relay{{2}, protocol::encode_payload(protocol::Heartbeat{}), {}}));
        const auto beat = receive(leader, leader_in);
        REQUIRE(beat);
        CHECK(std::get<protocol::Relay>(*beat).ranks == std::vector<std::uint32_t>{2});
        protocol::FrameDecoder alone_in;
        const int alone = register_rank(server.port(), auth, 3, alone_in, false);
        for (const std::uint32_t rank : {1U, 2U}) {
            send_frame(leader, protocol::encode_frame(protocol::Relay{{rank}, exit0, {}}));
        }
        send_frame(leader, protocol::encode_frame(protocol::Exit{ExitStatus::exited(0), ""}));
        send_frame(alone, protocol::encode_frame(protocol::Exit{ExitStatus::exited(0), ""}));
        // The leader's own stop, then one envelope for ranks 1 and 2.
        const auto own = receive(leader, leader_in);
        REQUIRE(own);
        CHECK(std::holds_alternative<protocol::Stop>(*own));
        const auto node = receive(leader, leader_in);
        REQUIRE(node);
        const auto& relay = std::get<protocol::Relay>(*node);
        CHECK(relay.ranks == std::vector<std::uint32_t>{1, 2});
        CHECK(std::holds_alternative<protocol::Stop>(protocol::decode_payload(relay.message)));
        const auto stop = receive(alone, alone_in);
        REQUIRE(stop);
        CHECK(std::holds_alternative<protocol::Stop>(*stop));
        CHECK(server.state().verdict() == Verdict::done);
        ::close(alone);
    }
    SECTION("a relayed launcher's lost connection is that rank's loss") {
        send_frame(leader, protocol::encode_frame(relayed_hello(1)));
        REQUIRE(receive(leader, leader_in));
        send_frame(leader, protocol::encode_frame(protocol::Relay{{1}, {}, "connection closed"}));
        const auto abort = receive(leader, leader_in);
        REQUIRE(abort);
        const auto& failure = std::get<protocol::Abort>(*abort).failure;
        CHECK(failure.rank == 1);
        CHECK(failure.cause == protocol::FailureCause::lost);
        CHECK(protocol::describe(failure) ==
              "rank 1 (worker:1) on n1 launcher lost (connection closed)");
    }
    SECTION("a follower its relay found silent is lost with the relay's reason") {
        send_frame(leader, protocol::encode_frame(relayed_hello(1)));
        REQUIRE(receive(leader, leader_in));
        send_frame(leader,
                   protocol::encode_frame(protocol::Relay{{1}, {}, "no heartbeat for 10 s"}));
        const auto abort = receive(leader, leader_in);
        REQUIRE(abort);
        CHECK(protocol::describe(std::get<protocol::Abort>(*abort).failure) ==
              "rank 1 (worker:1) on n1 launcher lost (no heartbeat for 10 s)");
    }
    SECTION("a leader speaks only for its own node") {
        send_frame(leader, protocol::encode_frame(relayed_hello(3)));
        CHECK_FALSE(receive(leader, leader_in)); // closed: a protocol error
    }
    SECTION("a relayed rank is admitted like any other") {
        auto hello = relayed_hello(1);
        send_frame(leader, protocol::encode_frame(hello));
        REQUIRE(receive(leader, leader_in));
        send_frame(leader, protocol::encode_frame(hello));
        const auto answer = receive(leader, leader_in);
        REQUIRE(answer);
        const auto reject = std::get<protocol::Reject>(
            protocol::decode_payload(std::get<protocol::Relay>(*answer).message));
        CHECK(reject.reason == "rank 1 is already registered");
    }
    SECTION("only a node's lowest rank may lead it") {
        protocol::FrameDecoder in;
        const int fd = connect_to(server.port());
        const auto challenge = receive(fd, in);
        REQUIRE(challenge);
        protocol::Hello hello;
        hello.job = 7;
        hello.rank = 1;
        hello.host = "n";
        hello.auth = protocol::AuthMethod::secret;
        hello.nonce = std::string(64, 'a');
        hello.relay = true;
        hello.credential = auth.prove(std::get<protocol::Challenge>(*challenge).nonce,
                                      protocol::StepId{7, 0},
                                      1,
                                      protocol::tcp_endpoint(server.port()));
        send_frame(fd, protocol::encode_frame(hello));
        const auto answer = receive(fd, in);
        REQUIRE(answer);
        CHECK(std::get<protocol::Reject>(*answer).reason ==
              "rank 1 is not its node's leader (rank 0 is)");
        ::close(fd);
    }
    live.stop();
    ::close(leader);
}

TEST_CASE("coordinator_server: with the tree, a routed rank registers only through its leader",
          "[coordinator_server][tree]") {
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "n1"}, Member{Role::worker, 1, "n1"}};
    s.ports = {23000, 23001};
    s.tree = true;
    LiveServer live(s);
    const protocol::Authenticator& auth = live.auth();
    protocol::FrameDecoder leader_in;
    const int leader = register_rank(live.port(), auth, 0, leader_in, true, "10.0.0.1");

    // Rank 1's hello straight to the control port, properly proved: the plan routes rank 1
    // through rank 0's relay, so this is not its launcher (or one that went astray).
    protocol::FrameDecoder direct_in;
    const int direct = connect_to(live.port());
    const auto challenge = receive(direct, direct_in);
    REQUIRE(challenge);
    protocol::Hello hello = proved_hello(challenge, auth, 1, live.port());
    hello.address = "10.0.0.1";
    send_frame(direct, protocol::encode_frame(hello));
    const auto answer = receive(direct, direct_in);
    REQUIRE(answer);
    CHECK(std::get<protocol::Reject>(*answer).reason ==
          "rank 1 registers through its node leader's relay (rank 0), not directly");
    ::close(direct);

    // Through its leader it registers, and the port it bound (exact mode) reaches `cluster`.
    auto relayed = relayed_hello(1);
    auto inner = std::get<protocol::Hello>(protocol::decode_payload(relayed.message));
    inner.address = "10.0.0.1";
    inner.port = 23009;
    relayed.message = protocol::encode_payload(inner);
    send_frame(leader, protocol::encode_frame(relayed));
    const auto welcome = receive(leader, leader_in);
    REQUIRE(welcome);
    CHECK(std::holds_alternative<protocol::Welcome>(
        protocol::decode_payload(std::get<protocol::Relay>(*welcome).message)));
    const auto own = receive(leader, leader_in);
    REQUIRE(own);
    CHECK(std::get<protocol::Cluster>(*own).ports == std::vector<std::uint16_t>{0, 23009});
    const auto node = receive(leader, leader_in);
    REQUIRE(node);
    const auto cluster = protocol::decode_payload(std::get<protocol::Relay>(*node).message);
    CHECK(std::get<protocol::Cluster>(cluster).ports == std::vector<std::uint16_t>{0, 23009});
    live.stop();
    ::close(leader);
}

TEST_CASE("coordinator_server: a stopped munged holds up no registered rank's heartbeat",
          "[coordinator_server][munge]") {
    const test::PrivateMunged& munged = test::private_munged();
    if (!munged.running()) {
        WARN("needs root and munged (a private one): not run");
        return;
    }
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "n1"}, Member{Role::worker, 1, "n2"}};
    // The coordinator accepts both: rank 0 proves itself with the secret, rank 1 with MUNGE.
    LiveServer live(s,
                    protocol::Authenticator::create(
                        {protocol::AuthMethod::automatic, std::string(64, 'c'), munged.socket()}));
    const auto secret = protocol::Authenticator::create(
        {protocol::AuthMethod::secret, std::string(64, 'c'), "/nonexistent/munge.socket"});
    const auto munge =
        protocol::Authenticator::create({protocol::AuthMethod::munge, {}, munged.socket()});
    protocol::FrameDecoder zero_in;
    const int zero = register_rank(live.port(), secret, 0, zero_in, false);

    protocol::FrameDecoder one_in;
    const int one = connect_to(live.port());
    const auto challenge = receive(one, one_in);
    REQUIRE(challenge);
    const protocol::Hello hello = proved_hello(challenge, munge, 1, live.port());

    // munged stops answering: rank 1's hello waits for it, rank 0's heartbeats do not.
    struct Continue {
        pid_t pid;
        ~Continue() { ::kill(pid, SIGCONT); }
    } const resume{munged.pid()};
    REQUIRE(::kill(munged.pid(), SIGSTOP) == 0);
    send_frame(one, protocol::encode_frame(hello));
    for (int beat = 0; beat < 3; ++beat) {
        send_frame(zero, protocol::encode_frame(protocol::Heartbeat{}));
        const auto answer = receive(zero, zero_in);
        REQUIRE(answer);
        CHECK(std::holds_alternative<protocol::Heartbeat>(*answer));
    }
    pollfd waiting{one, POLLIN, 0};
    CHECK(::poll(&waiting, 1, 0) == 0); // rank 1 has no answer yet: munged has not answered

    REQUIRE(::kill(munged.pid(), SIGCONT) == 0);
    const auto welcome = receive(one, one_in);
    REQUIRE(welcome);
    CHECK(std::holds_alternative<protocol::Welcome>(*welcome));
    CHECK_FALSE(munge.verify_coordinator(std::get<protocol::Welcome>(*welcome).credential,
                                         hello.nonce,
                                         protocol::StepId{7, 0},
                                         1,
                                         protocol::tcp_endpoint(live.port())));
    live.stop();
    ::close(zero);
    ::close(one);
}

TEST_CASE("coordinator_server: a node leader's heartbeat stands for its followers",
          "[coordinator_server][tree]") {
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "n1"}, Member{Role::worker, 1, "n1"}};
    s.run.heartbeat_timeout = 400ms;
    LiveServer live(s);
    const protocol::Authenticator& auth = live.auth();
    CoordinatorServer& server = live.server();
    protocol::FrameDecoder leader_in;
    const int leader = register_rank(server.port(), auth, 0, leader_in, true);
    send_frame(leader, protocol::encode_frame(relayed_hello(1)));
    REQUIRE(receive(leader, leader_in));
    // Rank 1 sends nothing for three heartbeat timeouts; only its leader heartbeats, and only
    // the leader is answered (its relay passes the answer on).
    for (int i = 0; i < 12; ++i) {
        std::this_thread::sleep_for(100ms);
        send_frame(leader, protocol::encode_frame(protocol::Heartbeat{}));
        const auto answer = receive(leader, leader_in);
        REQUIRE(answer);
        REQUIRE(std::holds_alternative<protocol::Heartbeat>(*answer));
    }
    live.stop([](CoordinatorServer& in_its_thread) {
        CHECK(in_its_thread.state().verdict() == Verdict::none);
    });
    ::close(leader);
}

TEST_CASE("coordinator_server: a leader's heartbeat carries the phases of the ranks it relays only",
          "[coordinator_server][tree][startup]") {
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "n1"},
               Member{Role::worker, 1, "n1"},
               Member{Role::worker, 2, "n2"}};
    LiveServer live(s);
    const protocol::Authenticator& auth = live.auth();
    CoordinatorServer& server = live.server();
    protocol::FrameDecoder leader_in;
    const int leader = register_rank(server.port(), auth, 0, leader_in, true);
    send_frame(leader, protocol::encode_frame(relayed_hello(1)));
    REQUIRE(receive(leader, leader_in));
    protocol::FrameDecoder other_in;
    const int other = register_rank(server.port(), auth, 2, other_in, false);
    StartupTimes phases;
    phases[StartupPhase::task] = WallClock::time_point{} + 1'796'047'358'000ms;
    phases[StartupPhase::up] = WallClock::time_point{} + 1'796'047'358'040ms;
    // Its own, its follower's, and rank 2's, which another connection carries: not believed.
    protocol::Heartbeat beat;
    beat.startup = phases;
    beat.startups = {{1, phases}, {2, phases}};
    send_frame(leader, protocol::encode_frame(beat));
    const auto answer = receive(leader, leader_in);
    REQUIRE(answer);
    REQUIRE(std::holds_alternative<protocol::Heartbeat>(*answer));
    live.stop([&phases](CoordinatorServer& in_its_thread) {
        CHECK(in_its_thread.state().startup(0) == phases);
        CHECK(in_its_thread.state().startup(1) == phases);
        CHECK(in_its_thread.state().startup(2).empty());
        CHECK(in_its_thread.state().startup_summary().reported == 2);
    });
    ::close(leader);
    ::close(other);
}

TEST_CASE("coordinator_server: a cluster larger than a frame reaches proven launchers",
          "[coordinator_server][tree]") {
    CoordinatorSettings s;
    // Long node names (250 characters): 300 nodes make a `cluster` of more than 64 KiB.
    constexpr std::uint32_t k_nodes = 300;
    for (std::uint32_t rank = 0; rank < k_nodes; ++rank) {
        s.ranks.push_back(Member{Role::worker, rank, fmt::format("{:0>250}", rank)});
    }
    LiveServer live(s);
    const protocol::Authenticator& auth = live.auth();
    CoordinatorServer& server = live.server();
    std::vector<int> fds;
    std::vector<protocol::FrameDecoder> in(k_nodes);
    for (std::uint32_t rank = 0; rank < k_nodes; ++rank) {
        fds.push_back(register_rank(server.port(),
                                    auth,
                                    rank,
                                    in[rank],
                                    false,
                                    fmt::format("10.0.{}.{}", rank / 256, rank % 256)));
    }
    for (const std::uint32_t rank : {0U, k_nodes - 1}) {
        const auto cluster = receive(fds[rank], in[rank]);
        CHECK(in[rank].partial() == false);
        CHECK((cluster && std::get<protocol::Cluster>(*cluster).addresses.size() == k_nodes));
    }
    protocol::Cluster expected;
    for (std::uint32_t rank = 0; rank < k_nodes; ++rank) {
        expected.addresses.emplace(s.ranks[rank].host,
                                   fmt::format("10.0.{}.{}", rank / 256, rank % 256));
    }
    CHECK(protocol::encode_payload(expected).size() > protocol::k_max_frame);
    live.stop();
    for (const int fd : fds) {
        ::close(fd);
    }
}

namespace {

/// `127.0.0.1:<port>`: how the coordinator names the peer at the other end of `fd`.
std::string peer_name(int fd) {
    sockaddr_in local{};
    socklen_t size = sizeof local;
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &size) == 0);
    return fmt::format("127.0.0.1:{}", ntohs(local.sin_port));
}

/// Whether the coordinator closed `fd` within 5 s, having sent nothing more.
bool closed_by_coordinator(int fd, protocol::FrameDecoder& decoder) {
    return !receive(fd, decoder);
}

} // namespace

TEST_CASE("coordinator_server: a frame that fails its MAC ends its connection, with one line",
          "[coordinator_server][channel]") {
    const test::LogCapture log(spdlog::level::warn);
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "n1"}, Member{Role::worker, 1, "n2"}};
    LiveServer live(s);
    protocol::FrameDecoder in;
    const int fd = register_rank(live.port(), live.auth(), 0, in, false);
    const std::string peer = peer_name(fd);
    protocol::Channel& channel = *channel_of(fd);
    const std::string heartbeat = protocol::encode_payload(protocol::Heartbeat{});
    const std::string exit0 = protocol::encode_payload(protocol::Exit{ExitStatus::exited(0), {}});
    const auto refused = [&](std::uint64_t frame) {
        return fmt::format("warning: coordinator: closing connection from {} (rank 0): protocol: "
                           "frame {} fails its MAC (tampered, replayed, reordered or cut short)\n",
                           peer,
                           frame);
    };
    std::string expected;

    SECTION("tampered: one bit of the payload flipped") {
        std::string frame = channel.seal(exit0, protocol::k_max_frame);
        frame[protocol::k_header_size + 20] ^= 0x01;
        send_raw(fd, frame);
        expected = refused(0);
    }
    SECTION("replayed: a frame that passed, sent again") {
        const std::string frame = channel.seal(heartbeat, protocol::k_max_frame);
        send_raw(fd, frame);
        const auto answer = receive(fd, in);
        REQUIRE(answer);
        CHECK(std::holds_alternative<protocol::Heartbeat>(*answer));
        send_raw(fd, frame);
        expected = refused(1);
    }
    SECTION("reordered: the second frame first") {
        const std::string first = channel.seal(heartbeat, protocol::k_max_frame);
        const std::string second = channel.seal(exit0, protocol::k_max_frame);
        send_raw(fd, second + first);
        expected = refused(0);
    }
    SECTION("cut short: the payload's last byte dropped, the length fixed") {
        std::string frame = channel.seal(exit0, protocol::k_max_frame);
        frame.erase(protocol::k_header_size + exit0.size() - 1, 1);
        frame[protocol::k_header_size - 1] = static_cast<char>(frame[3] - 1);
        send_raw(fd, frame);
        expected = refused(0);
    }
    SECTION("unauthenticated: a frame without a tag") {
        send_raw(fd, protocol::encode_frame(protocol::Exit{ExitStatus::exited(0), {}}));
        expected = refused(0);
    }
    SECTION("shorter than a tag") {
        send_raw(fd, protocol::frame_payload("{}"));
        expected = fmt::format("warning: coordinator: closing connection from {} (rank 0): "
                               "protocol: frame 0 of 2 bytes is shorter than its 32-byte MAC\n",
                               peer);
    }
    CHECK(closed_by_coordinator(fd, in));
    live.stop([](CoordinatorServer& in_its_thread) {
        // The forged `exit 0` never counted: rank 0 is lost, not done.
        CHECK(in_its_thread.state().verdict() != Verdict::done);
    });
    // One line for the frame, first; what losing rank 0 does to the step comes after it.
    CHECK_THAT(log.text(), Catch::StartsWith(expected));
    ::close(fd);
}

namespace {

/// Write `payloads` in one sealed frame, as a launcher's Outbox makes it (a batch from two on).
void send_batch(int fd, const std::vector<std::string>& payloads) {
    protocol::Outbox outbox;
    for (const std::string& payload : payloads) {
        outbox.push(payload, false, protocol::k_max_relay_frame);
    }
    send_raw(fd, outbox.take(*channel_of(fd)).bytes);
    REQUIRE(outbox.empty());
}

} // namespace

TEST_CASE("coordinator_server: a batch is handled message by message, as if each came alone",
          "[coordinator_server][tree]") {
    const test::LogCapture log(spdlog::level::warn);
    LiveServer live(node_of_three());
    CoordinatorServer& server = live.server();
    const auto exit0 = protocol::encode_payload(protocol::Exit{ExitStatus::exited(0), ""});
    protocol::FrameDecoder leader_in;
    const int leader = register_rank(server.port(), live.auth(), 0, leader_in, true);
    const std::string peer = peer_name(leader);
    send_batch(
        leader,
        {protocol::encode_payload(relayed_hello(1)), protocol::encode_payload(relayed_hello(2))});
    // Both welcomed in one envelope: the batch came in one read.
    const auto welcome = receive(leader, leader_in);
    REQUIRE(welcome);
    CHECK(std::get<protocol::Relay>(*welcome).ranks == std::vector<std::uint32_t>{1, 2});

    SECTION("the node's exits in one batch end the node") {
        send_batch(leader,
                   {protocol::encode_payload(protocol::Relay{{1}, exit0, {}}),
                    protocol::encode_payload(protocol::Relay{{2}, exit0, {}}),
                    exit0});
        protocol::FrameDecoder alone_in;
        const int alone = register_rank(server.port(), live.auth(), 3, alone_in, false);
        send_frame(alone, protocol::encode_frame(protocol::Exit{ExitStatus::exited(0), ""}));
        const auto own = receive(leader, leader_in);
        REQUIRE(own);
        CHECK(std::holds_alternative<protocol::Stop>(*own));
        const auto node = receive(leader, leader_in);
        REQUIRE(node);
        CHECK(std::get<protocol::Relay>(*node).ranks == std::vector<std::uint32_t>{1, 2});
        live.stop([](CoordinatorServer& in_its_thread) {
            CHECK(in_its_thread.state().verdict() == Verdict::done);
        });
        CHECK(log.text().empty());
        ::close(alone);
    }
    SECTION("a protocol error in a batch ends the connection there; what came before counts") {
        // Rank 1's exit counts; the relay for rank 3 (another node's) closes the connection, so
        // the exit after it is never read.
        send_batch(leader,
                   {protocol::encode_payload(protocol::Relay{{1}, exit0, {}}),
                    protocol::encode_payload(protocol::Relay{{3}, exit0, {}}),
                    protocol::encode_payload(protocol::Relay{{2}, exit0, {}})});
        CHECK(closed_by_coordinator(leader, leader_in));
        live.stop([](CoordinatorServer& in_its_thread) {
            const Coordinator& state = in_its_thread.state();
            CHECK(state.verdict() != Verdict::done);
            CHECK(state.rank_view(1, Clock::now()).activity == RankActivity::exited);
            CHECK(state.rank_view(2, Clock::now()).activity == RankActivity::lost);
        });
        CHECK_THAT(log.text(),
                   Catch::StartsWith(fmt::format(
                       "warning: coordinator: closing connection from {} (rank 0): protocol: "
                       "relay for rank 3 of another node from rank 0\n",
                       peer)));
    }
    SECTION("a batch of one is refused, quoted") {
        const std::string beat = protocol::encode_payload(protocol::Heartbeat{});
        protocol::Channel& channel = *channel_of(leader);
        send_raw(leader, channel.seal("[" + beat + "]", protocol::k_max_frame));
        CHECK(closed_by_coordinator(leader, leader_in));
        live.stop();
        CHECK_THAT(log.text(),
                   Catch::StartsWith(fmt::format(
                       "warning: coordinator: closing connection from {} (rank 0): protocol: a "
                       "batch of 1 message (expected 2 or more): "
                       "\"[{{\\\"type\\\":\\\"heartbeat\\\",\\\"v\\\":7}}]\"\n",
                       peer)));
    }
    SECTION("before the welcome, unsealed, a batch is no hello: refused, nothing registered") {
        protocol::FrameDecoder in;
        const int fd = connect_to(server.port());
        const auto challenge = receive(fd, in);
        REQUIRE(challenge);
        const std::string hello =
            protocol::encode_payload(proved_hello(challenge, live.auth(), 3, server.port()));
        send_raw(fd, protocol::frame_payload("[" + hello + "," + hello + "]"));
        CHECK(closed_by_coordinator(fd, in));
        live.stop([](CoordinatorServer& in_its_thread) {
            CHECK(in_its_thread.state().registered_count() == 3); // the leader's node only
        });
        CHECK_THAT(log.text(),
                   Catch::Contains(fmt::format("warning: coordinator: closing connection from {}: "
                                               "protocol: not a JSON object: \"[{{",
                                               peer_name(fd))));
        ::close(fd);
    }
    ::close(leader);
}

namespace {

/// The next payload on a watcher's raw connection `fd`, opened with its channel, within 5 s;
/// empty when the coordinator closed it.
std::string watcher_payload(int fd, protocol::FrameDecoder& decoder) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (std::chrono::steady_clock::now() < deadline) {
        if (auto frame = decoder.next()) {
            return channel_of(fd)->open(std::move(*frame));
        }
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) {
            continue;
        }
        std::array<char, 4096> buffer{};
        const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
        if (n <= 0) {
            return {};
        }
        decoder.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    }
    return {};
}

} // namespace

TEST_CASE("coordinator_server: a watcher sees every rank and changes nothing",
          "[coordinator_server][watch]") {
    CoordinatorSettings s;
    s.ranks = {Member{Role::worker, 0, "n1"}, Member{Role::ps, 0, "n2"}};
    s.run_id = "c-7-0";
    LiveServer live(s);
    protocol::FrameDecoder in;
    const int rank0 = register_rank(live.port(), live.auth(), 0, in, false);
    const WatchTarget target{"n1", "127.0.0.1", live.port(), protocol::StepId{7, 0}};

    SECTION("a snapshot at once, then one a second") {
        WatchClient client(target, live.auth(), 5s);
        const auto first = client.next(5s);
        REQUIRE(first);
        CHECK(first->job == 7);
        CHECK(first->run_id == "c-7-0");
        CHECK(first->nodes == 2);
        CHECK(first->verdict == Verdict::none);
        REQUIRE(first->ranks.size() == 2);
        CHECK(first->ranks[1].role == Role::ps);
        CHECK(first->ranks[0].host == "n1");
        CHECK(first->ranks[0].activity == RankActivity::running);
        CHECK(first->ranks[1].activity == RankActivity::waiting);
        const auto second = client.next(5s);
        REQUIRE(second);
        CHECK(second->elapsed >= first->elapsed);
    }
    SECTION("another step's coordinator refuses, naming both") {
        const WatchTarget other{"n1", "127.0.0.1", live.port(), protocol::StepId{7, 1}};
        REQUIRE_THROWS_WITH(WatchClient(other, live.auth(), 5s),
                            "top: step 7.1's coordinator refused this watcher: \"wrong step 7.1 "
                            "(this is step 7.0)\"");
    }
    SECTION("a watcher without the step's secret is refused") {
        const auto stranger = protocol::Authenticator::create(
            {protocol::AuthMethod::secret, std::string(64, 'd'), "/nonexistent/munge.socket"});
        REQUIRE_THROWS_WITH(WatchClient(target, stranger, 5s),
                            "top: step 7.0's coordinator refused this watcher: \"bad secret "
                            "proof\"");
    }
    SECTION("nothing a watcher sends reaches the coordinator: its connection ends") {
        const int fd = connect_to(live.port());
        protocol::FrameDecoder watcher_in;
        const auto challenge = receive(fd, watcher_in);
        REQUIRE(challenge);
        protocol::Hello hello =
            proved_hello(challenge, live.auth(), protocol::k_watcher_rank, live.port());
        hello.watch = true;
        send_frame(fd, protocol::encode_frame(hello));
        const auto welcome = receive(fd, watcher_in);
        REQUIRE(welcome);
        REQUIRE(std::holds_alternative<protocol::Welcome>(*welcome));
        const std::string snapshot = watcher_payload(fd, watcher_in);
        REQUIRE(is_snapshot_payload(snapshot));
        CHECK(decode_snapshot(snapshot).ranks.size() == 2);
        // A watcher's `exit`, `stall` and `interrupt` would end the step from a launcher.
        send_frame(fd, protocol::encode_frame(protocol::Stall{300000}));
        CHECK(watcher_payload(fd, watcher_in).empty()); // closed, nothing more sent
        ::close(fd);
        live.stop([](CoordinatorServer& in_its_thread) {
            CHECK(in_its_thread.state().verdict() == Verdict::none);
        });
    }
    SECTION("at most 16 watchers at once") {
        std::vector<std::unique_ptr<WatchClient>> watchers;
        watchers.reserve(16);
        for (int i = 0; i < 16; ++i) {
            watchers.push_back(std::make_unique<WatchClient>(target, live.auth(), 5s));
        }
        REQUIRE_THROWS_WITH(
            WatchClient(target, live.auth(), 5s),
            "top: step 7.0's coordinator refused this watcher: \"too many watchers (16 at once)\"");
        watchers.pop_back();
        // The one that left makes room (its end reaches the server first).
        std::this_thread::sleep_for(200ms);
        CHECK_NOTHROW(WatchClient(target, live.auth(), 5s));
    }
    ::close(rank0);
}

TEST_CASE("coordinator_server: a watcher believes no process that cannot prove it is the "
          "coordinator",
          "[coordinator_server][watch]") {
    // Another user's process on a port a stale endpoint names: it speaks the protocol (a
    // challenge, then a welcome) but cannot make the coordinator's proof.
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(listener, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    socklen_t size = sizeof address;
    REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) == 0);
    const std::uint16_t port = ntohs(address.sin_port);
    std::thread impostor([listener] {
        const int fd = ::accept(listener, nullptr, nullptr);
        if (fd < 0) {
            return;
        }
        const std::string challenge =
            protocol::encode_frame(protocol::Challenge{std::string(64, 'b')});
        (void)::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL);
        protocol::FrameDecoder in;
        std::array<char, 4096> buffer{};
        while (!in.next()) { // the watcher's hello
            const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
            if (n <= 0) {
                break;
            }
            in.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
        }
        const std::string welcome =
            protocol::encode_frame(protocol::Welcome{2, std::string(64, '0')});
        (void)::send(fd, welcome.data(), welcome.size(), MSG_NOSIGNAL);
        ::shutdown(fd, SHUT_WR);
        while (::recv(fd, buffer.data(), buffer.size(), 0) > 0) {
        }
        ::close(fd);
    });
    const auto auth = protocol::Authenticator::create(
        {protocol::AuthMethod::secret, std::string(64, 'c'), "/nonexistent/munge.socket"});
    const WatchTarget target{"n1", "127.0.0.1", port, protocol::StepId{7, 0}};
    REQUIRE_THROWS_WITH(WatchClient(target, auth, 5s),
                        fmt::format("top: the process at n1 (127.0.0.1:{}) is not step 7.0's "
                                    "coordinator: bad secret proof",
                                    port));
    impostor.join();
    ::close(listener);
}
