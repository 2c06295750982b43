// SPDX-License-Identifier: MIT
// The reachability probe's sockets (docs/protocol.md, "The reachability probe"). A probe
// connection carries nothing: connect, then close with a reset, so that neither side keeps a
// TIME_WAIT on the trainer's port and nothing looks like a trainer's peer.
#include "shell/detail/reachability_probe.hpp"

#include <tfslurm/common/log.hpp>

#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/v6_only.hpp>
#include <boost/asio/post.hpp>
#include <fmt/format.h>

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

namespace tfslurm::detail {

namespace asio = boost::asio;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

struct ReachabilityProbe::Attempt {
    Attempt(asio::io_context& io, ProbeTarget to) : target(std::move(to)), socket(io), timer(io) {}
    ProbeTarget target;
    std::vector<Tcp::endpoint> endpoints; ///< its addresses, in the order they are tried
    std::size_t next = 0;                 ///< the one being tried
    Tcp::socket socket;
    asio::steady_timer timer;
    std::string error;
    bool timed_out = false;
    bool resolving = false; ///< its node name is being resolved
    bool reached = false;
    bool done = false;
};

ReachabilityProbe::~ReachabilityProbe() {
    close();
}

void ReachabilityProbe::listen(HeldPort& held, std::uint16_t port) {
    const auto add = [this](std::unique_ptr<Tcp::acceptor> acceptor) {
        m_listeners.push_back(std::move(acceptor));
        accept(m_listeners.size() - 1);
    };
    error_code ec;
    if (held.port() != 0) {
        const int fd = held.listen();
        if (fd < 0) {
            logger().debug(
                "probe: cannot listen on held port {}: {}", held.port(), std::strerror(errno));
            return;
        }
        auto acceptor = std::make_unique<Tcp::acceptor>(m_io);
        acceptor->assign(Tcp::v4(), fd, ec);
        if (ec) {
            ::close(fd);
            return;
        }
        add(std::move(acceptor));
        // The held socket is IPv4: IPv6 peers need a socket of their own on the same port.
        auto v6 = std::make_unique<Tcp::acceptor>(m_io);
        v6->open(Tcp::v6(), ec);
        if (!ec) {
            v6->set_option(asio::ip::v6_only(true), ec);
            v6->bind(Tcp::endpoint(Tcp::v6(), held.port()), ec);
        }
        if (!ec) {
            v6->listen(asio::socket_base::max_listen_connections, ec);
        }
        if (!ec) {
            add(std::move(v6));
        }
        return;
    }
    for (const bool dual : {true, false}) {
        auto acceptor = std::make_unique<Tcp::acceptor>(m_io);
        acceptor->open(dual ? Tcp::v6() : Tcp::v4(), ec);
        if (!ec && dual) {
            acceptor->set_option(asio::ip::v6_only(false), ec);
        }
        if (!ec) {
            acceptor->set_option(asio::socket_base::reuse_address(true), ec);
            acceptor->bind(Tcp::endpoint(dual ? Tcp::v6() : Tcp::v4(), port), ec);
        }
        if (!ec) {
            acceptor->listen(asio::socket_base::max_listen_connections, ec);
        }
        if (!ec) {
            add(std::move(acceptor));
            return;
        }
    }
    logger().debug("probe: cannot listen on port {}: {}", port, ec.message());
}

void ReachabilityProbe::accept(std::size_t listener) {
    m_listeners[listener]->async_accept([this, listener](const error_code& ec, Tcp::socket peer) {
        error_code ignored;
        peer.close(ignored); // a probe: nothing to say
        if (ec != asio::error::operation_aborted && !m_closed) {
            accept(listener);
        }
    });
}

void ReachabilityProbe::start(std::vector<ProbeTarget> targets, Millis timeout, Done done) {
    m_done = std::move(done);
    m_deadline = Clock::now() + timeout;
    m_pending = targets.size();
    std::map<std::string, std::vector<std::shared_ptr<Attempt>>, std::less<>> by_name;
    for (auto& target : targets) {
        auto one = std::make_shared<Attempt>(m_io, std::move(target));
        m_attempts.push_back(one);
        error_code ec;
        const auto literal = asio::ip::make_address(one->target.address, ec);
        if (!ec) {
            one->endpoints = {Tcp::endpoint(literal, one->target.port)};
            asio::post(m_io, [this, one] { attempt(one); });
        } else {
            one->resolving = true;
            by_name[one->target.address].push_back(one);
        }
    }
    for (auto& [name, waiting] : by_name) {
        resolve(name, std::move(waiting));
    }
    if (!by_name.empty()) {
        // A name service that does not answer within the timeout fails its names (each connection
        // attempt has its own deadline).
        m_deadline_timer.expires_at(m_deadline);
        m_deadline_timer.async_wait([this, timeout](const error_code& ec) {
            if (ec || m_closed) {
                return;
            }
            for (const auto& one : m_attempts) {
                if (one->resolving && !one->done) {
                    one->error = fmt::format("not resolved within {}", format_seconds(timeout));
                    settle(one);
                }
            }
        });
    }
    if (m_pending == 0) {
        asio::post(m_io, [this] {
            if (m_done && !m_closed) {
                m_done({});
            }
        });
    }
}

void ReachabilityProbe::resolve(const std::string& name,
                                std::vector<std::shared_ptr<Attempt>> waiting) {
    // A node name (no address exchange), resolved once per node as the trainers will, by Asio's
    // resolver thread: a slow name service must not hold up the launcher's heartbeats.
    Resolved done = [this, waiting = std::move(waiting)](
                        const error_code& ec, const std::vector<asio::ip::address>& addresses) {
        resolved(waiting, ec, addresses);
    };
    if (m_resolve) {
        m_resolve(name, std::move(done));
        return;
    }
    m_resolver.async_resolve(
        name,
        "",
        [done = std::move(done)](const error_code& ec, const Tcp::resolver::results_type& results) {
            std::vector<asio::ip::address> addresses;
            for (const auto& entry : results) {
                addresses.push_back(entry.endpoint().address());
            }
            done(ec, std::move(addresses));
        });
}

void ReachabilityProbe::resolved(const std::vector<std::shared_ptr<Attempt>>& waiting,
                                 const error_code& ec,
                                 const std::vector<asio::ip::address>& addresses) {
    if (m_closed) {
        return;
    }
    for (const auto& one : waiting) {
        one->resolving = false;
        if (one->done) {
            continue; // the deadline came first
        }
        if (ec || addresses.empty()) {
            // Not retried: the name will not resolve for the trainer either.
            one->error = ec ? ec.message() : "no address";
            settle(one);
        } else {
            for (const auto& address : addresses) {
                const Tcp::endpoint peer(address, one->target.port);
                if (std::find(one->endpoints.begin(), one->endpoints.end(), peer) ==
                    one->endpoints.end()) {
                    one->endpoints.push_back(peer); // getaddrinfo repeats one per socket type
                }
            }
            attempt(one);
        }
    }
}

void ReachabilityProbe::attempt(const std::shared_ptr<Attempt>& one) {
    if (m_closed || one->done) {
        return;
    }
    error_code ec;
    const Tcp::endpoint peer = one->endpoints.at(one->next);
    one->socket.close(ec);
    one->socket.open(peer.protocol(), ec);
    if (ec) {
        failed(one, ec.message());
        return;
    }
    one->timed_out = false;
    one->timer.expires_at(std::min(Clock::now() + k_probe_attempt_timeout, m_deadline));
    one->timer.async_wait([one](const error_code& timer_ec) {
        if (!timer_ec) {
            one->timed_out = true;
            error_code ignored;
            one->socket.cancel(ignored);
        }
    });
    one->socket.async_connect(peer, [this, one](const error_code& connect_ec) {
        one->timer.cancel();
        if (m_closed) {
            return;
        }
        if (!connect_ec) {
            error_code ignored;
            one->socket.set_option(asio::socket_base::linger(true, 0), ignored);
            one->socket.close(ignored);
            one->reached = true;
            logger().debug("probe: reached rank {} at {}", one->target.rank, endpoint(one->target));
            settle(one);
            return;
        }
        failed(one, one->timed_out ? std::strerror(ETIMEDOUT) : connect_ec.message());
    });
}

void ReachabilityProbe::failed(const std::shared_ptr<Attempt>& one, std::string error) {
    if (m_closed || one->done) {
        return;
    }
    one->error = std::move(error);
    const auto now = Clock::now();
    if (one->next + 1 < one->endpoints.size() && now < m_deadline) {
        // The name's next address at once, as a connecting client does.
        ++one->next;
        asio::post(m_io, [this, one] { attempt(one); });
        return;
    }
    one->next = 0;
    if (now + k_probe_retry_delay >= m_deadline) {
        logger().debug("probe: cannot reach rank {} at {}: {}",
                       one->target.rank,
                       endpoint(one->target),
                       one->error);
        settle(one);
        return;
    }
    // A timed-out attempt already waited; a refused one waits a little (the peer's listener
    // may not be open yet: it opens once that launcher registered, or got `cluster`).
    one->timer.expires_at(one->timed_out ? now : now + k_probe_retry_delay);
    one->timer.async_wait([this, one](const error_code& ec) {
        if (!ec) {
            attempt(one);
        }
    });
}

void ReachabilityProbe::settle(const std::shared_ptr<Attempt>& one) {
    one->done = true;
    if (--m_pending > 0 || !m_done) {
        return;
    }
    try {
        m_deadline_timer.cancel(); // nothing left to resolve: it must not keep the loop alive
    } catch (const boost::system::system_error&) {
        // Nothing to cancel then.
    }
    std::vector<protocol::ProbeFailure> failures;
    for (const auto& each : m_attempts) {
        if (each->done && !each->reached) {
            failures.push_back({each->target.rank, endpoint(each->target), each->error});
        }
    }
    std::sort(failures.begin(), failures.end(), [](const auto& a, const auto& b) {
        return a.rank < b.rank;
    });
    auto done = std::move(m_done);
    m_done = nullptr;
    done(std::move(failures));
}

void ReachabilityProbe::close() noexcept {
    m_closed = true;
    m_resolver.cancel();
    error_code ignored;
    try {
        m_deadline_timer.cancel();
    } catch (const boost::system::system_error&) {
        // Nothing to cancel then: its handler sees m_closed.
    }
    for (auto& listener : m_listeners) {
        listener->close(ignored);
    }
    for (auto& one : m_attempts) {
        try {
            one->timer.cancel();
        } catch (const boost::system::system_error&) {
            // Nothing to cancel then: its handler sees m_closed.
        }
        one->socket.close(ignored);
    }
}

} // namespace tfslurm::detail
