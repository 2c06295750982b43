// SPDX-License-Identifier: MIT
// Sealed frames (tfslurm/run/channel.hpp, docs/protocol.md): session keys from the handshake, one
// keyed BLAKE2b per frame over its sequence number and its payload's BLAKE2b (libsodium).
#include "run/detail/sodium.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/channel.hpp>

#include <fmt/format.h>

#include <cstring>
#include <tuple>
#include <utility>

namespace tfslurm::protocol {

using detail::as_bytes;
using detail::ensure_sodium;

namespace {

static_assert(sizeof(crypto_generichash_state) == 384, "PayloadHash's storage");
static_assert(alignof(crypto_generichash_state) <= 64, "PayloadHash's alignment");
static_assert(crypto_generichash_BYTES == k_tag_size);

template <typename Storage> crypto_generichash_state* as_state(Storage& storage) noexcept {
    return reinterpret_cast<crypto_generichash_state*>(storage.data());
}

/// BLAKE2b-256 keyed with `key` over seq (u64 BE) || digest.
Tag tag_of(const std::array<unsigned char, 32>& key, std::uint64_t seq, const Digest& digest) {
    std::array<unsigned char, 8 + std::tuple_size_v<Digest>> message{};
    for (std::size_t i = 0; i < 8; ++i) {
        message[i] = static_cast<unsigned char>((seq >> (8U * (7U - i))) & 0xffU);
    }
    std::memcpy(message.data() + 8, digest.data(), digest.size());
    Tag tag{};
    crypto_generichash(reinterpret_cast<unsigned char*>(tag.data()),
                       tag.size(),
                       message.data(),
                       message.size(),
                       key.data(),
                       key.size());
    return tag;
}

std::array<unsigned char, 32> key_of(std::string_view key) {
    std::array<unsigned char, 32> out{};
    if (key.size() != out.size()) {
        throw errors::make(
            Errc::auth,
            "session",
            fmt::format("a session key of {} bytes (expected {})", key.size(), out.size()));
    }
    std::memcpy(out.data(), key.data(), out.size());
    return out;
}

} // namespace

PayloadHash::PayloadHash() {
    ensure_sodium();
    crypto_generichash_init(as_state(m_state), nullptr, 0, crypto_generichash_BYTES);
}

PayloadHash& PayloadHash::update(std::string_view data) noexcept {
    crypto_generichash_update(as_state(m_state), as_bytes(data), data.size());
    return *this;
}

Digest PayloadHash::digest() const noexcept {
    alignas(64) std::array<unsigned char, 384> copy = m_state;
    Digest out{};
    crypto_generichash_final(as_state(copy), out.data(), out.size());
    return out;
}

Digest payload_digest(std::string_view payload) {
    ensure_sodium();
    Digest out{};
    crypto_generichash(out.data(), out.size(), as_bytes(payload), payload.size(), nullptr, 0);
    return out;
}

SharedPayload::SharedPayload(std::string text, Envelope envelope) : bytes(std::move(text)) {
    bare.update(bytes);
    if (envelope == Envelope::also) {
        // frame_parts()'s head of a `relay`, after the header: what the envelope puts before.
        enveloped.update(R"({"msg":)").update(bytes);
    }
}

Channel::Channel(const SessionKeys& keys, End end)
    : m_send(key_of(end == End::launcher ? keys.up : keys.down)),
      m_receive(key_of(end == End::launcher ? keys.down : keys.up)) {
    ensure_sodium();
}

std::string Channel::seal(std::string_view payload, std::size_t limit) {
    FrameParts parts = frame_parts(payload.size(), {}, limit, k_tag_size);
    std::string frame = std::move(parts.head);
    frame.reserve(frame.size() + payload.size() + k_tag_size);
    frame += payload;
    const Tag tag = next_tag(payload_digest(payload));
    frame.append(tag.data(), tag.size());
    return frame;
}

Tag Channel::next_tag(const Digest& digest) {
    return tag_of(m_send, m_sent++, digest);
}

std::string Channel::open(std::string frame) {
    const std::uint64_t seq = m_received;
    if (frame.size() < k_tag_size) {
        throw errors::make(Errc::auth,
                           "protocol",
                           fmt::format("frame {} of {} bytes is shorter than its {}-byte MAC",
                                       seq,
                                       frame.size(),
                                       k_tag_size));
    }
    const std::size_t size = frame.size() - k_tag_size;
    const std::string_view payload(frame.data(), size);
    const Tag expected = tag_of(m_receive, seq, payload_digest(payload));
    if (!constant_time_equal(std::string_view(frame).substr(size),
                             std::string_view(expected.data(), expected.size()))) {
        throw errors::make(
            Errc::auth,
            "protocol",
            fmt::format("frame {} fails its MAC (tampered, replayed, reordered or cut short)",
                        seq));
    }
    ++m_received;
    frame.resize(size);
    return frame;
}

void Outbox::push(std::string payload, bool acknowledged, std::size_t limit) {
    static_cast<void>(frame_parts(payload.size(), {}, limit)); // refuses what can never go
    m_payloads.push_back({std::move(payload), acknowledged, limit});
}

Outbox::Frame Outbox::take(Channel& channel) {
    if (m_payloads.empty()) {
        return {};
    }
    // How many payloads, from the first, fit `[p1,p2,...]` (brackets and commas counted).
    std::size_t count = 0;
    std::size_t size = 1;
    for (const Payload& payload : m_payloads) {
        if (size + payload.bytes.size() + 1 > k_max_batch) {
            break;
        }
        size += payload.bytes.size() + 1;
        ++count;
    }
    Frame frame;
    if (count < 2) {
        Payload& first = m_payloads.front();
        frame.bytes = channel.seal(first.bytes, first.limit);
        frame.acknowledged = first.acknowledged ? 1U : 0U;
        m_payloads.pop_front();
        return frame;
    }
    frame.bytes = frame_parts(size, {}, k_max_batch, k_tag_size).head;
    frame.bytes.reserve(frame.bytes.size() + size + k_tag_size);
    const std::size_t body = frame.bytes.size();
    for (std::size_t i = 0; i < count; ++i) {
        frame.bytes += i == 0 ? '[' : ',';
        frame.bytes += m_payloads.front().bytes;
        frame.acknowledged += m_payloads.front().acknowledged ? 1U : 0U;
        m_payloads.pop_front();
    }
    frame.bytes += ']';
    const Tag tag = channel.next_tag(payload_digest(std::string_view(frame.bytes).substr(body)));
    frame.bytes.append(tag.data(), tag.size());
    return frame;
}

} // namespace tfslurm::protocol
