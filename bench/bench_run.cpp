// SPDX-License-Identifier: MIT
// bench_run: how fast `tfslurm run` ends a step, what a launcher costs, and how many launchers
// one coordinator takes. A benchmark that prints figures, not a test: nothing here asserts speed.
//
//   bench_run [--cli PATH] [--runs N] [--tasks N] [--fanin N]
//   bench_run --shape NODESxPER_NODE[,exchange] [--no-floor]   (only that fan-in, e.g. 12500x8,
//                                                  and its floor: for profiling)
//   bench_run --shape NODESxPER_NODE --runs N       (N rounds of that fan-in, each followed by
//                                                  its floor: medians and each round's ratio)
//
// 1. completion: --local 16 (4 ps, 12 workers): time from the last worker's exit to the last
//    ps receiving SIGTERM, and to the whole job having exited (median and max over --runs).
// 2. failure: the same job where one worker exits 1: time from that exit to the job's end.
// 3. overhead: `tfslurm run --local N -- true` against N plain `true` started together, and
//    the same with one task (the single-task overhead in milliseconds).
// 4. fan-in: one coordinator (its own process) and N simulated launchers (another process,
//    in-process clients over loopback) registering, reporting exit 0 and being stopped:
//    wall time and the coordinator's peak memory; through the tree (N/8 node leaders, each
//    carrying 8 ranks), flat (N connections), 100,000 tasks on 12,500 nodes, and the address
//    exchange (hellos with addresses, `cluster` to every task) through the tree. Under each tree
//    fan-in, its floor (issue #33): the same connections carrying the same bytes in the same
//    phases between a server and clients with no logic at all (floor_fanin()).
//
// The trainers of 1 and 2 are this program itself (`bench_run --trainer DIR`).
#include <tfslurm/common/error.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/snapshot.hpp>
#include <tfslurm/shell/coordinator_server.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <deque>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

using namespace tfslurm;
namespace asio = boost::asio;
using Tcp = asio::ip::tcp;

extern char** environ;

namespace {

/// CLOCK_MONOTONIC is system-wide: timestamps from different processes compare.
double now_ms() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void write_time(const std::string& path) {
    std::ofstream(path) << fmt::format("{:.6f}\n", now_ms());
}

double read_time(const std::string& path) {
    std::ifstream in(path);
    double value = 0;
    in >> value;
    return value;
}

std::string self_exe() {
    std::string path(PATH_MAX, '\0');
    const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size());
    path.resize(n > 0 ? static_cast<std::size_t>(n) : 0U);
    return path;
}

// --- trainer mode ------------------------------------------------------------------------------

int trainer(const std::string& dir) {
    const char* role = std::getenv("TFSLURM_ROLE");
    const char* rank = std::getenv("TFSLURM_RANK");
    const std::string me = rank != nullptr ? rank : "?";
    if (role != nullptr && std::string(role) == "ps") {
        sigset_t set;
        ::sigemptyset(&set);
        ::sigaddset(&set, SIGTERM);
        ::sigprocmask(SIG_BLOCK, &set, nullptr);
        int signo = 0;
        ::sigwait(&set, &signo);
        write_time(dir + "/ps." + me);
        return 0;
    }
    const char* fail = std::getenv("BENCH_FAIL_RANK");
    const bool failing = fail != nullptr && me == fail;
    // Let every task start before the first exit, like a real (short) training.
    ::usleep(failing || fail == nullptr ? 300000 : 100000000);
    write_time(dir + "/worker." + me);
    return failing ? 1 : 0;
}

// --- helpers -----------------------------------------------------------------------------------

struct Stats {
    double median = 0;
    double max = 0;
    double min = 0;
};

Stats stats(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    if (values.empty()) {
        return {};
    }
    return {values[values.size() / 2], values.back(), values.front()};
}

std::vector<std::string> base_env() {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string entry = *e;
        if (entry.rfind("SLURM_", 0) != 0 && entry.rfind("TFSLURM_", 0) != 0) {
            env.push_back(entry);
        }
    }
    env.emplace_back("TFSLURM_LOG_LEVEL=error");
    return env;
}

/// Run argv to completion; returns its shell status.
int run(const std::vector<std::string>& argv, std::vector<std::string> env = base_env()) {
    SpawnRequest request;
    request.argv = argv;
    request.env = std::move(env);
    request.group = ProcessGroup::inherit;
    const pid_t pid = spawn_process(request);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ExitStatus::from_wait_status(status).shell_status();
}

std::string make_dir() {
    char pattern[] = "/tmp/tfslurm-bench-XXXXXX";
    if (::mkdtemp(pattern) == nullptr) {
        throw std::runtime_error("mkdtemp failed");
    }
    return pattern;
}

void remove_dir(const std::string& dir) {
    run({"rm", "-rf", dir});
}

// --- 1 and 2: local jobs -----------------------------------------------------------------------

void completion(const std::string& cli, int runs, int tasks) {
    const int ps = std::max(1, tasks / 4);
    std::vector<double> to_ps;
    std::vector<double> to_end;
    for (int i = 0; i < runs; ++i) {
        const std::string dir = make_dir();
        const int status = run({cli,
                                "run",
                                "--local",
                                std::to_string(tasks),
                                "--job-id",
                                std::to_string(770000 + i),
                                "--ps",
                                std::to_string(ps),
                                "--heartbeat",
                                "0.5",
                                "--",
                                self_exe(),
                                "--trainer",
                                dir});
        const double end = now_ms();
        double last_worker = 0;
        double last_ps = 0;
        for (int rank = 0; rank < tasks; ++rank) {
            if (rank < ps) {
                last_ps = std::max(last_ps, read_time(dir + "/ps." + std::to_string(rank)));
            } else {
                last_worker =
                    std::max(last_worker, read_time(dir + "/worker." + std::to_string(rank)));
            }
        }
        remove_dir(dir);
        if (status != 0 || last_worker == 0 || last_ps == 0) {
            fmt::print("  run {}: status {}, incomplete timestamps: skipped\n", i, status);
            continue;
        }
        to_ps.push_back(last_ps - last_worker);
        to_end.push_back(end - last_worker);
    }
    const auto a = stats(to_ps);
    const auto b = stats(to_end);
    fmt::print(
        "completion ({} tasks: {} ps, {} workers; {} runs)\n", tasks, ps, tasks - ps, to_ps.size());
    fmt::print("  last worker exit -> last ps got SIGTERM:   median {:7.2f} ms   max {:7.2f} ms   "
               "(target < 50 ms)\n",
               a.median,
               a.max);
    fmt::print("  last worker exit -> whole job exited:      median {:7.2f} ms   max {:7.2f} ms\n",
               b.median,
               b.max);
}

void failure(const std::string& cli, int runs, int tasks) {
    const int ps = std::max(1, tasks / 4);
    std::vector<double> teardown;
    for (int i = 0; i < runs; ++i) {
        const std::string dir = make_dir();
        auto env = base_env();
        env.push_back("BENCH_FAIL_RANK=" + std::to_string(tasks - 1));
        // The job prints one abort line per launcher: keep them off the report.
        const int saved = ::dup(STDERR_FILENO);
        const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        ::dup2(null, STDERR_FILENO);
        const int status = run({cli,
                                "-q",
                                "run",
                                "--local",
                                std::to_string(tasks),
                                "--job-id",
                                std::to_string(771000 + i),
                                "--ps",
                                std::to_string(ps),
                                "--heartbeat",
                                "0.5",
                                "--",
                                self_exe(),
                                "--trainer",
                                dir},
                               env);
        const double end = now_ms();
        ::dup2(saved, STDERR_FILENO);
        ::close(saved);
        ::close(null);
        const double failed = read_time(dir + "/worker." + std::to_string(tasks - 1));
        remove_dir(dir);
        if (status != 1 || failed == 0) {
            fmt::print("  run {}: status {} (expected 1): skipped\n", i, status);
            continue;
        }
        teardown.push_back(end - failed);
    }
    const auto s = stats(teardown);
    fmt::print("failure ({} tasks, one worker exits 1, the others would run for 100 s; {} runs)\n",
               tasks,
               teardown.size());
    fmt::print("  failing exit -> whole job exited:          median {:7.2f} ms   max {:7.2f} ms\n",
               s.median,
               s.max);
}

void overhead(const std::string& cli, int runs, int tasks) {
    std::vector<double> launched;
    std::vector<double> plain;
    for (int i = 0; i < runs; ++i) {
        double start = now_ms();
        run({cli,
             "run",
             "--local",
             std::to_string(tasks),
             "--job-id",
             std::to_string(772000 + i),
             "--heartbeat",
             "0.5",
             "--",
             "true"});
        launched.push_back(now_ms() - start);
        start = now_ms();
        std::vector<pid_t> pids;
        for (int t = 0; t < tasks; ++t) {
            SpawnRequest request;
            request.argv = {"true"};
            request.env = base_env();
            request.group = ProcessGroup::inherit;
            pids.push_back(spawn_process(request));
        }
        for (const pid_t pid : pids) {
            ::waitpid(pid, nullptr, 0);
        }
        plain.push_back(now_ms() - start);
    }
    const auto a = stats(launched);
    const auto b = stats(plain);
    fmt::print("overhead ({} tasks of `true`; {} runs)\n", tasks, runs);
    fmt::print("  tfslurm run --local {} -- true:            median {:7.2f} ms   max {:7.2f} ms\n",
               tasks,
               a.median,
               a.max);
    fmt::print("  {} x true (spawned together):              median {:7.2f} ms   max {:7.2f} ms\n",
               tasks,
               b.median,
               b.max);
    fmt::print("  launcher overhead per job:                 median {:7.2f} ms\n",
               a.median - b.median);
}

// --- 4: fan-in ---------------------------------------------------------------------------------

const std::string k_secret(64, 'c');
constexpr std::uint64_t k_job = 99;

/// The shape of a simulated step: `nodes` x `per_node` ranks; with `exchange`, hellos carry an
/// address and every launcher waits for `cluster` before it reports its exit.
struct Shape {
    std::uint32_t nodes = 0;
    std::uint32_t per_node = 1;
    bool exchange = false;
    [[nodiscard]] std::uint32_t ranks() const { return nodes * per_node; }
};

/// Connect `socket` to 127.0.0.1:`port` with Nagle's algorithm off, as a launcher does, then
/// `connected(true)`, or `connected(false)` when the connection failed (the callback keeps the
/// socket's owner alive).
void connect_loopback(Tcp::socket& socket,
                      std::uint16_t port,
                      std::function<void(bool)> connected) {
    socket.async_connect(
        Tcp::endpoint(asio::ip::address_v4::loopback(), port),
        [&socket, connected = std::move(connected)](const boost::system::error_code& ec) {
            if (!ec) {
                socket.set_option(Tcp::no_delay(true));
            }
            connected(!ec);
        });
}

/// The bytes on the simulated nodes' connections, by phase, summed over the nodes (the
/// frames as they travel: header, payload and, once sealed, tag). The floor (floor_fanin())
/// carries the same bytes in the same phases with no logic at all.
struct Traffic {
    std::uint64_t challenge = 0;      ///< down: the coordinator's challenge
    std::uint64_t hello = 0;          ///< up: the leader's hello
    std::uint64_t welcome = 0;        ///< down: its welcome
    std::uint64_t reports = 0;        ///< up: the followers' hellos and every exit, sealed
    std::uint64_t relay_welcomes = 0; ///< down: the followers' welcomes (and any `cluster`)
    std::uint64_t stops = 0;          ///< down: the stops (and heartbeats), after every exit
};

/// The clients process's Traffic (one io_context, one thread).
Traffic g_traffic;

/// One simulated node: its leader's connection (rank `leader`, and with per_node > 1 the
/// `relay` envelopes of its followers, as a node leader sends them: the followers' own hop over
/// the node's Unix socket is not simulated). Connect, challenge, hello, welcome; the followers'
/// hellos; (with the exchange: wait for `cluster`;) every exit 0; wait for the stops; close.
class FakeNode : public std::enable_shared_from_this<FakeNode> {
  public:
    FakeNode(asio::io_context& io,
             const protocol::Authenticator& auth,
             std::uint32_t leader,
             const Shape& shape,
             std::uint16_t port,
             std::function<void()> registered,
             std::function<void(bool)> done)
        : m_socket(io), m_auth(auth), m_leader(leader), m_shape(shape), m_port(port),
          m_registered(std::move(registered)), m_done(std::move(done)) {}

    void start() {
        connect_loopback(m_socket, m_port, [self = shared_from_this()](bool connected) {
            connected ? self->read() : self->finish(false);
        });
    }

  private:
    void read() {
        m_socket.async_read_some(
            asio::buffer(m_buffer),
            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                if (ec) {
                    self->finish(false);
                    return;
                }
                self->m_decoder.feed(std::string_view(self->m_buffer.data(), n));
                while (auto payload = self->m_decoder.next()) {
                    const std::uint64_t frame = payload->size() + protocol::k_header_size;
                    if (self->m_channel) {
                        payload = self->m_channel->open(std::move(*payload));
                    }
                    // Envelope and message in one parse (the leader's part of a node's cost
                    // is simulated here, sharing the coordinator's cores).
                    auto unwrapped = protocol::decode_unwrapped(*payload);
                    count_down(unwrapped.message, unwrapped.inner, frame);
                    if (!self->handle(unwrapped.message, unwrapped.inner)) {
                        return;
                    }
                }
                self->read();
            });
    }

    /// A frame received, counted in its phase (Traffic).
    static void count_down(const protocol::Message& message,
                           const std::optional<protocol::Message>& inner,
                           std::uint64_t frame) {
        if (std::holds_alternative<protocol::Challenge>(message)) {
            g_traffic.challenge += frame;
        } else if (std::holds_alternative<protocol::Welcome>(message)) {
            g_traffic.welcome += frame;
        } else if ((inner && std::holds_alternative<protocol::Stop>(*inner)) ||
                   std::holds_alternative<protocol::Stop>(message) ||
                   std::holds_alternative<protocol::Heartbeat>(message)) {
            g_traffic.stops += frame;
        } else {
            g_traffic.relay_welcomes += frame;
        }
    }

    [[nodiscard]] protocol::Hello hello(std::uint32_t rank) const {
        protocol::Hello hello;
        hello.job = k_job;
        hello.rank = rank;
        hello.role = Role::worker;
        hello.host = fmt::format("node{}", m_leader / m_shape.per_node);
        static const pid_t pid = ::getpid(); // a launcher asks once, not once per follower
        hello.pid = pid;
        hello.auth = protocol::AuthMethod::secret;
        if (m_shape.exchange) {
            const std::uint32_t node = m_leader / m_shape.per_node;
            hello.address =
                fmt::format("10.{}.{}.{}", node >> 16U, (node >> 8U) & 255U, node & 255U);
        }
        return hello;
    }

    void report_exits() {
        const std::string exit0 =
            protocol::encode_payload(protocol::Exit{ExitStatus::exited(0), {}});
        for (std::uint32_t follower = 1; follower < m_shape.per_node; ++follower) {
            send(protocol::Relay{{m_leader + follower}, exit0, {}});
        }
        send(protocol::Exit{ExitStatus::exited(0), {}});
    }

    // The leader's side of a node in message order (~60 lines, like the handshake it copies).
    bool handle(const protocol::Message& message,
                const std::optional<protocol::Message>& unwrapped) {
        if (const auto* challenge = std::get_if<protocol::Challenge>(&message)) {
            protocol::Hello own = hello(m_leader);
            own.relay = m_shape.per_node > 1;
            own.credential = m_auth.prove(challenge->nonce,
                                          protocol::StepId{k_job, 0},
                                          m_leader,
                                          protocol::tcp_endpoint(m_port));
            // Our challenge to the coordinator (a real launcher checks the welcome's proof of
            // it; the benchmark trusts its own coordinator, but the hello must carry one).
            own.nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
            m_challenge = challenge->nonce;
            m_nonce = own.nonce;
            send(own);
        } else if (std::holds_alternative<protocol::Welcome>(message)) {
            release();
            // From here on every frame is sealed, both ways, as a real launcher's.
            m_channel.emplace(m_auth.session_keys(protocol::AuthMethod::secret,
                                                  {},
                                                  {},
                                                  m_challenge,
                                                  m_nonce,
                                                  protocol::StepId{k_job, 0},
                                                  m_leader,
                                                  protocol::tcp_endpoint(m_port)),
                              protocol::End::launcher);
            m_decoder.set_limit(protocol::k_max_trusted_frame + protocol::k_tag_size);
            for (std::uint32_t follower = 1; follower < m_shape.per_node; ++follower) {
                protocol::Hello relayed = hello(m_leader + follower);
                relayed.credential = std::string(64, '0'); // checked by the node's relay
                relayed.nonce = std::string(64, 'a');
                send(protocol::Relay{{m_leader + follower}, protocol::encode_payload(relayed), {}});
            }
            if (!m_shape.exchange) {
                report_exits();
            }
        } else if (const auto* relay = std::get_if<protocol::Relay>(&message)) {
            if (!unwrapped) {
                finish(false);
                return false;
            }
            const protocol::Message& inner = *unwrapped;
            if (std::holds_alternative<protocol::Stop>(inner)) {
                m_stopped += static_cast<std::uint32_t>(relay->ranks.size());
            } else if (std::holds_alternative<protocol::Cluster>(inner)) {
                m_clustered += static_cast<std::uint32_t>(relay->ranks.size());
            } else if (!std::holds_alternative<protocol::Welcome>(inner)) {
                finish(false);
                return false;
            }
        } else if (std::holds_alternative<protocol::Stop>(message)) {
            ++m_stopped;
        } else if (std::holds_alternative<protocol::Cluster>(message)) {
            ++m_clustered;
        } else if (!std::holds_alternative<protocol::Heartbeat>(message)) {
            finish(false);
            return false;
        }
        if (m_shape.exchange && !m_reported && m_clustered == m_shape.per_node) {
            m_reported = true;
            report_exits();
        }
        if (m_stopped == m_shape.per_node) {
            finish(true);
            return false;
        }
        return true;
    }

    /// As a launcher writes (launcher_link.cpp): one write in flight, and what queued up
    /// meanwhile goes out in the next one, gathered, its sealed payloads in batches (Outbox).
    void send(const protocol::Message& message) {
        if (m_channel) {
            m_outbox.push(protocol::encode_payload(message), false, protocol::k_max_relay_frame);
        } else {
            m_queue.push_back(protocol::encode_frame(message, protocol::k_max_relay_frame));
            g_traffic.hello += m_queue.back().size();
        }
        if (!m_writing && !m_write_posted) {
            m_write_posted = true;
            asio::post(m_socket.get_executor(), [self = shared_from_this()] {
                self->m_write_posted = false;
                if (!self->m_writing) {
                    self->write();
                }
            });
        }
    }

    void write() {
        m_writing = true;
        m_frames.assign(std::make_move_iterator(m_queue.begin()),
                        std::make_move_iterator(m_queue.end()));
        m_queue.clear();
        while (!m_outbox.empty()) {
            m_frames.push_back(m_outbox.take(*m_channel).bytes);
            g_traffic.reports += m_frames.back().size();
        }
        m_buffers.clear();
        for (const std::string& frame : m_frames) {
            m_buffers.push_back(asio::buffer(frame));
        }
        asio::async_write(
            m_socket,
            m_buffers,
            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                self->m_writing = false;
                if (ec) {
                    return;
                }
                if (!self->m_queue.empty() || !self->m_outbox.empty()) {
                    self->write();
                }
            });
    }

    void release() {
        if (m_registered) {
            auto registered = std::move(m_registered);
            m_registered = nullptr;
            registered();
        }
    }

    void finish(bool ok) {
        release();
        boost::system::error_code ignored;
        m_socket.close(ignored);
        if (m_done) {
            auto done = std::move(m_done);
            m_done = nullptr;
            done(ok);
        }
    }

    Tcp::socket m_socket;
    const protocol::Authenticator& m_auth;
    std::uint32_t m_leader;
    Shape m_shape;
    std::uint16_t m_port;
    std::function<void()> m_registered;
    std::function<void(bool)> m_done;
    /// As large as a real launcher's (LauncherLink's): 12,500 buffers of 64 KiB made the
    /// simulated launchers fault in 800 MiB, CPU taken from the coordinator on the same cores.
    std::array<char, 4096> m_buffer{};
    protocol::FrameDecoder m_decoder;
    std::string m_challenge; ///< the coordinator's, answered by our hello
    std::string m_nonce;     ///< ours, in the hello
    std::optional<protocol::Channel> m_channel;
    std::deque<std::string> m_queue;   ///< the handshake's frames
    protocol::Outbox m_outbox;         ///< the session's payloads
    std::vector<std::string> m_frames; ///< being written
    std::vector<asio::const_buffer> m_buffers;
    bool m_writing = false;
    bool m_write_posted = false;
    std::uint32_t m_stopped = 0;
    std::uint32_t m_clustered = 0;
    bool m_reported = false;
};

/// Keep a bounded number of connections in their handshake so the listen backlog never
/// overflows (SYN retries would measure the kernel's retry timer, not the coordinator), and
/// below the coordinator's share for one peer address (256 unauthenticated connections per
/// address, coordinator_server.cpp): every simulated launcher comes from 127.0.0.1, and past
/// that share the coordinator evicts the oldest handshakes, as it would a flood.
constexpr std::uint32_t k_in_flight = 200;

int fanin_clients(const Shape& shape, std::uint16_t port, int traffic_fd) {
    ensure_descriptor_limit(shape.nodes + 64, fmt::format("{} simulated nodes", shape.nodes));
    asio::io_context io;
    const auto auth =
        protocol::Authenticator::create({protocol::AuthMethod::secret, k_secret, "/nonexistent"});
    std::uint32_t next = 0;
    std::uint32_t ok = 0;
    std::uint32_t failed = 0;
    std::uint32_t handshaking = 0;
    std::function<void()> launch_more;
    launch_more = [&] {
        while (next < shape.nodes && handshaking < k_in_flight) {
            ++handshaking;
            const std::uint32_t node = next++;
            auto launcher = std::make_shared<FakeNode>(
                io,
                auth,
                node * shape.per_node,
                shape,
                port,
                [&] {
                    --handshaking;
                    launch_more();
                },
                [&](bool success) { (success ? ok : failed) += 1; });
            launcher->start();
        }
    };
    launch_more();
    io.run();
    if (failed > 0) {
        std::cerr << fmt::format("fan-in clients: {} of {} nodes failed\n", failed, shape.nodes);
    }
    [[maybe_unused]] auto w = ::write(traffic_fd, &g_traffic, sizeof g_traffic);
    return ok == shape.nodes ? 0 : 1;
}

struct FaninResult {
    bool ok = false;
    double wall_ms = 0;     ///< start -> every simulated launcher stopped
    double finished_ms = 0; ///< start -> the coordinator finished
    double rss_kib = 0;     ///< the coordinator's peak RSS
    /// The coordinator's CPU time (user + system): steadier than the wall time on a shared box.
    double cpu_ms = 0;
    double clients_cpu_ms = 0; ///< the simulated launchers' CPU time, sharing the same cores
    Traffic traffic;           ///< what crossed the connections (the floor's bytes)
};

// One measured run (~70 lines): the server and the simulated nodes in two processes, the
// figures read from both; kept together so what is timed is visible in one place.
/// `serve` in a process of its own (it writes its port to the descriptor it is given, then
/// serves: its return is the exit status), then `clients` in another (given the port and a
/// descriptor for the Traffic it counted): the times from the clients' start, the server's peak
/// memory and CPU, the clients' CPU and Traffic. `what` names the server in its messages.
FaninResult two_processes(const std::string& what,
                          const std::function<int(int port_fd)>& serve,
                          const std::function<int(std::uint16_t port, int traffic_fd)>& clients) {
    FaninResult result;
    int ports[2] = {-1, -1};
    if (::pipe(ports) != 0) {
        throw std::runtime_error("pipe");
    }
    const pid_t server = ::fork();
    if (server == 0) {
        ::close(ports[0]);
        ::prctl(PR_SET_NAME, "bench-server"); // perf tells the two processes apart by name
        int code = 1;
        try {
            code = serve(ports[1]);
        } catch (const std::exception& e) {
            std::cerr << what << ": " << e.what() << "\n";
        }
        ::_exit(code);
    }
    ::close(ports[1]);
    std::uint16_t port = 0;
    if (::read(ports[0], &port, sizeof port) != static_cast<ssize_t>(sizeof port)) {
        fmt::print("{}: did not start\n", what);
        ::waitpid(server, nullptr, 0);
        return result;
    }
    ::close(ports[0]);
    int traffic[2] = {-1, -1};
    if (::pipe(traffic) != 0) {
        throw std::runtime_error("pipe");
    }
    const double start = now_ms();
    const pid_t nodes = ::fork();
    if (nodes == 0) {
        ::close(traffic[0]);
        ::prctl(PR_SET_NAME, "bench-nodes");
        int code = 1;
        try {
            code = clients(port, traffic[1]);
        } catch (const std::exception& e) {
            std::cerr << what << ", its nodes: " << e.what() << "\n";
        }
        ::_exit(code);
    }
    ::close(traffic[1]);
    const auto ms = [](const timeval& t) {
        return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_usec) / 1e3;
    };
    int client_status = 0;
    rusage client_usage{};
    ::wait4(nodes, &client_status, 0, &client_usage);
    result.wall_ms = now_ms() - start;
    if (::read(traffic[0], &result.traffic, sizeof result.traffic) !=
        static_cast<ssize_t>(sizeof result.traffic)) {
        result.traffic = {};
    }
    ::close(traffic[0]);
    result.clients_cpu_ms = ms(client_usage.ru_utime) + ms(client_usage.ru_stime);
    int server_status = 0;
    rusage usage{};
    ::wait4(server, &server_status, 0, &usage);
    result.finished_ms = now_ms() - start;
    result.rss_kib = static_cast<double>(usage.ru_maxrss);
    result.cpu_ms = ms(usage.ru_utime) + ms(usage.ru_stime);
    result.ok = ExitStatus::from_wait_status(client_status).success() &&
                ExitStatus::from_wait_status(server_status).success();
    return result;
}

/// One coordinator (its own process) and the simulated nodes (another process).
FaninResult fanin(const Shape& shape) {
    const auto serve = [&shape](int port_fd) {
        const std::uint32_t n = shape.ranks();
        asio::io_context io;
        CoordinatorSettings settings;
        settings.ranks.reserve(n);
        for (std::uint32_t i = 0; i < n; ++i) {
            settings.ranks.push_back(
                Member{Role::worker, i, fmt::format("node{}", i / shape.per_node)});
        }
        settings.run.heartbeat_timeout = std::chrono::seconds(120);
        settings.run.connect_timeout = std::chrono::seconds(120);
        settings.linger = std::chrono::seconds(60);
        settings.tree = shape.per_node > 1;
        const auto auth = protocol::Authenticator::create(
            {protocol::AuthMethod::secret, k_secret, "/nonexistent"});
        CoordinatorServer coordinator(
            io, std::move(settings), auth, protocol::StepId{k_job, 0}, "127.0.0.1", 0);
        const std::uint16_t port = coordinator.port();
        [[maybe_unused]] auto w = ::write(port_fd, &port, sizeof port);
        ::close(port_fd);
        coordinator.on_finished([&] {
            coordinator.close();
            io.stop();
        });
        io.run();
        return coordinator.state().verdict() == Verdict::done ? 0 : 2;
    };
    return two_processes("fan-in coordinator", serve, [&shape](std::uint16_t port, int fd) {
        return fanin_clients(shape, port, fd);
    });
}

// --- the floor: the same connections and bytes, no logic ---------------------------------------

/// One node's share of a fan-in's Traffic, in bytes per phase.
struct FloorBytes {
    std::size_t challenge = 0;
    std::size_t hello = 0;
    std::size_t welcome = 0;
    std::size_t reports = 0;
    std::size_t relay_welcomes = 0;
    std::size_t stops = 0;
};

FloorBytes per_node(const Traffic& t, std::uint32_t nodes) {
    const auto share = [nodes](std::uint64_t total) {
        return static_cast<std::size_t>((total + nodes - 1) / nodes);
    };
    return {share(t.challenge),
            share(t.hello),
            share(t.welcome),
            share(t.reports),
            share(t.relay_welcomes),
            share(t.stops)};
}

/// The floor's coordinator: per connection, the challenge's bytes; the hello's read, the
/// welcome's written; the reports read, the followers' welcomes written; once every connection
/// reported, the stops to each; then its EOF. No parsing, no proof, no state but counts.
class FloorServer {
  public:
    FloorServer(asio::io_context& io, std::uint32_t nodes, const FloorBytes& bytes)
        : m_io(io), m_acceptor(io, Tcp::endpoint(asio::ip::address_v4::loopback(), 0)),
          m_nodes(nodes), m_bytes(bytes), m_fill(std::max({bytes.challenge,
                                                           bytes.hello,
                                                           bytes.welcome,
                                                           bytes.reports,
                                                           bytes.relay_welcomes,
                                                           bytes.stops}),
                                                 'x') {
        m_acceptor.listen(4096);
    }

    [[nodiscard]] std::uint16_t port() const { return m_acceptor.local_endpoint().port(); }

    void start() { accept(); }

  private:
    struct Conn {
        explicit Conn(asio::io_context& io) : socket(io) {}
        Tcp::socket socket;
        std::string in;
    };

    void accept() {
        auto conn = std::make_shared<Conn>(m_io);
        m_acceptor.async_accept(conn->socket, [this, conn](const boost::system::error_code& ec) {
            if (!ec) {
                conn->socket.set_option(Tcp::no_delay(true));
                serve(conn);
            }
            if (++m_accepted < m_nodes) {
                accept();
            }
        });
    }

    /// Write `n` bytes, then run `then`.
    void put(const std::shared_ptr<Conn>& conn, std::size_t n, std::function<void()> then) {
        asio::async_write(
            conn->socket,
            asio::buffer(m_fill.data(), n),
            [conn, then = std::move(then)](const boost::system::error_code& ec, std::size_t) {
                if (!ec && then) {
                    then();
                }
            });
    }

    /// Read exactly `n` bytes, then run `then`.
    void take(const std::shared_ptr<Conn>& conn, std::size_t n, std::function<void()> then) {
        conn->in.resize(n);
        asio::async_read(
            conn->socket,
            asio::buffer(conn->in),
            [conn, then = std::move(then)](const boost::system::error_code& ec, std::size_t) {
                if (!ec) {
                    then();
                }
            });
    }

    void serve(const std::shared_ptr<Conn>& conn) {
        put(conn, m_bytes.challenge, {});
        take(conn, m_bytes.hello, [this, conn] {
            put(conn, m_bytes.welcome, {});
            take(conn, m_bytes.reports, [this, conn] {
                put(conn, m_bytes.relay_welcomes, {});
                m_reported.push_back(conn);
                if (m_reported.size() == m_nodes) {
                    for (const auto& each : m_reported) {
                        put(each, m_bytes.stops, [this, each] { wait_eof(each); });
                    }
                    m_reported.clear();
                }
            });
        });
    }

    void wait_eof(const std::shared_ptr<Conn>& conn) {
        conn->in.resize(1);
        conn->socket.async_read_some(asio::buffer(conn->in),
                                     [this, conn](const boost::system::error_code&, std::size_t) {
                                         boost::system::error_code ignored;
                                         conn->socket.close(ignored);
                                         if (++m_closed == m_nodes) {
                                             m_acceptor.close(ignored);
                                         }
                                     });
    }

    asio::io_context& m_io;
    Tcp::acceptor m_acceptor;
    std::uint32_t m_nodes;
    FloorBytes m_bytes;
    std::string m_fill;
    std::uint32_t m_accepted = 0;
    std::uint32_t m_closed = 0;
    std::vector<std::shared_ptr<Conn>> m_reported;
};

/// The floor's simulated node: reads the challenge's bytes, writes the hello's, reads the
/// welcome's, writes the reports', reads the followers' welcomes and the stops, closes.
class FloorNode : public std::enable_shared_from_this<FloorNode> {
  public:
    FloorNode(asio::io_context& io,
              const FloorBytes& bytes,
              std::uint16_t port,
              std::function<void()> registered,
              std::function<void(bool)> done)
        : m_socket(io), m_bytes(bytes), m_port(port), m_registered(std::move(registered)),
          m_done(std::move(done)) {}

    void start() {
        connect_loopback(m_socket, m_port, [self = shared_from_this()](bool connected) {
            connected ? self->run() : self->finish(false);
        });
    }

  private:
    void run() {
        auto self = shared_from_this();
        take(m_bytes.challenge, [self] {
            self->put(self->m_bytes.hello);
            self->take(self->m_bytes.welcome, [self] {
                if (self->m_registered) {
                    std::exchange(self->m_registered, nullptr)();
                }
                self->put(self->m_bytes.reports);
                self->take(self->m_bytes.relay_welcomes + self->m_bytes.stops,
                           [self] { self->finish(true); });
            });
        });
    }

    void put(std::size_t n) {
        m_out.assign(n, 'y');
        asio::async_write(
            m_socket,
            asio::buffer(m_out),
            [self = shared_from_this()](const boost::system::error_code&, std::size_t) {});
    }

    void take(std::size_t n, std::function<void()> then) {
        m_in.resize(n);
        asio::async_read(m_socket,
                         asio::buffer(m_in),
                         [self = shared_from_this(), then = std::move(then)](
                             const boost::system::error_code& ec, std::size_t) {
                             if (ec) {
                                 self->finish(false);
                                 return;
                             }
                             then();
                         });
    }

    void finish(bool ok) {
        if (m_registered) {
            std::exchange(m_registered, nullptr)();
        }
        boost::system::error_code ignored;
        m_socket.close(ignored);
        if (m_done) {
            std::exchange(m_done, nullptr)(ok);
        }
    }

    Tcp::socket m_socket;
    FloorBytes m_bytes;
    std::uint16_t m_port;
    std::function<void()> m_registered;
    std::function<void(bool)> m_done;
    std::string m_in;
    std::string m_out;
};

/// The floor of a fan-in (issue #33): the same number of loopback connections carrying the same
/// bytes per phase (`traffic`, measured in the fan-in) with the same handshake window, between
/// a server and clients that do nothing else. Two processes, as fanin().
FaninResult floor_fanin(const Shape& shape, const Traffic& traffic) {
    const FloorBytes bytes = per_node(traffic, shape.nodes);
    const auto serve = [&shape, &bytes](int port_fd) {
        ensure_descriptor_limit(shape.nodes + 64, "the floor's server");
        asio::io_context io;
        FloorServer floor(io, shape.nodes, bytes);
        const std::uint16_t port = floor.port();
        [[maybe_unused]] auto w = ::write(port_fd, &port, sizeof port);
        ::close(port_fd);
        floor.start();
        io.run();
        return 0;
    };
    const auto clients = [&shape, &bytes](std::uint16_t port, int /*traffic_fd*/) {
        ensure_descriptor_limit(shape.nodes + 64, "the floor's nodes");
        asio::io_context io;
        std::uint32_t next = 0;
        std::uint32_t ok = 0;
        std::uint32_t handshaking = 0;
        std::function<void()> launch_more;
        launch_more = [&] {
            while (next < shape.nodes && handshaking < k_in_flight) {
                ++handshaking;
                ++next;
                std::make_shared<FloorNode>(
                    io,
                    bytes,
                    port,
                    [&] {
                        --handshaking;
                        launch_more();
                    },
                    [&](bool success) { ok += success ? 1 : 0; })
                    ->start();
            }
        };
        launch_more();
        io.run();
        return ok == shape.nodes ? 0 : 1;
    };
    return two_processes("floor server", serve, clients);
}

/// The floor's line under a fan-in's (`floor`, measured with its Traffic): its times and
/// tfslurm's ratio to them.
void print_floor_line(const Shape& shape, const FaninResult& real, const FaninResult& floor) {
    const std::uint64_t bytes = real.traffic.challenge + real.traffic.hello + real.traffic.welcome +
                                real.traffic.reports + real.traffic.relay_welcomes +
                                real.traffic.stops;
    fmt::print("  {:<44} {:8.1f} ms (tfslurm {:.2f}x)   CPU: server {:.0f} ms (tfslurm {:.2f}x), "
               "nodes {:.0f} ms; {:.1f} MiB in {} connections   {}\n",
               "floor: same connections and bytes, no logic",
               floor.wall_ms,
               real.wall_ms / floor.wall_ms,
               floor.cpu_ms,
               real.cpu_ms / std::max(floor.cpu_ms, 1.0),
               floor.clients_cpu_ms,
               static_cast<double>(bytes) / (1024.0 * 1024.0),
               shape.nodes,
               floor.ok ? "ok" : "FAILED");
}

/// The floor measured after a fan-in, with the bytes it counted, and its line.
void print_floor(const Shape& shape, const FaninResult& real) {
    if (real.traffic.hello == 0) {
        fmt::print("  {:<44} (no traffic measured)\n", "floor");
        return;
    }
    print_floor_line(shape, real, floor_fanin(shape, real.traffic));
}

void print_fanin(const std::string& what,
                 const Shape& shape,
                 const FaninResult& r,
                 const std::string& target) {
    const std::uint32_t n = shape.ranks();
    fmt::print("  {:<44} {:8.1f} ms {:>10.0f} tasks/s   coordinator done {:8.1f} ms   {}\n",
               what,
               r.wall_ms,
               n / (r.wall_ms / 1e3),
               r.finished_ms,
               r.ok ? "ok" : "FAILED");
    fmt::print("  {:<44} {:8.1f} MiB peak RSS ({:.0f} bytes per task), CPU: coordinator {:.0f} ms, "
               "simulated launchers {:.0f} ms   {}\n",
               "",
               r.rss_kib / 1024.0,
               r.rss_kib * 1024.0 / n,
               r.cpu_ms,
               r.clients_cpu_ms,
               target);
}

/// The tree against the flat protocol, next to the targets of issue #12 and the published
/// yardsticks. Figures are printed, never asserted.
void fanins(std::uint32_t tasks) {
    const std::uint32_t per_node = 8;
    fmt::print("fan-in: simulated launchers over loopback, secret auth, one coordinator process "
               "(registered, reported exit 0, stopped)\n");
    fmt::print("  yardsticks: torchelastic ~4,000 hosts in 10 s; PyTorch TCPStore 96,000 ranks "
               "in 100 s\n");
    const Shape tree{tasks / per_node, per_node, false};
    const FaninResult tree_result = fanin(tree);
    print_fanin(fmt::format("{} tasks, tree ({} nodes x {})", tree.ranks(), tree.nodes, per_node),
                tree,
                tree_result,
                "target (issue #33): 10,000 tasks <= 150 ms, within 2x of the floor");
    print_floor(tree, tree_result);
    const Shape flat{tasks, 1, false};
    print_fanin(fmt::format("{} tasks, flat ({} x 1)", flat.ranks(), flat.nodes),
                flat,
                fanin(flat),
                "(for comparison)");
    const Shape large{12500, per_node, false};
    const FaninResult large_result = fanin(large);
    print_fanin(fmt::format("{} tasks, tree ({} nodes x {})", large.ranks(), large.nodes, per_node),
                large,
                large_result,
                "target (issue #33): 100,000 tasks <= 1.5 s, within 2x of the floor");
    print_floor(large, large_result);
    const Shape exchange{tasks / per_node, per_node, true};
    print_fanin(fmt::format("{} tasks, tree, address exchange", exchange.ranks()),
                exchange,
                fanin(exchange),
                "(issue #9: hellos with addresses, `cluster` to every task, then exit and stop)");
}

/// What watchers (`tfslurm top`) cost the coordinator: once a second, while any is connected, one
/// snapshot of every rank taken and encoded (shared by every watcher); nothing without one. And
/// what a watcher pays to decode it. Medians of 5, in this process (no sockets: the sealing and
/// the write are per watcher and small next to the encoding).
void snapshots(std::uint32_t tasks) {
    constexpr std::uint32_t k_per_node = 8;
    CoordinatorSettings settings;
    settings.ranks.reserve(tasks);
    for (std::uint32_t i = 0; i < tasks; ++i) {
        settings.ranks.push_back(Member{Role::worker, i, fmt::format("node{}", i / k_per_node)});
    }
    settings.run.stall_timeout = std::chrono::seconds(300);
    const auto t0 = Clock::now();
    Coordinator coordinator(std::move(settings), t0);
    for (std::uint32_t i = 0; i < tasks; ++i) {
        coordinator.registered(i, t0);
        coordinator.usage_reported(i, protocol::Usage{1000U + i, 1ULL << 30, 4096}, t0);
        coordinator.usage_reported(
            i, protocol::Usage{6000U + i, 1ULL << 30, 8192}, t0 + std::chrono::seconds(5));
        coordinator.progressed(i, Millis{250}, t0 + std::chrono::seconds(5));
        // Every rank's start-up phases, a few milliseconds apart.
        StartupTimes phases;
        const auto task = WallClock::time_point{} + std::chrono::milliseconds{1'796'047'358'000} +
                          std::chrono::milliseconds{i % 97};
        phases[StartupPhase::task] = task;
        phases[StartupPhase::up] = task + std::chrono::milliseconds{30 + i % 13};
        phases[StartupPhase::registered] = task + std::chrono::milliseconds{60 + i % 17};
        phases[StartupPhase::started] = task + std::chrono::milliseconds{70 + i % 19};
        coordinator.startup_reported(i, phases);
    }
    const auto now = t0 + std::chrono::seconds(6);
    std::vector<double> take;
    std::vector<double> recompute;
    std::vector<double> decode;
    std::size_t bytes = 0;
    for (int run = 0; run < 5; ++run) {
        // While the step starts a phase comes between two snapshots: the start-up summary is
        // worked out again. Once it started, the summary is the last one.
        StartupTimes late;
        late[StartupPhase::progress] =
            WallClock::time_point{} + std::chrono::milliseconds{1'796'047'359'000 + run};
        coordinator.startup_reported(static_cast<std::uint32_t>(run) % tasks, late);
        double start = now_ms();
        (void)encode_snapshot(take_snapshot(coordinator, now, protocol::StepId{k_job, 0}));
        recompute.push_back(now_ms() - start);
        start = now_ms();
        const std::string payload =
            encode_snapshot(take_snapshot(coordinator, now, protocol::StepId{k_job, 0}));
        take.push_back(now_ms() - start);
        bytes = payload.size();
        start = now_ms();
        const Snapshot back = decode_snapshot(payload);
        decode.push_back(now_ms() - start);
        if (back.ranks.size() != tasks) {
            throw std::runtime_error("snapshot: ranks lost");
        }
    }
    std::sort(take.begin(), take.end());
    std::sort(recompute.begin(), recompute.end());
    std::sort(decode.begin(), decode.end());
    fmt::print("  {:<44} {:8.1f} ms a second ({:.1f}% of a core) with watchers, 0 without "
               "({:.1f} ms while the step starts: the start-up summary again); "
               "{:.1f} MiB a snapshot; a watcher decodes it in {:.1f} ms\n",
               fmt::format("top: {} ranks, snapshot taken + encoded", tasks),
               take[2],
               take[2] / 10.0,
               recompute[2],
               static_cast<double>(bytes) / (1024.0 * 1024.0),
               decode[2]);
}

/// `--shape ... --runs N` (N > 1): N rounds of the fan-in, each followed by its floor, so that
/// both meet the same minutes of a machine whose speed moves (bench/README.md: the floor alone
/// moved by half from one run to the next); then the medians and each round's ratio.
int fanin_rounds(const Shape& shape, int rounds) {
    std::vector<double> walls;
    std::vector<double> floors;
    std::vector<double> ratios;
    std::vector<double> cpus;
    std::vector<double> rss;
    bool ok = true;
    for (int round = 1; round <= rounds; ++round) {
        const FaninResult real = fanin(shape);
        if (real.traffic.hello == 0) {
            fmt::print("  round {}: no traffic measured\n", round);
            return 1;
        }
        const FaninResult floor = floor_fanin(shape, real.traffic);
        ok = ok && real.ok && floor.ok;
        fmt::print("  round {:<3} tfslurm {:8.1f} ms (coordinator CPU {:6.0f} ms)   floor {:8.1f} "
                   "ms   {:.2f}x   {}\n",
                   round,
                   real.wall_ms,
                   real.cpu_ms,
                   floor.wall_ms,
                   real.wall_ms / floor.wall_ms,
                   real.ok && floor.ok ? "ok" : "FAILED");
        walls.push_back(real.wall_ms);
        floors.push_back(floor.wall_ms);
        ratios.push_back(real.wall_ms / floor.wall_ms);
        cpus.push_back(real.cpu_ms);
        rss.push_back(real.rss_kib);
    }
    const auto under = std::count_if(ratios.begin(), ratios.end(), [](double r) { return r < 2; });
    const Stats wall = stats(walls);
    const Stats floor = stats(floors);
    const Stats ratio = stats(ratios);
    fmt::print("  {} tasks, {} rounds: tfslurm median {:.1f} ms ({:.1f} to {:.1f}), floor median "
               "{:.1f} ms ({:.1f} to {:.1f}); ratio median {:.2f}x ({:.2f} to {:.2f}x, {} of {} "
               "under 2x); coordinator CPU median {:.0f} ms, peak RSS {:.1f} MiB   {}\n",
               shape.ranks(),
               rounds,
               wall.median,
               wall.min,
               wall.max,
               floor.median,
               floor.min,
               floor.max,
               ratio.median,
               ratio.min,
               ratio.max,
               under,
               rounds,
               stats(cpus).median,
               stats(rss).max / 1024.0,
               ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}

/// `--shape NODESxPER_NODE`: that one fan-in, for a profiler (with `--runs N`, N rounds).
int only_fanin(const std::string& text, bool no_floor, int rounds) {
    unsigned nodes = 0;
    unsigned per_node = 0;
    char x = 0;
    if (std::sscanf(text.c_str(), "%u%c%u", &nodes, &x, &per_node) != 3 || x != 'x' || nodes == 0 ||
        per_node == 0) {
        std::cerr << "bench_run: --shape: expected NODESxPER_NODE such as 12500x8, got '" << text
                  << "'\n";
        return 2;
    }
    // `12500x8,exchange`: hellos with addresses and a `cluster` to every task (issue #9).
    const bool exchange = text.size() > 9 && text.compare(text.size() - 9, 9, ",exchange") == 0;
    const Shape one{nodes, per_node, exchange};
    if (rounds > 1 && !exchange && !no_floor) {
        return fanin_rounds(one, rounds);
    }
    const auto result = fanin(one);
    print_fanin(
        fmt::format("{} tasks ({} nodes x {})", one.ranks(), nodes, per_node), one, result, "");
    if (!exchange && !no_floor) {
        // The exchange's `cluster` comes between the hellos and the exits: not the floor's
        // phases.
        print_floor(one, result);
    }
    return result.ok ? 0 : 1;
}

/// The whole program; main() only catches what it throws.
int bench_main(int argc, char** argv) {
    if (argc == 3 && std::string(argv[1]) == "--trainer") {
        return trainer(argv[2]);
    }
    std::string cli;
    int runs = 10;
    std::optional<std::string> runs_text; ///< as typed, for its message
    int tasks = 16;
    std::uint32_t fanin_n = 10000;
    std::string shape;
    std::uint32_t top_only = 0;
    bool no_floor = false;
    for (int i = 1; i < argc; i += 2) {
        const std::string option = argv[i];
        if (option == "--no-floor") {
            no_floor = true;
            --i;
            continue;
        }
        if (i + 1 == argc) {
            std::cerr << "bench_run: " << option << " needs a value\n";
            return 2;
        }
        if (option == "--cli") {
            cli = argv[i + 1];
        } else if (option == "--runs") {
            runs = std::atoi(argv[i + 1]);
            runs_text = argv[i + 1];
        } else if (option == "--tasks") {
            tasks = std::atoi(argv[i + 1]);
        } else if (option == "--shape") {
            shape = argv[i + 1];
        } else if (option == "--top") {
            top_only = static_cast<std::uint32_t>(std::atoi(argv[i + 1]));
        } else if (option == "--fanin") {
            fanin_n = static_cast<std::uint32_t>(std::atoi(argv[i + 1]));
        } else {
            std::cerr << "usage: bench_run [--cli PATH] [--runs N] [--tasks N] [--fanin N]\n"
                         "       bench_run --shape NODESxPER_NODE[,exchange] [--no-floor]\n"
                         "       bench_run --shape NODESxPER_NODE --runs N\n"
                         "       bench_run --top RANKS\n";
            return 2;
        }
    }
    if (!shape.empty()) {
        if (runs_text && runs < 1) {
            std::cerr << "bench_run: --runs: expected a count of 1 or more, got '" << *runs_text
                      << "'\n";
            return 2;
        }
        return only_fanin(shape, no_floor, runs_text ? runs : 1);
    }
    if (top_only > 0) {
        snapshots(top_only);
        return 0;
    }
    if (cli.empty()) {
        const std::string exe = self_exe();
        cli = exe.substr(0, exe.rfind('/')) + "/../cli/tfslurm";
    }
    if (::access(cli.c_str(), X_OK) != 0) {
        std::cerr << "bench_run: no tfslurm at " << cli << " (give --cli PATH)\n";
        return 2;
    }
    fmt::print("bench_run: {} ({} CPUs)\n", cli, ::sysconf(_SC_NPROCESSORS_ONLN));
    completion(cli, runs, tasks);
    failure(cli, std::max(1, runs / 2), tasks);
    overhead(cli, std::max(1, runs / 2), tasks);
    // The one-task case (issue #33): what `tfslurm run` adds to a single `true`, in ms.
    overhead(cli, runs, 1);
    if (fanin_n > 0) {
        fanins(fanin_n);
        fmt::print("watchers (tfslurm top): what one snapshot a second costs the coordinator\n");
        snapshots(fanin_n);
        snapshots(100000);
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return bench_main(argc, argv);
    } catch (const std::exception& e) {
        std::cerr << "bench_run: " << e.what() << "\n";
        return 1;
    }
}
