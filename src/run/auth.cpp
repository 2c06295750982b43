// SPDX-License-Identifier: MIT
// Authentication of launchers and the coordinator: SHA-256, HMAC-SHA256, hex, constant-time
// comparison and random bytes from libsodium (checked against the FIPS 180-4 and RFC 4231
// vectors in tests/unit/run/test_auth.cpp), the per-job secret, and MUNGE credentials through
// libmunge.
#include "common/detail/text.hpp"
#include "run/detail/sodium.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>

#include <fmt/format.h>

#include <munge.h>
#include <sodium.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <tuple>

namespace tfslurm::protocol {

// --- Primitives (libsodium) -------------------------------------------------------------------

using detail::as_bytes;
using detail::as_chars;
using detail::ensure_sodium;

Digest sha256(std::string_view data) {
    ensure_sodium();
    Digest out{};
    crypto_hash_sha256(out.data(), as_bytes(data), data.size());
    return out;
}

Digest hmac_sha256(std::string_view key, std::string_view data) {
    ensure_sodium();
    static_assert(std::tuple_size_v<Digest> == crypto_auth_hmacsha256_BYTES);
    // The init/update/final interface takes a key of any length (hashed when longer than a
    // block, as RFC 2104 says); crypto_auth_hmacsha256() would insist on 32 bytes.
    crypto_auth_hmacsha256_state state;
    crypto_auth_hmacsha256_init(&state, as_bytes(key), key.size());
    crypto_auth_hmacsha256_update(&state, as_bytes(data), data.size());
    Digest out{};
    crypto_auth_hmacsha256_final(&state, out.data());
    sodium_memzero(&state, sizeof state);
    return out;
}

static_assert(sizeof(crypto_auth_hmacsha256_state) == 208, "HmacKey's storage");

HmacKey::HmacKey(std::string_view key) {
    ensure_sodium();
    crypto_auth_hmacsha256_init(
        reinterpret_cast<crypto_auth_hmacsha256_state*>(m_state.data()), as_bytes(key), key.size());
}

HmacKey::~HmacKey() {
    sodium_memzero(m_state.data(), m_state.size());
}

Digest HmacKey::mac(std::string_view data) const {
    // A copy of the state after the pads: both SHA-256 states hold a whole block, so that the
    // copy goes on from there.
    alignas(16) std::array<unsigned char, 208> copy = m_state;
    auto* state = reinterpret_cast<crypto_auth_hmacsha256_state*>(copy.data());
    crypto_auth_hmacsha256_update(state, as_bytes(data), data.size());
    Digest out{};
    crypto_auth_hmacsha256_final(state, out.data());
    sodium_memzero(copy.data(), copy.size());
    return out;
}

std::string to_hex(std::string_view bytes) {
    std::string out(2 * bytes.size() + 1, '\0');
    sodium_bin2hex(out.data(), out.size(), as_bytes(bytes), bytes.size());
    out.pop_back(); // sodium_bin2hex writes a terminating NUL
    return out;
}

std::string to_hex(const Digest& digest) {
    return to_hex(as_chars(digest));
}

namespace {

/// from_hex() for what is public: a nonce, a peer's MAC (whose own bytes are decoded before the
/// constant-time comparison). Its time depends on the characters; sodium_hex2bin's, four times
/// slower, does not, and decodes what is secret (TFSLURM_SECRET, MUNGE key material).
std::optional<std::string> public_from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0) {
        return std::nullopt;
    }
    std::string out(hex.size() / 2, '\0');
    for (std::size_t i = 0; i < out.size(); ++i) {
        const int high = tfslurm::detail::hex_digit(hex[2 * i]);
        const int low = tfslurm::detail::hex_digit(hex[2 * i + 1]);
        if (high < 0 || low < 0) {
            return std::nullopt;
        }
        out[i] = static_cast<char>(high * 16 + low);
    }
    return out;
}

} // namespace

std::optional<std::string> from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0) {
        return std::nullopt;
    }
    std::string out(hex.size() / 2, '\0');
    std::size_t length = 0;
    const char* end = nullptr;
    // sodium_hex2bin stops at the first non-hex character without failing: the whole input
    // must have been consumed.
    if (sodium_hex2bin(reinterpret_cast<unsigned char*>(out.data()),
                       out.size(),
                       hex.data(),
                       hex.size(),
                       nullptr,
                       &length,
                       &end) != 0 ||
        length != out.size() || end != hex.data() + hex.size()) {
        return std::nullopt;
    }
    return out;
}

std::string random_bytes(std::size_t n) {
    ensure_sodium();
    std::string out(n, '\0');
    randombytes_buf(out.data(), n);
    return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
    // The length is not secret (a MAC's length is public); the content is compared by
    // libsodium without an early exit.
    return a.size() == b.size() && sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string tcp_endpoint(std::uint16_t port) {
    return fmt::format("tcp:{}", port);
}

std::string unix_endpoint(std::string_view path) {
    return fmt::format("unix:{}", path);
}

namespace {

/// `prefix` || nonce (raw) || job || step || rank || endpoint: the fixed-size fields first, the
/// one of variable length last, so that no two field sets give the same bytes.
std::string bound_message(std::string_view prefix,
                          std::string_view nonce_hex,
                          StepId step,
                          std::uint32_t rank,
                          std::string_view endpoint) {
    std::string message(prefix);
    message += public_from_hex(nonce_hex).value_or(std::string(nonce_hex));
    for (const std::uint64_t id : {step.job, step.step}) {
        for (int shift = 56; shift >= 0; shift -= 8) {
            message.push_back(static_cast<char>((id >> static_cast<unsigned>(shift)) & 0xffU));
        }
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
        message.push_back(static_cast<char>((rank >> static_cast<unsigned>(shift)) & 0xffU));
    }
    message += endpoint;
    return message;
}

} // namespace

std::string secret_message(std::string_view nonce_hex,
                           StepId step,
                           std::uint32_t rank,
                           std::string_view endpoint) {
    return bound_message("tfslurm/7 launcher ", nonce_hex, step, rank, endpoint);
}

namespace {

/// `prefix` job=<job> step=<step> rank=<rank> nonce=<nonce> key=<key> endpoint=<endpoint>: the
/// text both MUNGE proofs carry (`key`: hex, of fixed size or empty, before the endpoint).
std::string bound_payload(std::string_view prefix,
                          std::string_view nonce_hex,
                          StepId step,
                          std::uint32_t rank,
                          std::string_view key_hex,
                          std::string_view endpoint) {
    return fmt::format("{}job={} step={} rank={} nonce={} key={} endpoint={}",
                       prefix,
                       step.job,
                       step.step,
                       rank,
                       nonce_hex,
                       key_hex,
                       endpoint);
}

} // namespace

std::string munge_payload(std::string_view nonce_hex,
                          StepId step,
                          std::uint32_t rank,
                          std::string_view endpoint,
                          std::string_view key) {
    return bound_payload("tfslurm/7 ", nonce_hex, step, rank, to_hex(key), endpoint);
}

std::string coordinator_secret_message(std::string_view nonce_hex,
                                       StepId step,
                                       std::uint32_t rank,
                                       std::string_view endpoint) {
    // A distinct prefix: a launcher's proof can never pass for the coordinator's.
    return bound_message("tfslurm/7 coordinator ", nonce_hex, step, rank, endpoint);
}

std::string coordinator_munge_payload(std::string_view nonce_hex,
                                      StepId step,
                                      std::uint32_t rank,
                                      std::string_view endpoint,
                                      std::string_view key) {
    return bound_payload("tfslurm/7 coordinator ", nonce_hex, step, rank, to_hex(key), endpoint);
}

// --- MUNGE -------------------------------------------------------------------------------------

namespace {

struct MungeContextDeleter {
    void operator()(munge_ctx_t ctx) const noexcept { munge_ctx_destroy(ctx); }
};
using MungeContext = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, MungeContextDeleter>;

struct FreeDeleter {
    void operator()(void* p) const noexcept { std::free(p); }
};

MungeContext make_context(const std::string& socket) {
    MungeContext ctx(munge_ctx_create());
    if (!ctx) {
        throw errors::make(Errc::auth, "munge", "cannot create a context (out of memory)");
    }
    if (!socket.empty() &&
        munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str()) != EMUNGE_SUCCESS) {
        throw errors::make(
            Errc::auth, "munge", fmt::format("socket rejected by libmunge: {}", quote(socket)));
    }
    return ctx;
}

/// `munged at /run/munge/munge.socket.2 (libmunge's default)`: which munged was asked, and
/// where its socket path came from, for the messages of a munge failure.
std::string munged_at(const std::string& munge_socket, const std::string& origin) {
    std::string socket = munge_socket;
    if (socket.empty()) {
        // libmunge's compiled-in default, as the library itself reports it.
        const MungeContext ctx(munge_ctx_create());
        char* path = nullptr;
        if (ctx && munge_ctx_get(ctx.get(), MUNGE_OPT_SOCKET, &path) == EMUNGE_SUCCESS &&
            path != nullptr) {
            socket = path;
        }
    }
    return fmt::format("munged at {} ({})", socket.empty() ? "?" : socket, origin);
}

/// Encode `payload`; the error text (munge's own) when it fails.
std::optional<std::string>
munge_encode_payload(const std::string& socket, std::string_view payload, std::string& error) {
    const MungeContext ctx = make_context(socket);
    // Only this user may decode it (munged refuses every other uid): the key material inside
    // stays with the job's user even if another user copies the credential off the wire.
    if (munge_ctx_set(ctx.get(), MUNGE_OPT_UID_RESTRICTION, ::getuid()) != EMUNGE_SUCCESS) {
        error = "cannot restrict the credential to this uid";
        return std::nullopt;
    }
    char* raw = nullptr;
    const munge_err_t status =
        munge_encode(&raw, ctx.get(), payload.data(), static_cast<int>(payload.size()));
    const std::unique_ptr<char, FreeDeleter> credential(raw);
    if (status != EMUNGE_SUCCESS || !credential) {
        const char* detail = munge_ctx_strerror(ctx.get());
        error = detail != nullptr ? detail : munge_strerror(status);
        return std::nullopt;
    }
    return std::string(credential.get());
}

} // namespace

bool munge_available(const std::string& socket) {
    std::string error;
    try {
        return munge_encode_payload(socket, "tfslurm/1 probe", error).has_value();
    } catch (const Error&) {
        return false;
    }
}

Authenticator Authenticator::create(const AuthSettings& settings) {
    Authenticator auth = create_unresolved(settings);
    auth.resolve_method();
    return auth;
}

Authenticator Authenticator::create_unresolved(const AuthSettings& settings) {
    Authenticator auth;
    auth.m_requested = settings.method;
    auth.m_munge_socket = settings.munge_socket;
    auth.m_munge_socket_origin = settings.munge_socket_origin;
    if (settings.secret_hex && settings.method != AuthMethod::munge) {
        const auto raw = from_hex(*settings.secret_hex);
        // The value itself is never printed: it is a credential.
        if (!raw || raw->size() < 16) {
            throw errors::make(Errc::auth,
                               "TFSLURM_SECRET",
                               "must be at least 32 hex digits (16 bytes)",
                               "e.g. export TFSLURM_SECRET=$(openssl rand -hex 32)");
        }
        auth.m_secret = *raw;
        auth.m_secret_hmac = HmacKey(auth.m_secret);
    }
    return auth;
}

// One switch over the three methods, each case with its own message (~50 lines): split, the
// messages would drift apart.
void Authenticator::resolve_method() {
    if (m_resolved) {
        return;
    }
    std::string munge_error;
    const auto munge_works = [&] {
        return munge_encode_payload(m_munge_socket, "tfslurm/1 probe", munge_error).has_value();
    };
    switch (m_requested) {
    case AuthMethod::munge:
        if (!munge_works()) {
            throw errors::make(
                Errc::auth,
                setting_ref("auth", "munge"),
                fmt::format("{} is not reachable: {}",
                            munged_at(m_munge_socket, m_munge_socket_origin),
                            munge_error),
                "is munged running on this node? Slurm's AuthInfo=socket=... in slurm.conf "
                "names its socket; TFSLURM_MUNGE_SOCKET overrides it");
        }
        m_method = AuthMethod::munge;
        break;
    case AuthMethod::secret:
        if (m_secret.empty()) {
            throw errors::make(Errc::auth,
                               setting_ref("auth", "secret"),
                               "TFSLURM_SECRET is not set",
                               "export TFSLURM_SECRET=$(openssl rand -hex 32) before srun");
        }
        m_method = AuthMethod::secret;
        break;
    case AuthMethod::automatic:
        if (munge_works()) {
            m_method = AuthMethod::munge;
        } else if (!m_secret.empty()) {
            logger().debug("auth: munge unavailable ({}); using TFSLURM_SECRET", munge_error);
            m_method = AuthMethod::secret;
        } else {
            throw errors::make(
                Errc::auth,
                setting_ref("auth"),
                fmt::format("no authentication available: {} is not reachable ({}) and "
                            "TFSLURM_SECRET is not set",
                            munged_at(m_munge_socket, m_munge_socket_origin),
                            munge_error),
                "start munged (Slurm's AuthInfo=socket=... in slurm.conf names its socket; "
                "TFSLURM_MUNGE_SOCKET overrides it), or export TFSLURM_SECRET=$(openssl rand "
                "-hex 32) before srun");
        }
        break;
    }
    m_resolved = true;
}

void Authenticator::host_own_coordinator(std::uint32_t rank) {
    m_own_key = random_bytes(k_key_material_size);
    m_own_hmac = HmacKey(m_own_key);
    m_own_rank = rank;
}

std::string Authenticator::prove(std::string_view nonce_hex,
                                 StepId step,
                                 std::uint32_t rank,
                                 std::string_view endpoint,
                                 std::string_view key) const {
    if (method_for(rank) == AuthMethod::secret) {
        return to_hex(hmac_for(rank).mac(secret_message(nonce_hex, step, rank, endpoint)));
    }
    std::string error;
    auto credential = munge_encode_payload(
        m_munge_socket, munge_payload(nonce_hex, step, rank, endpoint, key), error);
    if (!credential) {
        throw errors::make(
            Errc::auth, "munge", fmt::format("cannot encode a credential: {}", error));
    }
    return std::move(*credential);
}

std::optional<Reject> check_step(const Hello& hello, StepId step) {
    // Another job's or another step's launcher at a shared control port: named with a code,
    // so that it looks for its own coordinator on the next candidate.
    if (hello.job != step.job) {
        return Reject{RejectCode::wrong_job,
                      fmt::format("wrong job {} (this is job {})", hello.job, step.job)};
    }
    if (hello.step != step.step) {
        return Reject{RejectCode::wrong_step,
                      fmt::format("wrong step {} (this is step {})",
                                  to_string(StepId{hello.job, hello.step}),
                                  to_string(step))};
    }
    return std::nullopt;
}

std::optional<Reject> Authenticator::verify(const Hello& hello,
                                            std::string_view nonce_hex,
                                            StepId step,
                                            std::string_view endpoint,
                                            std::string* key) const {
    if (auto other = check_step(hello, step)) {
        return other;
    }
    const auto refused = [](std::string reason) {
        return Reject{RejectCode::refused, std::move(reason)};
    };
    if (hello.auth == AuthMethod::secret) {
        // This process's own launcher (host_own_coordinator()) proves its rank with this
        // process's key, whatever the step's method; no one else can.
        if (!own(hello.rank) && (m_secret.empty() || m_requested == AuthMethod::munge)) {
            return refused("secret authentication is not enabled");
        }
        const auto mac = public_from_hex(hello.credential);
        const Digest expected =
            hmac_for(hello.rank).mac(secret_message(nonce_hex, step, hello.rank, endpoint));
        if (!mac || !constant_time_equal(*mac, as_chars(expected))) {
            return refused("bad secret proof");
        }
        return std::nullopt;
    }
    if (hello.auth != AuthMethod::munge || m_requested == AuthMethod::secret) {
        return refused("munge authentication is not enabled");
    }
    std::string material;
    if (auto why = check_munge(hello.credential,
                               munge_payload(nonce_hex, step, hello.rank, endpoint, {}),
                               &material)) {
        return refused(std::move(*why));
    }
    if (key != nullptr) {
        if (material.size() != k_key_material_size) {
            return refused("munge credential carries no key material for the session");
        }
        *key = std::move(material);
    }
    return std::nullopt;
}

std::optional<std::string> Authenticator::check_munge(const std::string& credential,
                                                      const std::string& expected,
                                                      std::string* key) const {
    MungeContext ctx;
    try {
        ctx = make_context(m_munge_socket);
    } catch (const Error& e) {
        return std::string(e.what());
    }
    void* raw = nullptr;
    int length = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    const munge_err_t status =
        munge_decode(credential.c_str(), ctx.get(), &raw, &length, &uid, &gid);
    const std::unique_ptr<void, FreeDeleter> payload(raw);
    if (status != EMUNGE_SUCCESS) {
        const char* detail = munge_ctx_strerror(ctx.get());
        const std::string why = detail != nullptr ? detail : munge_strerror(status);
        if (status == EMUNGE_CRED_UNAUTHORIZED) {
            // Every credential is restricted to its encoder's uid: munged says whom it refused.
            return fmt::format("munge credential of another user, which munged decodes for that "
                               "user only ({})",
                               why);
        }
        return fmt::format("munge credential rejected: {}", why);
    }
    if (uid != ::getuid()) {
        return fmt::format("munge credential of uid {} (expected {})", uid, ::getuid());
    }
    const std::string_view got(static_cast<const char*>(payload.get()),
                               payload ? static_cast<std::size_t>(length) : 0U);
    // `expected` has an empty key: everything before ` key=` and from ` endpoint=` on must
    // match, and between them the sender's key material (hex of k_key_material_size bytes, or
    // nothing).
    constexpr std::string_view k_key_field = " key=";
    const std::size_t at = expected.find(" key= endpoint=");
    const std::string_view want(expected);
    const std::string_view head = want.substr(0, at + k_key_field.size());
    const std::string_view tail = want.substr(at + k_key_field.size());
    std::optional<std::string> material;
    if (at != std::string::npos && got.size() >= head.size() + tail.size() &&
        got.substr(0, head.size()) == head && got.substr(got.size() - tail.size()) == tail) {
        const std::string_view hex =
            got.substr(head.size(), got.size() - head.size() - tail.size());
        if (hex.empty() || hex.size() == 2 * k_key_material_size) {
            material = from_hex(hex);
        }
    }
    if (!material) {
        return std::string(
            "munge credential payload does not match the job, step, rank, challenge and endpoint");
    }
    *key = std::move(*material);
    return std::nullopt;
}

std::string Authenticator::prove_coordinator(AuthMethod method,
                                             std::string_view nonce_hex,
                                             StepId step,
                                             std::uint32_t rank,
                                             std::string_view endpoint,
                                             std::string_view key) const {
    if (method == AuthMethod::secret) {
        if (secret_for(rank).empty()) {
            throw errors::make(Errc::auth, "coordinator", "no secret to prove itself with");
        }
        return to_hex(
            hmac_for(rank).mac(coordinator_secret_message(nonce_hex, step, rank, endpoint)));
    }
    std::string error;
    auto credential = munge_encode_payload(
        m_munge_socket, coordinator_munge_payload(nonce_hex, step, rank, endpoint, key), error);
    if (!credential) {
        throw errors::make(
            Errc::auth, "munge", fmt::format("cannot encode a credential: {}", error));
    }
    return std::move(*credential);
}

std::optional<std::string> Authenticator::verify_coordinator(const std::string& credential,
                                                             std::string_view nonce_hex,
                                                             StepId step,
                                                             std::uint32_t rank,
                                                             std::string_view endpoint,
                                                             std::string* key) const {
    if (method_for(rank) == AuthMethod::secret) {
        const auto mac = public_from_hex(credential);
        const Digest expected =
            hmac_for(rank).mac(coordinator_secret_message(nonce_hex, step, rank, endpoint));
        if (!mac || !constant_time_equal(*mac, as_chars(expected))) {
            return std::string("bad secret proof");
        }
        return std::nullopt;
    }
    std::string material;
    if (auto why = check_munge(credential,
                               coordinator_munge_payload(nonce_hex, step, rank, endpoint, {}),
                               &material)) {
        return why;
    }
    if (key != nullptr) {
        if (material.size() != k_key_material_size) {
            return std::string("munge credential carries no key material for the session");
        }
        *key = std::move(material);
    }
    return std::nullopt;
}

namespace {

/// BLAKE2b-256 of `data`, keyed with `key` (at most 64 bytes; none when empty).
Digest blake2b(std::string_view key, std::string_view data) {
    ensure_sodium();
    Digest out{};
    crypto_generichash(out.data(),
                       out.size(),
                       as_bytes(data),
                       data.size(),
                       key.empty() ? nullptr : as_bytes(key),
                       key.size());
    return out;
}

} // namespace

SessionKeys session_keys(std::string_view ikm,
                         std::string_view challenge_hex,
                         std::string_view hello_nonce_hex,
                         StepId step,
                         std::uint32_t rank,
                         std::string_view endpoint) {
    if (ikm.empty()) {
        throw errors::make(Errc::auth, "session", "no key material to derive the session keys");
    }
    // The proofs' layout (bound_message()), the challenge's nonce first: `tfslurm/7 session `
    // || challenge (raw) || hello nonce (raw) || job || step || rank || endpoint.
    const std::string transcript = bound_message(
        "tfslurm/7 session " + public_from_hex(challenge_hex).value_or(std::string(challenge_hex)),
        hello_nonce_hex,
        step,
        rank,
        endpoint);
    // BLAKE2b (keyed, a PRF) rather than HMAC-SHA256: the coordinator of 12,500 nodes derives
    // 12,500 pairs, and libsodium's BLAKE2b is several times faster than its SHA-256. A key
    // longer than BLAKE2b takes (a long secret) is hashed first, as HMAC would.
    const Digest key = ikm.size() <= crypto_generichash_KEYBYTES_MAX ? Digest{} : blake2b({}, ikm);
    const std::string_view base_key =
        ikm.size() <= crypto_generichash_KEYBYTES_MAX ? ikm : as_chars(key);
    const Digest base = blake2b(base_key, transcript);
    const Digest up = blake2b(as_chars(base), "launcher to coordinator");
    const Digest down = blake2b(as_chars(base), "coordinator to launcher");
    return {std::string(as_chars(up)), std::string(as_chars(down))};
}

SessionKeys Authenticator::session_keys(AuthMethod method,
                                        std::string_view launcher_key,
                                        std::string_view coordinator_key,
                                        std::string_view challenge_hex,
                                        std::string_view hello_nonce_hex,
                                        StepId step,
                                        std::uint32_t rank,
                                        std::string_view endpoint) const {
    if (method == AuthMethod::secret) {
        if (secret_for(rank).empty()) {
            throw errors::make(Errc::auth, "session", "no secret to derive the session keys from");
        }
        return protocol::session_keys(
            secret_for(rank), challenge_hex, hello_nonce_hex, step, rank, endpoint);
    }
    // Each end's key material came inside its own credential, which munged decodes only for
    // this uid: someone who forwarded both credentials knows neither.
    if (launcher_key.size() != k_key_material_size ||
        coordinator_key.size() != k_key_material_size) {
        throw errors::make(Errc::auth,
                           "session",
                           fmt::format("MUNGE key material of {} and {} bytes (expected {} each)",
                                       launcher_key.size(),
                                       coordinator_key.size(),
                                       k_key_material_size));
    }
    std::string ikm(launcher_key);
    ikm += coordinator_key;
    SessionKeys keys =
        protocol::session_keys(ikm, challenge_hex, hello_nonce_hex, step, rank, endpoint);
    sodium_memzero(ikm.data(), ikm.size());
    return keys;
}

} // namespace tfslurm::protocol
