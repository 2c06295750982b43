// SPDX-License-Identifier: MIT
// Frames (protocol_frame.cpp): the 4-byte length header, the limits checked from it before
// anything is buffered, truncated and split reads, and the larger limit of a proven peer.
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <string_view>

using namespace tfslurm;
using namespace tfslurm::protocol;

namespace {

std::string frame_of(std::string_view payload) {
    const auto size = static_cast<std::uint32_t>(payload.size());
    std::string frame;
    frame.push_back(static_cast<char>(size >> 24U));
    frame.push_back(static_cast<char>((size >> 16U) & 0xffU));
    frame.push_back(static_cast<char>((size >> 8U) & 0xffU));
    frame.push_back(static_cast<char>(size & 0xffU));
    frame += payload;
    return frame;
}

} // namespace

TEST_CASE("protocol_frame: an oversize frame is refused from its header", "[protocol][frame]") {
    FrameDecoder decoder;
    SECTION("the largest length") {
        CHECK_THROWS_WITH(decoder.feed(std::string("\xff\xff\xff\xff", 4)),
                          Catch::StartsWith("protocol: frame of 4294967295 bytes exceeds the "
                                            "65536-byte limit: "));
    }
    SECTION("one byte over the limit, header split over two reads") {
        decoder.feed(std::string("\x00\x01", 2));
        CHECK_THROWS_AS(decoder.feed(std::string("\x00\x01", 2)), Error);
    }
    SECTION("exactly the limit is accepted") {
        decoder.feed(std::string("\x00\x01\x00\x00", 4));
        CHECK_FALSE(decoder.next());
        CHECK(decoder.partial());
    }
    SECTION("a too large message is not encoded") {
        CHECK_THROWS_WITH(encode_frame(Reject{RejectCode::refused, std::string(70000, 'x')}),
                          "protocol: reject message of 70052 bytes exceeds the 65536-byte frame "
                          "limit");
    }
}

TEST_CASE("protocol_frame: truncated and split frames", "[protocol][frame]") {
    const std::string a = encode_frame(Interrupt{2});
    const std::string b = encode_frame(Heartbeat{});
    FrameDecoder decoder;
    SECTION("a truncated frame stays partial") {
        decoder.feed(a.substr(0, 3));
        CHECK_FALSE(decoder.next());
        CHECK(decoder.partial());
        decoder.feed(a.substr(3, 5));
        CHECK_FALSE(decoder.next());
        CHECK(decoder.partial());
    }
    SECTION("byte by byte") {
        const std::string both = a + b;
        std::vector<std::string> payloads;
        for (const char c : both) {
            decoder.feed(std::string(1, c));
            while (auto payload = decoder.next()) {
                payloads.push_back(*payload);
            }
        }
        REQUIRE(payloads.size() == 2);
        CHECK(std::holds_alternative<Interrupt>(decode_payload(payloads[0])));
        CHECK(std::holds_alternative<Heartbeat>(decode_payload(payloads[1])));
        CHECK_FALSE(decoder.partial());
    }
    SECTION("two frames in one read") {
        decoder.feed(a + b);
        CHECK(decoder.next());
        CHECK(decoder.next());
        CHECK_FALSE(decoder.next());
    }
    SECTION("an empty payload is a frame, and not JSON") {
        decoder.feed(frame_of(""));
        const auto payload = decoder.next();
        REQUIRE(payload);
        CHECK_THROWS_AS(decode_payload(*payload), Error);
    }
}

TEST_CASE("protocol_frame: large frames only from a proven peer", "[protocol][frame]") {
    Cluster cluster;
    for (int node = 0; node < 5000; ++node) {
        cluster.addresses.emplace(fmt::format("node{:05}", node),
                                  fmt::format("10.{}.{}.1", node / 256, node % 256));
    }
    // 5,000 nodes take more than k_max_frame: refused by default, as before authentication.
    CHECK_THROWS_WITH(encode_frame(cluster), Catch::Contains("exceeds the 65536-byte frame limit"));
    const std::string frame = encode_frame(cluster, k_max_trusted_frame);
    CHECK(frame.size() > k_max_frame);
    FrameDecoder untrusted;
    CHECK_THROWS_WITH(untrusted.feed(frame), Catch::Contains("exceeds the 65536-byte limit"));
    FrameDecoder trusted;
    trusted.set_limit(k_max_trusted_frame);
    trusted.feed(frame);
    const auto payload = trusted.next();
    REQUIRE(payload);
    CHECK(std::get<Cluster>(decode_payload(*payload)).addresses.size() == 5000);
    CHECK_THROWS_WITH(frame_payload(std::string(k_max_frame + 1, 'x')),
                      Catch::Contains("exceeds the 65536-byte frame limit"));
}

TEST_CASE("protocol_frame: the limit may be raised between two frames of one read",
          "[protocol][frame]") {
    // A launcher raises its limit after the coordinator's welcome; the large `cluster` can
    // arrive in the same read, right behind it.
    Cluster cluster;
    for (int node = 0; node < 5000; ++node) {
        cluster.addresses.emplace(fmt::format("node{:05}", node), "10.0.0.1");
    }
    const std::string both = encode_frame(Welcome{5000, std::string(64, 'f')}) +
                             encode_frame(cluster, k_max_trusted_frame);
    FrameDecoder decoder;
    decoder.feed(both);
    const auto welcome = decoder.next();
    REQUIRE(welcome);
    CHECK(std::holds_alternative<Welcome>(decode_payload(*welcome)));
    SECTION("raised: the large frame follows") {
        decoder.set_limit(k_max_trusted_frame);
        const auto payload = decoder.next();
        REQUIRE(payload);
        CHECK(std::get<Cluster>(decode_payload(*payload)).addresses.size() == 5000);
    }
    SECTION("not raised: the next call refuses it") {
        CHECK_THROWS_WITH(decoder.next(), Catch::Contains("exceeds the 65536-byte limit"));
    }
}
