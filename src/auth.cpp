// SPDX-License-Identifier: MIT
// Authentication of launchers: SHA-256/HMAC (our own small implementation, checked against the
// FIPS 180-4 and RFC 4231 vectors in tests/unit/test_protocol.cpp), the per-job secret, and
// MUNGE credentials through libmunge.
#include <tfslurm/auth.hpp>
#include <tfslurm/error.hpp>
#include <tfslurm/log.hpp>
#include <tfslurm/protocol.hpp>

#include <fmt/format.h>

#include <munge.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <system_error>

namespace tfslurm::protocol {

// --- SHA-256 (FIPS 180-4) --------------------------------------------------------------------

namespace {

constexpr std::array<std::uint32_t, 64> k_round{
    0x428a2f98U, 0x71374491U, 0xb5c0fbcfU, 0xe9b5dba5U, 0x3956c25bU, 0x59f111f1U, 0x923f82a4U,
    0xab1c5ed5U, 0xd807aa98U, 0x12835b01U, 0x243185beU, 0x550c7dc3U, 0x72be5d74U, 0x80deb1feU,
    0x9bdc06a7U, 0xc19bf174U, 0xe49b69c1U, 0xefbe4786U, 0x0fc19dc6U, 0x240ca1ccU, 0x2de92c6fU,
    0x4a7484aaU, 0x5cb0a9dcU, 0x76f988daU, 0x983e5152U, 0xa831c66dU, 0xb00327c8U, 0xbf597fc7U,
    0xc6e00bf3U, 0xd5a79147U, 0x06ca6351U, 0x14292967U, 0x27b70a85U, 0x2e1b2138U, 0x4d2c6dfcU,
    0x53380d13U, 0x650a7354U, 0x766a0abbU, 0x81c2c92eU, 0x92722c85U, 0xa2bfe8a1U, 0xa81a664bU,
    0xc24b8b70U, 0xc76c51a3U, 0xd192e819U, 0xd6990624U, 0xf40e3585U, 0x106aa070U, 0x19a4c116U,
    0x1e376c08U, 0x2748774cU, 0x34b0bcb5U, 0x391c0cb3U, 0x4ed8aa4aU, 0x5b9cca4fU, 0x682e6ff3U,
    0x748f82eeU, 0x78a5636fU, 0x84c87814U, 0x8cc70208U, 0x90befffaU, 0xa4506cebU, 0xbef9a3f7U,
    0xc67178f2U,
};

constexpr std::uint32_t rotr(std::uint32_t x, unsigned n) noexcept {
    return (x >> n) | (x << (32U - n));
}

class Sha256 {
  public:
    void update(std::string_view data) noexcept {
        for (const char c : data) {
            m_block[m_fill++] = static_cast<std::uint8_t>(c);
            if (m_fill == m_block.size()) {
                compress();
                m_fill = 0;
            }
        }
        m_bits += static_cast<std::uint64_t>(data.size()) * 8U;
    }

    Digest finish() noexcept {
        const std::uint64_t bits = m_bits;
        m_block[m_fill++] = 0x80U;
        if (m_fill > 56) {
            while (m_fill < 64) {
                m_block[m_fill++] = 0;
            }
            compress();
            m_fill = 0;
        }
        while (m_fill < 56) {
            m_block[m_fill++] = 0;
        }
        for (unsigned i = 0; i < 8; ++i) {
            m_block[56 + i] = static_cast<std::uint8_t>(bits >> (56U - 8U * i));
        }
        compress();
        Digest out{};
        for (std::size_t i = 0; i < 8; ++i) {
            for (unsigned b = 0; b < 4; ++b) {
                out[4 * i + b] = static_cast<std::uint8_t>(m_state[i] >> (24U - 8U * b));
            }
        }
        return out;
    }

  private:
    void compress() noexcept {
        std::array<std::uint32_t, 64> w{};
        for (std::size_t i = 0; i < 16; ++i) {
            w[i] = (std::uint32_t{m_block[4 * i]} << 24U) |
                   (std::uint32_t{m_block[4 * i + 1]} << 16U) |
                   (std::uint32_t{m_block[4 * i + 2]} << 8U) | std::uint32_t{m_block[4 * i + 3]};
        }
        for (std::size_t i = 16; i < 64; ++i) {
            const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3U);
            const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10U);
            w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        std::uint32_t a = m_state[0];
        std::uint32_t b = m_state[1];
        std::uint32_t c = m_state[2];
        std::uint32_t d = m_state[3];
        std::uint32_t e = m_state[4];
        std::uint32_t f = m_state[5];
        std::uint32_t g = m_state[6];
        std::uint32_t h = m_state[7];
        for (std::size_t i = 0; i < 64; ++i) {
            const std::uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
            const std::uint32_t ch = (e & f) ^ (~e & g);
            const std::uint32_t t1 = h + s1 + ch + k_round[i] + w[i];
            const std::uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
            const std::uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
            const std::uint32_t t2 = s0 + maj;
            h = g;
            g = f;
            f = e;
            e = d + t1;
            d = c;
            c = b;
            b = a;
            a = t1 + t2;
        }
        m_state[0] += a;
        m_state[1] += b;
        m_state[2] += c;
        m_state[3] += d;
        m_state[4] += e;
        m_state[5] += f;
        m_state[6] += g;
        m_state[7] += h;
    }

    std::array<std::uint32_t, 8> m_state{0x6a09e667U,
                                         0xbb67ae85U,
                                         0x3c6ef372U,
                                         0xa54ff53aU,
                                         0x510e527fU,
                                         0x9b05688cU,
                                         0x1f83d9abU,
                                         0x5be0cd19U};
    std::array<std::uint8_t, 64> m_block{};
    std::size_t m_fill = 0;
    std::uint64_t m_bits = 0;
};

std::string_view as_chars(const Digest& digest) noexcept {
    return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

} // namespace

Digest sha256(std::string_view data) noexcept {
    Sha256 hash;
    hash.update(data);
    return hash.finish();
}

Digest hmac_sha256(std::string_view key, std::string_view data) noexcept {
    constexpr std::size_t k_block = 64;
    std::array<char, k_block> padded{};
    if (key.size() > k_block) {
        const Digest short_key = sha256(key);
        std::memcpy(padded.data(), short_key.data(), short_key.size());
    } else {
        std::memcpy(padded.data(), key.data(), key.size());
    }
    std::array<char, k_block> inner_pad{};
    std::array<char, k_block> outer_pad{};
    for (std::size_t i = 0; i < k_block; ++i) {
        inner_pad[i] = static_cast<char>(padded[i] ^ 0x36);
        outer_pad[i] = static_cast<char>(padded[i] ^ 0x5c);
    }
    Sha256 inner;
    inner.update({inner_pad.data(), inner_pad.size()});
    inner.update(data);
    const Digest inner_digest = inner.finish();
    Sha256 outer;
    outer.update({outer_pad.data(), outer_pad.size()});
    outer.update(as_chars(inner_digest));
    return outer.finish();
}

std::string to_hex(std::string_view bytes) {
    constexpr std::string_view k_digits = "0123456789abcdef";
    std::string out;
    out.reserve(2 * bytes.size());
    for (const char c : bytes) {
        const auto byte = static_cast<std::uint8_t>(c);
        out.push_back(k_digits[byte >> 4U]);
        out.push_back(k_digits[byte & 0x0fU]);
    }
    return out;
}

std::string to_hex(const Digest& digest) {
    return to_hex(as_chars(digest));
}

std::optional<std::string> from_hex(std::string_view hex) {
    if (hex.size() % 2 != 0) {
        return std::nullopt;
    }
    const auto nibble = [](char c) -> int {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    };
    std::string out;
    out.reserve(hex.size() / 2);
    for (std::size_t i = 0; i < hex.size(); i += 2) {
        const int high = nibble(hex[i]);
        const int low = nibble(hex[i + 1]);
        if (high < 0 || low < 0) {
            return std::nullopt;
        }
        out.push_back(static_cast<char>(high * 16 + low));
    }
    return out;
}

std::string random_bytes(std::size_t n) {
    std::string out(n, '\0');
    std::size_t filled = 0;
    while (filled < n) {
        const ssize_t got = ::getrandom(out.data() + filled, n - filled, 0);
        if (got < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw std::system_error(errno, std::generic_category(), "getrandom");
        }
        filled += static_cast<std::size_t>(got);
    }
    return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    unsigned difference = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        difference |= static_cast<unsigned>(static_cast<std::uint8_t>(a[i]) ^
                                            static_cast<std::uint8_t>(b[i]));
    }
    return difference == 0;
}

std::string secret_message(std::string_view nonce_hex, std::uint64_t job, std::uint32_t rank) {
    std::string message = from_hex(nonce_hex).value_or(std::string(nonce_hex));
    for (int shift = 56; shift >= 0; shift -= 8) {
        message.push_back(static_cast<char>((job >> static_cast<unsigned>(shift)) & 0xffU));
    }
    for (int shift = 24; shift >= 0; shift -= 8) {
        message.push_back(static_cast<char>((rank >> static_cast<unsigned>(shift)) & 0xffU));
    }
    return message;
}

std::string munge_payload(std::string_view nonce_hex, std::uint64_t job, std::uint32_t rank) {
    return fmt::format("tfslurm/1 job={} rank={} nonce={}", job, rank, nonce_hex);
}

std::string
coordinator_secret_message(std::string_view nonce_hex, std::uint64_t job, std::uint32_t rank) {
    // A distinct prefix: a launcher's proof can never pass for the coordinator's.
    return "tfslurm/1 coordinator " + secret_message(nonce_hex, job, rank);
}

std::string
coordinator_munge_payload(std::string_view nonce_hex, std::uint64_t job, std::uint32_t rank) {
    return fmt::format("tfslurm/1 coordinator job={} rank={} nonce={}", job, rank, nonce_hex);
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
std::string munged_at(const AuthSettings& settings) {
    std::string socket = settings.munge_socket;
    if (socket.empty()) {
        // libmunge's compiled-in default, as the library itself reports it.
        const MungeContext ctx(munge_ctx_create());
        char* path = nullptr;
        if (ctx && munge_ctx_get(ctx.get(), MUNGE_OPT_SOCKET, &path) == EMUNGE_SUCCESS &&
            path != nullptr) {
            socket = path;
        }
    }
    return fmt::format(
        "munged at {} ({})", socket.empty() ? "?" : socket, settings.munge_socket_origin);
}

/// Encode `payload`; the error text (munge's own) when it fails.
std::optional<std::string>
munge_encode_payload(const std::string& socket, std::string_view payload, std::string& error) {
    const MungeContext ctx = make_context(socket);
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

// One switch over the three methods, each case with its own message (~60 lines): split, the
// messages would drift apart.
Authenticator Authenticator::create(const AuthSettings& settings) {
    Authenticator auth;
    auth.m_requested = settings.method;
    auth.m_munge_socket = settings.munge_socket;
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
    }
    std::string munge_error;
    const auto munge_works = [&] {
        return munge_encode_payload(settings.munge_socket, "tfslurm/1 probe", munge_error)
            .has_value();
    };
    switch (settings.method) {
    case AuthMethod::munge:
        if (!munge_works()) {
            throw errors::make(
                Errc::auth,
                setting_ref("auth", "munge"),
                fmt::format("{} is not reachable: {}", munged_at(settings), munge_error),
                "is munged running on this node? Slurm's AuthInfo=socket=... in slurm.conf "
                "names its socket; TFSLURM_MUNGE_SOCKET overrides it");
        }
        auth.m_method = AuthMethod::munge;
        break;
    case AuthMethod::secret:
        if (auth.m_secret.empty()) {
            throw errors::make(Errc::auth,
                               setting_ref("auth", "secret"),
                               "TFSLURM_SECRET is not set",
                               "export TFSLURM_SECRET=$(openssl rand -hex 32) before srun");
        }
        auth.m_method = AuthMethod::secret;
        break;
    case AuthMethod::automatic:
        if (munge_works()) {
            auth.m_method = AuthMethod::munge;
        } else if (!auth.m_secret.empty()) {
            logger().debug("auth: munge unavailable ({}); using TFSLURM_SECRET", munge_error);
            auth.m_method = AuthMethod::secret;
        } else {
            throw errors::make(
                Errc::auth,
                setting_ref("auth"),
                fmt::format("no authentication available: {} is not reachable ({}) and "
                            "TFSLURM_SECRET is not set",
                            munged_at(settings),
                            munge_error),
                "start munged (Slurm's AuthInfo=socket=... in slurm.conf names its socket; "
                "TFSLURM_MUNGE_SOCKET overrides it), or export TFSLURM_SECRET=$(openssl rand "
                "-hex 32) before srun");
        }
        break;
    }
    return auth;
}

std::string
Authenticator::prove(std::string_view nonce_hex, std::uint64_t job, std::uint32_t rank) const {
    if (m_method == AuthMethod::secret) {
        return to_hex(hmac_sha256(m_secret, secret_message(nonce_hex, job, rank)));
    }
    std::string error;
    auto credential =
        munge_encode_payload(m_munge_socket, munge_payload(nonce_hex, job, rank), error);
    if (!credential) {
        throw errors::make(
            Errc::auth, "munge", fmt::format("cannot encode a credential: {}", error));
    }
    return std::move(*credential);
}

std::optional<std::string>
Authenticator::verify(const Hello& hello, std::string_view nonce_hex, std::uint64_t job) const {
    if (hello.job != job) {
        return fmt::format("wrong job {} (this is job {})", hello.job, job);
    }
    if (hello.auth == AuthMethod::secret) {
        if (m_secret.empty() || m_requested == AuthMethod::munge) {
            return std::string("secret authentication is not enabled");
        }
        const auto mac = from_hex(hello.credential);
        const Digest expected = hmac_sha256(m_secret, secret_message(nonce_hex, job, hello.rank));
        if (!mac || !constant_time_equal(*mac, as_chars(expected))) {
            return std::string("bad secret proof");
        }
        return std::nullopt;
    }
    if (hello.auth != AuthMethod::munge || m_requested == AuthMethod::secret) {
        return std::string("munge authentication is not enabled");
    }
    return check_munge(hello.credential, munge_payload(nonce_hex, job, hello.rank));
}

std::optional<std::string> Authenticator::check_munge(const std::string& credential,
                                                      const std::string& expected) const {
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
        return fmt::format("munge credential rejected: {}",
                           detail != nullptr ? detail : munge_strerror(status));
    }
    if (uid != ::getuid()) {
        return fmt::format("munge credential of uid {} (expected {})", uid, ::getuid());
    }
    const std::string_view got(static_cast<const char*>(payload.get()),
                               payload ? static_cast<std::size_t>(length) : 0U);
    if (got != expected) {
        return std::string("munge credential payload does not match the job, rank and challenge");
    }
    return std::nullopt;
}

std::string Authenticator::prove_coordinator(AuthMethod method,
                                             std::string_view nonce_hex,
                                             std::uint64_t job,
                                             std::uint32_t rank) const {
    if (method == AuthMethod::secret) {
        if (m_secret.empty()) {
            throw errors::make(Errc::auth, "coordinator", "no secret to prove itself with");
        }
        return to_hex(hmac_sha256(m_secret, coordinator_secret_message(nonce_hex, job, rank)));
    }
    std::string error;
    auto credential = munge_encode_payload(
        m_munge_socket, coordinator_munge_payload(nonce_hex, job, rank), error);
    if (!credential) {
        throw errors::make(
            Errc::auth, "munge", fmt::format("cannot encode a credential: {}", error));
    }
    return std::move(*credential);
}

std::optional<std::string> Authenticator::verify_coordinator(const std::string& credential,
                                                             std::string_view nonce_hex,
                                                             std::uint64_t job,
                                                             std::uint32_t rank) const {
    if (m_method == AuthMethod::secret) {
        const auto mac = from_hex(credential);
        const Digest expected =
            hmac_sha256(m_secret, coordinator_secret_message(nonce_hex, job, rank));
        if (!mac || !constant_time_equal(*mac, as_chars(expected))) {
            return std::string("bad secret proof");
        }
        return std::nullopt;
    }
    return check_munge(credential, coordinator_munge_payload(nonce_hex, job, rank));
}

} // namespace tfslurm::protocol
