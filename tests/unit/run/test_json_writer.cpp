// SPDX-License-Identifier: MIT
// The protocol's JSON writer (src/run/detail/json_writer.hpp): the same bytes as nlohmann/json's
// dump() of the same object, which wrote every payload before it.
#include "run/detail/json_writer.hpp"

#include <tfslurm/run/protocol.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

using tfslurm::ExitStatus;
using tfslurm::Role;
using tfslurm::StartupPhase;
using tfslurm::WallClock;
using tfslurm::protocol::detail::append_json_string;
using tfslurm::protocol::detail::JsonWriter;
namespace protocol = tfslurm::protocol;

namespace {

/// nlohmann/json's dump() as encode_payload() called it before the writer.
std::string dumped(const nlohmann::json& value) {
    return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string written(std::string_view text) {
    std::string out;
    append_json_string(out, text);
    return out;
}

/// Strings of the bytes where escaping and UTF-8 go wrong, the same on every run.
std::vector<std::string> awkward_strings() {
    static constexpr std::string_view k_bytes = "a\"\\/\b\f\n\r\t\x01\x1f\x7f\x80\xbf\xc0\xc1\xc2"
                                                "\xc3\xa9\xdf\xe0\xa0\xe2\x82\xac\xed\x9f\xa0"
                                                "\xef\xf0\x90\xf4\x8f\xf5\xff";
    std::vector<std::string> out;
    std::uint64_t state = 0x2545F4914F6CDD1DULL;
    for (int i = 0; i < 20000; ++i) {
        state ^= state << 13U;
        state ^= state >> 7U;
        state ^= state << 17U;
        std::string text;
        for (std::uint64_t n = state % 9, s = state; n > 0; --n, s /= k_bytes.size()) {
            text += k_bytes[s % k_bytes.size()];
        }
        out.push_back(text);
    }
    return out;
}

std::vector<protocol::Message> every_message() {
    tfslurm::StartupTimes phases;
    const auto at = WallClock::time_point{} + std::chrono::milliseconds{1'796'047'358'000};
    for (std::size_t i = 0; i < tfslurm::k_startup_phases; ++i) {
        phases.at.at(i) = at + std::chrono::milliseconds{7 * i};
    }
    protocol::Hello hello{};
    hello.job = std::numeric_limits<std::uint64_t>::max();
    hello.step = 4;
    hello.rank = 3;
    hello.role = Role::ps;
    hello.host = "n\xc3\xa9\xff\"1";
    hello.pid = 4242;
    hello.auth = protocol::AuthMethod::munge;
    hello.credential = "MUNGE:\x01\x7f";
    hello.nonce = std::string(64, 'a');
    hello.address = "10.0.0.1";
    hello.relay = true;
    hello.port = 65535;
    protocol::Hello watcher{};
    watcher.rank = protocol::k_watcher_rank;
    watcher.watch = true;
    watcher.nonce = std::string(64, 'c');
    protocol::Heartbeat heartbeat;
    heartbeat.usage = protocol::Usage{1, 2, 3};
    heartbeat.followers = {{4, {5, 6, {}}}, {7, {8, 9, 10}}};
    heartbeat.startup = phases;
    heartbeat.startups = {{4, phases}, {7, {}}};
    protocol::Exit exit{ExitStatus::signaled(9), "boom\n\xe2\x82"};
    exit.startup = phases;
    exit.progress_step = 12;
    protocol::Failure failure{};
    failure.rank = 2;
    failure.role = Role::chief;
    failure.host = "n2";
    failure.cause = protocol::FailureCause::stalled;
    failure.status = ExitStatus::exited(3);
    failure.detail = "d";
    failure.missing = 1;
    failure.ranks = "0-3";
    failure.answering = 4;
    failure.step_status = 137;
    protocol::Cluster cluster;
    cluster.addresses = {{"n2", "10.0.0.2"}, {"n1", "fe80::1"}, {"n3", "10.0.0.3"}};
    cluster.ports = {0, 31999};
    return {
        protocol::Challenge{std::string(64, 'b')},
        hello,
        watcher,
        protocol::Welcome{3, "cred"},
        protocol::Reject{protocol::RejectCode::wrong_step, "no"},
        heartbeat,
        protocol::Heartbeat{},
        exit,
        protocol::Exit{ExitStatus::exited(0)},
        protocol::Interrupt{15, true},
        protocol::Stop{protocol::StopReason::done, 5, 6, true},
        protocol::Stop{protocol::StopReason::signal, 5, 6, true},
        protocol::Abort{failure},
        protocol::Stall{60000},
        cluster,
        protocol::Restart{1, 3},
        protocol::Relay{{1, 2}, R"({"type":"go","v":7})", {}},
        protocol::Relay{{4}, {}, "no heartbeat for 10 s"},
        protocol::Probed{{{1, "10.0.0.1", "refused"}}, protocol::PreflightFailure{"gpu", "x"}},
        protocol::Probed{},
        protocol::Go{},
        protocol::Progress{250},
        protocol::Checked{protocol::PreflightFailure{"disk", "full"}},
        protocol::Checked{},
    };
}

} // namespace

TEST_CASE("json writer: strings as nlohmann/json dumps them", "[json_writer]") {
    const auto [text, expected] = GENERATE(table<std::string, std::string>({
        {"", R"("")"},
        {"plain", R"("plain")"},
        {"q\"b\\s/", R"("q\"b\\s/")"},
        {"\b\f\n\r\t", R"("\b\f\n\r\t")"},
        {std::string("\0\x01\x1f\x7f", 4), "\"\\u0000\\u0001\\u001f\x7f\""},
        {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\""},
        // Each piece that is not UTF-8 is one U+FFFD; a byte that breaks a sequence starts
        // afresh.
        {"a\xff"
         "b",
         "\"a\xef\xbf\xbd"
         "b\""},
        {"\xe2\x82", "\"\xef\xbf\xbd\""},
        {"\xe2\x82"
         "a",
         "\"\xef\xbf\xbd"
         "a\""},
        {"\xe0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
        {"\xf4\x90\x80\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""},
    }));
    CAPTURE(text);
    CHECK(written(text) == expected);
    CHECK(written(text) == dumped(text));
}

TEST_CASE("json writer: 20,000 awkward strings written as nlohmann/json writes them",
          "[json_writer]") {
    for (const std::string& text : awkward_strings()) {
        CAPTURE(text);
        REQUIRE(written(text) == dumped(text));
    }
}

TEST_CASE("json writer: objects, arrays and the order of keys", "[json_writer]") {
    std::string out;
    JsonWriter w(out);
    w.open_object().key("a").open_array().unsigned_number(1).signed_number(-2).boolean(false);
    w.open_object().close_object().open_array().close_array().close_array();
    w.key("b").raw(R"({"x":1})").key("c").string("\n").close_object();
    CHECK(out == R"({"a":[1,-2,false,{},[]],"b":{"x":1},"c":"\n"})");
    CHECK(nlohmann::json::parse(out).dump() == out);

    std::string bad;
    JsonWriter unsorted(bad);
    unsorted.open_object().key("type");
    CHECK_THROWS_WITH(unsorted.key("rank"), R"(JsonWriter: key "rank" after "type")");
    CHECK_THROWS_WITH(unsorted.key("type"), R"(JsonWriter: key "type" after "type")");
    std::string stray;
    JsonWriter outside(stray);
    outside.open_array();
    CHECK_THROWS_WITH(outside.key("a"), "JsonWriter: a key outside an object");
}

TEST_CASE("json writer: every message is nlohmann/json's dump of itself, and decodes back",
          "[json_writer]") {
    for (const protocol::Message& message : every_message()) {
        const std::string payload = protocol::encode_payload(message);
        CAPTURE(payload);
        // Compact, keys sorted at every level, strings escaped as nlohmann writes them: the
        // same bytes as before the writer, for the same object.
        CHECK(dumped(nlohmann::json::parse(payload)) == payload);
        CHECK(protocol::encode_payload(protocol::decode_payload(payload)) == payload);
    }
}
