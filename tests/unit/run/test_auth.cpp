// SPDX-License-Identifier: MIT
// The authentication of launchers and coordinator (auth.hpp): digests, the secret and munge
// proofs in both directions, and the refusals when no method is available.
#include "private_munged.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>

#include <grp.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

using namespace tfslurm;
using namespace tfslurm::protocol;

namespace {

std::string hex_digest(const Digest& digest) {
    return to_hex(digest);
}

std::string unhex(std::string_view hex) {
    return from_hex(hex).value();
}

const std::string k_nonce(64, 'a');

/// What verify() returns for a final refusal.
std::optional<Reject> refused(std::string reason) {
    return Reject{RejectCode::refused, std::move(reason)};
}

} // namespace

TEST_CASE("auth: SHA-256 (libsodium) matches the FIPS 180-4 examples", "[auth]") {
    CHECK(hex_digest(sha256("")) ==
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(hex_digest(sha256("abc")) ==
          "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(hex_digest(sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    CHECK(hex_digest(sha256(
              "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopq"
              "klmnopqrlmnopqrsmnopqrstnopqrstu")) ==
          "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
    CHECK(hex_digest(sha256(std::string(1000000, 'a'))) ==
          "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    // Lengths around the padding boundary (55, 56, 64 bytes).
    CHECK(hex_digest(sha256(std::string(55, 'a'))) ==
          "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
    CHECK(hex_digest(sha256(std::string(56, 'a'))) ==
          "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
    CHECK(hex_digest(sha256(std::string(64, 'a'))) ==
          "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("auth: HMAC-SHA256 (libsodium, any key length) matches RFC 4231", "[auth]") {
    const auto [key, data, mac] = GENERATE(table<std::string, std::string, std::string>({
        // Test case 1
        {std::string(20, '\x0b'),
         "Hi There",
         "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
        // Test case 2
        {"Jefe",
         "what do ya want for nothing?",
         "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
        // Test case 3
        {std::string(20, '\xaa'),
         std::string(50, '\xdd'),
         "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
        // Test case 4
        {unhex("0102030405060708090a0b0c0d0e0f10111213141516171819"),
         std::string(50, '\xcd'),
         "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
        // Test case 6: a key longer than the block
        {std::string(131, '\xaa'),
         "Test Using Larger Than Block-Size Key - Hash Key First",
         "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
        // Test case 7
        {std::string(131, '\xaa'),
         "This is a test using a larger than block-size key and a larger than block-size data. "
         "The key needs to be hashed before being used by the HMAC algorithm.",
         "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
    }));
    CHECK(hex_digest(hmac_sha256(key, data)) == mac);
    // A key made ready once gives the same MAC, again and again (its state is copied).
    const HmacKey ready(key);
    CHECK(hex_digest(ready.mac(data)) == mac);
    CHECK(hex_digest(ready.mac("other")) == hex_digest(hmac_sha256(key, "other")));
    CHECK(hex_digest(ready.mac(data)) == mac);
    HmacKey copy;
    copy = ready;
    CHECK(hex_digest(copy.mac(data)) == mac);
    // Test case 5 (output truncated to 128 bits).
    CHECK(hex_digest(hmac_sha256(std::string(20, '\x0c'), "Test With Truncation")).substr(0, 32) ==
          "a3b6167473100ee06e0c796c2955552b");
}

TEST_CASE("auth: hex helpers and constant-time comparison", "[auth]") {
    CHECK(to_hex(std::string("\x01\xab\xff", 3)) == "01abff");
    CHECK(from_hex("01ABff") == std::string("\x01\xab\xff", 3));
    CHECK_FALSE(from_hex("abc"));
    CHECK_FALSE(from_hex("zz"));
    // libsodium's decoder stops at the first non-hex character: that must not pass.
    CHECK_FALSE(from_hex("010g"));
    CHECK_FALSE(from_hex("01 2"));
    CHECK(to_hex(std::string()) == "");
    CHECK(from_hex("") == std::string());
    CHECK(constant_time_equal("abc", "abc"));
    CHECK_FALSE(constant_time_equal("abc", "abd"));
    CHECK_FALSE(constant_time_equal("abc", "ab"));
    CHECK(random_bytes(32).size() == 32);
    CHECK(random_bytes(32) != random_bytes(32));
    const std::string fields =
        std::string(32, '\0') + std::string("\x01\x02\x03\x04\x05\x06\x07\x08"
                                            "\x00\x00\x00\x00\x00\x00\x11\x12\x0a\x0b\x0c\x0d",
                                            20);
    CHECK(secret_message(std::string(64, '0'),
                         StepId{0x0102030405060708ULL, 0x1112U},
                         0x0a0b0c0dU,
                         "tcp:25006") == "tfslurm/7 launcher " + fields + "tcp:25006");
    CHECK(coordinator_secret_message(std::string(64, '0'),
                                     StepId{0x0102030405060708ULL, 0x1112U},
                                     0x0a0b0c0dU,
                                     "tcp:25006") ==
          "tfslurm/7 coordinator " + fields + "tcp:25006");
    CHECK(munge_payload("ab", StepId{42, 1}, 3, "tcp:25006", "\x01\xfe") ==
          "tfslurm/7 job=42 step=1 rank=3 nonce=ab key=01fe endpoint=tcp:25006");
    CHECK(coordinator_munge_payload("ab", StepId{42, 1}, 3, "unix:@tfslurm-0/relay-42.1-2", {}) ==
          "tfslurm/7 coordinator job=42 step=1 rank=3 nonce=ab key= "
          "endpoint=unix:@tfslurm-0/relay-42.1-2");
    CHECK(tcp_endpoint(25006) == "tcp:25006");
    CHECK(unix_endpoint("@tfslurm-0/relay-42.1-2") == "unix:@tfslurm-0/relay-42.1-2");
    CHECK(to_string(StepId{12345, 1}) == "12345.1");
}

TEST_CASE("auth: --auth values", "[auth]") {
    CHECK(parse_auth_method("auto", "--auth") == AuthMethod::automatic);
    CHECK(parse_auth_method("munge", "--auth") == AuthMethod::munge);
    CHECK(parse_auth_method("secret", "--auth") == AuthMethod::secret);
    CHECK_THROWS_WITH(parse_auth_method("none", "--auth"),
                      R"(--auth: expected auto, munge or secret: "none")");
}

namespace {

const std::string k_secret_hex = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
const std::string k_no_munge = "/nonexistent/tfslurm-test/munge.socket";
/// The endpoint the launchers of these tests dialled.
const std::string k_endpoint = "tcp:25006";

Hello secret_hello(const Authenticator& auth, std::uint64_t job, std::uint32_t rank) {
    Hello hello;
    hello.job = job;
    hello.rank = rank;
    hello.role = Role::worker;
    hello.host = "n1";
    hello.pid = 1;
    hello.auth = auth.method_for(rank);
    hello.credential = auth.prove(k_nonce, StepId{job, 0}, rank, k_endpoint);
    return hello;
}

} // namespace

TEST_CASE("auth: secret authentication", "[auth]") {
    const auto auth = Authenticator::create({AuthMethod::automatic, k_secret_hex, k_no_munge});
    REQUIRE(auth.method() == AuthMethod::secret);
    const Hello hello = secret_hello(auth, 77, 3);
    CHECK(hello.credential.size() == 64);
    CHECK_FALSE(auth.verify(hello, k_nonce, StepId{77, 0}, k_endpoint));

    SECTION("another challenge") {
        CHECK(auth.verify(hello, std::string(64, 'b'), StepId{77, 0}, k_endpoint) ==
              refused("bad secret proof"));
    }
    SECTION("another rank claimed") {
        Hello other = hello;
        other.rank = 4;
        CHECK(auth.verify(other, k_nonce, StepId{77, 0}, k_endpoint) ==
              refused("bad secret proof"));
    }
    SECTION("another job") {
        CHECK(auth.verify(hello, k_nonce, StepId{78, 0}, k_endpoint) ==
              Reject{RejectCode::wrong_job, "wrong job 77 (this is job 78)"});
    }
    SECTION("another step of the same job, named before the proof is checked") {
        CHECK(auth.verify(hello, k_nonce, StepId{77, 1}, k_endpoint) ==
              Reject{RejectCode::wrong_step, "wrong step 77.0 (this is step 77.1)"});
        Hello step1 = hello;
        step1.step = 1;
        CHECK(auth.verify(step1, k_nonce, StepId{77, 0}, k_endpoint) ==
              Reject{RejectCode::wrong_step, "wrong step 77.1 (this is step 77.0)"});
    }
    SECTION("the proof binds the step: a hello that claims another step than it proved") {
        Hello claimed = hello; // proved for step 0
        claimed.step = 1;
        CHECK(auth.verify(claimed, k_nonce, StepId{77, 1}, k_endpoint) ==
              refused("bad secret proof"));
        claimed.credential = auth.prove(k_nonce, StepId{77, 1}, 3, k_endpoint);
        CHECK_FALSE(auth.verify(claimed, k_nonce, StepId{77, 1}, k_endpoint));
    }
    SECTION("another secret") {
        const auto intruder =
            Authenticator::create({AuthMethod::secret, std::string(64, '1'), k_no_munge});
        CHECK(auth.verify(secret_hello(intruder, 77, 3), k_nonce, StepId{77, 0}, k_endpoint) ==
              refused("bad secret proof"));
    }
    SECTION("garbage credentials") {
        Hello bad = hello;
        bad.credential = "not hex";
        CHECK(auth.verify(bad, k_nonce, StepId{77, 0}, k_endpoint) == refused("bad secret proof"));
        bad.credential = "";
        CHECK(auth.verify(bad, k_nonce, StepId{77, 0}, k_endpoint) == refused("bad secret proof"));
        // The right proof with one character that is not hex, in either half of a byte.
        for (const std::size_t at : {std::size_t{0}, std::size_t{1}, hello.credential.size() - 1}) {
            bad.credential = hello.credential;
            bad.credential[at] = 'g';
            CHECK(auth.verify(bad, k_nonce, StepId{77, 0}, k_endpoint) ==
                  refused("bad secret proof"));
        }
        // Hex of either case is hex.
        Hello upper = hello;
        for (char& c : upper.credential) {
            c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
        }
        CHECK(upper.credential != hello.credential);
        CHECK_FALSE(auth.verify(upper, k_nonce, StepId{77, 0}, k_endpoint));
    }
    SECTION("a munge credential when only the secret is allowed") {
        const auto secret_only =
            Authenticator::create({AuthMethod::secret, k_secret_hex, k_no_munge});
        Hello munge = hello;
        munge.auth = AuthMethod::munge;
        munge.credential = "MUNGE:xyz:";
        CHECK(secret_only.verify(munge, k_nonce, StepId{77, 0}, k_endpoint) ==
              refused("munge authentication is not enabled"));
    }
}

TEST_CASE("auth: the coordinator proves itself to each launcher", "[auth]") {
    const auto coordinator =
        Authenticator::create({AuthMethod::automatic, k_secret_hex, k_no_munge});
    const auto launcher = Authenticator::create({AuthMethod::secret, k_secret_hex, k_no_munge});
    const std::string proof =
        coordinator.prove_coordinator(AuthMethod::secret, k_nonce, StepId{77, 0}, 3, k_endpoint);
    CHECK(proof.size() == 64);
    CHECK_FALSE(launcher.verify_coordinator(proof, k_nonce, StepId{77, 0}, 3, k_endpoint));
    SECTION("bound to the launcher's nonce, the job, the step and the rank") {
        CHECK(launcher.verify_coordinator(proof, k_nonce, StepId{77, 1}, 3, k_endpoint) ==
              std::string("bad secret proof"));
        CHECK(launcher.verify_coordinator(
                  proof, std::string(64, 'b'), StepId{77, 0}, 3, k_endpoint) ==
              std::string("bad secret proof"));
        CHECK(launcher.verify_coordinator(proof, k_nonce, StepId{78, 0}, 3, k_endpoint) ==
              std::string("bad secret proof"));
        CHECK(launcher.verify_coordinator(proof, k_nonce, StepId{77, 0}, 4, k_endpoint) ==
              std::string("bad secret proof"));
    }
    SECTION("bound to the endpoint the launcher dialled: a forwarder's victim's proof fails") {
        // A process of another user holds the control port (tcp:25006) and forwards each
        // launcher to the coordinator's fallback port (tcp:32246): neither proof passes on.
        CHECK(launcher.verify_coordinator(proof, k_nonce, StepId{77, 0}, 3, "tcp:32246") ==
              std::string("bad secret proof"));
        Hello forwarded = secret_hello(launcher, 77, 3); // proved at tcp:25006
        CHECK(coordinator.verify(forwarded, k_nonce, StepId{77, 0}, "tcp:32246") ==
              refused("bad secret proof"));
        CHECK(
            coordinator.verify(forwarded, k_nonce, StepId{77, 0}, "unix:@tfslurm-0/relay-77.0-2") ==
            refused("bad secret proof"));
        CHECK_FALSE(coordinator.verify(forwarded, k_nonce, StepId{77, 0}, k_endpoint));
    }
    SECTION("a launcher's proof never passes for the coordinator's") {
        CHECK(launcher.verify_coordinator(launcher.prove(k_nonce, StepId{77, 0}, 3, k_endpoint),
                                          k_nonce,
                                          StepId{77, 0},
                                          3,
                                          k_endpoint) == std::string("bad secret proof"));
    }
    SECTION("a process without the secret cannot prove it") {
        const auto impostor =
            Authenticator::create({AuthMethod::secret, std::string(64, '1'), k_no_munge});
        CHECK(launcher.verify_coordinator(
                  impostor.prove_coordinator(
                      AuthMethod::secret, k_nonce, StepId{77, 0}, 3, k_endpoint),
                  k_nonce,
                  StepId{77, 0},
                  3,
                  k_endpoint) == std::string("bad secret proof"));
        CHECK(launcher.verify_coordinator("", k_nonce, StepId{77, 0}, 3, k_endpoint) ==
              std::string("bad secret proof"));
    }
}

TEST_CASE("auth: authentication must be available", "[auth]") {
    SECTION("auto without munged and without a secret") {
        try {
            (void)Authenticator::create({AuthMethod::automatic, std::nullopt, k_no_munge});
            FAIL("no exception");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::auth);
            CHECK_THAT(std::string(e.what()),
                       Catch::StartsWith("auth: no authentication available: munged at " +
                                         std::string(k_no_munge) +
                                         " (libmunge's default) is not reachable (") &&
                           Catch::EndsWith(") and TFSLURM_SECRET is not set"));
            CHECK_THAT(e.hint(), Catch::Contains("TFSLURM_SECRET=$(openssl rand -hex 32)"));
        }
    }
    SECTION("a short secret") {
        CHECK_THROWS_WITH(Authenticator::create({AuthMethod::secret, "abcd", k_no_munge}),
                          "TFSLURM_SECRET: must be at least 32 hex digits (16 bytes)");
    }
    SECTION("a secret that is not hex (the value is never printed)") {
        CHECK_THROWS_WITH(
            Authenticator::create({AuthMethod::secret, std::string(40, 'g'), k_no_munge}),
            "TFSLURM_SECRET: must be at least 32 hex digits (16 bytes)");
    }
    SECTION("--auth secret without a secret") {
        CHECK_THROWS_WITH(Authenticator::create({AuthMethod::secret, std::nullopt, k_no_munge}),
                          "auth=secret: TFSLURM_SECRET is not set");
    }
    SECTION("--auth munge without munged") {
        CHECK_THROWS_WITH(Authenticator::create({AuthMethod::munge, k_secret_hex, k_no_munge}),
                          Catch::StartsWith("auth=munge: munged at " + std::string(k_no_munge) +
                                            " (libmunge's default) is not reachable: "));
        AuthSettings from_conf{AuthMethod::munge, k_secret_hex, k_no_munge};
        from_conf.munge_socket_origin = "AuthInfo in /etc/slurm/slurm.conf";
        CHECK_THROWS_WITH(Authenticator::create(from_conf),
                          Catch::StartsWith("auth=munge: munged at " + std::string(k_no_munge) +
                                            " (AuthInfo in /etc/slurm/slurm.conf) is not "
                                            "reachable: "));
        CHECK_FALSE(munge_available(k_no_munge));
    }
}

TEST_CASE("auth: rank 0 verifies and proves its own rank before its method is resolved, which "
          "then says create()'s errors",
          "[auth]") {
    const StepId step{77, 0};
    SECTION("auto without munged and without a secret: the coordinator's work first, the error "
            "after") {
        auto host =
            Authenticator::create_unresolved({AuthMethod::automatic, std::nullopt, k_no_munge});
        host.host_own_coordinator(0);
        const Hello own = secret_hello(host, 77, 0);
        CHECK_FALSE(host.verify(own, k_nonce, step, k_endpoint));
        CHECK_FALSE(host.verify_coordinator(
            host.prove_coordinator(AuthMethod::secret, k_nonce, step, 0, k_endpoint),
            k_nonce,
            step,
            0,
            k_endpoint));
        CHECK_THROWS_WITH(host.resolve_method(),
                          Catch::StartsWith("auth: no authentication available: munged at " +
                                            std::string(k_no_munge)));
    }
    SECTION("auto with a secret: resolved as create() resolves it, once") {
        auto host =
            Authenticator::create_unresolved({AuthMethod::automatic, k_secret_hex, k_no_munge});
        host.host_own_coordinator(0);
        host.resolve_method();
        host.resolve_method();
        CHECK(host.method() == AuthMethod::secret);
        CHECK(host.method_for(0) == AuthMethod::secret);
        const auto holder = Authenticator::create({AuthMethod::secret, k_secret_hex, k_no_munge});
        CHECK_FALSE(host.verify(secret_hello(holder, 77, 3), k_nonce, step, k_endpoint));
    }
    SECTION("a bad TFSLURM_SECRET is said at once") {
        CHECK_THROWS_WITH(
            Authenticator::create_unresolved({AuthMethod::automatic, "abcd", k_no_munge}),
            "TFSLURM_SECRET: must be at least 32 hex digits (16 bytes)");
    }
}

namespace {} // namespace

TEST_CASE("auth: munge authentication with a private munged", "[auth][munge]") {
    const test::PrivateMunged& munged = test::private_munged();
    if (!munged.running()) {
        WARN("munged/mungekey unavailable or not root: the munge path is left to the e2e tests");
        return;
    }
    const auto auth = Authenticator::create({AuthMethod::automatic, std::nullopt, munged.socket()});
    REQUIRE(auth.method() == AuthMethod::munge);
    Hello hello;
    hello.job = 99;
    hello.rank = 2;
    hello.role = Role::ps;
    hello.host = "n1";
    hello.pid = 1;
    hello.auth = AuthMethod::munge;
    hello.credential = auth.prove(k_nonce, StepId{99, 0}, 2, k_endpoint);
    CHECK_THAT(hello.credential, Catch::StartsWith("MUNGE:"));

    SECTION("accepted once, then a replay is refused by munged") {
        CHECK_FALSE(auth.verify(hello, k_nonce, StepId{99, 0}, k_endpoint));
        const auto replay = auth.verify(hello, k_nonce, StepId{99, 0}, k_endpoint);
        REQUIRE(replay);
        CHECK_THAT(replay->reason,
                   Catch::StartsWith("munge credential rejected: ") && Catch::Contains("eplayed"));
    }
    SECTION("a credential for another step, claimed for this one") {
        Hello other = hello;
        other.step = 1;
        CHECK(auth.verify(other, k_nonce, StepId{99, 1}, k_endpoint) ==
              refused("munge credential payload does not match the job, step, rank, challenge and "
                      "endpoint"));
    }
    SECTION("the coordinator's proof for another step") {
        const std::string proof =
            auth.prove_coordinator(AuthMethod::munge, k_nonce, StepId{99, 1}, 2, k_endpoint);
        CHECK(auth.verify_coordinator(proof, k_nonce, StepId{99, 0}, 2, k_endpoint) ==
              std::string("munge credential payload does not match the job, step, rank, challenge "
                          "and endpoint"));
    }
    SECTION("a credential for another rank") {
        Hello other = hello;
        other.rank = 3;
        CHECK(auth.verify(other, k_nonce, StepId{99, 0}, k_endpoint) ==
              refused("munge credential payload does not match the job, step, rank, challenge and "
                      "endpoint"));
    }
    SECTION("a credential for another endpoint, both directions") {
        CHECK(auth.verify(hello, k_nonce, StepId{99, 0}, "tcp:32246") ==
              refused("munge credential payload does not match the job, step, rank, challenge "
                      "and endpoint"));
        const std::string proof =
            auth.prove_coordinator(AuthMethod::munge, k_nonce, StepId{99, 0}, 2, "tcp:32246");
        CHECK(auth.verify_coordinator(proof, k_nonce, StepId{99, 0}, 2, k_endpoint) ==
              std::string("munge credential payload does not match the job, step, rank, "
                          "challenge and endpoint"));
    }
    SECTION("a credential for another challenge") {
        CHECK(auth.verify(hello, std::string(64, 'c'), StepId{99, 0}, k_endpoint) ==
              refused("munge credential payload does not match the job, step, rank, challenge and "
                      "endpoint"));
    }
    SECTION("a forged credential") {
        Hello forged = hello;
        forged.credential = "MUNGE:AAAAAAAAAAAAAAAAAAAAAAAAAAAA:";
        const auto reason = auth.verify(forged, k_nonce, StepId{99, 0}, k_endpoint);
        REQUIRE(reason);
        CHECK_THAT(reason->reason, Catch::StartsWith("munge credential rejected: "));
    }
    SECTION("the coordinator's proof, and a launcher's that cannot pass for it") {
        const std::string proof =
            auth.prove_coordinator(AuthMethod::munge, k_nonce, StepId{99, 0}, 2, k_endpoint);
        CHECK_THAT(proof, Catch::StartsWith("MUNGE:"));
        CHECK_FALSE(auth.verify_coordinator(proof, k_nonce, StepId{99, 0}, 2, k_endpoint));
        CHECK(auth.verify_coordinator(auth.prove(k_nonce, StepId{99, 0}, 2, k_endpoint),
                                      k_nonce,
                                      StepId{99, 0},
                                      2,
                                      k_endpoint) ==
              std::string("munge credential payload does not match the job, step, rank, challenge "
                          "and endpoint"));
    }
    SECTION("key material: carried to the verifier, required when a session follows") {
        const std::string key(k_key_material_size, '\x42');
        Hello keyed = hello;
        keyed.credential = auth.prove(k_nonce, StepId{99, 0}, 2, k_endpoint, key);
        std::string got;
        CHECK_FALSE(auth.verify(keyed, k_nonce, StepId{99, 0}, k_endpoint, &got));
        CHECK(got == key);
        std::string none;
        CHECK(auth.verify(hello, k_nonce, StepId{99, 0}, k_endpoint, &none) ==
              refused("munge credential carries no key material for the session"));
        const std::string proof =
            auth.prove_coordinator(AuthMethod::munge, k_nonce, StepId{99, 0}, 2, k_endpoint, key);
        got.clear();
        CHECK_FALSE(auth.verify_coordinator(proof, k_nonce, StepId{99, 0}, 2, k_endpoint, &got));
        CHECK(got == key);
        const std::string bare =
            auth.prove_coordinator(AuthMethod::munge, k_nonce, StepId{99, 0}, 2, k_endpoint);
        CHECK(auth.verify_coordinator(bare, k_nonce, StepId{99, 0}, 2, k_endpoint, &got) ==
              std::string("munge credential carries no key material for the session"));
        // Both ends' material makes the keys; a missing one is an error, not a weak key.
        CHECK(auth.session_keys(
                      AuthMethod::munge, key, key, k_nonce, k_nonce, StepId{99, 0}, 2, k_endpoint)
                  .up.size() == 32);
        CHECK_THROWS_WITH(
            auth.session_keys(
                AuthMethod::munge, key, {}, k_nonce, k_nonce, StepId{99, 0}, 2, k_endpoint),
            "session: MUNGE key material of 32 and 0 bytes (expected 32 each)");
    }
    SECTION("another uid cannot decode a credential, so never learns its key material") {
        const std::string credential = auth.prove(
            k_nonce, StepId{99, 0}, 2, k_endpoint, std::string(k_key_material_size, '\x42'));
        // nobody (65534) asks the same munged to decode it: munged refuses (the credential is
        // restricted to this uid). The directory of the private munged opens for search
        // meanwhile (its socket is 0777 inside).
        const std::string dir = munged.socket().substr(0, munged.socket().rfind('/'));
        REQUIRE(::chmod(dir.c_str(), 0711) == 0);
        const pid_t child = ::fork();
        REQUIRE(child >= 0);
        if (child == 0) {
            if (::setgroups(0, nullptr) != 0 || ::setresgid(65534, 65534, 65534) != 0 ||
                ::setresuid(65534, 65534, 65534) != 0) {
                ::_exit(3);
            }
            Hello stolen = hello;
            stolen.credential = credential;
            const auto other =
                Authenticator::create({AuthMethod::munge, std::nullopt, munged.socket()});
            const auto reason = other.verify(stolen, k_nonce, StepId{99, 0}, k_endpoint);
            // 0: refused as unauthorized; 1: decoded; 2: refused for another reason.
            ::_exit(!reason ? 1 : reason->reason.find("Unauthorized") != std::string::npos ? 0 : 2);
        }
        int status = 0;
        REQUIRE(::waitpid(child, &status, 0) == child);
        ::chmod(dir.c_str(), 0700);
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
    }
    SECTION("munge refused when only the secret is allowed") {
        const auto secret_only =
            Authenticator::create({AuthMethod::secret, k_secret_hex, munged.socket()});
        CHECK(secret_only.verify(hello, k_nonce, StepId{99, 0}, k_endpoint) ==
              refused("munge authentication is not enabled"));
    }
}

TEST_CASE("auth: the launcher of the coordinator's own process proves itself with the process's "
          "key",
          "[auth]") {
    auto host = Authenticator::create({AuthMethod::automatic, k_secret_hex, k_no_munge});
    host.host_own_coordinator(0);
    CHECK(host.method_for(0) == AuthMethod::secret);
    CHECK(host.method_for(1) == host.method());
    const StepId step{77, 0};
    // Both directions and the session keys, as a launcher and its coordinator in one process.
    const Hello own = secret_hello(host, 77, 0);
    CHECK_FALSE(host.verify(own, k_nonce, step, k_endpoint));
    const std::string welcome =
        host.prove_coordinator(AuthMethod::secret, k_nonce, step, 0, k_endpoint);
    CHECK_FALSE(host.verify_coordinator(welcome, k_nonce, step, 0, k_endpoint));
    const auto keys =
        host.session_keys(AuthMethod::secret, {}, {}, k_nonce, k_nonce, step, 0, k_endpoint);
    CHECK(keys.up.size() == 32);

    SECTION("the step's secret does not prove that rank any more, nor does its proof hold") {
        const auto holder = Authenticator::create({AuthMethod::secret, k_secret_hex, k_no_munge});
        CHECK(host.verify(secret_hello(holder, 77, 0), k_nonce, step, k_endpoint) ==
              refused("bad secret proof"));
        CHECK(holder.verify(own, k_nonce, step, k_endpoint) == refused("bad secret proof"));
        CHECK(holder.verify_coordinator(welcome, k_nonce, step, 0, k_endpoint) ==
              std::string("bad secret proof"));
        CHECK(keys.up !=
              holder.session_keys(AuthMethod::secret, {}, {}, k_nonce, k_nonce, step, 0, k_endpoint)
                  .up);
    }
    SECTION("another process's own key proves nothing here") {
        auto other = Authenticator::create({AuthMethod::automatic, k_secret_hex, k_no_munge});
        other.host_own_coordinator(0);
        CHECK(host.verify(secret_hello(other, 77, 0), k_nonce, step, k_endpoint) ==
              refused("bad secret proof"));
    }
    SECTION("the other ranks are proved as before") {
        CHECK_FALSE(host.verify(secret_hello(host, 77, 3), k_nonce, step, k_endpoint));
    }
    SECTION("with only munge allowed, the secret stays refused for every other rank") {
        const test::PrivateMunged& munged = test::private_munged();
        if (!munged.running()) {
            WARN("munged/mungekey unavailable or not root: the munge path is left to the e2e "
                 "tests");
            return;
        }
        auto munge_only = Authenticator::create({AuthMethod::munge, std::nullopt, munged.socket()});
        munge_only.host_own_coordinator(0);
        CHECK(munge_only.method() == AuthMethod::munge);
        CHECK(munge_only.method_for(0) == AuthMethod::secret);
        CHECK_FALSE(munge_only.verify(secret_hello(munge_only, 77, 0), k_nonce, step, k_endpoint));
        const auto holder = Authenticator::create({AuthMethod::secret, k_secret_hex, k_no_munge});
        CHECK(munge_only.verify(secret_hello(holder, 77, 2), k_nonce, step, k_endpoint) ==
              refused("secret authentication is not enabled"));
        CHECK(munge_only.verify(secret_hello(holder, 77, 0), k_nonce, step, k_endpoint) ==
              refused("bad secret proof"));
    }
}
