// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/shell/watch_client.hpp>

#include <fmt/format.h>

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

namespace tfslurm {

namespace {

/// Heartbeats a watcher sends while it reads: the coordinator never waits for them, but a
/// connection that says nothing for hours is not mistaken for a dead one by a firewall.
constexpr Millis k_watch_heartbeat{10000};

int remaining_ms(Clock::time_point deadline) {
    const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
    return left <= 0 ? 0 : static_cast<int>(std::min<Millis::rep>(left, 60000));
}

struct AddrInfoDeleter {
    void operator()(addrinfo* info) const noexcept { ::freeaddrinfo(info); }
};

} // namespace

std::string WatchClient::where() const {
    return fmt::format("{} ({})", m_target.host, m_dialled);
}

Error WatchClient::unreachable(const std::string& why) const {
    return errors::make(Errc::io,
                        "top",
                        fmt::format("cannot reach step {}'s coordinator at {}: {}",
                                    protocol::to_string(m_target.step),
                                    where(),
                                    why));
}

Error WatchClient::unexpected(std::string_view expected, const protocol::Message& got) const {
    return errors::make(
        Errc::protocol,
        "top",
        fmt::format("expected a {} from {}, got {}", expected, where(), protocol::type_name(got)));
}

WatchClient::WatchClient(const WatchTarget& target,
                         const protocol::Authenticator& auth,
                         Millis timeout)
    : m_target(target), m_dialled(host_port(target.address, target.port)),
      m_last_beat(Clock::now()) {
    const auto deadline = Clock::now() + timeout;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    const std::string service = std::to_string(target.port);
    if (const int rc = ::getaddrinfo(target.address.c_str(), service.c_str(), &hints, &found);
        rc != 0) {
        throw unreachable(::gai_strerror(rc));
    }
    const std::unique_ptr<addrinfo, AddrInfoDeleter> addresses(found);
    std::string last_error = "no address";
    for (const addrinfo* a = addresses.get(); a != nullptr && m_fd < 0; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            last_error = std::strerror(errno);
            continue;
        }
        if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
            last_error = std::strerror(errno);
            ::close(fd);
            continue;
        }
        pollfd p{fd, POLLOUT, 0};
        const int ready = ::poll(&p, 1, remaining_ms(deadline));
        int error = 0;
        socklen_t length = sizeof error;
        if (ready <= 0) {
            last_error = fmt::format("did not answer within {}", format_seconds(timeout));
        } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0 || error != 0) {
            last_error = std::strerror(error != 0 ? error : errno);
        } else {
            m_fd = fd;
            break;
        }
        ::close(fd);
    }
    if (m_fd < 0) {
        throw unreachable(last_error);
    }
    try {
        handshake(auth, timeout, deadline);
    } catch (...) {
        // No destructor runs for an object whose constructor threw.
        ::close(m_fd);
        m_fd = -1;
        throw;
    }
}

void WatchClient::handshake(const protocol::Authenticator& auth,
                            Millis timeout,
                            Clock::time_point deadline) {
    const WatchTarget& target = m_target;
    const std::string step_name = protocol::to_string(target.step);
    // The handshake: challenge, our hello with its proof, the coordinator's welcome with its.
    if (!fill(deadline, "challenge", timeout)) {
        throw unreachable("it closed the connection before its challenge");
    }
    const protocol::Message first = protocol::decode_payload(*std::exchange(m_pending, {}));
    const auto* challenge = std::get_if<protocol::Challenge>(&first);
    if (challenge == nullptr) {
        throw unexpected("challenge", first);
    }
    const std::string endpoint = protocol::tcp_endpoint(target.port);
    protocol::Hello hello;
    hello.job = target.step.job;
    hello.step = target.step.step;
    hello.rank = protocol::k_watcher_rank;
    hello.watch = true;
    std::array<char, 256> name{};
    hello.host = ::gethostname(name.data(), name.size() - 1) == 0 ? name.data() : "?";
    hello.pid = ::getpid();
    hello.auth = auth.method();
    std::string own_key;
    if (hello.auth == protocol::AuthMethod::munge) {
        own_key = protocol::random_bytes(protocol::k_key_material_size);
    }
    hello.credential =
        auth.prove(challenge->nonce, target.step, protocol::k_watcher_rank, endpoint, own_key);
    hello.nonce = protocol::to_hex(protocol::random_bytes(protocol::k_nonce_size));
    send(hello);
    if (!fill(deadline, "welcome", timeout)) {
        throw unreachable("it closed the connection before its welcome");
    }
    const protocol::Message answer = protocol::decode_payload(*std::exchange(m_pending, {}));
    if (const auto* reject = std::get_if<protocol::Reject>(&answer)) {
        throw errors::make(Errc::auth,
                           "top",
                           fmt::format("step {}'s coordinator refused this watcher: {}",
                                       step_name,
                                       quote(reject->reason)));
    }
    const auto* welcome = std::get_if<protocol::Welcome>(&answer);
    if (welcome == nullptr) {
        throw unexpected("welcome", answer);
    }
    std::string peer_key;
    if (auto why = auth.verify_coordinator(welcome->credential,
                                           hello.nonce,
                                           target.step,
                                           protocol::k_watcher_rank,
                                           endpoint,
                                           &peer_key)) {
        throw errors::make(
            Errc::auth,
            "top",
            fmt::format(
                "the process at {} is not step {}'s coordinator: {}", where(), step_name, *why));
    }
    m_channel.emplace(auth.session_keys(auth.method(),
                                        own_key,
                                        peer_key,
                                        challenge->nonce,
                                        hello.nonce,
                                        target.step,
                                        protocol::k_watcher_rank,
                                        endpoint),
                      protocol::End::launcher);
    // A proven coordinator's snapshot of a large step exceeds k_max_frame.
    m_decoder.set_limit(protocol::k_max_trusted_frame + protocol::k_tag_size);
}

void WatchClient::send(const protocol::Message& message) {
    const std::string frame =
        m_channel ? m_channel->seal(protocol::encode_payload(message), protocol::k_max_frame)
                  : protocol::encode_frame(message);
    std::size_t done = 0;
    const auto deadline = Clock::now() + Millis{10000};
    while (done < frame.size()) {
        const ssize_t n = ::send(m_fd, frame.data() + done, frame.size() - done, MSG_NOSIGNAL);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            pollfd p{m_fd, POLLOUT, 0};
            if (::poll(&p, 1, remaining_ms(deadline)) > 0) {
                continue;
            }
        }
        throw errors::make(Errc::io,
                           "top",
                           fmt::format("cannot write to the coordinator at {}: {}",
                                       where(),
                                       n < 0 ? std::strerror(errno) : "timed out"));
    }
}

bool WatchClient::fill(Clock::time_point deadline, const std::string& waiting_for, Millis timeout) {
    std::array<char, 65536> buffer{};
    while (!m_pending) {
        if ((m_pending = m_decoder.next())) {
            break;
        }
        pollfd p{m_fd, POLLIN, 0};
        const int ready = ::poll(&p, 1, remaining_ms(deadline));
        if (ready < 0 && errno == EINTR) {
            continue;
        }
        if (ready <= 0) {
            throw errors::make(Errc::io,
                               "top",
                               fmt::format("no {} from step {}'s coordinator at {} within {}",
                                           waiting_for,
                                           protocol::to_string(m_target.step),
                                           where(),
                                           format_seconds(timeout)));
        }
        const ssize_t n = ::recv(m_fd, buffer.data(), buffer.size(), 0);
        if (n == 0) {
            return false;
        }
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                continue;
            }
            if (errno == ECONNRESET) {
                return false;
            }
            throw errors::make(Errc::io,
                               "top",
                               fmt::format("cannot read from the coordinator at {}: {}",
                                           where(),
                                           std::strerror(errno)));
        }
        m_decoder.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    }
    return true;
}

bool WatchClient::buffered() {
    if (!m_pending) {
        m_pending = m_decoder.next();
    }
    return m_pending.has_value();
}

std::optional<Snapshot> WatchClient::next(Millis timeout) {
    const auto now = Clock::now();
    if (now - m_last_beat >= k_watch_heartbeat) {
        m_last_beat = now;
        send(protocol::Heartbeat{});
    }
    if (!fill(now + timeout, "snapshot", timeout)) {
        return std::nullopt;
    }
    const std::string payload = m_channel->open(*std::exchange(m_pending, {}));
    if (!is_snapshot_payload(payload)) {
        // Nothing else is sent to a watcher: decoding it names what it was.
        const protocol::Message other = protocol::decode_payload(payload);
        throw errors::make(Errc::protocol,
                           "top",
                           fmt::format("expected a snapshot from {}, got {}",
                                       where(),
                                       protocol::type_name(other)));
    }
    return decode_snapshot(payload);
}

WatchClient::~WatchClient() {
    if (m_fd >= 0) {
        ::close(m_fd);
    }
}

} // namespace tfslurm
