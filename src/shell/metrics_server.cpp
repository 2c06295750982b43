// SPDX-License-Identifier: MIT
// The metrics endpoint's listener (tfslurm/shell/metrics_server.hpp): Asio on the launcher's
// loop; what it answers is metrics.hpp's.
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/metrics.hpp>
#include <tfslurm/shell/metrics_server.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <map>

namespace tfslurm {

namespace asio = boost::asio;
using asio::ip::tcp;
using boost::system::error_code;

struct MetricsServer::Impl : std::enable_shared_from_this<MetricsServer::Impl> {
    /// One request and its answer.
    struct Connection : std::enable_shared_from_this<Connection> {
        Connection(asio::io_context& io, tcp::socket peer, std::weak_ptr<Impl> owner)
            : socket(std::move(peer)), timer(io), request(k_max_request_head),
              server(std::move(owner)) {}

        void start() {
            if (const auto owner = server.lock()) {
                timer.expires_after(owner->read_timeout);
            }
            timer.async_wait([self = shared_from_this()](const error_code& ec) {
                if (!ec) {
                    self->end(); // no request head in time
                }
            });
            asio::async_read_until(
                socket,
                request,
                "\r\n\r\n",
                [self = shared_from_this()](const error_code& ec, std::size_t /*bytes*/) {
                    self->answer(ec);
                });
        }

        void answer(const error_code& ec) {
            if (ec == asio::error::operation_aborted || !socket.is_open()) {
                return;
            }
            const auto owner = server.lock();
            if (!owner) {
                end();
                return;
            }
            if (ec == asio::error::not_found) {
                reply = http_answer(431, "text/plain", "request head too large\n", false);
            } else if (ec) {
                end();
                return;
            } else {
                const auto data = request.data();
                const std::string head(asio::buffers_begin(data), asio::buffers_end(data));
                reply = http_response(head, [&owner] { return owner->render(); });
            }
            asio::async_write(socket,
                              asio::buffer(reply),
                              [self = shared_from_this()](const error_code& /*ec*/,
                                                          std::size_t /*bytes*/) { self->end(); });
        }

        void end() {
            error_code ignored;
            timer.cancel();
            socket.shutdown(tcp::socket::shutdown_both, ignored);
            socket.close(ignored);
            if (const auto owner = server.lock()) {
                owner->connections.erase(this);
            }
        }

        tcp::socket socket;
        asio::steady_timer timer;
        asio::streambuf request;
        std::string reply;
        std::weak_ptr<Impl> server;
    };

    Impl(asio::io_context& context, Render renderer, Millis timeout)
        : io(context), acceptor(context), render(std::move(renderer)), read_timeout(timeout) {}

    void accept() {
        acceptor.async_accept([self = shared_from_this()](const error_code& ec, tcp::socket peer) {
            if (ec == asio::error::operation_aborted || !self->acceptor.is_open()) {
                return;
            }
            if (!ec) {
                if (self->connections.size() >= k_metrics_connections) {
                    error_code ignored;
                    peer.close(ignored); // busy: a scrape never queues behind hung ones
                } else {
                    auto connection = std::make_shared<Connection>(self->io, std::move(peer), self);
                    self->connections.emplace(connection.get(), connection);
                    connection->start();
                }
            }
            self->accept();
        });
    }

    asio::io_context& io;
    tcp::acceptor acceptor;
    Render render;
    Millis read_timeout;
    std::map<Connection*, std::shared_ptr<Connection>> connections;
};

MetricsServer::MetricsServer(asio::io_context& io,
                             const MetricsEndpoint& endpoint,
                             Render render,
                             Millis read_timeout)
    : m_impl(std::make_shared<Impl>(io, std::move(render), read_timeout)) {
    error_code ec;
    const auto address = endpoint.address.empty() ? asio::ip::address(asio::ip::address_v4::any())
                                                  : asio::ip::make_address(endpoint.address, ec);
    const tcp::endpoint where{address, endpoint.port};
    const auto fail = [&](const error_code& error) {
        return errors::make(Errc::io,
                            setting_ref("metrics"),
                            fmt::format("cannot listen on {}:{}: {}",
                                        endpoint.address.empty() ? "*" : endpoint.address,
                                        endpoint.port,
                                        error.message()));
    };
    if (ec) {
        throw fail(ec);
    }
    auto& acceptor = m_impl->acceptor;
    if (acceptor.open(where.protocol(), ec); ec) {
        throw fail(ec);
    }
    acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (acceptor.bind(where, ec); ec) {
        throw fail(ec);
    }
    if (acceptor.listen(asio::socket_base::max_listen_connections, ec); ec) {
        throw fail(ec);
    }
    m_impl->accept();
}

MetricsServer::~MetricsServer() {
    close();
}

std::uint16_t MetricsServer::port() const noexcept {
    try {
        error_code ec;
        const auto local = m_impl->acceptor.local_endpoint(ec);
        return ec ? 0 : local.port();
    } catch (...) {
        return 0;
    }
}

void MetricsServer::close() noexcept {
    try {
        error_code ignored;
        m_impl->acceptor.close(ignored);
        auto connections = std::move(m_impl->connections);
        m_impl->connections.clear();
        for (const auto& [raw, connection] : connections) {
            connection->socket.close(ignored);
            connection->timer.cancel();
        }
    } catch (...) {
        // Closing is best effort: the loop ends with the launcher anyway.
    }
}

} // namespace tfslurm
