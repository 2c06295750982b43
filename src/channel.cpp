// SPDX-License-Identifier: MIT
// Sealed frames (tfslurm/channel.hpp, docs/protocol.md): session keys from the handshake, one
// HMAC-SHA256 per frame over its sequence number and its payload's SHA-256 (libsodium).
#include "detail/sodium.hpp"

#include <tfslurm/channel.hpp>
#include <tfslurm/error.hpp>

#include <fmt/format.h>

#include <cstring>
#include <utility>

namespace tfslurm::protocol {

using detail::as_bytes;
using detail::as_chars;
using detail::ensure_sodium;

namespace {

static_assert(sizeof(crypto_hash_sha256_state) == 104, "Sha256's storage");
static_assert(sizeof(crypto_auth_hmacsha256_state) == 208, "Channel's HMAC storage");
static_assert(crypto_auth_hmacsha256_BYTES == k_tag_size);

template <typename State, typename Storage> State* as_state(Storage& storage) noexcept {
    return reinterpret_cast<State*>(storage.data());
}

/// HMAC(state's key, seq || digest): a copy of the keyed state finishes it.
std::string
tag_of(const std::array<unsigned char, 208>& keyed, std::uint64_t seq, const Digest& digest) {
    crypto_auth_hmacsha256_state state;
    std::memcpy(&state, keyed.data(), sizeof state);
    std::array<unsigned char, 8> counter{};
    for (std::size_t i = 0; i < counter.size(); ++i) {
        counter[i] = static_cast<unsigned char>((seq >> (8U * (7U - i))) & 0xffU);
    }
    crypto_auth_hmacsha256_update(&state, counter.data(), counter.size());
    crypto_auth_hmacsha256_update(&state, digest.data(), digest.size());
    std::string tag(k_tag_size, '\0');
    crypto_auth_hmacsha256_final(&state, reinterpret_cast<unsigned char*>(tag.data()));
    sodium_memzero(&state, sizeof state);
    return tag;
}

void keyed(std::array<unsigned char, 208>& storage, std::string_view key) {
    auto* state = as_state<crypto_auth_hmacsha256_state>(storage);
    crypto_auth_hmacsha256_init(state, as_bytes(key), key.size());
}

} // namespace

Sha256::Sha256() {
    ensure_sodium();
    crypto_hash_sha256_init(as_state<crypto_hash_sha256_state>(m_state));
}

Sha256& Sha256::update(std::string_view data) noexcept {
    crypto_hash_sha256_update(
        as_state<crypto_hash_sha256_state>(m_state), as_bytes(data), data.size());
    return *this;
}

Digest Sha256::digest() const noexcept {
    crypto_hash_sha256_state copy;
    std::memcpy(&copy, m_state.data(), sizeof copy);
    Digest out{};
    crypto_hash_sha256_final(&copy, out.data());
    return out;
}

SharedPayload::SharedPayload(std::string text, Envelope envelope) : bytes(std::move(text)) {
    bare.update(bytes);
    if (envelope == Envelope::also) {
        // frame_parts()'s head of a `relay`, after the header: what the envelope puts before.
        enveloped.update(R"({"msg":)").update(bytes);
    }
}

Channel::Channel(const SessionKeys& keys, End end) {
    ensure_sodium();
    keyed(m_send, end == End::launcher ? keys.up : keys.down);
    keyed(m_receive, end == End::launcher ? keys.down : keys.up);
}

std::string Channel::seal(std::string_view payload, std::size_t limit) {
    FrameParts parts = frame_parts(payload.size(), {}, limit, k_tag_size);
    std::string frame = std::move(parts.head);
    frame.reserve(frame.size() + payload.size() + k_tag_size);
    frame += payload;
    frame += next_tag(sha256(payload));
    return frame;
}

std::string Channel::next_tag(const Digest& digest) {
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
    const std::string expected = tag_of(m_receive, seq, sha256(payload));
    if (!constant_time_equal(std::string_view(frame).substr(size), expected)) {
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

} // namespace tfslurm::protocol
