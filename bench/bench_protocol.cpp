// SPDX-License-Identifier: MIT
// bench_protocol: what one frame of the control plane costs on one core, message by message, as
// the coordinator of a large step meets them (issue #33): the hellos and exits of a node's
// launchers in their `relay` envelopes, a leader's own hello, a heartbeat. For each: its bytes,
// encoding (encode_payload), decoding as the coordinator does (decode_unwrapped: envelope and
// message in one parse), and, as yardsticks of the decoding, nlohmann/json's parse of the same
// bytes into a document and its parse with no document at all (SAX events thrown away: the
// JSON lexer alone); then sealing and opening the frame (Channel). A benchmark that prints
// figures, not a test: nothing here asserts speed.
//
//   bench_protocol [--iterations N]   (default 200000 per figure, 50000 at most for opening;
//                                      the median of 5 rounds)
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/protocol.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace tfslurm;
using Json = nlohmann::json;

/// SAX events, counted and thrown away: nlohmann/json's lexer and parser with no document.
struct Discard : nlohmann::json_sax<Json> {
    std::size_t events = 0;
    bool null() override { return ++events != 0; }
    bool boolean(bool /*v*/) override { return ++events != 0; }
    bool number_integer(number_integer_t /*v*/) override { return ++events != 0; }
    bool number_unsigned(number_unsigned_t /*v*/) override { return ++events != 0; }
    bool number_float(number_float_t /*v*/, const string_t& /*s*/) override {
        return ++events != 0;
    }
    bool string(string_t& /*s*/) override { return ++events != 0; }
    bool binary(binary_t& /*b*/) override { return ++events != 0; }
    bool start_object(std::size_t /*n*/) override { return ++events != 0; }
    bool key(string_t& /*s*/) override { return ++events != 0; }
    bool end_object() override { return ++events != 0; }
    bool start_array(std::size_t /*n*/) override { return ++events != 0; }
    bool end_array() override { return ++events != 0; }
    bool parse_error(std::size_t /*at*/,
                     const std::string& /*token*/,
                     const nlohmann::detail::exception& /*e*/) override {
        return false;
    }
};

/// Median over 5 rounds of `iterations` calls, in nanoseconds per call.
double per_call_ns(std::size_t iterations, const std::function<std::size_t()>& call) {
    std::array<double, 5> rounds{};
    std::size_t sink = 0;
    for (double& round : rounds) {
        const auto start = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < iterations; ++i) {
            sink += call();
        }
        const std::chrono::duration<double, std::nano> took =
            std::chrono::steady_clock::now() - start;
        round = took.count() / static_cast<double>(iterations);
    }
    if (sink == 0) {
        std::abort(); // every call returns a size: never 0 in total
    }
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
}

protocol::Hello launcher_hello(std::uint32_t rank) {
    protocol::Hello hello;
    hello.job = 4242;
    hello.rank = rank;
    hello.role = Role::worker;
    hello.host = "node1250";
    hello.pid = 123456;
    hello.auth = protocol::AuthMethod::secret;
    hello.credential = std::string(64, '0');
    hello.nonce = std::string(64, 'a');
    hello.address = "10.0.4.226";
    return hello;
}

struct Case {
    std::string name;
    protocol::Message message;
};

} // namespace

int main(int argc, char** argv) {
    std::size_t iterations = 200000;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--iterations" && i + 1 < argc) {
            char* end = nullptr;
            iterations = std::strtoull(argv[++i], &end, 10);
            if (end == nullptr || *end != '\0' || iterations == 0) {
                fmt::print(stderr,
                           "bench_protocol: --iterations: expected a positive count, not \"{}\"\n",
                           argv[i]);
                return 2;
            }
        } else {
            fmt::print(stderr, "usage: bench_protocol [--iterations N]\n");
            return 2;
        }
    }

    protocol::Hello leader = launcher_hello(9992);
    leader.relay = true;
    const std::vector<Case> cases = {
        {"relayed hello",
         protocol::Relay{{9999}, protocol::encode_payload(launcher_hello(9999)), {}}},
        {"relayed exit 0",
         protocol::Relay{
             {9999}, protocol::encode_payload(protocol::Exit{ExitStatus::exited(0), {}}), {}}},
        {"leader's hello", leader},
        {"exit 0", protocol::Exit{ExitStatus::exited(0), {}}},
        {"heartbeat", protocol::Heartbeat{}},
    };

    const protocol::SessionKeys keys = protocol::session_keys(std::string(32, 'k'),
                                                              std::string(64, 'a'),
                                                              std::string(64, 'b'),
                                                              protocol::StepId{4242, 0},
                                                              9992,
                                                              protocol::tcp_endpoint(12024));
    fmt::print("bench_protocol: one core, median of 5 rounds of {} calls each, ns per call\n",
               iterations);
    fmt::print("{:<16} {:>6} {:>8} {:>8} {:>10} {:>10} {:>8} {:>8}\n",
               "message",
               "bytes",
               "encode",
               "decode",
               "json DOM",
               "json SAX",
               "seal",
               "open");
    for (const Case& c : cases) {
        const std::string payload = protocol::encode_payload(c.message);
        const double encode =
            per_call_ns(iterations, [&c] { return protocol::encode_payload(c.message).size(); });
        const double decode = per_call_ns(iterations, [&payload] {
            const auto unwrapped = protocol::decode_unwrapped(payload);
            return unwrapped.message.index() + 1;
        });
        const double dom = per_call_ns(
            iterations, [&payload] { return Json::parse(payload, nullptr, false).size(); });
        const double sax = per_call_ns(iterations, [&payload] {
            Discard events;
            Json::sax_parse(payload, &events);
            return events.events;
        });
        protocol::Channel sender(keys, protocol::End::launcher);
        const double seal = per_call_ns(iterations, [&sender, &payload] {
            return sender.seal(payload, protocol::k_max_relay_frame).size();
        });
        // Frames sealed in order; each round opens them in the same order (their sequence
        // numbers) with a fresh channel, each from a copy, as FrameDecoder::next() makes one.
        const std::size_t frames = std::min<std::size_t>(iterations, 50000);
        protocol::Channel writer(keys, protocol::End::launcher);
        std::vector<std::string> sealed;
        sealed.reserve(frames);
        for (std::size_t i = 0; i < frames; ++i) {
            sealed.push_back(
                writer.seal(payload, protocol::k_max_relay_frame).substr(protocol::k_header_size));
        }
        std::optional<protocol::Channel> reader;
        std::size_t next = frames;
        const double open = per_call_ns(frames, [&reader, &keys, &sealed, &next] {
            if (next == sealed.size()) {
                reader.emplace(keys, protocol::End::coordinator);
                next = 0;
            }
            return reader->open(sealed[next++]).size();
        });
        fmt::print("{:<16} {:>6} {:>8.0f} {:>8.0f} {:>10.0f} {:>10.0f} {:>8.0f} {:>8.0f}\n",
                   c.name,
                   payload.size(),
                   encode,
                   decode,
                   dom,
                   sax,
                   seal,
                   open);
    }
    return 0;
}
