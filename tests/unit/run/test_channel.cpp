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
#include <variant>
#include <vector>

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

TEST_CASE("channel: an outbox seals what queued up as one batch", "[channel]") {
    Channel launcher(keys_of(), End::launcher);
    Channel twin(keys_of(), End::launcher); // seals as the launcher would, frame by frame
    Channel coordinator(keys_of(), End::coordinator);
    Outbox outbox;

    SECTION("one payload goes as itself") {
        outbox.push(k_heartbeat, true, k_max_frame);
        const Outbox::Frame frame = outbox.take(launcher);
        CHECK(outbox.empty());
        CHECK(frame.acknowledged == 1);
        CHECK(frame.bytes == twin.seal(k_heartbeat, k_max_frame));
        CHECK(coordinator.open(received(frame.bytes)) == k_heartbeat);
    }
    SECTION("two or more go as one array, in order, under one tag") {
        const std::string exit = encode_payload(Exit{});
        outbox.push(k_heartbeat, false, k_max_frame);
        outbox.push(exit, true, k_max_frame);
        outbox.push(k_heartbeat, true, k_max_frame);
        const Outbox::Frame frame = outbox.take(launcher);
        CHECK(outbox.empty());
        CHECK(frame.acknowledged == 2);
        const std::string batch = "[" + k_heartbeat + "," + exit + "," + k_heartbeat + "]";
        CHECK(frame.bytes.size() == k_header_size + batch.size() + k_tag_size);
        CHECK(coordinator.open(received(frame.bytes)) == batch);
        CHECK(launcher.sent() == 1);
        const std::vector<Unwrapped> messages = decode_batch(batch);
        REQUIRE(messages.size() == 3);
        CHECK(std::holds_alternative<Heartbeat>(messages[0].message));
        CHECK(std::holds_alternative<Exit>(messages[1].message));
        CHECK(std::holds_alternative<Heartbeat>(messages[2].message));
        // The next frame follows in sequence.
        outbox.push(k_exit, false, k_max_frame);
        CHECK(coordinator.open(received(outbox.take(launcher).bytes)) == k_exit);
    }
    SECTION("a batch stops short of k_max_batch; the rest goes in the next frame") {
        // 50,000 bytes and 30,000: those two do not fit one batch; two of 30,000 do, three not.
        const std::string big = R"({"pad":")" + std::string(49970, 'x') + R"(","type":"x","v":7})";
        const std::string half = R"({"pad":")" + std::string(29970, 'y') + R"(","type":"y","v":7})";
        outbox.push(big, false, k_max_frame);
        outbox.push(half, false, k_max_frame);
        outbox.push(half, false, k_max_frame);
        outbox.push(half, false, k_max_frame);
        CHECK(coordinator.open(received(outbox.take(launcher).bytes)) == big);
        const std::string two = coordinator.open(received(outbox.take(launcher).bytes));
        CHECK(two == "[" + half + "," + half + "]");
        CHECK(two.size() <= k_max_batch);
        CHECK(coordinator.open(received(outbox.take(launcher).bytes)) == half);
        CHECK(outbox.empty());
        CHECK(launcher.sent() == 3);
    }
    SECTION("a payload too large alone is refused as it is queued") {
        CHECK_THROWS_WITH(outbox.push(std::string(k_max_frame + 1, 'x'), false, k_max_frame),
                          "protocol: message of 65537 bytes exceeds the 65536-byte frame limit");
        CHECK(outbox.empty());
        // A relayed message may exceed k_max_batch alone (its envelope): it goes alone.
        const std::string relayed = R"({"pad":")" + std::string(k_max_frame, 'z') + R"("})";
        outbox.push(k_heartbeat, false, k_max_relay_frame);
        outbox.push(relayed, false, k_max_relay_frame);
        CHECK(coordinator.open(received(outbox.take(launcher).bytes)) == k_heartbeat);
        FrameDecoder decoder(k_max_relay_frame + k_tag_size);
        decoder.feed(outbox.take(launcher).bytes);
        CHECK(coordinator.open(*decoder.next()) == relayed);
    }
    SECTION("clear() forgets what is queued; nothing to take is an empty frame") {
        outbox.push(k_heartbeat, true, k_max_frame);
        outbox.clear();
        CHECK(outbox.empty());
        const Outbox::Frame nothing = outbox.take(launcher);
        CHECK(nothing.bytes.empty());
        CHECK(nothing.acknowledged == 0);
        CHECK(launcher.sent() == 0);
    }
}
