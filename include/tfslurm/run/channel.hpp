// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Every frame after the handshake carries a MAC (docs/protocol.md, "Sealed frames"): the two
/// ends of a connection derive a key for each direction from the handshake (session_keys()),
/// and each frame's tag is BLAKE2b-256 keyed with it over sequence number || BLAKE2b-256(payload).
/// A tampered, replayed, reordered, cut short or unauthenticated frame fails Channel::open().
/// BLAKE2b, not SHA-256: libsodium's SHA-256 is portable C, its BLAKE2b uses the CPU's vector
/// units, and a frame costs a quarter of the time (about 1 us for a hello: 200,000 frames of a
/// 100,000-task step on one coordinator core).
///
/// The tag covers a digest of the payload, not the payload itself, so that one broadcast (a
/// `cluster` of 100,000 ranks to 12,500 node leaders) is hashed once: each connection adds only
/// its own envelope's tail to a copy of the hash state (SharedPayload) and MACs 40 bytes.

#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <string>
#include <string_view>

namespace tfslurm::protocol {

/// Bytes of the tag after each sealed frame's payload (the frame's length counts it).
inline constexpr std::size_t k_tag_size = 32;
/// Incremental BLAKE2b-256 of a payload, whose state can be copied (libsodium's
/// crypto_generichash state).
class PayloadHash {
  public:
    /// \throws std::runtime_error when libsodium cannot start.
    PayloadHash();
    /// Add `data`. Returns *this.
    PayloadHash& update(std::string_view data) noexcept;
    /// The digest of what was added so far (this state is left as it is: a copy is finished).
    [[nodiscard]] Digest digest() const noexcept;

  private:
    alignas(64) std::array<unsigned char, 384> m_state{};
};

/// BLAKE2b-256 of `payload` (PayloadHash in one call).
[[nodiscard]] Digest payload_digest(std::string_view payload);

/// An encoded payload that several connections send (the coordinator's broadcasts, a relay's
/// downstream messages), with the hash states of its two framings computed once.
struct SharedPayload {
    /// `bytes` hashed as it is and, with Envelope::also, after `{"msg":` (frame_parts() with
    /// ranks): the coordinator sends it both ways, a relay only as it is.
    enum class Envelope { none, also };
    explicit SharedPayload(std::string bytes, Envelope envelope = Envelope::none);

    std::string bytes;
    PayloadHash bare;      ///< over `bytes`
    PayloadHash enveloped; ///< over `{"msg":` + `bytes` (Envelope::also), else empty
};

/// A frame's tag, as it goes on the wire after the payload.
using Tag = std::array<char, k_tag_size>;

/// Which end of a connection a Channel is: it sends with its own direction's key.
enum class End { launcher, coordinator };

/// The MACs and sequence numbers of one connection after its handshake. Not thread-safe: one
/// connection, one thread. Sequence numbers start at 0 each way and are never sent: a frame
/// replayed, dropped or moved fails the next check.
class Channel {
  public:
    Channel(const SessionKeys& keys, End end);

    /// Header + payload + tag: the next frame this end sends. \throws Error (Errc::protocol) when
    /// the payload exceeds `limit` (frame_payload()).
    [[nodiscard]] std::string seal(std::string_view payload, std::size_t limit);
    /// The tag of the next frame this end sends, whose payload's digest is `digest` (a shared
    /// payload's: SharedPayload, then the connection's own tail).
    [[nodiscard]] Tag next_tag(const Digest& digest);

    /// Check the next frame received: `frame` is what FrameDecoder::next() returned (payload,
    /// then tag); returns the payload. \throws Error (Errc::auth) `frame 4 fails its MAC
    /// (tampered, replayed, reordered or cut short)`, or for a frame shorter than a tag.
    [[nodiscard]] std::string open(std::string frame);

    /// Frames sealed and opened so far.
    [[nodiscard]] std::uint64_t sent() const noexcept { return m_sent; }
    [[nodiscard]] std::uint64_t received() const noexcept { return m_received; }

  private:
    std::array<unsigned char, 32> m_send{};
    std::array<unsigned char, 32> m_receive{};
    std::uint64_t m_sent = 0;
    std::uint64_t m_received = 0;
};

/// Largest batch (Outbox, decode_batch()): the coordinator's limit for a frame from any launcher.
inline constexpr std::size_t k_max_batch = k_max_frame;

/// What a launcher has to say to its coordinator while its last write is in flight: each write
/// seals what queued up as few frames as it can (docs/protocol.md, "Batches"). A payload alone
/// goes as itself (Channel::seal()); two or more as one batch, `[p1,p2,...]` of at most
/// k_max_batch bytes, each payload byte for byte as it would go alone: one MAC, one read and
/// one parse at the coordinator for a node leader's followers' hellos or exits, instead of one
/// per rank (at 100,000 tasks, 25,000 frames opened instead of 187,500). Pure: the launcher's
/// link and bench_run's simulated node leaders share it.
class Outbox {
  public:
    /// Queue one encoded payload; `acknowledged`: counted in the Frame that carries it.
    /// \throws Error (Errc::protocol) when it exceeds `limit` alone (frame_payload()).
    void push(std::string payload, bool acknowledged, std::size_t limit);
    [[nodiscard]] bool empty() const noexcept { return m_payloads.empty(); }

    /// A frame sealed for the wire and how many acknowledged payloads it carries.
    struct Frame {
        std::string bytes;
        std::size_t acknowledged = 0;
    };
    /// The next frame, sealed by `channel`: the queued payloads, from the first, that fit one
    /// batch (the first always: alone, as Channel::seal() makes it); nothing when empty().
    [[nodiscard]] Frame take(Channel& channel);
    /// Forget what is queued (the connection is gone).
    void clear() noexcept { m_payloads.clear(); }

  private:
    struct Payload {
        std::string bytes;
        bool acknowledged = false;
        std::size_t limit = 0;
    };
    std::deque<Payload> m_payloads;
};

} // namespace tfslurm::protocol
