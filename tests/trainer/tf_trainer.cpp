// SPDX-License-Identifier: MIT
// tfslurm_test_trainer: a fake TensorFlow-like trainer for the launcher's tests (local mode and
// the real-cluster e2e tests). It reads TF_CONFIG and behaves like a TF1/TF2 PSS task:
//
// - every task with an address in the cluster spec listens on its port;
// - a ps (and an evaluator) serves forever: each connection gets its 4 bytes echoed back;
// - a worker or the chief connects to every ps (retrying until they listen), sends its rank as
//   4 bytes, checks the echo, "works" for --work-ms, then exits 0.
//
// Misbehaviour for tests; options apply to every task, or, after `--on SELECTOR`, only to the
// matching tasks (until the next --on). SELECTOR: all, rank=N, ps, worker, chief, evaluator,
// or ROLE:INDEX (worker:1).
//
//   --sleep-ms N          sleep N ms before anything else
//   --work-ms N           worker/chief: sleep N ms after the exchange; ps: see --exit-code
//   --until-file PATH     worker/chief: after --work-ms, work on until PATH exists (looked for
//                         every 100 ms, for at most 120 s; then exit 4)
//   --exit-code C         exit with C at the end (a ps with --exit-code stops serving and
//                         exits after --work-ms)
//   --signal S            kill itself with signal S at the end
//   --ignore-sigterm      print and ignore SIGTERM
//   --grandchild          fork a child that sleeps forever (same process group)
//   --grandchild-setsid   the same in a new session (escapes the process group)
//   --serve               worker/chief: serve forever after the work (TF2 PSS worker)
//   --connect-timeout-ms N  how long to retry connecting to a ps (default 30000)
//
// Output: one line per event on stdout, `tf_trainer[<role>:<index> rank=<r>]: <event>`.
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

struct Behaviour {
    long sleep_ms = 0;
    long work_ms = 0;
    std::string until_file;
    std::optional<int> exit_code;
    int signal = 0;
    bool ignore_sigterm = false;
    bool grandchild = false;
    bool grandchild_setsid = false;
    bool serve = false;
    long connect_timeout_ms = 30000;
};

struct Identity {
    std::string role = "worker";
    long index = 0;
    long rank = -1;
    std::string address; ///< host:port, empty when not in the cluster spec
    std::vector<std::pair<std::string, std::string>> ps; ///< (name, host:port)
};

std::array<char, 256> g_prefix{};
bool g_ignore_sigterm = false;

void say(const std::string& event) {
    const std::string line = std::string(g_prefix.data()) + event + "\n";
    [[maybe_unused]] const auto n = ::write(STDOUT_FILENO, line.data(), line.size());
}

void say_raw(const char* event) noexcept {
    // Async-signal-safe (memcpy, strlen, write), and one write() per line: other processes
    // write to the same pipe, and a line written in two pieces can be split by theirs.
    std::array<char, 512> line{};
    const std::size_t prefix = std::min(std::strlen(g_prefix.data()), line.size());
    std::memcpy(line.data(), g_prefix.data(), prefix);
    const std::size_t rest = std::min(std::strlen(event), line.size() - prefix);
    std::memcpy(line.data() + prefix, event, rest);
    [[maybe_unused]] const auto n = ::write(STDOUT_FILENO, line.data(), prefix + rest);
}

extern "C" void on_sigterm(int /*signo*/) {
    if (g_ignore_sigterm) {
        say_raw("received SIGTERM, ignoring it\n");
        return;
    }
    say_raw("received SIGTERM, exiting\n");
    ::signal(SIGTERM, SIG_DFL);
    ::raise(SIGTERM);
}

[[noreturn]] void die(const std::string& what) {
    say("error: " + what);
    std::exit(1);
}

bool matches(std::string_view selector, const Identity& self) {
    if (selector == "all") {
        return true;
    }
    if (selector.rfind("rank=", 0) == 0) {
        return std::to_string(self.rank) == selector.substr(5);
    }
    const auto colon = selector.find(':');
    if (colon == std::string_view::npos) {
        return selector == self.role;
    }
    return selector.substr(0, colon) == self.role &&
           selector.substr(colon + 1) == std::to_string(self.index);
}

long number(const char* text, const char* option) {
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0') {
        die(std::string("bad number for ") + option + ": " + text);
    }
    return value;
}

Behaviour parse(int argc, char** argv, const Identity& self) {
    Behaviour b;
    bool applies = true;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        const auto value = [&]() -> const char* {
            if (i + 1 >= argc) {
                die(std::string("missing value for ") + argv[i]);
            }
            return argv[++i];
        };
        if (arg == "--on") {
            applies = matches(value(), self);
        } else if (arg == "--sleep-ms") {
            const long v = number(value(), "--sleep-ms");
            b.sleep_ms = applies ? v : b.sleep_ms;
        } else if (arg == "--work-ms") {
            const long v = number(value(), "--work-ms");
            b.work_ms = applies ? v : b.work_ms;
        } else if (arg == "--until-file") {
            const char* path = value();
            b.until_file = applies ? path : b.until_file;
        } else if (arg == "--exit-code") {
            const long v = number(value(), "--exit-code");
            if (applies) {
                b.exit_code = static_cast<int>(v);
            }
        } else if (arg == "--signal") {
            const long v = number(value(), "--signal");
            b.signal = applies ? static_cast<int>(v) : b.signal;
        } else if (arg == "--connect-timeout-ms") {
            const long v = number(value(), "--connect-timeout-ms");
            b.connect_timeout_ms = applies ? v : b.connect_timeout_ms;
        } else if (arg == "--ignore-sigterm") {
            b.ignore_sigterm = b.ignore_sigterm || applies;
        } else if (arg == "--grandchild") {
            b.grandchild = b.grandchild || applies;
        } else if (arg == "--grandchild-setsid") {
            b.grandchild_setsid = b.grandchild_setsid || applies;
        } else if (arg == "--serve") {
            b.serve = b.serve || applies;
        } else {
            die("unknown option " + std::string(arg));
        }
    }
    return b;
}

Identity identify() {
    Identity self;
    const char* rank = std::getenv("TFSLURM_RANK");
    if (rank == nullptr) {
        rank = std::getenv("SLURM_PROCID");
    }
    self.rank = rank != nullptr ? std::strtol(rank, nullptr, 10) : -1;
    const char* config = std::getenv("TF_CONFIG");
    if (config == nullptr) {
        die("TF_CONFIG is not set");
    }
    const auto json = nlohmann::json::parse(config, nullptr, false);
    if (json.is_discarded() || !json.contains("task")) {
        die(std::string("TF_CONFIG is not valid: ") + config);
    }
    self.role = json["task"].value("type", "worker");
    self.index = json["task"].value("index", 0L);
    const auto& cluster = json.value("cluster", nlohmann::json::object());
    if (cluster.contains(self.role) && static_cast<long>(cluster[self.role].size()) > self.index) {
        self.address = cluster[self.role][static_cast<std::size_t>(self.index)].get<std::string>();
    }
    if (cluster.contains("ps")) {
        long i = 0;
        for (const auto& endpoint : cluster["ps"]) {
            self.ps.emplace_back("ps:" + std::to_string(i++), endpoint.get<std::string>());
        }
    }
    return self;
}

std::pair<std::string, std::uint16_t> split(const std::string& endpoint) {
    const auto colon = endpoint.rfind(':');
    if (colon == std::string::npos) {
        die("bad endpoint " + endpoint);
    }
    return {endpoint.substr(0, colon),
            static_cast<std::uint16_t>(std::strtoul(endpoint.c_str() + colon + 1, nullptr, 10))};
}

/// The IPv4 address of `host` (first result), or INADDR_ANY when it does not resolve.
in_addr resolve(const std::string& host) {
    in_addr out{};
    out.s_addr = htonl(INADDR_ANY);
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) == 0 && found != nullptr) {
        out = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
        ::freeaddrinfo(found);
    }
    return out;
}

int listen_on(const std::string& endpoint) {
    const auto [host, port] = split(endpoint);
    in_addr address = resolve(host);
    // A loopback address is bound as such; a node name may resolve to 127.0.1.1 on the node
    // itself, so anything else binds every address.
    if ((ntohl(address.s_addr) >> 24U) != 127U) {
        address.s_addr = htonl(INADDR_ANY);
    }
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr = address;
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) != 0 ||
        ::listen(fd, 128) != 0) {
        die("cannot listen on " + endpoint + ": " + std::strerror(errno));
    }
    say("listening on " + endpoint);
    return fd;
}

[[noreturn]] void serve_forever(int listener) {
    say("serving forever");
    std::vector<pollfd> fds{{listener, POLLIN, 0}};
    for (;;) {
        if (::poll(fds.data(), fds.size(), -1) < 0) {
            continue;
        }
        if ((fds[0].revents & POLLIN) != 0) {
            const int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            if (client >= 0) {
                fds.push_back({client, POLLIN, 0});
            }
        }
        for (std::size_t i = 1; i < fds.size();) {
            if ((fds[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
                std::array<char, 4> buffer{};
                const ssize_t n = ::recv(fds[i].fd, buffer.data(), buffer.size(), MSG_WAITALL);
                if (n == 4) {
                    [[maybe_unused]] auto w = ::send(fds[i].fd, buffer.data(), 4, MSG_NOSIGNAL);
                }
                ::close(fds[i].fd);
                fds.erase(fds.begin() + static_cast<long>(i));
            } else {
                ++i;
            }
        }
    }
}

void exchange_with(const std::string& name,
                   const std::string& endpoint,
                   long rank,
                   long timeout_ms) {
    const auto [host, port] = split(endpoint);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr = resolve(host);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (;;) {
        const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        // A ps that accepted (in the kernel's backlog) but never answers must not hang us.
        timeval limit{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
        if (::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0) {
            const auto value = htonl(static_cast<std::uint32_t>(rank));
            std::array<char, 4> out{};
            std::memcpy(out.data(), &value, 4);
            std::array<char, 4> in{};
            const bool ok = ::send(fd, out.data(), 4, MSG_NOSIGNAL) == 4 &&
                            ::recv(fd, in.data(), 4, MSG_WAITALL) == 4 && in == out;
            ::close(fd);
            if (!ok) {
                die(std::string("bad echo from ").append(name).append(" at ").append(endpoint));
            }
            say(std::string("exchanged with ").append(name).append(" at ").append(endpoint));
            return;
        }
        ::close(fd);
        if (std::chrono::steady_clock::now() > deadline) {
            die(std::string("cannot reach ").append(name).append(" at ").append(endpoint));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

void spawn_grandchild(bool new_session) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::signal(SIGTERM, SIG_DFL);
        if (new_session) {
            ::setsid();
        }
        for (;;) {
            ::pause();
        }
    }
    say(std::string(new_session ? "grandchild (new session)" : "grandchild") +
        " pid=" + std::to_string(pid));
}

void sleep_ms(long ms) {
    if (ms > 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
}

/// Until `path` exists (every 100 ms); exits 4 after 120 s without it.
void wait_for_file(const std::string& path) {
    for (int i = 0; i < 1200; ++i) {
        if (::access(path.c_str(), F_OK) == 0) {
            say("found " + path);
            return;
        }
        sleep_ms(100);
    }
    say("no " + path + " within 120 s");
    std::exit(4);
}

[[noreturn]] void finish(const Behaviour& b) {
    if (b.signal != 0) {
        say("crashing with signal " + std::to_string(b.signal));
        ::signal(b.signal, SIG_DFL);
        ::raise(b.signal);
        ::pause();
    }
    const int code = b.exit_code.value_or(0);
    say("exiting with status " + std::to_string(code));
    std::exit(code);
}

} // namespace

namespace {
int run(int argc, char** argv);
} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        die(std::string("unexpected error: ") + e.what());
    }
}

namespace {
int run(int argc, char** argv) {
    const Identity self = identify();
    std::snprintf(g_prefix.data(),
                  g_prefix.size(),
                  "tf_trainer[%s:%ld rank=%ld]: ",
                  self.role.c_str(),
                  self.index,
                  self.rank);
    const Behaviour b = parse(argc, argv, self);
    g_ignore_sigterm = b.ignore_sigterm;
    struct sigaction action {};
    action.sa_handler = on_sigterm;
    ::sigemptyset(&action.sa_mask);
    ::sigaction(SIGTERM, &action, nullptr);
    say("start pid=" + std::to_string(::getpid()) + " pgid=" + std::to_string(::getpgrp()));
    sleep_ms(b.sleep_ms);
    if (b.grandchild) {
        spawn_grandchild(false);
    }
    if (b.grandchild_setsid) {
        spawn_grandchild(true);
    }
    const int listener = self.address.empty() ? -1 : listen_on(self.address);
    const bool server_role = self.role == "ps" || self.role == "evaluator";
    if (server_role) {
        if (b.exit_code || b.signal != 0) {
            sleep_ms(b.work_ms);
            finish(b);
        }
        if (listener < 0) {
            say("serving forever (no address)");
            for (;;) {
                ::pause();
            }
        }
        serve_forever(listener);
    }
    for (const auto& [name, endpoint] : self.ps) {
        exchange_with(name, endpoint, self.rank, b.connect_timeout_ms);
    }
    sleep_ms(b.work_ms);
    if (!b.until_file.empty()) {
        wait_for_file(b.until_file);
    }
    if (b.serve && listener >= 0 && !b.exit_code && b.signal == 0) {
        serve_forever(listener);
    }
    finish(b);
}
} // namespace
