// SPDX-License-Identifier: MIT
#include "run/detail/json_tape.hpp"
#include "run/detail/json_writer.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/run/protocol.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <algorithm>
#include <limits>
#include <type_traits>

namespace tfslurm::protocol {

namespace {

// The wire names are defined here, not borrowed from the CLI's parsers, so that the protocol
// cannot change by accident when the command line grows aliases.
constexpr std::array<std::pair<Role, std::string_view>, 4> k_roles{{
    {Role::chief, "chief"},
    {Role::evaluator, "evaluator"},
    {Role::ps, "ps"},
    {Role::worker, "worker"},
}};

constexpr std::array<std::pair<FailureCause, std::string_view>, 7> k_causes{{
    {FailureCause::trainer, "trainer"},
    {FailureCause::start, "start"},
    {FailureCause::lost, "lost"},
    {FailureCause::unregistered, "unregistered"},
    {FailureCause::stalled, "stalled"},
    {FailureCause::unreachable, "unreachable"},
    {FailureCause::preflight, "preflight"},
}};

constexpr std::array<std::pair<RejectCode, std::string_view>, 3> k_reject_codes{{
    {RejectCode::refused, "refused"},
    {RejectCode::wrong_job, "wrong_job"},
    {RejectCode::wrong_step, "wrong_step"},
}};

/// Deepest nesting a valid message has is 4 (a relayed heartbeat's `startups`:
/// `{"msg":{"startups":[[r,{...}]]}}`); the reader refuses anything deeper than this as it meets
/// it.
constexpr int k_max_depth = 8;
/// Longest string field accepted (a MUNGE credential of our payload is ~200 bytes).
constexpr std::size_t k_max_string = 4096;

bool is_hex(std::string_view text) noexcept {
    return std::all_of(text.begin(), text.end(), [](char c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    });
}

std::string_view role_name(Role role) noexcept {
    for (const auto& [value, name] : k_roles) {
        if (value == role) {
            return name;
        }
    }
    return "worker";
}

template <typename Enum, std::size_t N>
std::string_view enum_name(const std::array<std::pair<Enum, std::string_view>, N>& table,
                           Enum value) noexcept {
    for (const auto& [entry, name] : table) {
        if (entry == value) {
            return name;
        }
    }
    return table.front().second;
}

[[noreturn]] void fail(std::string_view problem, std::string_view payload) {
    throw errors::make(Errc::protocol, "protocol", fmt::format("{}: {}", problem, quote(payload)));
}

} // namespace

// Deep nesting is refused without recursion: brackets are counted outside strings.
void check_nesting(std::string_view payload, int max_depth) {
    int depth = 0;
    bool in_string = false;
    bool escaped = false;
    for (const char c : payload) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '{' || c == '[') {
            if (++depth > max_depth) {
                fail("nested too deeply", payload);
            }
        } else if (c == '}' || c == ']') {
            --depth;
        }
    }
}

namespace {

using detail::JsonTape;
using detail::JsonWriter;
using Value = JsonTape::Value;

/// Members of an object that Fields looks up on the tape itself rather than indexing first.
constexpr std::size_t k_walked_members = 4;

/// Field readers: each names the field and the message type in its error.
class Fields {
  public:
    Fields(const Value& object, std::string_view type, std::string_view payload)
        : m_object(object), m_type(type), m_payload(payload) {
        // The members side by side, looked up without walking the tape: a hello's 15 fields
        // looked up one by one walked its nodes about 150 times. A few members are walked.
        if (object.size() > k_walked_members && object.size() <= m_members.size()) {
            for (const auto& [key, value] : object.members()) {
                m_members[m_count++] = Member{key.data(), key.size(), value};
            }
        }
    }

    [[nodiscard]] Value require(std::string_view key) const {
        const std::optional<Value> value = find(key);
        if (!value) {
            fail(fmt::format("missing field \"{}\" in {}", key, m_type), m_payload);
        }
        return *value;
    }

    [[nodiscard]] std::optional<Value> find(std::string_view key) const {
        if (m_count < m_object.size()) {
            return m_object.find(key); // more members than the index holds
        }
        for (std::size_t i = 0; i < m_count; ++i) {
            const Member& member = m_members[i];
            if (detail::same_key(std::string_view(member.key, member.length), key)) {
                return member.value;
            }
        }
        return std::nullopt;
    }

    [[nodiscard]] bool has(std::string_view key) const { return find(key).has_value(); }

    /// An optional boolean: false when absent.
    [[nodiscard]] bool flag(std::string_view key) const {
        const std::optional<Value> value = find(key);
        if (!value) {
            return false;
        }
        if (!value->is_boolean()) {
            fail(fmt::format("field \"{}\" of {} is not a boolean", key, m_type), m_payload);
        }
        return value->as_boolean();
    }

    template <typename Int>
    [[nodiscard]] Int integer(std::string_view key,
                              Int min = std::numeric_limits<Int>::min(),
                              Int max = std::numeric_limits<Int>::max()) const {
        const Value value = require(key);
        if constexpr (std::is_unsigned_v<Int>) {
            if (value.is_unsigned()) {
                const std::uint64_t number = value.as_unsigned();
                if (number >= static_cast<std::uint64_t>(min) &&
                    number <= static_cast<std::uint64_t>(max)) {
                    return static_cast<Int>(number);
                }
            }
        } else {
            if (value.is_signed()) {
                const std::int64_t number = value.as_signed();
                if (number >= static_cast<std::int64_t>(min) &&
                    number <= static_cast<std::int64_t>(max)) {
                    return static_cast<Int>(number);
                }
            }
        }
        fail(fmt::format("field \"{}\" of {} is not an integer in [{}, {}]", key, m_type, min, max),
             m_payload);
    }

    /// A string field, as it is in the tape (valid while the tape holds this message).
    [[nodiscard]] std::string_view text(std::string_view key) const {
        const Value value = require(key);
        if (!value.is_string() || value.as_string().size() > k_max_string) {
            fail(fmt::format("field \"{}\" of {} is not a string of at most {} bytes",
                             key,
                             m_type,
                             k_max_string),
                 m_payload);
        }
        return value.as_string();
    }

    [[nodiscard]] std::string string(std::string_view key) const { return std::string(text(key)); }

    template <typename Enum, std::size_t N>
    [[nodiscard]] Enum choice(std::string_view key,
                              const std::array<std::pair<Enum, std::string_view>, N>& table) const {
        const std::string_view given = text(key);
        for (const auto& [value, name] : table) {
            if (name == given) {
                return value;
            }
        }
        fail(fmt::format("field \"{}\" of {} has an unknown value", key, m_type), m_payload);
    }

    [[nodiscard]] Value object(std::string_view key) const {
        const Value value = require(key);
        if (!value.is_object()) {
            fail(fmt::format("field \"{}\" of {} is not an object", key, m_type), m_payload);
        }
        return value;
    }

    [[nodiscard]] ExitStatus status(std::string_view key) const {
        const Fields inner(object(key), m_type, m_payload);
        const std::string_view kind = inner.text("kind");
        if (kind == "exited") {
            return ExitStatus::exited(inner.integer<int>("code", 0, 255));
        }
        if (kind == "signaled") {
            return ExitStatus::signaled(inner.integer<int>("signal", 1, 127));
        }
        fail(fmt::format("field \"{}.kind\" of {} has an unknown value", key, m_type), m_payload);
    }

  private:
    Value m_object;
    std::string_view m_type;
    std::string_view m_payload;
    /// A member as the index holds it: trivial, so that the index is not cleared first.
    struct Member {
        const char* key;
        std::size_t length;
        Value value;
    };
    std::array<Member, 24> m_members; // NOLINT(cppcoreguidelines-pro-type-member-init): m_count
    std::size_t m_count = 0;
};

/// Writes `"status":{...}` (an exit's or an abort's).
void write_status(JsonWriter& w, const ExitStatus& status) {
    w.key("status").open_object();
    if (status.kind == ExitStatus::Kind::signaled) {
        w.key("kind").string("signaled").key("signal").signed_number(status.value);
    } else {
        w.key("code").signed_number(status.value).key("kind").string("exited");
    }
    w.close_object();
}

/// The start-up phases in the order of their names, as a `startup` lists them.
constexpr std::array<StartupPhase, k_startup_phases> k_phases_by_name{StartupPhase::cluster,
                                                                      StartupPhase::progress,
                                                                      StartupPhase::registered,
                                                                      StartupPhase::started,
                                                                      StartupPhase::task,
                                                                      StartupPhase::up};

/// A `startup`'s object: each known phase by name, milliseconds since the Unix epoch.
void write_startup(JsonWriter& w, const StartupTimes& times) {
    w.open_object();
    for (const StartupPhase phase : k_phases_by_name) {
        if (const auto& time = times[phase]) {
            w.key(to_string(phase))
                .signed_number(
                    std::chrono::duration_cast<std::chrono::milliseconds>(time->time_since_epoch())
                        .count());
        }
    }
    w.close_object();
}

void write_failure(JsonWriter& w, std::string_view key, const PreflightFailure& failure) {
    w.key(key)
        .open_object()
        .key("check")
        .string(failure.check)
        .key("detail")
        .string(failure.detail)
        .close_object();
}

/// Each message's members in the order of their keys, `type` and `v` among them: the bytes
/// nlohmann/json's sorted objects made before (JsonWriter checks the order).
struct Encoder {
    JsonWriter& w;
    std::string_view name; ///< the message's type

    void type() const { w.key("type").string(name); }
    void version() const { w.key("v").signed_number(k_version); }
    void tail() const {
        type();
        version();
    }

    void operator()(const Challenge& m) const {
        w.key("nonce").string(m.nonce);
        tail();
    }
    void operator()(const Hello& m) const {
        if (!m.address.empty()) {
            w.key("address").string(m.address);
        }
        w.key("auth").string(to_string(m.auth));
        w.key("credential").string(m.credential);
        w.key("host").string(m.host);
        w.key("job").unsigned_number(m.job);
        w.key("nonce").string(m.nonce);
        w.key("pid").signed_number(m.pid);
        if (m.port != 0) {
            w.key("port").unsigned_number(m.port);
        }
        w.key("rank").unsigned_number(m.rank);
        if (m.relay) {
            w.key("relay").boolean(true);
        }
        w.key("role").string(role_name(m.role));
        w.key("step").unsigned_number(m.step);
        tail();
        if (m.watch) {
            w.key("watch").boolean(true);
        }
    }
    void operator()(const Relay& m) const {
        if (!m.closed.empty()) {
            w.key("closed").string(m.closed);
        }
        if (!m.message.empty()) {
            // The message's text as it is: a large `cluster` is not parsed again.
            w.key("msg").raw(m.message);
        }
        ranks(m.ranks);
        tail();
    }
    void ranks(const std::vector<std::uint32_t>& ranks) const {
        w.key("ranks").open_array();
        for (const std::uint32_t rank : ranks) {
            w.unsigned_number(rank);
        }
        w.close_array();
    }
    void operator()(const Cluster& m) const {
        w.key("addresses").open_object();
        for (const auto& [host, address] : m.addresses) {
            w.key(host).string(address);
        }
        w.close_object();
        if (!m.ports.empty()) {
            w.key("ports").open_array();
            for (const std::uint16_t port : m.ports) {
                w.unsigned_number(port);
            }
            w.close_array();
        }
        tail();
    }
    void operator()(const Welcome& m) const {
        w.key("credential").string(m.credential);
        w.key("ranks").unsigned_number(m.ranks);
        tail();
    }
    void operator()(const Reject& m) const {
        w.key("code").string(enum_name(k_reject_codes, m.code));
        w.key("reason").string(m.reason);
        tail();
    }
    void operator()(const Heartbeat& m) const {
        if (!m.followers.empty()) {
            w.key("followers").open_array();
            for (const RankUsage& follower : m.followers) {
                w.open_array()
                    .unsigned_number(follower.rank)
                    .unsigned_number(follower.usage.cpu_ms)
                    .unsigned_number(follower.usage.rss_bytes);
                if (follower.usage.output_bytes) {
                    w.unsigned_number(*follower.usage.output_bytes);
                }
                w.close_array();
            }
            w.close_array();
        }
        if (!m.startup.empty()) {
            write_startup(w.key("startup"), m.startup);
        }
        if (!m.startups.empty()) {
            w.key("startups").open_array();
            for (const RankStartup& follower : m.startups) {
                w.open_array().unsigned_number(follower.rank);
                write_startup(w, follower.startup);
                w.close_array();
            }
            w.close_array();
        }
        type();
        if (m.usage) {
            w.key("usage").open_object().key("cpu_ms").unsigned_number(m.usage->cpu_ms);
            if (m.usage->output_bytes) {
                w.key("out").unsigned_number(*m.usage->output_bytes);
            }
            w.key("rss").unsigned_number(m.usage->rss_bytes).close_object();
        }
        version();
    }
    void operator()(const Exit& m) const {
        if (!m.error.empty()) {
            w.key("error").string(m.error);
        }
        if (m.progress_step) {
            w.key("progress_step").unsigned_number(*m.progress_step);
        }
        if (!m.startup.empty()) {
            write_startup(w.key("startup"), m.startup);
        }
        write_status(w, m.status);
        tail();
    }
    void operator()(const Interrupt& m) const {
        w.key("signal").signed_number(m.signal);
        tail();
        if (m.whole_step) {
            w.key("whole_step").boolean(true);
        }
    }
    void operator()(const Stop& m) const {
        const bool signal = m.reason == StopReason::signal;
        if (signal) {
            w.key("rank").unsigned_number(m.rank);
        }
        w.key("reason").string(signal ? "signal" : "done");
        if (signal) {
            w.key("signal").signed_number(m.signal);
        }
        tail();
        if (signal && m.whole_step) {
            w.key("whole_step").boolean(true);
        }
    }
    void operator()(const Abort& m) const {
        const Failure& f = m.failure;
        if (f.answering != 0) {
            w.key("answering").unsigned_number(f.answering);
        }
        w.key("cause").string(enum_name(k_causes, f.cause));
        w.key("detail").string(f.detail);
        w.key("host").string(f.host);
        w.key("index").unsigned_number(f.index);
        w.key("missing").unsigned_number(f.missing);
        w.key("rank").unsigned_number(f.rank);
        if (!f.ranks.empty()) {
            w.key("ranks").string(f.ranks);
        }
        w.key("role").string(role_name(f.role));
        write_status(w, f.status);
        w.key("step_status").signed_number(f.step_status);
        tail();
    }
    void operator()(const Stall& m) const {
        w.key("silent_ms").unsigned_number(m.silent_ms);
        tail();
    }
    void operator()(const Restart& m) const {
        w.key("count").unsigned_number(m.count);
        w.key("limit").unsigned_number(m.limit);
        tail();
    }
    void operator()(const Probed& m) const {
        w.key("failures").open_array();
        for (const ProbeFailure& failure : m.failures) {
            w.open_object()
                .key("address")
                .string(failure.address)
                .key("error")
                .string(failure.error)
                .key("rank")
                .unsigned_number(failure.rank)
                .close_object();
        }
        w.close_array();
        if (m.preflight) {
            write_failure(w, "preflight", *m.preflight);
        }
        tail();
    }
    void operator()(const Go& /*unused*/) const { tail(); }
    void operator()(const Progress& m) const {
        w.key("idle_ms").unsigned_number(m.idle_ms);
        tail();
    }
    void operator()(const Checked& m) const {
        if (m.failure) {
            write_failure(w, "failure", *m.failure);
        }
        tail();
    }
};

/// `cluster`: node names as in a hostlist (printable, no quotes), IP literals as addresses.
Cluster decode_cluster(const Fields& f, std::string_view payload) {
    Cluster m;
    for (const auto& [host, address] : f.object("addresses").members()) {
        if (!address.is_string() || !is_ip_address(address.as_string()) || host.empty() ||
            host.size() > 255 || std::any_of(host.begin(), host.end(), [](char c) {
                return static_cast<unsigned char>(c) <= 0x20 ||
                       static_cast<unsigned char>(c) >= 0x7f || c == '"' || c == '\\';
            })) {
            fail("field \"addresses\" of cluster maps a node name to an IPv4 or IPv6 address",
                 payload);
        }
        m.addresses.emplace(host, address.as_string());
    }
    if (const std::optional<Value> ports = f.find("ports")) {
        const auto elements = ports->elements();
        if (!ports->is_array() || std::any_of(elements.begin(), elements.end(), [](Value port) {
                return !port.is_unsigned() || port.as_unsigned() > 65535;
            })) {
            fail("field \"ports\" of cluster is not a list of ports (0 to 65535)", payload);
        }
        m.ports.reserve(ports->size());
        for (const Value port : elements) {
            m.ports.push_back(static_cast<std::uint16_t>(port.as_unsigned()));
        }
    }
    return m;
}

/// `probed`: at most k_max_probe_failures failures, each a rank, an address and an error.
Probed decode_probed(const Fields& f, std::string_view payload) {
    const Value failures = f.require("failures");
    const auto elements = failures.elements();
    if (!failures.is_array() || failures.size() > k_max_probe_failures ||
        std::any_of(
            elements.begin(), elements.end(), [](Value failure) { return !failure.is_object(); })) {
        fail(fmt::format("field \"failures\" of probed is not a list of at most {} objects",
                         k_max_probe_failures),
             payload);
    }
    Probed m;
    for (const Value failure : elements) {
        const Fields inner(failure, "probed", payload);
        m.failures.push_back(
            {inner.integer<std::uint32_t>("rank"), inner.string("address"), inner.string("error")});
    }
    if (f.has("preflight")) {
        const Fields preflight(f.object("preflight"), "probed", payload);
        m.preflight = PreflightFailure{preflight.string("check"), preflight.string("detail")};
        if (m.preflight->check.empty()) {
            fail("field \"check\" of probed's preflight is empty", payload);
        }
    }
    return m;
}

StartupTimes decode_startup(const Value& object, std::string_view type, std::string_view payload);

/// `heartbeat`: its optional `usage` ({cpu_ms, rss}), `followers` ([rank, cpu_ms, rss]
/// triples, at most k_max_follower_usages), `startup` (the launcher's phases) and `startups`
/// ([rank, phases] pairs, at most k_max_follower_usages).
Heartbeat decode_heartbeat(const Fields& f, std::string_view payload) {
    Heartbeat m;
    if (f.has("usage")) {
        const Fields usage(f.object("usage"), "heartbeat", payload);
        m.usage =
            Usage{usage.integer<std::uint64_t>("cpu_ms"), usage.integer<std::uint64_t>("rss"), {}};
        if (usage.has("out")) {
            m.usage->output_bytes = usage.integer<std::uint64_t>("out");
        }
    }
    if (const std::optional<Value> followers = f.find("followers")) {
        const auto triple = [](Value item) {
            const auto numbers = item.elements();
            return item.is_array() && (item.size() == 3 || item.size() == 4) &&
                   std::all_of(
                       numbers.begin(), numbers.end(), [](Value n) { return n.is_unsigned(); }) &&
                   (*numbers.begin()).as_unsigned() <= UINT32_MAX;
        };
        const auto items = followers->elements();
        if (!followers->is_array() || followers->size() > k_max_follower_usages ||
            !std::all_of(items.begin(), items.end(), triple)) {
            fail(fmt::format("field \"followers\" of heartbeat is not a list of at most {} "
                             "[rank, cpu_ms, rss] or [rank, cpu_ms, rss, out]",
                             k_max_follower_usages),
                 payload);
        }
        m.followers.reserve(followers->size());
        for (const Value item : items) {
            std::array<std::uint64_t, 4> n{};
            std::size_t i = 0;
            for (const Value number : item.elements()) {
                n.at(i++) = number.as_unsigned();
            }
            RankUsage follower{static_cast<std::uint32_t>(n[0]), {n[1], n[2], {}}};
            if (item.size() == 4) {
                follower.usage.output_bytes = n[3];
            }
            m.followers.push_back(follower);
        }
    }
    if (f.has("startup")) {
        m.startup = decode_startup(f.object("startup"), "heartbeat", payload);
    }
    if (const std::optional<Value> startups = f.find("startups")) {
        const auto pair = [](Value item) {
            if (!item.is_array() || item.size() != 2) {
                return false;
            }
            auto it = item.elements().begin();
            const Value rank = *it;
            const Value phases = *++it;
            return rank.is_unsigned() && rank.as_unsigned() <= UINT32_MAX && phases.is_object();
        };
        const auto items = startups->elements();
        if (!startups->is_array() || startups->size() > k_max_follower_usages ||
            !std::all_of(items.begin(), items.end(), pair)) {
            fail(fmt::format("field \"startups\" of heartbeat is not a list of at most {} "
                             "[rank, phases]",
                             k_max_follower_usages),
                 payload);
        }
        m.startups.reserve(startups->size());
        for (const Value item : items) {
            auto it = item.elements().begin();
            const auto rank = static_cast<std::uint32_t>((*it).as_unsigned());
            m.startups.push_back({rank, decode_startup(*++it, "heartbeat", payload)});
        }
    }
    return m;
}

/// `checked`: the first failed check, if any (a name that is not empty, and what it saw).
Checked decode_checked(const Fields& f, std::string_view payload) {
    Checked m;
    if (f.has("failure")) {
        const Fields failure(f.object("failure"), "checked", payload);
        m.failure = PreflightFailure{failure.string("check"), failure.string("detail")};
        if (m.failure->check.empty()) {
            fail("field \"check\" of checked's failure is empty", payload);
        }
    }
    return m;
}

/// A `startup` (an `exit`'s or a `heartbeat`'s, `type`): known phases only, each milliseconds
/// since the epoch, from 0 to the last one the wall clock holds (its nanoseconds end in 2262: a
/// larger time would overflow).
StartupTimes decode_startup(const Value& object, std::string_view type, std::string_view payload) {
    constexpr std::int64_t k_max_millis =
        std::chrono::duration_cast<std::chrono::milliseconds>(WallClock::duration::max()).count();
    const Fields f(object, type, payload);
    StartupTimes out;
    const auto phase_of = [](std::string_view key) {
        std::size_t phase = 0;
        while (phase < k_startup_phases && key != to_string(static_cast<StartupPhase>(phase))) {
            ++phase;
        }
        return phase;
    };
    for (const auto& [key, value] : object.members()) {
        if (phase_of(key) == k_startup_phases) {
            fail(fmt::format("field \"startup\" of {} has an unknown phase {}", type, quote(key)),
                 payload);
        }
    }
    for (const auto& [key, value] : object.members()) {
        out.at.at(phase_of(key)) =
            WallClock::time_point{std::chrono::duration_cast<WallClock::duration>(
                std::chrono::milliseconds{f.integer<std::int64_t>(key, 0, k_max_millis)})};
    }
    return out;
}

/// `relay`: 1 to k_max_relay_ranks ranks; `msg` an object (kept as text, decoded by whoever
/// handles it, unless `as_text` is false: decode_unwrapped() decodes it in the same parse)
/// unless `closed` says why a local connection ended.
Relay decode_relay(const Fields& f, std::string_view payload, bool as_text = true) {
    constexpr std::size_t k_max_relay_ranks = std::size_t{1} << 20U;
    Relay m;
    const Value ranks = f.require("ranks");
    if (!ranks.is_array() || ranks.size() == 0 || ranks.size() > k_max_relay_ranks) {
        fail("field \"ranks\" of relay is not a list of 1 to 1048576 ranks", payload);
    }
    m.ranks.reserve(ranks.size());
    for (const Value rank : ranks.elements()) {
        if (!rank.is_unsigned() || rank.as_unsigned() > std::numeric_limits<std::uint32_t>::max()) {
            fail("field \"ranks\" of relay holds something other than a rank", payload);
        }
        m.ranks.push_back(static_cast<std::uint32_t>(rank.as_unsigned()));
    }
    if (f.has("closed")) {
        m.closed = f.string("closed");
    }
    if (f.has("msg")) {
        const Value inner = f.object("msg");
        if (as_text) {
            // Its text as it came: a valid object (the tape read it), passed on unchanged.
            m.message = std::string(inner.text());
        }
    } else if (m.closed.empty()) {
        fail(R"(relay carries neither "msg" nor "closed")", payload);
    }
    return m;
}

// One short case per message type (~110 lines): the whole decoded wire format in one place,
// next to Encoder above.
Message decode_object(const Fields& f, std::string_view type, std::string_view payload) {
    if (type == "challenge") {
        Challenge m;
        m.nonce = f.string("nonce");
        if (m.nonce.size() != 2 * k_nonce_size || !is_hex(m.nonce)) {
            fail("field \"nonce\" of challenge is not 32 bytes of hex", payload);
        }
        return m;
    }
    if (type == "hello") {
        Hello m;
        m.job = f.integer<std::uint64_t>("job");
        m.step = f.integer<std::uint64_t>("step");
        m.rank = f.integer<std::uint32_t>("rank");
        m.role = f.choice("role", k_roles);
        m.host = f.string("host");
        m.pid = f.integer<std::int64_t>("pid", 0);
        m.auth = f.choice("auth",
                          std::array<std::pair<AuthMethod, std::string_view>, 2>{{
                              {AuthMethod::munge, "munge"},
                              {AuthMethod::secret, "secret"},
                          }});
        m.credential = f.string("credential");
        m.nonce = f.string("nonce");
        if (m.nonce.size() != 2 * k_nonce_size || !is_hex(m.nonce)) {
            fail("field \"nonce\" of hello is not 32 bytes of hex", payload);
        }
        if (f.has("address")) {
            m.address = f.string("address");
            if (!is_ip_address(m.address)) {
                fail("field \"address\" of hello is not an IPv4 or IPv6 address", payload);
            }
        }
        m.relay = f.flag("relay");
        if (f.has("port")) {
            m.port = f.integer<std::uint16_t>("port", 1);
        }
        m.watch = f.flag("watch");
        if (m.watch && (m.rank != k_watcher_rank || m.relay || m.port != 0)) {
            fail(fmt::format("a watcher's hello has rank {} and neither relay nor port",
                             k_watcher_rank),
                 payload);
        }
        return m;
    }
    if (type == "cluster") {
        return decode_cluster(f, payload);
    }
    if (type == "welcome") {
        return Welcome{f.integer<std::uint32_t>("ranks"), f.string("credential")};
    }
    if (type == "reject") {
        return Reject{f.choice("code", k_reject_codes), f.string("reason")};
    }
    if (type == "heartbeat") {
        return decode_heartbeat(f, payload);
    }
    if (type == "exit") {
        Exit m;
        m.status = f.status("status");
        if (f.has("error")) {
            m.error = f.string("error");
        }
        if (f.has("startup")) {
            m.startup = decode_startup(f.object("startup"), "exit", payload);
        }
        if (f.has("progress_step")) {
            m.progress_step = f.integer<std::uint64_t>("progress_step");
        }
        return m;
    }
    if (type == "interrupt") {
        return Interrupt{f.integer<int>("signal", 1, 127), f.flag("whole_step")};
    }
    if (type == "stop") {
        Stop m;
        m.reason = f.choice("reason",
                            std::array<std::pair<StopReason, std::string_view>, 2>{{
                                {StopReason::done, "done"},
                                {StopReason::signal, "signal"},
                            }});
        if (m.reason == StopReason::signal) {
            m.rank = f.integer<std::uint32_t>("rank");
            m.signal = f.integer<int>("signal", 1, 127);
            m.whole_step = f.flag("whole_step");
        }
        return m;
    }
    if (type == "abort") {
        Failure x;
        x.rank = f.integer<std::uint32_t>("rank");
        x.role = f.choice("role", k_roles);
        x.index = f.integer<std::uint32_t>("index");
        x.host = f.string("host");
        x.cause = f.choice("cause", k_causes);
        x.status = f.status("status");
        x.detail = f.string("detail");
        x.missing = f.integer<std::uint32_t>("missing");
        if (f.has("ranks")) {
            x.ranks = f.string("ranks");
        }
        if (f.has("answering")) {
            x.answering = f.integer<std::uint32_t>("answering", 1, UINT32_MAX);
        }
        x.step_status = f.integer<int>("step_status", 0, 255);
        return Abort{std::move(x)};
    }
    if (type == "stall") {
        return Stall{f.integer<std::uint64_t>("silent_ms")};
    }
    if (type == "restart") {
        return Restart{f.integer<std::uint32_t>("count"), f.integer<std::uint32_t>("limit")};
    }
    if (type == "relay") {
        return decode_relay(f, payload);
    }
    if (type == "probed") {
        return decode_probed(f, payload);
    }
    if (type == "go") {
        return Go{};
    }
    if (type == "progress") {
        return Progress{f.integer<std::uint64_t>("idle_ms")};
    }
    if (type == "checked") {
        return decode_checked(f, payload);
    }
    fail(fmt::format("unknown message type \"{}\"", type), payload);
}

} // namespace

std::string_view type_name(const Message& message) noexcept {
    constexpr std::array<std::string_view, 17> k_names{"challenge",
                                                       "hello",
                                                       "welcome",
                                                       "reject",
                                                       "heartbeat",
                                                       "exit",
                                                       "interrupt",
                                                       "stop",
                                                       "abort",
                                                       "stall",
                                                       "cluster",
                                                       "restart",
                                                       "relay",
                                                       "probed",
                                                       "go",
                                                       "progress",
                                                       "checked"};
    static_assert(std::variant_size_v<Message> == k_names.size());
    return k_names.at(message.index());
}

std::string encode_payload(const Message& message) {
    std::string text;
    text.reserve(128);
    JsonWriter w(text);
    w.open_object();
    std::visit(Encoder{w, type_name(message)}, message);
    w.close_object();
    return text;
}

namespace {

/// This thread's tape: its memory serves one message after the other, and what a large one
/// took is given back when it is decoded (TapeLease).
class TapeLease {
  public:
    TapeLease() : m_tape(tape()) {}
    ~TapeLease() { m_tape.trim(); }
    TapeLease(const TapeLease&) = delete;
    TapeLease& operator=(const TapeLease&) = delete;
    TapeLease(TapeLease&&) = delete;
    TapeLease& operator=(TapeLease&&) = delete;

    /// Read one payload, which must be a JSON object. \throws Error (Errc::protocol).
    [[nodiscard]] Value object(std::string_view payload) {
        const Value object = value(payload, k_max_depth);
        if (!object.is_object()) {
            fail("not a JSON object", payload);
        }
        return object;
    }

    /// Read a batch: a JSON array whose elements may nest as deep as a payload alone.
    [[nodiscard]] Value batch(std::string_view payload) {
        const Value array = value(payload, k_max_depth + 1);
        if (!array.is_array()) {
            fail("not a JSON array", payload);
        }
        return array;
    }

  private:
    [[nodiscard]] Value value(std::string_view payload, int max_depth) {
        switch (m_tape.read(payload, max_depth)) {
        case JsonTape::Outcome::too_deep:
            fail("nested too deeply", payload);
        case JsonTape::Outcome::invalid:
            fail("not valid JSON", payload);
        case JsonTape::Outcome::repeated_key:
            fail("an object repeats a key", payload);
        case JsonTape::Outcome::ok:
            break;
        }
        return m_tape.root();
    }

    static JsonTape& tape() {
        thread_local JsonTape tape;
        return tape;
    }

    JsonTape& m_tape;
};

/// The `type` of a message object of this version. \throws Error (Errc::protocol).
std::string_view type_of(const Value& object, std::string_view payload) {
    if (!object.is_object()) {
        fail("not a JSON object", payload);
    }
    const std::optional<Value> version = object.find("v");
    if (!version || !version->is_signed()) {
        fail(fmt::format("unsupported protocol version (expected \"v\":{})", k_version), payload);
    }
    if (const std::int64_t got = version->as_signed(); got != k_version) {
        // Both versions named: every task of a step must run the same tfslurm.
        fail(fmt::format("protocol version {} (this tfslurm speaks version {})", got, k_version),
             payload);
    }
    if (const std::optional<Value> type = object.find("type");
        type && type->is_string() && type->as_string().size() <= k_max_string) {
        return type->as_string();
    }
    return Fields(object, "message", payload).text("type"); // its error
}

} // namespace

void check_relayable(std::string_view payload) {
    TapeLease tape;
    static_cast<void>(type_of(tape.object(payload), payload));
}

Message decode_payload(std::string_view payload) {
    TapeLease tape;
    const Value object = tape.object(payload);
    const std::string_view type = type_of(object, payload);
    return decode_object(Fields(object, type, payload), type, payload);
}

namespace {

/// One payload object read on a tape: a `relay`'s message decoded with it.
Unwrapped unwrap(const Value& object, std::string_view payload) {
    const std::string_view type = type_of(object, payload);
    const Fields fields(object, type, payload);
    if (type != "relay") {
        return {decode_object(fields, type, payload), std::nullopt};
    }
    Unwrapped out{decode_relay(fields, payload, false), std::nullopt};
    if (const std::optional<Value> msg = object.find("msg")) {
        const std::string_view inner = type_of(*msg, payload);
        out.inner = decode_object(Fields(*msg, inner, payload), inner, payload);
    }
    return out;
}

} // namespace

Unwrapped decode_unwrapped(std::string_view payload) {
    TapeLease tape;
    return unwrap(tape.object(payload), payload);
}

std::vector<Unwrapped> decode_batch(std::string_view payload) {
    if (payload.empty() || payload.front() != '[') {
        std::vector<Unwrapped> one;
        one.push_back(decode_unwrapped(payload));
        return one;
    }
    TapeLease tape;
    const Value batch = tape.batch(payload);
    if (batch.size() < 2) {
        fail(fmt::format("a batch of {} message{} (expected 2 or more)",
                         batch.size(),
                         batch.size() == 1 ? "" : "s"),
             payload);
    }
    std::vector<Unwrapped> out;
    out.reserve(batch.size());
    for (const Value element : batch.elements()) {
        // Quoted on error: the element, as a payload of its own would be.
        out.push_back(unwrap(element, element.text()));
    }
    return out;
}

std::string to_string(StepId id) {
    return fmt::format("{}.{}", id.job, id.step);
}

bool operator==(const PreflightFailure& a, const PreflightFailure& b) noexcept {
    return a.check == b.check && a.detail == b.detail;
}

bool operator==(const ProbeFailure& a, const ProbeFailure& b) noexcept {
    return a.rank == b.rank && a.address == b.address && a.error == b.error;
}

bool operator==(const Reject& a, const Reject& b) noexcept {
    return a.code == b.code && a.reason == b.reason;
}

std::string_view to_string(FailureCause cause) noexcept {
    return enum_name(k_causes, cause);
}

std::string_view to_string(AuthMethod method) noexcept {
    switch (method) {
    case AuthMethod::automatic:
        return "auto";
    case AuthMethod::munge:
        return "munge";
    case AuthMethod::secret:
        return "secret";
    }
    return "auto";
}

AuthMethod parse_auth_method(std::string_view text, std::string_view subject) {
    if (text == "auto") {
        return AuthMethod::automatic;
    }
    if (text == "munge") {
        return AuthMethod::munge;
    }
    if (text == "secret") {
        return AuthMethod::secret;
    }
    throw errors::invalid_argument(
        subject, "expected auto, munge or secret", text, "e.g. " + setting_ref("auth", "secret"));
}

} // namespace tfslurm::protocol
