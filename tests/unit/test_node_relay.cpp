// SPDX-License-Identifier: MIT
// The node relay of the tree (src/detail/node_relay.hpp) on its own: the test is both ends, the
// node's followers (Unix-socket clients) and the coordinator (the relay's upstream callback and
// downstream()), all in one io_context.
#include "detail/node_relay.hpp"

#include <tfslurm/auth.hpp>
#include <tfslurm/protocol.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using Unix = asio::local::stream_protocol;

namespace {

const protocol::StepId k_step{4242, 0};

/// Run `io` until `done()` (true) or 5 s have passed (false).
bool run_until(asio::io_context& io, const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!done()) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        io.run_one_for(10ms);
    }
    return true;
}

/// A local launcher: connects to the relay, collects what it is sent, sends frames.
class Follower {
  public:
    Follower(asio::io_context& io, const std::string& path) : m_socket(io) {
        m_socket.connect(Unix::endpoint(path));
        m_decoder.set_limit(protocol::k_max_trusted_frame);
        read();
    }

    void send(const protocol::Message& message) {
        auto frame = std::make_shared<std::string>(protocol::encode_frame(message));
        asio::async_write(m_socket, asio::buffer(*frame), [frame](auto /*ec*/, auto /*n*/) {});
    }

    /// A hello of `rank` answering the relay's challenge (with the right secret or not).
    void hello(const protocol::Authenticator& auth, std::uint32_t rank) {
        const auto& challenge = std::get<protocol::Challenge>(received.at(0));
        protocol::Hello hello;
        hello.job = k_step.job;
        hello.rank = rank;
        hello.role = Role::worker;
        hello.host = "n1";
        hello.pid = ::getpid();
        hello.auth = protocol::AuthMethod::secret;
        hello.nonce = m_nonce;
        hello.credential = auth.prove(challenge.nonce, k_step, rank);
        send(hello);
    }

    void close() { m_socket.close(); }

    std::vector<protocol::Message> received;
    bool eof = false;
    const std::string m_nonce = std::string(64, 'a');

  private:
    void read() {
        m_socket.async_read_some(asio::buffer(m_buffer), [this](auto ec, std::size_t n) {
            if (ec) {
                eof = true;
                return;
            }
            m_decoder.feed(std::string_view(m_buffer.data(), n));
            while (auto payload = m_decoder.next()) {
                received.push_back(protocol::decode_payload(*payload));
            }
            read();
        });
    }

    Unix::socket m_socket;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
};

template <typename T> bool got(const Follower& follower) {
    return !follower.received.empty() && std::holds_alternative<T>(follower.received.back());
}

protocol::Authenticator secret_auth(char digit) {
    return protocol::Authenticator::create(
        {protocol::AuthMethod::secret, std::string(64, digit), "/nonexistent/munge.socket"});
}

} // namespace

TEST_CASE("node relay: followers register, talk and end through the leader's relay",
          "[node_relay]") {
    asio::io_context io;
    const auto auth = secret_auth('c');
    std::vector<protocol::Relay> up; // what the leader sends to the coordinator
    RelaySettings settings;
    settings.step = k_step;
    settings.ranks = {1, 2};
    settings.heartbeat_timeout = 200ms;
    detail::NodeRelay relay(
        io,
        auth,
        settings,
        [&](const protocol::Message& m) { up.push_back(std::get<protocol::Relay>(m)); },
        {});
    const std::string path = detail::relay_path(k_step, 900000 + static_cast<unsigned>(::getpid()));
    relay.listen(path);

    // Rank 1 registers: its hello goes up; the coordinator's welcome comes down, proved.
    Follower one(io, path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(one); }));
    one.hello(auth, 1);
    REQUIRE(run_until(io, [&] { return up.size() == 1; }));
    CHECK(up[0].ranks == std::vector<std::uint32_t>{1});
    CHECK(std::get<protocol::Hello>(protocol::decode_payload(up[0].message)).rank == 1);
    relay.downstream({{1}, protocol::encode_payload(protocol::Welcome{3, {}}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Welcome>(one); }));
    CHECK_FALSE(auth.verify_coordinator(
        std::get<protocol::Welcome>(one.received.back()).credential, one.m_nonce, k_step, 1));

    // Its messages go up unchanged, but not its heartbeats: the leader's stand for the node,
    // and the coordinator's answer to the leader's comes down as pulse().
    one.send(protocol::Heartbeat{});
    one.send(protocol::Exit{ExitStatus::exited(0), {}});
    REQUIRE(run_until(io, [&] { return up.size() == 2; }));
    CHECK(up[1].message == protocol::encode_payload(protocol::Exit{ExitStatus::exited(0), {}}));
    relay.pulse();
    REQUIRE(run_until(io, [&] { return got<protocol::Heartbeat>(one); }));

    // A broadcast for the node's ranks reaches the registered one.
    relay.downstream({{1, 2}, protocol::encode_payload(protocol::Stop{}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Stop>(one); }));

    // A launcher with the wrong secret is refused here: the coordinator never hears of it.
    const auto wrong = secret_auth('d');
    Follower impostor(io, path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(impostor); }));
    impostor.hello(wrong, 2);
    REQUIRE(run_until(io, [&] { return impostor.eof; }));
    REQUIRE(impostor.received.size() == 2);
    const auto& reject = std::get<protocol::Reject>(impostor.received[1]);
    CHECK(reject.code == protocol::RejectCode::refused);
    CHECK_THAT(reject.reason, Catch::Contains("bad secret proof"));
    CHECK(up.size() == 2);

    // Rank 1 closes: reported as `closed` for its rank.
    one.close();
    REQUIRE(run_until(io, [&] { return up.size() == 3; }));
    CHECK(up[2].ranks == std::vector<std::uint32_t>{1});
    CHECK(up[2].closed == "connection closed");

    // Rank 2 registers, then falls silent: its relay reports it lost after the timeout.
    Follower two(io, path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(two); }));
    two.hello(auth, 2);
    REQUIRE(run_until(io, [&] { return up.size() == 4; }));
    relay.downstream({{2}, protocol::encode_payload(protocol::Welcome{3, {}}), {}});
    REQUIRE(run_until(io, [&] { return up.size() == 5; }));
    CHECK(up[4].ranks == std::vector<std::uint32_t>{2});
    CHECK(up[4].closed == "no heartbeat for 0.2 s");
    REQUIRE(run_until(io, [&] { return two.eof; })); // its connection was closed
    CHECK(got<protocol::Welcome>(two));
    CHECK_FALSE(relay.busy());
    relay.close();
}
