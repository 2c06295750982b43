// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/snapshot.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <set>
#include <utility>

namespace tfslurm {

using Json = nlohmann::json;

namespace {

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

Json optional_number(const std::optional<std::uint64_t>& value) {
    return value ? Json(*value) : Json(nullptr);
}

/// An unsigned number or null, within `max`.
std::optional<std::uint64_t>
read_optional(const Json& value,
              std::string_view what,
              std::string_view payload,
              std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    if (value.is_null()) {
        return std::nullopt;
    }
    if (!value.is_number_unsigned() || value.get<std::uint64_t>() > max) {
        bad_snapshot(fmt::format("{} is not a number in [0, {}] or null", what, max), payload);
    }
    return value.get<std::uint64_t>();
}

std::uint64_t read_number(const Json& object,
                          std::string_view key,
                          std::string_view payload,
                          std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
    const auto it = object.find(key);
    if (it == object.end() || !it->is_number_unsigned() || it->get<std::uint64_t>() > max) {
        bad_snapshot(fmt::format("field \"{}\" is not a number in [0, {}]", key, max), payload);
    }
    return it->get<std::uint64_t>();
}

std::string read_string(const Json& value, std::string_view what, std::string_view payload) {
    if (!value.is_string() || value.get_ref<const std::string&>().size() > k_max_snapshot_string) {
        bad_snapshot(
            fmt::format("{} is not a string of at most {} bytes", what, k_max_snapshot_string),
            payload);
    }
    return value.get<std::string>();
}

std::string read_field(const Json& object, std::string_view key, std::string_view payload) {
    const auto it = object.find(key);
    if (it == object.end()) {
        bad_snapshot(fmt::format("missing field \"{}\"", key), payload);
    }
    return read_string(*it, fmt::format("field \"{}\"", key), payload);
}

SnapshotRank read_rank(const Json& row, std::size_t expected, std::string_view payload) {
    if (!row.is_array() || row.size() != k_row_items) {
        bad_snapshot(fmt::format("rank {} is not a list of {} items", expected, k_row_items),
                     payload);
    }
    SnapshotRank rank;
    const auto what = [expected](std::string_view item) {
        return fmt::format("rank {}'s {}", expected, item);
    };
    const auto number = read_optional(row[0], what("number"), payload, UINT32_MAX);
    if (!number || *number != expected) {
        bad_snapshot(fmt::format("rank {} is out of order", expected), payload);
    }
    rank.rank = static_cast<std::uint32_t>(*number);
    try {
        rank.role = parse_role(read_string(row[1], what("role"), payload), "role");
    } catch (const Error&) {
        bad_snapshot(fmt::format("{} is unknown", what("role")), payload);
    }
    const auto index = read_optional(row[2], what("index"), payload, UINT32_MAX);
    if (!index) {
        bad_snapshot(fmt::format("{} is missing", what("index")), payload);
    }
    rank.index = static_cast<std::uint32_t>(*index);
    rank.host = read_string(row[3], what("host"), payload);
    const auto activity = parse_rank_activity(read_string(row[4], what("state"), payload));
    if (!activity) {
        bad_snapshot(fmt::format("{} is unknown", what("state")), payload);
    }
    rank.activity = *activity;
    const auto restarts = read_optional(row[5], what("restarts"), payload, UINT32_MAX);
    rank.restarts = static_cast<std::uint32_t>(restarts.value_or(0));
    // Ages up to a year: no time point arithmetic of the renderer overflows.
    constexpr std::uint64_t k_year_ms = 365ULL * 24 * 3600 * 1000;
    if (const auto age = read_optional(row[6], what("progress age"), payload, k_year_ms)) {
        rank.progress_age = Millis{static_cast<Millis::rep>(*age)};
    }
    const auto cpu = read_optional(row[7], what("CPU time"), payload);
    const auto rss = read_optional(row[8], what("memory"), payload);
    if (cpu.has_value() != rss.has_value()) {
        bad_snapshot(fmt::format("{} and memory are not both given", what("CPU time")), payload);
    }
    if (cpu) {
        rank.usage = protocol::Usage{*cpu, *rss, {}};
    }
    rank.cpu_percent = read_optional(row[9], what("CPU use"), payload);
    rank.output_rate = read_optional(row[10], what("output rate"), payload);
    return rank;
}

/// Milliseconds of a start-up summary: signed (a total compares two nodes' clocks), within a
/// year either way.
constexpr std::int64_t k_summary_ms = 365LL * 24 * 3600 * 1000;

Json phase_name(const std::optional<StartupPhase>& phase) {
    return phase ? Json(std::string(to_string(*phase))) : Json(nullptr);
}

Json wire_startup_json(const StartupSummary& summary) {
    Json phases = Json::array();
    for (const PhaseFigures& f : summary.phases) {
        phases.push_back(Json{std::string(to_string(f.phase)),
                              f.ranks,
                              f.median.count(),
                              f.p90.count(),
                              f.max.count(),
                              f.slowest});
    }
    Json nodes = Json::array();
    for (const NodeStartup& node : summary.nodes) {
        nodes.push_back(Json{node.host, node.took.count()});
    }
    Json out = Json::object();
    out["end"] = std::string(to_string(summary.end));
    out["reported"] = summary.reported;
    out["phases"] = std::move(phases);
    out["nodes"] = std::move(nodes);
    out["more_nodes"] = summary.more_nodes;
    if (const auto& slowest = summary.slowest) {
        out["slowest"] =
            Json{slowest->rank,
                 slowest->total.count(),
                 phase_name(slowest->lost),
                 slowest->took.count(),
                 slowest->others_median ? Json(slowest->others_median->count()) : Json(nullptr)};
    } else {
        out["slowest"] = nullptr;
    }
    return out;
}

std::optional<StartupPhase>
read_phase(const Json& value, std::string_view what, std::string_view payload) {
    if (value.is_string()) {
        for (std::size_t i = 0; i < k_startup_phases; ++i) {
            if (to_string(static_cast<StartupPhase>(i)) == value.get_ref<const std::string&>()) {
                return static_cast<StartupPhase>(i);
            }
        }
    }
    bad_snapshot(fmt::format("{} is not a start-up phase", what), payload);
}

Millis read_millis(const Json& value, std::string_view what, std::string_view payload) {
    if (!value.is_number_integer() || value.get<std::int64_t>() < -k_summary_ms ||
        value.get<std::int64_t>() > k_summary_ms) {
        bad_snapshot(fmt::format("{} is not a number of milliseconds within a year", what),
                     payload);
    }
    return Millis{value.get<std::int64_t>()};
}

/// A rank named by the start-up summary: one of the snapshot's.
std::uint32_t read_summary_rank(const Json& value,
                                std::size_t ranks,
                                std::string_view what,
                                std::string_view payload) {
    const auto rank = read_optional(value, what, payload, UINT32_MAX);
    if (!rank || *rank >= ranks) {
        bad_snapshot(fmt::format("{} is not one of the step's ranks", what), payload);
    }
    return static_cast<std::uint32_t>(*rank);
}

StartupSummary read_startup(const Json& object, std::size_t ranks, std::string_view payload) {
    if (!object.is_object()) {
        bad_snapshot("field \"startup\" is not an object", payload);
    }
    StartupSummary out;
    const auto end = object.find("end");
    out.end = *read_phase(end == object.end() ? Json() : *end, "the start-up's end", payload);
    out.reported = read_number(object, "reported", payload, ranks);
    out.more_nodes = read_number(object, "more_nodes", payload, UINT32_MAX);
    const auto phases = object.find("phases");
    if (phases == object.end() || !phases->is_array() || phases->size() > k_startup_phases) {
        bad_snapshot(
            fmt::format("the start-up's phases are not a list of at most {}", k_startup_phases),
            payload);
    }
    for (const Json& item : *phases) {
        if (!item.is_array() || item.size() != 6) {
            bad_snapshot("a start-up phase is not a list of 6 items", payload);
        }
        PhaseFigures f;
        f.phase = *read_phase(item[0], "a start-up phase's name", payload);
        const auto count = read_optional(item[1], "a start-up phase's ranks", payload, ranks);
        if (!count || (!out.phases.empty() && out.phases.back().phase >= f.phase)) {
            bad_snapshot(fmt::format("start-up phase {} is out of order or has no ranks",
                                     to_string(f.phase)),
                         payload);
        }
        f.ranks = *count;
        f.median = read_millis(item[2], "a start-up phase's median", payload);
        f.p90 = read_millis(item[3], "a start-up phase's 90th percentile", payload);
        f.max = read_millis(item[4], "a start-up phase's maximum", payload);
        f.slowest = read_summary_rank(item[5], ranks, "a start-up phase's slowest rank", payload);
        out.phases.push_back(f);
    }
    const auto nodes = object.find("nodes");
    if (nodes == object.end() || !nodes->is_array() || nodes->size() > k_slowest_nodes) {
        bad_snapshot(
            fmt::format("the start-up's nodes are not a list of at most {}", k_slowest_nodes),
            payload);
    }
    for (const Json& item : *nodes) {
        if (!item.is_array() || item.size() != 2) {
            bad_snapshot("a start-up node is not a list of 2 items", payload);
        }
        out.nodes.push_back({read_string(item[0], "a start-up node's host", payload),
                             read_millis(item[1], "a start-up node's time", payload)});
    }
    const auto slowest = object.find("slowest");
    if (slowest == object.end()) {
        bad_snapshot("missing field \"slowest\" of the start-up", payload);
    }
    if (!slowest->is_null()) {
        const Json& item = *slowest;
        if (!item.is_array() || item.size() != 5) {
            bad_snapshot("the start-up's slowest rank is not a list of 5 items", payload);
        }
        SlowestStartup last;
        last.rank = read_summary_rank(item[0], ranks, "the start-up's slowest rank", payload);
        last.total = read_millis(item[1], "the slowest rank's total", payload);
        if (!item[2].is_null()) {
            last.lost = read_phase(item[2], "the slowest rank's phase", payload);
        }
        last.took = read_millis(item[3], "the slowest rank's phase time", payload);
        if (!item[4].is_null()) {
            last.others_median = read_millis(item[4], "the other ranks' median", payload);
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

std::string encode_snapshot(const Snapshot& snapshot) {
    Json ranks = Json::array();
    ranks.get_ref<Json::array_t&>().reserve(snapshot.ranks.size());
    for (const SnapshotRank& rank : snapshot.ranks) {
        Json row = Json::array();
        row.get_ref<Json::array_t&>().reserve(k_row_items);
        row.push_back(rank.rank);
        row.push_back(std::string(to_string(rank.role)));
        row.push_back(rank.index);
        row.push_back(rank.host);
        row.push_back(std::string(to_string(rank.activity)));
        row.push_back(rank.restarts);
        row.push_back(rank.progress_age ? Json(static_cast<std::uint64_t>(
                                              std::max<Millis::rep>(0, rank.progress_age->count())))
                                        : Json(nullptr));
        row.push_back(rank.usage ? Json(rank.usage->cpu_ms) : Json(nullptr));
        row.push_back(rank.usage ? Json(rank.usage->rss_bytes) : Json(nullptr));
        row.push_back(optional_number(rank.cpu_percent));
        row.push_back(optional_number(rank.output_rate));
        ranks.push_back(std::move(row));
    }
    Json out = Json::object();
    out["v"] = protocol::k_version;
    out["type"] = "snapshot";
    out["job"] = snapshot.job;
    out["step"] = snapshot.step;
    out["run_id"] = snapshot.run_id;
    out["elapsed_ms"] =
        static_cast<std::uint64_t>(std::max<Millis::rep>(0, snapshot.elapsed.count()));
    out["nodes"] = snapshot.nodes;
    out["verdict"] = std::string(to_string(snapshot.verdict));
    out["failure"] = snapshot.failure;
    out["restarts"] = snapshot.restarts;
    out["stall_timeout_ms"] = snapshot.stall_timeout
                                  ? Json(static_cast<std::uint64_t>(
                                        std::max<Millis::rep>(0, snapshot.stall_timeout->count())))
                                  : Json(nullptr);
    out["ranks"] = std::move(ranks);
    if (snapshot.startup.reported > 0) {
        out["startup"] = wire_startup_json(snapshot.startup);
    }
    // Host names come from the system: a stray byte never throws here.
    return out.dump(-1, ' ', false, Json::error_handler_t::replace);
}

bool is_snapshot_payload(std::string_view payload) noexcept {
    // Unescaped quotes occur only around keys and string values: the text below is the `type`
    // key with its value, wherever the keys' order puts it; decode_snapshot() checks the rest.
    return payload.find(R"("type":"snapshot")") != std::string_view::npos;
}

Snapshot decode_snapshot(std::string_view payload) {
    constexpr int k_snapshot_depth = 4; // the object, its ranks or start-up, a rank, a phase
    protocol::check_nesting(payload, k_snapshot_depth);
    Json object = Json::parse(payload, nullptr, false);
    if (object.is_discarded() || !object.is_object()) {
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
    const auto stall = object.find("stall_timeout_ms");
    if (stall == object.end()) {
        bad_snapshot("missing field \"stall_timeout_ms\"", payload);
    }
    if (const auto ms = read_optional(*stall, "field \"stall_timeout_ms\"", payload, k_year_ms)) {
        out.stall_timeout = Millis{static_cast<Millis::rep>(*ms)};
    }
    const auto ranks = object.find("ranks");
    if (ranks == object.end() || !ranks->is_array()) {
        bad_snapshot("field \"ranks\" is not a list", payload);
    }
    out.ranks.reserve(ranks->size());
    for (const Json& row : *ranks) {
        out.ranks.push_back(read_rank(row, out.ranks.size(), payload));
    }
    if (const auto startup = object.find("startup"); startup != object.end()) {
        out.startup = read_startup(*startup, out.ranks.size(), payload);
    }
    return out;
}

} // namespace tfslurm
