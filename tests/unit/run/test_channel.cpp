// SPDX-License-Identifier: MIT
// Sealed frames (channel.hpp): the session keys, and a MAC that refuses a tampered, replayed,
// reordered, cut short or unauthenticated frame in both directions, a shared payload's tag
// equal to its own.
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/channel.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>

#include <string>

using namespace tfslurm;
using namespace tfslurm::protocol;

namespace {

const std::string k_challenge(64, 'a');
const std::string k_channel_nonce(64, 'b');
const std::string k_ikm(32, 's');

SessionKeys keys_of(std::string_view ikm = k_ikm,
                    std::string_view endpoint = "tcp:23000",
                    std::uint32_t rank = 3) {
    return session_keys(ikm, k_challenge, k_channel_nonce, StepId{12, 0}, rank, endpoint);
}

/// The payload and tag of a sealed frame, as FrameDecoder::next() returns them.
std::string received(const std::string& frame) {
    FrameDecoder decoder(k_max_frame + k_tag_size);
    decoder.feed(frame);
    auto payload = decoder.next();
    REQUIRE(payload);
    return *payload;
}

std::string refused(std::uint64_t frame) {
    return "protocol: frame " + std::to_string(frame) +
           " fails its MAC (tampered, replayed, reordered or cut short)";
}

const std::string k_heartbeat = R"({"type":"heartbeat","v":7})";
const std::string k_exit = R"({"signal":0,"status":3,"type":"exit","v":7})";

} // namespace

TEST_CASE("channel: session keys depend on every part of the handshake", "[channel]") {
    const SessionKeys keys = keys_of();
    CHECK(keys.up.size() == 32);
    CHECK(keys.down.size() == 32);
    CHECK(keys.up != keys.down);
    CHECK(keys_of().up == keys.up); // deterministic: both ends derive the same
    CHECK(keys_of(std::string(32, 't')).up != keys.up);
    CHECK(keys_of(k_ikm, "tcp:23001").up != keys.up);
    CHECK(keys_of(k_ikm, "tcp:23000", 4).up != keys.up);
    CHECK(session_keys(k_ikm, k_channel_nonce, k_challenge, StepId{12, 0}, 3, "tcp:23000").up !=
          keys.up);
    CHECK(session_keys(k_ikm, k_challenge, k_channel_nonce, StepId{12, 1}, 3, "tcp:23000").up !=
          keys.up);
    CHECK(session_keys(k_ikm, k_challenge, k_channel_nonce, StepId{13, 0}, 3, "tcp:23000").up !=
          keys.up);
    CHECK_THROWS_WITH(keys_of(""), "session: no key material to derive the session keys");
}

TEST_CASE("channel: sealed frames pass in order, both ways", "[channel]") {
    Channel launcher(keys_of(), End::launcher);
    Channel coordinator(keys_of(), End::coordinator);
    for (int i = 0; i < 3; ++i) {
        CHECK(coordinator.open(received(launcher.seal(k_heartbeat, k_max_frame))) == k_heartbeat);
        CHECK(launcher.open(received(coordinator.seal(k_exit, k_max_frame))) == k_exit);
    }
    CHECK(launcher.sent() == 3);
    CHECK(launcher.received() == 3);
    // The header counts the tag.
    const std::string frame = launcher.seal(k_heartbeat, k_max_frame);
    CHECK(frame.size() == k_header_size + k_heartbeat.size() + k_tag_size);
    CHECK(frame.substr(0, 4) == std::string("\0\0\0\x3a", 4));
    CHECK_THROWS_WITH(launcher.seal(std::string(k_max_frame + 1, 'x'), k_max_frame),
                      "protocol: message of 65537 bytes exceeds the 65536-byte frame limit");
}

TEST_CASE("channel: what fails the MAC, each way", "[channel]") {
    const auto direction = GENERATE(End::launcher, End::coordinator);
    const End other = direction == End::launcher ? End::coordinator : End::launcher;
    Channel sender(keys_of(), direction);
    Channel receiver(keys_of(), other);
    std::string error;
    const auto open = [&](const std::string& frame) {
        try {
            (void)receiver.open(frame);
        } catch (const Error& e) {
            CHECK(e.code() == Errc::auth);
            error = e.what();
        }
    };

    SECTION("tampered") {
        std::string frame = received(sender.seal(k_exit, k_max_frame));
        frame[frame.find('3')] = '0'; // status 3 becomes 0
        open(frame);
        CHECK(error == refused(0));
    }
    SECTION("replayed") {
        const std::string frame = received(sender.seal(k_heartbeat, k_max_frame));
        CHECK(receiver.open(frame) == k_heartbeat);
        open(frame);
        CHECK(error == refused(1));
    }
    SECTION("reordered") {
        const std::string first = received(sender.seal(k_heartbeat, k_max_frame));
        const std::string second = received(sender.seal(k_exit, k_max_frame));
        open(second);
        CHECK(error == refused(0));
        CHECK(receiver.open(first) == k_heartbeat); // a refused frame moves nothing on
    }
    SECTION("dropped: the frame after a missing one") {
        (void)sender.seal(k_heartbeat, k_max_frame);
        open(received(sender.seal(k_exit, k_max_frame)));
        CHECK(error == refused(0));
    }
    SECTION("cut short") {
        std::string frame = received(sender.seal(k_exit, k_max_frame));
        frame.erase(k_exit.size() - 1, 1);
        open(frame);
        CHECK(error == refused(0));
    }
    SECTION("unauthenticated: a payload without a tag") {
        open(k_exit);
        CHECK(error == refused(0));
        open("{}");
        CHECK(error == "protocol: frame 0 of 2 bytes is shorter than its 32-byte MAC");
    }
    SECTION("sent back to an end of the same side (reflected)") {
        Channel mirror(keys_of(), direction);
        try {
            (void)mirror.open(received(sender.seal(k_heartbeat, k_max_frame)));
            FAIL("a frame passed at an end of the side that sealed it");
        } catch (const Error& e) {
            CHECK(e.what() == refused(0));
        }
    }
    SECTION("sealed with another session's keys") {
        Channel stranger(keys_of(k_ikm, "tcp:23001"), direction);
        open(received(stranger.seal(k_heartbeat, k_max_frame)));
        CHECK(error == refused(0));
    }
}

TEST_CASE("channel: a shared payload's tag is the one of its own frame", "[channel]") {
    const SharedPayload shared(k_exit, SharedPayload::Envelope::also);
    Channel a(keys_of(), End::coordinator);
    Channel b(keys_of(), End::coordinator);
    Channel launcher(keys_of(), End::launcher);

    // As it is: the tag of a frame sealed whole.
    const Tag tag = a.next_tag(shared.bare.digest());
    const std::string bare_tag(tag.data(), tag.size());
    CHECK(bare_tag == b.seal(k_exit, k_max_frame).substr(4 + k_exit.size()));
    const FrameParts bare = frame_parts(k_exit.size(), {}, k_max_frame, k_tag_size);
    CHECK(launcher.open(received(bare.head + k_exit + bare_tag)) == k_exit);
    // In a relay envelope for ranks 5 and 6: the state after `{"msg":` + payload, then the tail.
    const FrameParts parts = frame_parts(k_exit.size(), {5, 6}, k_max_frame, k_tag_size);
    PayloadHash hash = shared.enveloped;
    const Tag envelope_tag = a.next_tag(hash.update(parts.tail).digest());
    const std::string frame =
        parts.head + k_exit + parts.tail + std::string(envelope_tag.data(), envelope_tag.size());
    CHECK(launcher.open(received(frame)) ==
          R"({"msg":)" + k_exit + R"(,"ranks":[5,6],"type":"relay","v":7})");
    // The shared state is untouched by the copy that finished.
    CHECK(shared.bare.digest() == payload_digest(k_exit));
}
