// SPDX-License-Identifier: MIT
// The node relay of the tree (src/shell/detail/node_relay.hpp) on its own: the test is both ends,
// the node's followers (Unix-socket clients) and the coordinator (the relay's upstream callback and
// downstream()), all in one io_context.
#include "log_capture.hpp"
#include "private_munged.hpp"
#include "shell/detail/node_relay.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/protocol.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <grp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <set>
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
    Follower(asio::io_context& io, const std::string& path) : m_path(path), m_socket(io) {
        m_socket.connect(detail::relay_endpoint(path));
        m_decoder.set_limit(protocol::k_max_trusted_frame + protocol::k_tag_size);
        read();
    }

    /// Sealed after the welcome, as a launcher's.
    void send(const protocol::Message& message) {
        send_raw(channel ? channel->seal(protocol::encode_payload(message), protocol::k_max_frame)
                         : protocol::encode_frame(message));
    }

    /// `bytes` as they are.
    void send_raw(std::string bytes) {
        auto frame = std::make_shared<std::string>(std::move(bytes));
        asio::async_write(m_socket, asio::buffer(*frame), [frame](auto /*ec*/, auto /*n*/) {});
    }

    /// A hello of `rank` answering the relay's challenge (with the right secret or not; with
    /// MUNGE when `auth` is a munged's).
    void hello(const protocol::Authenticator& auth, std::uint32_t rank) {
        const auto& challenge = std::get<protocol::Challenge>(received.at(0));
        protocol::Hello hello;
        hello.job = k_step.job;
        hello.rank = rank;
        hello.role = Role::worker;
        hello.host = "n1";
        hello.pid = ::getpid();
        hello.auth = auth.method();
        hello.nonce = m_nonce;
        if (hello.auth == protocol::AuthMethod::munge) {
            // The session keys come with the welcome's credential (the relay's key material).
            m_munge.emplace(Munge{&auth, rank, challenge.nonce});
            hello.credential = auth.prove(
                challenge.nonce, k_step, rank, protocol::unix_endpoint(m_path), m_munge->own_key);
            send(hello);
            return;
        }
        hello.credential =
            auth.prove(challenge.nonce, k_step, rank, protocol::unix_endpoint(m_path));
        // The session keys, should the relay welcome it (with this secret or not).
        m_keys = auth.session_keys(protocol::AuthMethod::secret,
                                   {},
                                   {},
                                   challenge.nonce,
                                   m_nonce,
                                   k_step,
                                   rank,
                                   protocol::unix_endpoint(m_path));
        send(hello);
    }

    void close() { m_socket.close(); }

    std::vector<protocol::Message> received;
    /// From the welcome on: what it sends is sealed, what it receives checked.
    std::optional<protocol::Channel> channel;
    std::string refused;                      ///< why a received frame failed its check
    std::optional<std::string> munge_refused; ///< why the relay's MUNGE proof did not pass
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
                if (channel) {
                    try {
                        payload = channel->open(std::move(*payload));
                    } catch (const Error& e) {
                        refused = e.what();
                        return;
                    }
                }
                received.push_back(protocol::decode_payload(*payload));
                const auto* welcome = std::get_if<protocol::Welcome>(&received.back());
                if (welcome != nullptr && m_munge) {
                    // As a launcher: the relay's credential proves it and carries its key.
                    std::string relay_key;
                    munge_refused =
                        m_munge->auth->verify_coordinator(welcome->credential,
                                                          m_nonce,
                                                          k_step,
                                                          m_munge->rank,
                                                          protocol::unix_endpoint(m_path),
                                                          &relay_key);
                    if (!munge_refused) {
                        m_keys = m_munge->auth->session_keys(protocol::AuthMethod::munge,
                                                             m_munge->own_key,
                                                             relay_key,
                                                             m_munge->challenge,
                                                             m_nonce,
                                                             k_step,
                                                             m_munge->rank,
                                                             protocol::unix_endpoint(m_path));
                    }
                }
                if (welcome != nullptr && m_keys) {
                    channel.emplace(*m_keys, protocol::End::launcher);
                }
            }
            read();
        });
    }

    std::string m_path; ///< the relay's: what the proofs bind
    Unix::socket m_socket;
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    std::optional<protocol::SessionKeys> m_keys;
    /// A MUNGE hello's: who proves, and what the session keys are made of.
    struct Munge {
        const protocol::Authenticator* auth;
        std::uint32_t rank;
        std::string challenge;
        std::string own_key = std::string(protocol::k_key_material_size, 'k');
    };
    std::optional<Munge> m_munge;
};

template <typename T> bool got(const Follower& follower) {
    return !follower.received.empty() && std::holds_alternative<T>(follower.received.back());
}

protocol::Authenticator secret_auth(char digit) {
    return protocol::Authenticator::create(
        {protocol::AuthMethod::secret, std::string(64, digit), "/nonexistent/munge.socket"});
}

/// A leader's relay for `ranks`, listening on a name of its own (`name` + this process's pid,
/// so that tests running side by side never meet); what it sends up is collected in `up`.
struct LiveRelay {
    LiveRelay(asio::io_context& io,
              const protocol::Authenticator& auth,
              std::set<std::uint32_t> ranks,
              unsigned name,
              Millis heartbeat_timeout = k_default_heartbeat_timeout,
              bool upstream_waits = false)
        : path(detail::relay_path(k_step, name + static_cast<unsigned>(::getpid()))),
          relay(io,
                auth,
                settings(std::move(ranks), heartbeat_timeout, upstream_waits),
                [this](const protocol::Message& m) { up.push_back(std::get<protocol::Relay>(m)); },
                {}) {
        relay.listen(path);
    }

    static RelaySettings
    settings(std::set<std::uint32_t> ranks, Millis heartbeat_timeout, bool upstream_waits) {
        RelaySettings out;
        out.step = k_step;
        out.ranks = std::move(ranks);
        out.heartbeat_timeout = heartbeat_timeout;
        out.upstream_waits = upstream_waits;
        return out;
    }

    std::vector<protocol::Relay> up; ///< what the leader sends to the coordinator
    std::string path;
    detail::NodeRelay relay;
};

/// `follower` registers as `rank` through `live` with `auth`: its challenge, its hello, which
/// goes up, and the coordinator's welcome coming down.
void register_through(asio::io_context& io,
                      LiveRelay& live,
                      Follower& follower,
                      const protocol::Authenticator& auth,
                      std::uint32_t rank) {
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(follower); }));
    const std::size_t sent = live.up.size();
    follower.hello(auth, rank);
    REQUIRE(run_until(io, [&] { return live.up.size() == sent + 1; }));
    REQUIRE(live.up.back().ranks == std::vector<std::uint32_t>{rank});
    live.relay.downstream({{rank}, protocol::encode_payload(protocol::Welcome{3, {}}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Welcome>(follower); }));
}

} // namespace

TEST_CASE("node relay: followers register, talk and end through the leader's relay",
          "[node_relay]") {
    asio::io_context io;
    const auto auth = secret_auth('c');
    LiveRelay live(io, auth, {1, 2}, 900000, 200ms);
    auto& relay = live.relay;
    auto& up = live.up;
    const std::string& path = live.path;
    relay.serve();

    // Rank 1 registers: its hello goes up; the coordinator's welcome comes down, proved.
    Follower one(io, path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(one); }));
    one.hello(auth, 1);
    REQUIRE(run_until(io, [&] { return up.size() == 1; }));
    CHECK(up[0].ranks == std::vector<std::uint32_t>{1});
    CHECK(std::get<protocol::Hello>(protocol::decode_payload(up[0].message)).rank == 1);
    relay.downstream({{1}, protocol::encode_payload(protocol::Welcome{3, {}}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Welcome>(one); }));
    CHECK_FALSE(auth.verify_coordinator(std::get<protocol::Welcome>(one.received.back()).credential,
                                        one.m_nonce,
                                        k_step,
                                        1,
                                        protocol::unix_endpoint(path)));
    // A welcome proved at the relay does not pass for any other endpoint.
    CHECK(auth.verify_coordinator(std::get<protocol::Welcome>(one.received.back()).credential,
                                  one.m_nonce,
                                  k_step,
                                  1,
                                  protocol::tcp_endpoint(25006)) ==
          std::string("bad secret proof"));

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

TEST_CASE("node relay: every frame after the welcome is sealed, each way, per session",
          "[node_relay][channel]") {
    const test::LogCapture log(spdlog::level::warn);
    asio::io_context io;
    const auto auth = secret_auth('c');
    LiveRelay live(io, auth, {1, 2}, 930000);
    auto& relay = live.relay;
    auto& up = live.up;
    const std::string& path = live.path;
    relay.serve();
    std::vector<std::unique_ptr<Follower>> followers;
    for (const std::uint32_t rank : {1U, 2U}) {
        followers.push_back(std::make_unique<Follower>(io, path));
        Follower& follower = *followers.back();
        REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(follower); }));
        follower.hello(auth, rank);
        REQUIRE(run_until(io, [&] { return up.size() == rank; }));
        relay.downstream({{rank}, protocol::encode_payload(protocol::Welcome{3, {}}), {}});
        REQUIRE(run_until(io, [&] { return got<protocol::Welcome>(follower); }));
    }
    Follower& one = *followers[0];
    Follower& two = *followers[1];

    // One broadcast, sealed for each session with its own keys: both open it.
    relay.downstream({{1, 2}, protocol::encode_payload(protocol::Stop{}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Stop>(one) && got<protocol::Stop>(two); }));
    CHECK(one.refused.empty());
    CHECK(two.refused.empty());

    // Rank 1 sends a sealed `exit 3` with its status changed to 0 on the way: refused, one
    // line, its connection closed and reported; the forged status never goes up.
    std::string frame = one.channel->seal(
        protocol::encode_payload(protocol::Exit{ExitStatus::exited(3), {}}), protocol::k_max_frame);
    frame[frame.find(R"("status":3)") + 9] = '0';
    one.send_raw(frame);
    REQUIRE(run_until(io, [&] { return up.size() == 3; }));
    CHECK(up[2].ranks == std::vector<std::uint32_t>{1});
    CHECK(up[2].closed == "protocol error");
    REQUIRE(run_until(io, [&] { return one.eof; }));
    CHECK(log.text() == "warning: relay: closing a local connection (rank 1): protocol: frame 0 "
                        "fails its MAC (tampered, replayed, reordered or cut short)\n");

    // Rank 2's frame of another session (rank 1's keys) fails the same way: a frame is good
    // only on the connection it was sealed for.
    two.send_raw(
        one.channel->seal(protocol::encode_payload(protocol::Heartbeat{}), protocol::k_max_frame));
    REQUIRE(run_until(io, [&] { return up.size() == 4; }));
    CHECK(up[3].ranks == std::vector<std::uint32_t>{2});
    CHECK(up[3].closed == "protocol error");
    relay.close();
}

TEST_CASE("node relay: the relay's name is abstract, the user's, the job's, the step's and the "
          "leader's",
          "[node_relay]") {
    CHECK(detail::relay_path({12345, 0}, 4) ==
          fmt::format("@tfslurm-{}/relay-12345.0-4", ::geteuid()));
    CHECK(detail::relay_endpoint("@tfslurm-0/relay-1.0-2").path() ==
          std::string("\0tfslurm-0/relay-1.0-2", 22));
    CHECK(detail::relay_endpoint("/run/relay.sock").path() == "/run/relay.sock");
}

TEST_CASE("node relay: a name that another process holds fails the leader at once, naming it",
          "[node_relay]") {
    asio::io_context io;
    const auto auth = secret_auth('c');
    RelaySettings settings;
    settings.step = k_step;
    settings.ranks = {1};
    const std::string path = detail::relay_path(k_step, 910000 + static_cast<unsigned>(::getpid()));
    // The squatter: a socket listening on the name first (here this process itself, so the
    // kernel names this pid; another user's is named the same way, by its uid and pid).
    Unix::acceptor squatter(io, detail::relay_endpoint(path));
    detail::NodeRelay relay(io, auth, settings, [](const protocol::Message&) {}, {});
    try {
        relay.listen(path);
        FAIL("listen() on a held name did not throw");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::auth);
        CHECK(std::string(e.what()) ==
              fmt::format("relay: \"{}\" is held by uid {} (pid {}), not by this job's user (uid "
                          "{})",
                          path,
                          ::geteuid(),
                          ::getpid(),
                          ::geteuid()));
        CHECK(e.hint() == "another process on this node took the relay's name; `ss -xlp | grep "
                          "tfslurm` shows it");
    }
}

TEST_CASE("node relay: another user's connection is closed before its first byte", "[node_relay]") {
    if (::geteuid() != 0) {
        WARN("needs root to act as another user (nobody): not run");
        return;
    }
    const test::LogCapture log(spdlog::level::warn);
    asio::io_context io;
    const auto auth = secret_auth('c');
    RelaySettings settings;
    settings.step = k_step;
    settings.ranks = {1};
    detail::NodeRelay relay(io, auth, settings, [](const protocol::Message&) {}, {});
    const std::string path = detail::relay_path(k_step, 920000 + static_cast<unsigned>(::getpid()));
    // Also a connection made before the relay serves (its leader not registered yet): it waits
    // in the backlog, and is refused the same way once the relay accepts.
    const bool early = GENERATE(false, true);
    CAPTURE(early);
    relay.listen(path);
    if (!early) {
        relay.serve();
    }
    const auto endpoint = detail::relay_endpoint(path);
    std::array<int, 2> connected{-1, -1}; // the child's byte once its connect() returned
    REQUIRE(::pipe2(connected.data(), O_CLOEXEC) == 0);

    // The other user (uid and gid 65534, nobody): connects and reads. Exit 0: closed without a
    // byte (refused); 1: the relay sent something (a challenge); 2: it could not connect; killed
    // by SIGALRM after 10 s: the relay neither answered nor closed. Killed by the guard if this
    // test ends first.
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::alarm(10);
        if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
            ::setresuid(65534, 65534, 65534) != 0) {
            ::_exit(3);
        }
        const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 ||
            ::connect(fd, endpoint.data(), static_cast<socklen_t>(endpoint.size())) != 0) {
            ::_exit(2);
        }
        char byte = 'c';
        if (::write(connected[1], &byte, 1) != 1) {
            ::_exit(4);
        }
        ::_exit(::read(fd, &byte, 1) == 0 ? 0 : 1);
    }
    ::close(connected[1]);
    if (early) {
        // Its connection is in the backlog (else the child failed first: EOF, and its status
        // says why).
        char byte = 0;
        const ssize_t got = ::read(connected[0], &byte, 1);
        CHECK(got == 1);
        relay.serve();
    }
    ::close(connected[0]);
    int status = 0;
    bool reaped = false;
    const std::shared_ptr<void> guard(nullptr, [&](void* /*unused*/) {
        if (!reaped) {
            ::kill(child, SIGKILL);
            ::waitpid(child, nullptr, 0);
        }
    });
    REQUIRE(run_until(io, [&] { return reaped = ::waitpid(child, &status, WNOHANG) == child; }));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(log.text() ==
          fmt::format("warning: relay: refused a connection to {} from uid 65534 (pid {}): not "
                      "this job's user (uid 0)\n",
                      path,
                      child));
    // The relay goes on: this user's followers still get their challenge.
    Follower one(io, path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(one); }));
    relay.close();
}

TEST_CASE("node relay: a follower that comes before the relay serves waits for its challenge",
          "[node_relay]") {
    asio::io_context io;
    const auto auth = secret_auth('c');
    // A relay that listens: the follower's connection is made (it waits in the backlog) but
    // nothing comes before the relay serves, and nothing goes up.
    LiveRelay live(io, auth, {1}, 940000);
    auto& relay = live.relay;
    auto& up = live.up;
    const std::string& path = live.path;
    Follower one(io, path);
    const auto until = std::chrono::steady_clock::now() + 200ms;
    while (std::chrono::steady_clock::now() < until) {
        io.run_one_for(10ms);
    }
    CHECK(one.received.empty());
    CHECK_FALSE(one.eof);
    CHECK(up.empty());
    // It serves: the waiting follower gets its challenge and registers.
    relay.serve();
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(one); }));
    one.hello(auth, 1);
    REQUIRE(run_until(io, [&] { return up.size() == 1; }));
    CHECK(std::get<protocol::Hello>(protocol::decode_payload(up[0].message)).rank == 1);
    relay.close();
}

TEST_CASE("node relay: a leader not yet registered checks its followers and holds their hellos "
          "until it is",
          "[node_relay]") {
    asio::io_context io;
    const auto auth = secret_auth('c');
    // As a leader serves while it registers (LauncherShell::listen_relay()).
    LiveRelay live(io, auth, {1, 2}, 950000, k_default_heartbeat_timeout, true);
    live.relay.serve();
    Follower one(io, live.path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(one); }));
    one.hello(auth, 1);
    // Another follower's hello that does not prove itself is refused meanwhile, here.
    Follower impostor(io, live.path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(impostor); }));
    impostor.hello(secret_auth('d'), 2);
    REQUIRE(run_until(io, [&] { return got<protocol::Reject>(impostor); }));
    CHECK(live.up.empty());
    CHECK(one.received.size() == 1); // its challenge only: nobody welcomes it yet
    // Registered: the checked hello goes up at once, then the welcome comes down as usual.
    live.relay.upstream_open();
    REQUIRE(live.up.size() == 1);
    CHECK(live.up[0].ranks == std::vector<std::uint32_t>{1});
    CHECK(std::get<protocol::Hello>(protocol::decode_payload(live.up[0].message)).rank == 1);
    live.relay.downstream({{1}, protocol::encode_payload(protocol::Welcome{3, {}}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Welcome>(one); }));
    live.relay.close();
}

TEST_CASE("node relay: MUNGE proofs are made off the io thread: a stopped munged holds up no "
          "other follower",
          "[node_relay][munge]") {
    const test::PrivateMunged& munged = test::private_munged();
    if (!munged.running()) {
        WARN("needs root and munged (a private one): not run");
        return;
    }
    const test::LogCapture log(spdlog::level::debug);
    asio::io_context io;
    // The relay accepts both: rank 1 proves itself with the secret, rank 2 with MUNGE.
    const auto relay_auth = protocol::Authenticator::create(
        {protocol::AuthMethod::automatic, std::string(64, 'c'), munged.socket()});
    const auto secret = secret_auth('c');
    const auto munge =
        protocol::Authenticator::create({protocol::AuthMethod::munge, {}, munged.socket()});
    LiveRelay live(io, relay_auth, {1, 2}, 950000);
    auto& relay = live.relay;
    auto& up = live.up;
    const std::string& path = live.path;
    relay.serve();

    Follower one(io, path);
    register_through(io, live, one, secret, 1);

    Follower two(io, path);
    REQUIRE(run_until(io, [&] { return got<protocol::Challenge>(two); }));
    {
        // munged stops answering: rank 2's hello waits for it on the proofs pool, while rank 1's
        // frames go up and the leader's pulse comes down as before.
        struct Continue {
            pid_t pid;
            ~Continue() { ::kill(pid, SIGCONT); }
        } const resume{munged.pid()};
        two.hello(munge, 2); // its credential is made before munged stops
        REQUIRE(::kill(munged.pid(), SIGSTOP) == 0);
        REQUIRE(run_until(io, [&] {
            return log.text().find("relay: rank 2 (pid " + std::to_string(::getpid()) +
                                   "): MUNGE proof") != std::string::npos;
        }));
        one.send(protocol::Exit{ExitStatus::exited(0), {}});
        REQUIRE(run_until(io, [&] { return up.size() == 2; }));
        CHECK(up[1].ranks == std::vector<std::uint32_t>{1});
        relay.pulse();
        REQUIRE(run_until(io, [&] { return got<protocol::Heartbeat>(one); }));
        CHECK(two.received.size() == 1); // the challenge only: munged has not answered
        REQUIRE(::kill(munged.pid(), SIGCONT) == 0);
    }
    // munged answers: rank 2's hello goes up, and the welcome comes down with the relay's proof
    // (made on the pool with the check), whose key material seals the session both ways.
    REQUIRE(run_until(io, [&] { return up.size() == 3; }));
    CHECK(up[2].ranks == std::vector<std::uint32_t>{2});
    CHECK(std::get<protocol::Hello>(protocol::decode_payload(up[2].message)).auth ==
          protocol::AuthMethod::munge);
    relay.downstream({{2}, protocol::encode_payload(protocol::Welcome{3, {}}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Welcome>(two); }));
    REQUIRE(two.munge_refused == std::nullopt);
    REQUIRE(two.channel);
    two.send(protocol::Exit{ExitStatus::exited(3), {}});
    REQUIRE(run_until(io, [&] { return up.size() == 4; }));
    CHECK(up[3].ranks == std::vector<std::uint32_t>{2});
    CHECK(up[3].message == protocol::encode_payload(protocol::Exit{ExitStatus::exited(3), {}}));
    relay.downstream({{1, 2}, protocol::encode_payload(protocol::Stop{}), {}});
    REQUIRE(run_until(io, [&] { return got<protocol::Stop>(two); }));
    CHECK(two.refused.empty());
    relay.close();
}
