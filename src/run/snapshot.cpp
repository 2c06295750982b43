// SPDX-License-Identifier: MIT
#include "run/detail/json_tape.hpp"
#include "run/detail/json_writer.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/snapshot.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <utility>

namespace tfslurm {

namespace {

// Read and written with the protocol's own JSON reader and writer (issue #33): a snapshot of
// 100,000 ranks is 7 MiB, once a second while a watcher is connected.
using Value = protocol::detail::JsonTape::Value;
using protocol::detail::JsonTape;
using protocol::detail::JsonWriter;

/// Longest string field of a snapshot (a host, the failure line, the run id).
constexpr std::size_t k_max_snapshot_string = 4096;
/// Items of a rank's row.
constexpr std::size_t k_row_items = 11;

constexpr std::array<Verdict, 4> k_snapshot_verdicts{
    Verdict::none, Verdict::done, Verdict::interrupted, Verdict::aborted};

[[noreturn]] void bad_snapshot(std::string_view problem, std::string_view payload) {
    // A snapshot of 100,000 ranks is megabytes: the error quotes its beginning.
    constexpr std::size_t k_quoted = 200;
    const std::string_view shown = payload.substr(0, std::min(payload.size(), k_quoted));
    throw errors::make(Errc::protocol,
                       "protocol",
                       fmt::format("snapshot: {}: {}{}",
                                   problem,
                                   quote(shown),
                                   shown.size() < payload.size() ? " (shortened)" : ""));
}

/// What a reader names in its error: a field, or an item of a rank's row (`rank 3's host`),
/// formatted only when there is an error (a snapshot of 100,000 ranks has 1.1 million items).
class What {
  public:
    What(const char* text) : m_text(text) {}        // NOLINT(google-explicit-constructor)
    What(std::string_view text) : m_text(text) {}   // NOLINT(google-explicit-constructor)
    What(const std::string& text) : m_text(text) {} // NOLINT(google-explicit-constructor)
    What(std::size_t rank, std::string_view item) : m_text(item), m_rank(rank) {}

    [[nodiscard]] std::string str() const {
        return m_rank ? fmt::format("rank {}'s {}", *m_rank, m_text) : std::string(m_text);
    }

  private:
    std::string_view m_text;
    std::optional<std::size_t> m_rank;
};

void optional_number(JsonWriter& w, const std::optional<std::uint64_t>& value) {
    if (value) {
        w.unsigned_number(*value);
    } else {
        w.null();
    }
}

/// Milliseconds that are never negative on the wire.
std::uint64_t wire_ms(Millis ms) {
    return static_cast<std::uint64_t>(std::max<Millis::rep>(0, ms.count()));
}

/// An unsigned number or null, within `max`.
std::optional<std::uint64_t>
read_optional(const Value& value,
              const What& what,
              std::string_view payload,
              std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    if (value.is_null()) {
        return std::nullopt;
    }
    if (!value.is_unsigned() || value.as_unsigned() > max) {
        bad_snapshot(fmt::format("{} is not a number in [0, {}] or null", what.str(), max),
                     payload);
    }
    return value.as_unsigned();
}

std::uint64_t read_number(const Value& object,
                          std::string_view key,
                          std::string_view payload,
                          std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    const std::optional<Value> value = object.find(key);
    if (!value || !value->is_unsigned() || value->as_unsigned() > max) {
        bad_snapshot(fmt::format("field \"{}\" is not a number in [0, {}]", key, max), payload);
    }
    return value->as_unsigned();
}

std::string read_string(const Value& value, const What& what, std::string_view payload) {
    if (!value.is_string() || value.as_string().size() > k_max_snapshot_string) {
        bad_snapshot(fmt::format("{} is not a string of at most {} bytes",
                                 what.str(),
                                 k_max_snapshot_string),
                     payload);
    }
    return std::string(value.as_string());
}

std::string read_field(const Value& object, std::string_view key, std::string_view payload) {
    const std::optional<Value> value = object.find(key);
    if (!value) {
        bad_snapshot(fmt::format("missing field \"{}\"", key), payload);
    }
    return read_string(*value, fmt::format("field \"{}\"", key), payload);
}

/// The items of a list of exactly N, or none.
template <std::size_t N>
std::optional<std::array<std::optional<Value>, N>> items_of(const Value& list) {
    if (!list.is_array() || list.size() != N) {
        return std::nullopt;
    }
    std::array<std::optional<Value>, N> out;
    std::size_t i = 0;
    for (const Value item : list.elements()) {
        out.at(i++) = item;
    }
    return out;
}

SnapshotRank read_rank(const Value& list, std::size_t expected, std::string_view payload) {
    const auto items = items_of<k_row_items>(list);
    if (!items) {
        bad_snapshot(fmt::format("rank {} is not a list of {} items", expected, k_row_items),
                     payload);
    }
    const auto row = [&items](std::size_t i) -> const Value& { return *items->at(i); };
    SnapshotRank rank;
    const auto what = [expected](std::string_view item) { return What(expected, item); };
    const auto number = read_optional(row(0), what("number"), payload, UINT32_MAX);
    if (!number || *number != expected) {
        bad_snapshot(fmt::format("rank {} is out of order", expected), payload);
    }
    rank.rank = static_cast<std::uint32_t>(*number);
    try {
        rank.role = parse_role(read_string(row(1), what("role"), payload), "role");
    } catch (const Error&) {
        bad_snapshot(fmt::format("{} is unknown", what("role").str()), payload);
    }
    const auto index = read_optional(row(2), what("index"), payload, UINT32_MAX);
    if (!index) {
        bad_snapshot(fmt::format("{} is missing", what("index").str()), payload);
    }
    rank.index = static_cast<std::uint32_t>(*index);
    rank.host = read_string(row(3), what("host"), payload);
    const auto activity = parse_rank_activity(read_string(row(4), what("state"), payload));
    if (!activity) {
        bad_snapshot(fmt::format("{} is unknown", what("state").str()), payload);
    }
    rank.activity = *activity;
    const auto restarts = read_optional(row(5), what("restarts"), payload, UINT32_MAX);
    rank.restarts = static_cast<std::uint32_t>(restarts.value_or(0));
    // Ages up to a year: no time point arithmetic of the renderer overflows.
    constexpr std::uint64_t k_year_ms = 365ULL * 24 * 3600 * 1000;
    if (const auto age = read_optional(row(6), what("progress age"), payload, k_year_ms)) {
        rank.progress_age = Millis{static_cast<Millis::rep>(*age)};
    }
    const auto cpu = read_optional(row(7), what("CPU time"), payload);
    const auto rss = read_optional(row(8), what("memory"), payload);
    if (cpu.has_value() != rss.has_value()) {
        bad_snapshot(fmt::format("{} and memory are not both given", what("CPU time").str()),
                     payload);
    }
    if (cpu) {
        rank.usage = protocol::Usage{*cpu, *rss, {}};
    }
    rank.cpu_percent = read_optional(row(9), what("CPU use"), payload);
    rank.output_rate = read_optional(row(10), what("output rate"), payload);
    return rank;
}

/// Milliseconds of a start-up summary: signed (a total compares two nodes' clocks), within a
/// year either way.
constexpr std::int64_t k_summary_ms = 365LL * 24 * 3600 * 1000;

void write_phase(JsonWriter& w, const std::optional<StartupPhase>& phase) {
    if (phase) {
        w.string(to_string(*phase));
    } else {
        w.null();
    }
}

/// `"startup":{...}`, its keys in order.
void write_startup(JsonWriter& w, const StartupSummary& summary) {
    w.key("startup").open_object();
    w.key("end").string(to_string(summary.end));
    w.key("more_nodes").unsigned_number(summary.more_nodes);
    w.key("nodes").open_array();
    for (const NodeStartup& node : summary.nodes) {
        w.open_array().string(node.host).signed_number(node.took.count()).close_array();
    }
    w.close_array();
    w.key("phases").open_array();
    for (const PhaseFigures& f : summary.phases) {
        w.open_array()
            .string(to_string(f.phase))
            .unsigned_number(f.ranks)
            .signed_number(f.median.count())
            .signed_number(f.p90.count())
            .signed_number(f.max.count())
            .unsigned_number(f.slowest)
            .close_array();
    }
    w.close_array();
    w.key("reported").unsigned_number(summary.reported);
    w.key("slowest");
    if (const auto& slowest = summary.slowest) {
        w.open_array().unsigned_number(slowest->rank).signed_number(slowest->total.count());
        write_phase(w, slowest->lost);
        w.signed_number(slowest->took.count());
        if (slowest->others_median) {
            w.signed_number(slowest->others_median->count());
        } else {
            w.null();
        }
        w.close_array();
    } else {
        w.null();
    }
    w.close_object();
}

std::optional<StartupPhase>
read_phase(const Value& value, std::string_view what, std::string_view payload) {
    if (value.is_string()) {
        for (std::size_t i = 0; i < k_startup_phases; ++i) {
            if (to_string(static_cast<StartupPhase>(i)) == value.as_string()) {
                return static_cast<StartupPhase>(i);
            }
        }
    }
    bad_snapshot(fmt::format("{} is not a start-up phase", what), payload);
}

Millis read_millis(const Value& value, std::string_view what, std::string_view payload) {
    if (!value.is_signed() || value.as_signed() < -k_summary_ms ||
        value.as_signed() > k_summary_ms) {
        bad_snapshot(fmt::format("{} is not a number of milliseconds within a year", what),
                     payload);
    }
    return Millis{value.as_signed()};
}

/// A rank named by the start-up summary: one of the snapshot's.
std::uint32_t read_summary_rank(const Value& value,
                                std::size_t ranks,
                                std::string_view what,
                                std::string_view payload) {
    const auto rank = read_optional(value, What(what), payload, UINT32_MAX);
    if (!rank || *rank >= ranks) {
        bad_snapshot(fmt::format("{} is not one of the step's ranks", what), payload);
    }
    return static_cast<std::uint32_t>(*rank);
}

// The start-up summary's fields, each checked (~70 lines: one check per field, as read_rank).
StartupSummary read_startup(const Value& object, std::size_t ranks, std::string_view payload) {
    if (!object.is_object()) {
        bad_snapshot("field \"startup\" is not an object", payload);
    }
    StartupSummary out;
    const std::optional<Value> end = object.find("end");
    if (!end) {
        bad_snapshot("the start-up's end is not a start-up phase", payload);
    }
    out.end = *read_phase(*end, "the start-up's end", payload);
    out.reported = read_number(object, "reported", payload, ranks);
    out.more_nodes = read_number(object, "more_nodes", payload, UINT32_MAX);
    const std::optional<Value> phases = object.find("phases");
    if (!phases || !phases->is_array() || phases->size() > k_startup_phases) {
        bad_snapshot(
            fmt::format("the start-up's phases are not a list of at most {}", k_startup_phases),
            payload);
    }
    for (const Value list : phases->elements()) {
        const auto item = items_of<6>(list);
        if (!item) {
            bad_snapshot("a start-up phase is not a list of 6 items", payload);
        }
        PhaseFigures f;
        f.phase = *read_phase(*item->at(0), "a start-up phase's name", payload);
        const auto count = read_optional(*item->at(1), "a start-up phase's ranks", payload, ranks);
        if (!count || (!out.phases.empty() && out.phases.back().phase >= f.phase)) {
            bad_snapshot(fmt::format("start-up phase {} is out of order or has no ranks",
                                     to_string(f.phase)),
                         payload);
        }
        f.ranks = *count;
        f.median = read_millis(*item->at(2), "a start-up phase's median", payload);
        f.p90 = read_millis(*item->at(3), "a start-up phase's 90th percentile", payload);
        f.max = read_millis(*item->at(4), "a start-up phase's maximum", payload);
        f.slowest =
            read_summary_rank(*item->at(5), ranks, "a start-up phase's slowest rank", payload);
        out.phases.push_back(f);
    }
    const std::optional<Value> nodes = object.find("nodes");
    if (!nodes || !nodes->is_array() || nodes->size() > k_slowest_nodes) {
        bad_snapshot(
            fmt::format("the start-up's nodes are not a list of at most {}", k_slowest_nodes),
            payload);
    }
    for (const Value list : nodes->elements()) {
        const auto item = items_of<2>(list);
        if (!item) {
            bad_snapshot("a start-up node is not a list of 2 items", payload);
        }
        out.nodes.push_back({read_string(*item->at(0), "a start-up node's host", payload),
                             read_millis(*item->at(1), "a start-up node's time", payload)});
    }
    const std::optional<Value> slowest = object.find("slowest");
    if (!slowest) {
        bad_snapshot("missing field \"slowest\" of the start-up", payload);
    }
    if (!slowest->is_null()) {
        const auto item = items_of<5>(*slowest);
        if (!item) {
            bad_snapshot("the start-up's slowest rank is not a list of 5 items", payload);
        }
        SlowestStartup last;
        last.rank = read_summary_rank(*item->at(0), ranks, "the start-up's slowest rank", payload);
        last.total = read_millis(*item->at(1), "the slowest rank's total", payload);
        if (!item->at(2)->is_null()) {
            last.lost = read_phase(*item->at(2), "the slowest rank's phase", payload);
        }
        last.took = read_millis(*item->at(3), "the slowest rank's phase time", payload);
        if (!item->at(4)->is_null()) {
            last.others_median = read_millis(*item->at(4), "the other ranks' median", payload);
        }
        out.slowest = last;
    }
    return out;
}

} // namespace

std::optional<RankActivity> parse_rank_activity(std::string_view name) noexcept {
    for (std::size_t i = 0; i < k_rank_activities; ++i) {
        const auto activity = static_cast<RankActivity>(i);
        if (to_string(activity) == name) {
            return activity;
        }
    }
    return std::nullopt;
}

std::optional<Verdict> parse_verdict(std::string_view name) noexcept {
    for (const Verdict verdict : k_snapshot_verdicts) {
        if (to_string(verdict) == name) {
            return verdict;
        }
    }
    return std::nullopt;
}

Snapshot take_snapshot(const Coordinator& coordinator, Clock::time_point now, protocol::StepId id) {
    Snapshot out;
    out.job = id.job;
    out.step = id.step;
    out.run_id = coordinator.settings().run_id;
    out.elapsed =
        std::max(Millis{0}, std::chrono::duration_cast<Millis>(now - coordinator.started()));
    out.verdict = coordinator.verdict();
    if (coordinator.failure()) {
        out.failure = protocol::describe(*coordinator.failure());
    }
    out.restarts = coordinator.restarts();
    out.stall_timeout = coordinator.settings().run.stall_timeout;
    const std::vector<Member>& members = coordinator.settings().ranks;
    std::set<std::string_view> hosts;
    out.ranks.reserve(members.size());
    for (std::uint32_t rank = 0; rank < members.size(); ++rank) {
        const Member& member = members[rank];
        hosts.insert(member.host);
        const RankView view = coordinator.rank_view(rank, now);
        out.ranks.push_back(SnapshotRank{rank,
                                         member.role,
                                         member.index,
                                         member.host,
                                         view.activity,
                                         view.restarts,
                                         view.progress_age,
                                         view.usage,
                                         view.cpu_percent,
                                         view.output_rate});
    }
    out.nodes = hosts.size();
    out.startup = coordinator.startup_summary();
    return out;
}

// The snapshot's fields in the order of their keys (JsonWriter checks it), the ranks a row
// each (~50 lines).
std::string encode_snapshot(const Snapshot& snapshot) {
    std::string text;
    text.reserve(128 + snapshot.ranks.size() * 64);
    JsonWriter w(text);
    w.open_object();
    w.key("elapsed_ms").unsigned_number(wire_ms(snapshot.elapsed));
    w.key("failure").string(snapshot.failure);
    w.key("job").unsigned_number(snapshot.job);
    w.key("nodes").unsigned_number(snapshot.nodes);
    w.key("ranks").open_array();
    for (const SnapshotRank& rank : snapshot.ranks) {
        w.open_array()
            .unsigned_number(rank.rank)
            .string(to_string(rank.role))
            .unsigned_number(rank.index)
            .string(rank.host)
            .string(to_string(rank.activity))
            .unsigned_number(rank.restarts);
        optional_number(
            w, rank.progress_age ? std::optional(wire_ms(*rank.progress_age)) : std::nullopt);
        optional_number(w, rank.usage ? std::optional(rank.usage->cpu_ms) : std::nullopt);
        optional_number(w, rank.usage ? std::optional(rank.usage->rss_bytes) : std::nullopt);
        optional_number(w, rank.cpu_percent);
        optional_number(w, rank.output_rate);
        w.close_array();
    }
    w.close_array();
    w.key("restarts").unsigned_number(snapshot.restarts);
    w.key("run_id").string(snapshot.run_id);
    w.key("stall_timeout_ms");
    optional_number(
        w, snapshot.stall_timeout ? std::optional(wire_ms(*snapshot.stall_timeout)) : std::nullopt);
    if (snapshot.startup.reported > 0) {
        write_startup(w, snapshot.startup);
    }
    w.key("step").unsigned_number(snapshot.step);
    w.key("type").string("snapshot");
    w.key("v").signed_number(protocol::k_version);
    w.key("verdict").string(to_string(snapshot.verdict));
    w.close_object();
    return text;
}

bool is_snapshot_payload(std::string_view payload) noexcept {
    // Unescaped quotes occur only around keys and string values: the text below is the `type`
    // key with its value, wherever the keys' order puts it; decode_snapshot() checks the rest.
    return payload.find(R"("type":"snapshot")") != std::string_view::npos;
}

Snapshot decode_snapshot(std::string_view payload) {
    constexpr int k_snapshot_depth = 4; // the object, its ranks or start-up, a rank, a phase
    JsonTape tape;
    switch (tape.read(payload, k_snapshot_depth)) {
    case JsonTape::Outcome::too_deep:
        // As every message of the protocol says it (protocol::check_nesting()).
        throw errors::make(
            Errc::protocol, "protocol", fmt::format("nested too deeply: {}", quote(payload)));
    case JsonTape::Outcome::invalid:
    case JsonTape::Outcome::repeated_key:
        bad_snapshot("not a JSON object", payload);
    case JsonTape::Outcome::ok:
        break;
    }
    const Value object = tape.root();
    if (!object.is_object()) {
        bad_snapshot("not a JSON object", payload);
    }
    if (read_field(object, "type", payload) != "snapshot") {
        bad_snapshot("of another type", payload);
    }
    if (read_number(object, "v", payload) != static_cast<std::uint64_t>(protocol::k_version)) {
        bad_snapshot(fmt::format("not version {}", protocol::k_version), payload);
    }
    Snapshot out;
    out.job = read_number(object, "job", payload);
    out.step = read_number(object, "step", payload);
    out.run_id = read_field(object, "run_id", payload);
    constexpr std::uint64_t k_year_ms = 365ULL * 24 * 3600 * 1000;
    out.elapsed =
        Millis{static_cast<Millis::rep>(read_number(object, "elapsed_ms", payload, k_year_ms))};
    out.nodes = read_number(object, "nodes", payload, UINT32_MAX);
    const auto verdict = parse_verdict(read_field(object, "verdict", payload));
    if (!verdict) {
        bad_snapshot("field \"verdict\" is unknown", payload);
    }
    out.verdict = *verdict;
    out.failure = read_field(object, "failure", payload);
    out.restarts = static_cast<std::uint32_t>(read_number(object, "restarts", payload, UINT32_MAX));
    const std::optional<Value> stall = object.find("stall_timeout_ms");
    if (!stall) {
        bad_snapshot("missing field \"stall_timeout_ms\"", payload);
    }
    if (const auto ms = read_optional(*stall, "field \"stall_timeout_ms\"", payload, k_year_ms)) {
        out.stall_timeout = Millis{static_cast<Millis::rep>(*ms)};
    }
    const std::optional<Value> ranks = object.find("ranks");
    if (!ranks || !ranks->is_array()) {
        bad_snapshot("field \"ranks\" is not a list", payload);
    }
    out.ranks.reserve(ranks->size());
    for (const Value row : ranks->elements()) {
        out.ranks.push_back(read_rank(row, out.ranks.size(), payload));
    }
    if (const std::optional<Value> startup = object.find("startup")) {
        out.startup = read_startup(*startup, out.ranks.size(), payload);
    }
    return out;
}

} // namespace tfslurm
