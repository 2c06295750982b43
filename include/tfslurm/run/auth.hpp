// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// How launchers and the coordinator prove who they are: MUNGE credentials or an HMAC-SHA256
/// of the challenge with the per-job TFSLURM_SECRET.

#include <tfslurm/run/protocol.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm::protocol {

using Digest = std::array<std::uint8_t, 32>;

/// FIPS 180-4 SHA-256 (libsodium). \throws std::runtime_error when libsodium cannot start.
[[nodiscard]] Digest sha256(std::string_view data);
/// RFC 2104 HMAC-SHA256 with a key of any length (libsodium; test vectors: RFC 4231).
/// \throws std::runtime_error when libsodium cannot start.
[[nodiscard]] Digest hmac_sha256(std::string_view key, std::string_view data);

/// An HMAC-SHA256 key made ready once: RFC 2104's inner and outer pads are hashed when it is
/// made, so that each MAC costs the message's SHA-256 blocks and the outer one, two blocks less
/// than hmac_sha256() (a coordinator checks one proof and makes one per connection). The same
/// MACs as hmac_sha256(key, data). Its state is zeroed when it goes.
class HmacKey {
  public:
    /// No key: mac() must not be called.
    HmacKey() = default;
    /// \throws std::runtime_error when libsodium cannot start.
    explicit HmacKey(std::string_view key);
    HmacKey(const HmacKey&) = default;
    HmacKey& operator=(const HmacKey&) = default;
    HmacKey(HmacKey&&) = default;
    HmacKey& operator=(HmacKey&&) = default;
    ~HmacKey();

    [[nodiscard]] Digest mac(std::string_view data) const;

  private:
    alignas(16) std::array<unsigned char, 208> m_state{}; ///< crypto_auth_hmacsha256_state
};

/// Lower-case hex. Input: "\x01\xab". Output: "01ab".
[[nodiscard]] std::string to_hex(std::string_view bytes);
[[nodiscard]] std::string to_hex(const Digest& digest);
/// Decode hex (either case); nullopt for odd length or a non-hex character.
[[nodiscard]] std::optional<std::string> from_hex(std::string_view hex);

/// `n` bytes from libsodium's randombytes_buf() (the kernel's getrandom()).
/// \throws std::runtime_error when libsodium cannot start.
[[nodiscard]] std::string random_bytes(std::size_t n);

/// Compare without an early exit (sodium_memcmp: the time does not depend on where they
/// differ; only on the lengths, which are public).
[[nodiscard]] bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

/// What a proof says of the endpoint the launcher dialled, so that a proof made for one
/// endpoint fails at any other (docs/protocol.md, "Threat model": a process of another user that
/// holds a control port and forwards the bytes to the coordinator's fallback port cannot pass its
/// victims' proofs on). Input: 25006. Output: `tcp:25006`.
[[nodiscard]] std::string tcp_endpoint(std::uint16_t port);
/// The same for a node leader's relay socket (relay_path()). Input: `@tfslurm-0/relay-12.0-2`.
/// Output: `unix:@tfslurm-0/relay-12.0-2`.
[[nodiscard]] std::string unix_endpoint(std::string_view path);

/// The bytes a launcher MACs with the secret: `tfslurm/7 launcher ` || nonce (raw) || job (u64
/// BE) || step (u64 BE) || rank (u32 BE) || endpoint (tcp_endpoint(), unix_endpoint(); last, the
/// only field of variable length).
[[nodiscard]] std::string secret_message(std::string_view nonce_hex,
                                         StepId step,
                                         std::uint32_t rank,
                                         std::string_view endpoint);

/// The payload a launcher MUNGE-encodes: `tfslurm/7 job=<job> step=<step> rank=<rank>
/// nonce=<nonce_hex> key=<key, hex> endpoint=<endpoint>`. `key`: the launcher's key material for
/// the session keys (k_key_material_size random bytes; empty in a proof that starts no session).
[[nodiscard]] std::string munge_payload(std::string_view nonce_hex,
                                        StepId step,
                                        std::uint32_t rank,
                                        std::string_view endpoint,
                                        std::string_view key);

/// What the coordinator (or a node leader's relay) HMACs to prove itself: secret_message() with
/// `coordinator` for `launcher` (never equal to a launcher's message).
[[nodiscard]] std::string coordinator_secret_message(std::string_view nonce_hex,
                                                     StepId step,
                                                     std::uint32_t rank,
                                                     std::string_view endpoint);

/// What the coordinator MUNGE-encodes to prove itself: `tfslurm/7 coordinator job=<job>
/// step=<step> rank=<rank> nonce=<launcher's nonce> key=<key, hex> endpoint=<endpoint>`.
[[nodiscard]] std::string coordinator_munge_payload(std::string_view nonce_hex,
                                                    StepId step,
                                                    std::uint32_t rank,
                                                    std::string_view endpoint,
                                                    std::string_view key);

/// A hello of another job or another step (sharing the control port), named with the code the
/// launcher acts on; nullopt for this step's. Cheap: no proof is checked.
/// Input: a hello of 12345.1 at 12345.0. Output:
/// `{RejectCode::wrong_step, "wrong step 12345.1 (this is step 12345.0)"}`.
[[nodiscard]] std::optional<Reject> check_step(const Hello& hello, StepId step);

/// Bytes of key material each end puts in its MUNGE credential, for the session keys.
inline constexpr std::size_t k_key_material_size = 32;

/// How many MUNGE hellos a coordinator (or a node leader's relay) proves at once, each on a
/// thread of its own that mostly waits on munged (which serves several clients at once: its
/// --num-threads, 2 by default). Leaders that register together, or a node's followers, are
/// proved side by side instead of one after the other (issue #33).
inline constexpr std::size_t k_munge_threads = 4;

/// The two keys of one connection: `up` for what the launcher sends, `down` for what the
/// coordinator (or a node leader's relay, in its stead) sends.
struct SessionKeys {
    std::string up;
    std::string down;
};

/// Derive a connection's keys: BLAKE2b-256 keyed with `ikm` (the step's secret, or the two ends'
/// MUNGE key material; BLAKE2b-256(ikm) when longer than 64 bytes) over `tfslurm/7 session ` ||
/// the challenge's nonce || the hello's nonce || job || step || rank || endpoint, then one keyed
/// BLAKE2b of a label per direction. Both ends get the same keys only when
/// they saw the same handshake at the same endpoint with the same ikm.
/// \throws std::runtime_error when libsodium cannot start; Error (Errc::auth) for an empty ikm.
[[nodiscard]] SessionKeys session_keys(std::string_view ikm,
                                       std::string_view challenge_hex,
                                       std::string_view hello_nonce_hex,
                                       StepId step,
                                       std::uint32_t rank,
                                       std::string_view endpoint);

/// What the user configured.
struct AuthSettings {
    AuthMethod method = AuthMethod::automatic;
    std::optional<std::string> secret_hex; ///< TFSLURM_SECRET
    std::string munge_socket;              ///< empty = libmunge's default
    /// Where munge_socket came from, for messages: `TFSLURM_MUNGE_SOCKET`, `AuthInfo in
    /// /etc/slurm/slurm.conf`, ... (find_munge_socket() in slurm_config.hpp).
    std::string munge_socket_origin = "libmunge's default";
};

/// Creates hello credentials (launcher side) and verifies them (coordinator side).
///
/// Launcher: `prove()` with the resolved method. Coordinator: `verify()` accepts munge unless
/// `--auth secret` was chosen, and the secret when one is configured and `--auth munge` was
/// not chosen. Either way a MUNGE credential must carry this process's uid, the job, the step,
/// the claimed rank and the challenge's nonce; munged rejects replays.
class Authenticator {
  public:
    /// Resolve `automatic` (munge if a credential can be encoded now, else the secret if
    /// set). \throws Error (Errc::auth) `--auth: no authentication available: ...`, or for
    /// `--auth secret` without a valid TFSLURM_SECRET (hex, >= 16 bytes), or `--auth munge`
    /// when munged cannot be reached.
    [[nodiscard]] static Authenticator create(const AuthSettings& settings);
    /// create() without resolving the method yet (TFSLURM_SECRET is checked): verify() and
    /// the proofs of host_own_coordinator()'s rank work at once, resolve_method() makes the
    /// rest of create()'s checks. Rank 0 starts its coordinator in between (issue #33: the
    /// `automatic` method's MUNGE round trip is then off the other launchers' path, and rank 0
    /// registers with its own key). \throws Error as create() for TFSLURM_SECRET.
    [[nodiscard]] static Authenticator create_unresolved(const AuthSettings& settings);
    /// create()'s resolution and its errors, once (create() does it itself).
    void resolve_method();

    /// The method prove() uses: munge or secret.
    [[nodiscard]] AuthMethod method() const noexcept { return m_method; }

    /// This process hosts the coordinator, and its own launcher, of `rank`, registers with it:
    /// that one connection is proved both ways with a key of this process's own (random,
    /// k_key_material_size bytes, never written or sent anywhere), by the secret method's HMACs
    /// and session keys, instead of four MUNGE round trips to munged (issue #33: rank 0's own
    /// registration came first on its path to its relay and its trainer). Only what holds this
    /// object can make such a proof; a hello of `rank` with the secret method is checked with
    /// that key alone from then on. \throws std::runtime_error when libsodium cannot start.
    void host_own_coordinator(std::uint32_t rank);

    /// The method of `rank`'s proofs: secret for the rank of host_own_coordinator(), else
    /// method().
    [[nodiscard]] AuthMethod method_for(std::uint32_t rank) const noexcept {
        return own(rank) ? AuthMethod::secret : m_method;
    }

    /// The credential for a hello over `endpoint` (the one dialled: tcp_endpoint(),
    /// unix_endpoint()). MUNGE: it carries `key` (this end's key material, session_keys()),
    /// readable only by this uid (MUNGE_OPT_UID_RESTRICTION); the secret ignores it.
    /// \throws Error (Errc::auth) when munge_encode fails.
    [[nodiscard]] std::string prove(std::string_view nonce_hex,
                                    StepId step,
                                    std::uint32_t rank,
                                    std::string_view endpoint,
                                    std::string_view key = {}) const;

    /// nullopt when `hello` proves it belongs to `step` (job and step), answers `nonce_hex` and
    /// was sent to `endpoint` (this end's: the port it listens on, its relay socket); otherwise
    /// the reject to send (its reason also goes to the log). Another job or another step is
    /// named before any proof is checked, with a code the launcher acts on (check_step()).
    /// With `key` (a session follows), a MUNGE hello must carry key material (refused
    /// otherwise), and leaves it in `*key`.
    [[nodiscard]] std::optional<Reject> verify(const Hello& hello,
                                               std::string_view nonce_hex,
                                               StepId step,
                                               std::string_view endpoint,
                                               std::string* key = nullptr) const;

    /// The coordinator's credential for the welcome to the launcher of `rank`: it answers the
    /// nonce of that launcher's hello with `method` (the hello's). Both directions are proved,
    /// so that a process holding the control port first cannot pass for the coordinator.
    /// MUNGE: it carries `key`, as prove(). \throws Error (Errc::auth) when munge_encode fails
    /// or there is no secret.
    [[nodiscard]] std::string prove_coordinator(AuthMethod method,
                                                std::string_view nonce_hex,
                                                StepId step,
                                                std::uint32_t rank,
                                                std::string_view endpoint,
                                                std::string_view key = {}) const;

    /// Launcher side: nullopt when a welcome's `credential` proves that its sender belongs to
    /// `step` (job and step; same MUNGE uid, or the same secret), answers this launcher's
    /// `nonce_hex` for `rank` and is the one at `endpoint` (the one the launcher dialled);
    /// otherwise why not. With `key`, a MUNGE credential must carry key material, left in `*key`.
    [[nodiscard]] std::optional<std::string> verify_coordinator(const std::string& credential,
                                                                std::string_view nonce_hex,
                                                                StepId step,
                                                                std::uint32_t rank,
                                                                std::string_view endpoint,
                                                                std::string* key = nullptr) const;

    /// The keys of a connection whose handshake used `method`: from the secret, or from both
    /// ends' MUNGE key material (`launcher_key` from the hello's credential, `coordinator_key`
    /// from the welcome's), and the handshake (protocol::session_keys()). \throws Error
    /// (Errc::auth) without a secret, or when MUNGE key material is not k_key_material_size bytes.
    [[nodiscard]] SessionKeys session_keys(AuthMethod method,
                                           std::string_view launcher_key,
                                           std::string_view coordinator_key,
                                           std::string_view challenge_hex,
                                           std::string_view hello_nonce_hex,
                                           StepId step,
                                           std::uint32_t rank,
                                           std::string_view endpoint) const;

  private:
    /// Decode a MUNGE credential and match its payload with `expected` (built with an empty
    /// key): why not, or nullopt and the key material it carries (hex of k_key_material_size
    /// bytes, or none) in `*key`.
    [[nodiscard]] std::optional<std::string>
    check_munge(const std::string& credential, const std::string& expected, std::string* key) const;

    /// Whether `rank` is the one whose launcher registers with the coordinator in this process.
    [[nodiscard]] bool own(std::uint32_t rank) const noexcept {
        return !m_own_key.empty() && rank == m_own_rank;
    }
    /// The key of the secret method's proofs for `rank`: this process's own, or TFSLURM_SECRET.
    [[nodiscard]] const std::string& secret_for(std::uint32_t rank) const noexcept {
        return own(rank) ? m_own_key : m_secret;
    }
    /// secret_for(rank) made ready for its HMACs. \pre !secret_for(rank).empty().
    [[nodiscard]] const HmacKey& hmac_for(std::uint32_t rank) const noexcept {
        return own(rank) ? m_own_hmac : m_secret_hmac;
    }

    AuthMethod m_method = AuthMethod::secret;
    AuthMethod m_requested = AuthMethod::automatic;
    std::string m_secret;         ///< raw bytes, empty when none
    HmacKey m_secret_hmac;        ///< m_secret's, when there is one
    std::string m_own_key;        ///< host_own_coordinator()'s key, empty when none
    HmacKey m_own_hmac;           ///< m_own_key's, when there is one
    std::uint32_t m_own_rank = 0; ///< and the rank it proves
    std::string m_munge_socket;
    std::string m_munge_socket_origin; ///< AuthSettings::munge_socket_origin, for messages
    bool m_resolved = false;           ///< resolve_method() was made
};

/// Whether a MUNGE credential can be encoded now (munged reachable). Touches the OS.
[[nodiscard]] bool munge_available(const std::string& socket);

} // namespace tfslurm::protocol
