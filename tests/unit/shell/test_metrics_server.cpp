// SPDX-License-Identifier: MIT
// The metrics endpoint's listener (src/shell/metrics_server.cpp) on loopback: a scrape, and every
// bound it keeps (the request head's size and time, the connections at once).
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/metrics.hpp>
#include <tfslurm/shell/metrics_server.hpp>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

/// Run `server`'s loop while `client` talks to it from another thread.
void serve_while(asio::io_context& io, const std::function<void()>& client) {
    std::thread thread([&] {
        client();
        io.stop();
    });
    io.run();
    thread.join();
}

tcp::socket connected(asio::io_context& client_io, std::uint16_t port) {
    tcp::socket socket(client_io);
    socket.connect({asio::ip::make_address("127.0.0.1"), port});
    return socket;
}

/// Everything the server sends until it closes the connection.
std::string read_all(tcp::socket& socket) {
    std::string out;
    boost::system::error_code ec;
    asio::read(socket, asio::dynamic_buffer(out), ec);
    return out;
}

} // namespace

TEST_CASE("metrics_server: a scrape gets the text, anything else its error status",
          "[metrics_server]") {
    asio::io_context io;
    int renders = 0;
    MetricsServer server(io, MetricsEndpoint{"127.0.0.1", 0}, [&renders] {
        ++renders;
        return std::string("tfslurm_step_restarts_total 0\n");
    });
    REQUIRE(server.port() != 0);
    std::vector<std::string> answers;
    serve_while(io, [&] {
        asio::io_context client_io;
        for (const std::string request : {"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n",
                                          "GET /nothing HTTP/1.1\r\n\r\n",
                                          "DELETE /metrics HTTP/1.1\r\n\r\n"}) {
            tcp::socket socket = connected(client_io, server.port());
            asio::write(socket, asio::buffer(request));
            answers.push_back(read_all(socket));
        }
    });
    REQUIRE(answers.size() == 3);
    CHECK(answers[0] ==
          http_answer(200, k_metrics_content_type, "tfslurm_step_restarts_total 0\n", false));
    CHECK(answers[1].rfind("HTTP/1.1 404 Not Found\r\n", 0) == 0);
    CHECK(answers[2].rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0) == 0);
    CHECK(renders == 1); // only the scrape made a snapshot
}

TEST_CASE("metrics_server: a request head past 8 KiB gets 431, a silent one is closed",
          "[metrics_server]") {
    asio::io_context io;
    MetricsServer server(
        io, MetricsEndpoint{"127.0.0.1", 0}, [] { return std::string(); }, Millis{200});
    std::string too_large;
    std::string silent;
    serve_while(io, [&] {
        asio::io_context client_io;
        tcp::socket big = connected(client_io, server.port());
        const std::string head = "GET /metrics HTTP/1.1\r\nX: " + std::string(9000, 'a');
        boost::system::error_code ec;
        asio::write(big, asio::buffer(head), ec);
        too_large = read_all(big);
        // Says nothing: closed at the read timeout, without an answer.
        tcp::socket quiet = connected(client_io, server.port());
        silent = read_all(quiet);
    });
    CHECK(too_large.rfind("HTTP/1.1 431 Request Header Fields Too Large\r\n", 0) == 0);
    CHECK(silent.empty());
}

TEST_CASE("metrics_server: past 16 connections at once, more are closed as they come",
          "[metrics_server]") {
    asio::io_context io;
    // A read timeout far longer than the test: every slot stays taken until freed here.
    MetricsServer server(
        io, MetricsEndpoint{"127.0.0.1", 0}, [] { return std::string("x 1\n"); }, Millis{600000});
    std::string refused;
    std::string served;
    serve_while(io, [&] {
        asio::io_context client_io;
        std::vector<tcp::socket> held;
        for (std::size_t i = 0; i < k_metrics_connections; ++i) {
            held.push_back(connected(client_io, server.port()));
        }
        // Every slot is taken by a client that says nothing (the backlog is accepted in order):
        // the next one is closed without an answer.
        tcp::socket extra = connected(client_io, server.port());
        boost::system::error_code ec;
        asio::write(extra, asio::buffer(std::string("GET /metrics HTTP/1.1\r\n\r\n")), ec);
        refused = read_all(extra);
        // Once one slot is free, a scrape is served again (tried until the server saw the close).
        held.front().close();
        for (int attempt = 0; attempt < 600 && served.empty(); ++attempt) {
            tcp::socket next = connected(client_io, server.port());
            asio::write(next, asio::buffer(std::string("GET /metrics HTTP/1.1\r\n\r\n")), ec);
            served = read_all(next);
            if (served.empty()) {
                std::this_thread::sleep_for(10ms);
            }
        }
    });
    CHECK(refused.empty());
    CHECK(served.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
}

TEST_CASE("metrics_server: an address it cannot bind is an error naming metrics",
          "[metrics_server]") {
    asio::io_context io;
    const MetricsServer first(io, MetricsEndpoint{"127.0.0.1", 0}, [] { return std::string(); });
    CHECK_THROWS_WITH(
        MetricsServer(io, MetricsEndpoint{"127.0.0.1", first.port()}, [] { return std::string(); }),
        Catch::StartsWith("metrics: cannot listen on 127.0.0.1:" + std::to_string(first.port()) +
                          ": "));
}
