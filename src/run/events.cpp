// SPDX-License-Identifier: MIT
// The step's event record: JSON lines out and in, and the timeline (tfslurm/run/events.hpp).
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/events.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <limits>
#include <map>
#include <utility>

namespace tfslurm {

namespace {

using nlohmann::json;

/// A `why` as the file holds it: its setting references (a remote rank's error naming
/// `output`, say) in their neutral form, since no face renders the file.
[[nodiscard]] std::string why_without_face(const std::string& why) {
    return render_settings(why, neutral_setting_name);
}

constexpr std::array<std::string_view, 13> k_kind_names{"step",
                                                        "registered",
                                                        "started",
                                                        "exited",
                                                        "restarted",
                                                        "lost",
                                                        "stalled",
                                                        "straggling",
                                                        "checkpoint",
                                                        "requeue",
                                                        "verdict",
                                                        "startup",
                                                        "checked"};

/// How much of a bad line an error quotes.
constexpr std::size_t k_quoted_prefix = 60;

[[nodiscard]] std::optional<EventKind> parse_kind(std::string_view name) {
    for (std::size_t i = 0; i < k_kind_names.size(); ++i) {
        if (k_kind_names.at(i) == name) {
            return static_cast<EventKind>(i);
        }
    }
    return std::nullopt;
}

/// The last year a time point holds (the wall clock counts nanoseconds in 64 bits: to 2262).
constexpr int k_last_year = 2261;

/// `2026-11-26T13:02:38.123Z` back to a time point; nullopt if it is not exactly that shape or
/// after k_last_year.
[[nodiscard]] std::optional<WallClock::time_point> parse_time(std::string_view text) {
    // YYYY-MM-DDTHH:MM:SS.mmmZ: 24 characters, digits except at the separators.
    constexpr std::string_view k_shape = "0000-00-00T00:00:00.000Z";
    if (text.size() != k_shape.size()) {
        return std::nullopt;
    }
    for (std::size_t i = 0; i < k_shape.size(); ++i) {
        const bool digit = text[i] >= '0' && text[i] <= '9';
        if (k_shape[i] == '0' ? !digit : text[i] != k_shape[i]) {
            return std::nullopt;
        }
    }
    const auto number = [text](std::size_t at, std::size_t length) {
        int value = 0;
        for (std::size_t i = at; i < at + length; ++i) {
            value = value * 10 + (text[i] - '0');
        }
        return value;
    };
    std::tm parts{};
    parts.tm_year = number(0, 4) - 1900;
    parts.tm_mon = number(5, 2) - 1;
    parts.tm_mday = number(8, 2);
    parts.tm_hour = number(11, 2);
    parts.tm_min = number(14, 2);
    parts.tm_sec = number(17, 2);
    if (parts.tm_mon > 11 || parts.tm_mday < 1 || parts.tm_mday > 31 || parts.tm_hour > 23 ||
        parts.tm_min > 59 || parts.tm_sec > 60 || parts.tm_year + 1900 > k_last_year) {
        return std::nullopt;
    }
    const std::time_t seconds = ::timegm(&parts);
    return WallClock::from_time_t(seconds) + Millis{number(20, 3)};
}

/// The member fields of `object` into `event` (all four, or none). Returns an error text.
[[nodiscard]] std::string read_member(const json& object, StepEvent& event) {
    if (!object.contains("rank")) {
        return {};
    }
    const json& rank = object["rank"];
    if (!rank.is_number_unsigned() || rank.get<std::uint64_t>() > UINT32_MAX) {
        return "\"rank\" is not a rank number";
    }
    event.rank = rank.get<std::uint32_t>();
    if (!object.contains("role") || !object["role"].is_string() || !object.contains("index") ||
        !object["index"].is_number_unsigned() || !object.contains("host") ||
        !object["host"].is_string()) {
        return R"(an event about a rank needs "role", "index" and "host")";
    }
    try {
        event.member.role = parse_role(object["role"].get<std::string>(), "role");
    } catch (const Error&) {
        return fmt::format("unknown role {}", quote(object["role"].get<std::string>()));
    }
    if (object["index"].get<std::uint64_t>() > UINT32_MAX) {
        return "\"index\" is out of range";
    }
    event.member.index = object["index"].get<std::uint32_t>();
    event.member.host = object["host"].get<std::string>();
    return {};
}

/// A string field, if present; an error text if present with another type.
[[nodiscard]] std::string read_string(const json& object, const char* key, std::string& out) {
    if (!object.contains(key)) {
        return {};
    }
    if (!object[key].is_string()) {
        return fmt::format("\"{}\" is not a string", key);
    }
    out = object[key].get<std::string>();
    return {};
}

/// An unsigned field that fits `T`, if present; an error text otherwise.
template <typename T>
[[nodiscard]] std::string
read_unsigned(const json& object, const char* key, std::optional<T>& out) {
    if (!object.contains(key)) {
        return {};
    }
    if (!object[key].is_number_unsigned() ||
        object[key].get<std::uint64_t>() >
            static_cast<std::uint64_t>(std::numeric_limits<T>::max())) {
        return fmt::format(
            "\"{}\" is not a number from 0 to {}", key, std::numeric_limits<T>::max());
    }
    out = object[key].get<T>();
    return {};
}

/// The kind's own fields of `object` into `event`. Returns an error text.
[[nodiscard]] std::string read_fields(const json& object, StepEvent& event) {
    std::string error;
    const auto check = [&error](std::string result) {
        if (error.empty()) {
            error = std::move(result);
        }
    };
    check(read_member(object, event));
    check(read_string(object, "why", event.why));
    check(read_string(object, "verdict", event.verdict));
    check(read_string(object, "cause", event.cause));
    check(read_string(object, "job", event.job));
    check(read_string(object, "step", event.step));
    check(read_string(object, "nodes", event.nodes));
    check(read_string(object, "run_id", event.run_id));
    check(read_string(object, "result", event.result));
    check(read_string(object, "check", event.check));
    check(read_unsigned(object, "ranks", event.ranks));
    check(read_unsigned(object, "restart", event.restart));
    std::optional<std::uint8_t> status;
    std::optional<std::uint8_t> signal;
    check(read_unsigned(object, "status", status));
    check(read_unsigned(object, "signal", signal));
    if (event.kind == EventKind::checkpoint) {
        event.signal = signal;
    } else if (signal) {
        event.status = ExitStatus::signaled(*signal);
    } else if (status) {
        event.status = ExitStatus::exited(*status);
    }
    for (const char* key : {"silent_ms", "behind_ms"}) {
        std::optional<std::uint64_t> millis;
        check(read_unsigned(object, key, millis));
        if (millis) {
            event.millis = Millis{static_cast<Millis::rep>(*millis)};
        }
    }
    if (event.kind == EventKind::startup) {
        for (std::size_t i = 0; i < k_startup_phases; ++i) {
            const auto phase = static_cast<StartupPhase>(i);
            const std::string key(to_string(phase));
            if (!object.contains(key)) {
                continue;
            }
            const auto time =
                object[key].is_string() ? parse_time(object[key].get<std::string>()) : std::nullopt;
            if (!time) {
                check(fmt::format("\"{}\" is no time of the form 2026-11-26T13:02:38.123Z", key));
            }
            event.startup[phase] = time;
        }
        check(read_unsigned(object, "progress_step", event.progress_step));
    }
    if (object.contains("excluded")) {
        if (!object["excluded"].is_array()) {
            check("\"excluded\" is not a list of hosts");
        } else {
            for (const json& host : object["excluded"]) {
                if (!host.is_string()) {
                    check("\"excluded\" is not a list of hosts");
                    break;
                }
                event.excluded.push_back(host.get<std::string>());
            }
        }
    }
    const bool about_rank = event.kind != EventKind::step && event.kind != EventKind::requeue &&
                            event.kind != EventKind::verdict && event.kind != EventKind::checkpoint;
    if (error.empty() && about_rank && !event.rank) {
        error = fmt::format("a {} event needs \"rank\"", to_string(event.kind));
    }
    if (error.empty() && event.kind == EventKind::exited && !event.status) {
        error = R"(an exited event needs "status" or "signal")";
    }
    if (error.empty() && event.kind == EventKind::checked && event.result != "passed" &&
        event.result != "failed") {
        error = R"(a checked event needs "result": passed or failed)";
    }
    return error;
}

[[nodiscard]] StepEvent parse_line(std::string_view line) {
    const json object = json::parse(line, nullptr, false);
    if (object.is_discarded() || !object.is_object()) {
        throw std::invalid_argument("not a JSON object");
    }
    if (!object.contains("v") || !object["v"].is_number_integer()) {
        throw std::invalid_argument("no format version \"v\"");
    }
    if (const auto version = object["v"].get<std::int64_t>(); version != k_events_version) {
        throw std::invalid_argument(
            fmt::format("format version {} is not one this tfslurm reads (it reads {})",
                        version,
                        k_events_version));
    }
    StepEvent event;
    if (!object.contains("event") || !object["event"].is_string()) {
        throw std::invalid_argument("no \"event\"");
    }
    const auto kind = parse_kind(object["event"].get<std::string>());
    if (!kind) {
        throw std::invalid_argument(
            fmt::format("unknown event {}", quote(object["event"].get<std::string>())));
    }
    event.kind = *kind;
    const auto time = object.contains("time") && object["time"].is_string()
                          ? parse_time(object["time"].get<std::string>())
                          : std::nullopt;
    if (!time) {
        throw std::invalid_argument("no \"time\" of the form 2026-11-26T13:02:38.123Z");
    }
    event.time = *time;
    if (const std::string error = read_fields(object, event); !error.empty()) {
        throw std::invalid_argument(error);
    }
    return event;
}

/// Text from the file as it is when it is plain, else quoted: a file cannot write control
/// characters to the reader's terminal.
[[nodiscard]] std::string shown(std::string_view text) {
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte < 0x20 || byte == 0x7f || c == '"') {
            return quote(text);
        }
    }
    return std::string(text);
}

[[nodiscard]] std::string who(const StepEvent& event) {
    return fmt::format("rank {} ({}:{}) on {}",
                       *event.rank,
                       to_string(event.member.role),
                       event.member.index,
                       shown(event.member.host));
}

[[nodiscard]] std::string seconds(Millis millis) {
    return fmt::format("{}.{:03} s", millis.count() / 1000, millis.count() % 1000);
}

/// A `startup` event's phases, each from its task's start (or the first phase known):
/// `start-up: launcher up +0.031 s, registered +0.052 s, trainer started +0.060 s`.
[[nodiscard]] std::string startup_phases_text(const StepEvent& event) {
    std::optional<WallClock::time_point> origin;
    std::string text = "start-up:";
    const char* separator = " ";
    for (std::size_t i = 0; i < k_startup_phases; ++i) {
        const auto& time = event.startup.at.at(i);
        if (!time) {
            continue;
        }
        if (!origin) {
            origin = time;
            if (i != 0) {
                text += fmt::format(" from {}", describe(static_cast<StartupPhase>(i)));
                separator = ": ";
            }
            continue;
        }
        const auto offset = std::chrono::duration_cast<Millis>(*time - *origin);
        text += fmt::format("{}{} {}{}",
                            separator,
                            describe(static_cast<StartupPhase>(i)),
                            offset.count() < 0 ? "-" : "+",
                            seconds(Millis{std::abs(offset.count())}));
        separator = ", ";
    }
    if (event.progress_step) {
        text += fmt::format("{}progress step {}", separator, *event.progress_step);
    }
    return text;
}

/// What happened, without the time and the rank.
[[nodiscard]] std::string what(const StepEvent& event) {
    switch (event.kind) {
    case EventKind::step: {
        std::string text = fmt::format("step {}.{}: {} ranks on {}",
                                       shown(event.job),
                                       shown(event.step),
                                       event.ranks.value_or(0),
                                       shown(event.nodes));
        return event.run_id.empty() ? text : fmt::format("{} (run {})", text, shown(event.run_id));
    }
    case EventKind::registered:
        return "registered";
    case EventKind::started:
        return event.restart.value_or(0) == 0
                   ? std::string("trainer started")
                   : fmt::format("trainer started (restart {})", *event.restart);
    case EventKind::exited:
        return fmt::format("trainer {}", describe(event.status.value_or(ExitStatus{})));
    case EventKind::restarted:
        return fmt::format("restarted ({} of its restarts)", event.restart.value_or(0));
    case EventKind::lost:
        return fmt::format("launcher lost ({})", shown(event.why));
    case EventKind::stalled:
        return fmt::format("stalled (no progress for {})",
                           seconds(event.millis.value_or(Millis{})));
    case EventKind::straggling:
        return fmt::format("straggling ({} behind the others)",
                           seconds(event.millis.value_or(Millis{})));
    case EventKind::checkpoint:
        return fmt::format("checkpoint signal {} ({}) to the trainers",
                           event.signal.value_or(0),
                           signal_description(event.signal.value_or(0)));
    case EventKind::requeue: {
        std::string text = fmt::format("job {} requeued", shown(event.job));
        for (std::size_t i = 0; i < event.excluded.size(); ++i) {
            text += fmt::format("{}{}", i == 0 ? " without " : ",", shown(event.excluded[i]));
        }
        return event.why.empty() ? text : fmt::format("{} ({})", text, shown(event.why));
    }
    case EventKind::startup:
        return startup_phases_text(event);
    case EventKind::checked:
        return event.result == "passed" ? std::string("node check passed")
                                        : fmt::format("node check failed ({}: {})",
                                                      shown(event.check),
                                                      shown(event.why));
    case EventKind::verdict: {
        std::string text = fmt::format("verdict: {}, status {}",
                                       event.verdict,
                                       event.status.value_or(ExitStatus{}).shell_status());
        return event.why.empty() ? text : fmt::format("{}: {}", text, shown(event.why));
    }
    }
    return {};
}

} // namespace

std::string_view to_string(EventKind kind) noexcept {
    return k_kind_names.at(static_cast<std::size_t>(kind));
}

StepEvent
rank_event(EventKind kind, WallClock::time_point time, std::uint32_t rank, const Member& member) {
    StepEvent event;
    event.kind = kind;
    event.time = time;
    event.rank = rank;
    event.member = member;
    return event;
}

std::string format_event_time(WallClock::time_point time) {
    const auto since = std::chrono::duration_cast<Millis>(time.time_since_epoch()).count();
    auto seconds_since = static_cast<std::time_t>(since / 1000);
    auto millis = since % 1000;
    if (millis < 0) {
        millis += 1000;
        --seconds_since;
    }
    std::tm parts{};
    ::gmtime_r(&seconds_since, &parts);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                       parts.tm_year + 1900,
                       parts.tm_mon + 1,
                       parts.tm_mday,
                       parts.tm_hour,
                       parts.tm_min,
                       parts.tm_sec,
                       millis);
}

/// One event as one line of JSON. Long because it is flat: one `if` per field that the event's
/// kind has (events.hpp's table), each written at its fixed place in the line; splitting it
/// would only scatter that order.
std::string to_json_line(const StepEvent& event) {
    // Keys in a fixed order (ordered_json): the file reads the same every time.
    nlohmann::ordered_json line;
    line["v"] = k_events_version;
    line["time"] = format_event_time(event.time);
    line["event"] = to_string(event.kind);
    if (event.rank) {
        line["rank"] = *event.rank;
        line["role"] = to_string(event.member.role);
        line["index"] = event.member.index;
        line["host"] = event.member.host;
    }
    switch (event.kind) {
    case EventKind::step:
        line["job"] = event.job;
        line["step"] = event.step;
        line["ranks"] = event.ranks.value_or(0);
        line["nodes"] = event.nodes;
        if (!event.run_id.empty()) {
            line["run_id"] = event.run_id;
        }
        break;
    case EventKind::started:
    case EventKind::restarted:
        line["restart"] = event.restart.value_or(0);
        break;
    case EventKind::exited:
    case EventKind::verdict:
        if (event.kind == EventKind::verdict) {
            line["verdict"] = event.verdict;
        }
        if (event.status && event.status->kind == ExitStatus::Kind::signaled) {
            line["signal"] = event.status->value;
        } else {
            line["status"] = event.status.value_or(ExitStatus{}).value;
        }
        if (!event.cause.empty()) {
            line["cause"] = event.cause;
        }
        if (!event.why.empty()) {
            line["why"] = why_without_face(event.why);
        }
        break;
    case EventKind::lost:
        line["why"] = why_without_face(event.why);
        break;
    case EventKind::stalled:
        line["silent_ms"] = event.millis.value_or(Millis{}).count();
        break;
    case EventKind::straggling:
        line["behind_ms"] = event.millis.value_or(Millis{}).count();
        break;
    case EventKind::checkpoint:
        line["signal"] = event.signal.value_or(0);
        break;
    case EventKind::checked:
        line["result"] = event.result;
        if (event.result == "failed") {
            line["check"] = event.check;
            line["why"] = why_without_face(event.why);
        }
        break;
    case EventKind::requeue:
        line["job"] = event.job;
        line["excluded"] = event.excluded;
        line["why"] = why_without_face(event.why);
        break;
    case EventKind::startup:
        for (std::size_t i = 0; i < k_startup_phases; ++i) {
            if (const auto& time = event.startup.at.at(i)) {
                line[std::string(to_string(static_cast<StartupPhase>(i)))] =
                    format_event_time(*time);
            }
        }
        if (event.progress_step) {
            line["progress_step"] = *event.progress_step;
        }
        break;
    case EventKind::registered:
        break;
    }
    // Invalid UTF-8 from a peer is replaced, not thrown: the record must not stop the step.
    return line.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

std::vector<StepEvent>
parse_events(std::string_view text, std::string_view subject, std::size_t* incomplete) {
    std::vector<StepEvent> events;
    std::size_t number = 0;
    if (incomplete != nullptr) {
        *incomplete = 0;
    }
    while (!text.empty()) {
        ++number;
        const auto end = text.find('\n');
        const std::string_view line = text.substr(0, end);
        text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
        if (line.empty()) {
            continue;
        }
        try {
            events.push_back(parse_line(line));
        } catch (const std::invalid_argument& e) {
            if (end == std::string_view::npos && incomplete != nullptr) {
                ++*incomplete; // the writer was killed in the middle of its last line
                break;
            }
            const bool cut = line.size() > k_quoted_prefix;
            throw errors::make(Errc::invalid_argument,
                               subject,
                               fmt::format("line {}: {}: {}{}",
                                           number,
                                           e.what(),
                                           quote(line.substr(0, k_quoted_prefix)),
                                           cut ? "..." : ""),
                               "expected the event file that tfslurm run --events wrote");
        }
    }
    return events;
}

std::string render_timeline(const std::vector<StepEvent>& events) {
    if (events.empty()) {
        return "no events\n";
    }
    const WallClock::time_point origin = events.front().time;
    std::string out = fmt::format("from {} UTC\n", [&origin] {
        std::string text = format_event_time(origin);
        text[10] = ' ';
        text.pop_back();
        return text;
    }());
    for (const StepEvent& event : events) {
        const auto offset = std::chrono::duration_cast<Millis>(event.time - origin);
        const std::string sign = offset.count() < 0 ? "-" : "+";
        const std::string at = sign + seconds(Millis{std::abs(offset.count())});
        if (event.rank) {
            out += fmt::format("{:>12}  {}: {}\n", at, who(event), what(event));
        } else {
            out += fmt::format("{:>12}  {}\n", at, what(event));
        }
    }
    return out;
}

namespace {

[[nodiscard]] std::string signed_seconds(Millis millis) {
    return millis.count() < 0 ? "-" + seconds(-millis) : seconds(millis);
}

} // namespace

std::string render_startup_figures(const StartupSummary& summary,
                                   const std::function<std::string(std::uint32_t)>& who,
                                   bool ended) {
    std::string out =
        fmt::format("{:<21}{:>10}{:>10}{:>10}  slowest\n", "phase", "median", "p90", "max");
    bool progress = false;
    for (const PhaseFigures& figures : summary.phases) {
        progress = progress || figures.phase == StartupPhase::progress;
        out += fmt::format("{:<21}{:>10}{:>10}{:>10}  {}\n",
                           describe(figures.phase),
                           signed_seconds(figures.median),
                           signed_seconds(figures.p90),
                           signed_seconds(figures.max),
                           who(figures.slowest));
    }
    if (!progress && ended) {
        out += fmt::format("{:<21}no trainer touched $TFSLURM_PROGRESS_FILE\n",
                           describe(StartupPhase::progress));
    }
    if (!summary.slowest) {
        return out;
    }
    out += fmt::format("slowest nodes to {}:", describe(summary.end));
    for (std::size_t i = 0; i < summary.nodes.size(); ++i) {
        out += fmt::format("{} {} {}",
                           i == 0 ? "" : ",",
                           shown(summary.nodes[i].host),
                           signed_seconds(summary.nodes[i].took));
    }
    out += summary.more_nodes > 0 ? ", ...\n" : "\n";
    const SlowestStartup& slowest = *summary.slowest;
    out += fmt::format("slowest: {}, {} from the step's first task to {}",
                       who(slowest.rank),
                       signed_seconds(slowest.total),
                       describe(summary.end));
    if (slowest.lost) {
        out += fmt::format("; its {} took {} ({})",
                           describe(*slowest.lost),
                           signed_seconds(slowest.took),
                           slowest.others_median ? "the other ranks' median: " +
                                                       signed_seconds(*slowest.others_median)
                                                 : std::string("no other rank reached it"));
    }
    return out + "\n";
}

std::string render_startup(const std::vector<StepEvent>& events) {
    const StepEvent* step = nullptr;
    std::vector<const StepEvent*> startups;
    for (const StepEvent& event : events) {
        if (event.kind == EventKind::step && step == nullptr) {
            step = &event;
        } else if (event.kind == EventKind::startup && event.rank) {
            startups.push_back(&event);
        }
    }
    std::string out =
        step == nullptr
            ? std::string("start-up of the step")
            : fmt::format("start-up of step {}.{}", shown(step->job), shown(step->step));
    if (startups.empty()) {
        return out + ": no rank's start-up is in the record (its launchers exited before "
                     "reporting it, or an older tfslurm wrote it)\n";
    }
    out += fmt::format(": {} of {} ranks reported", startups.size(), [&] {
        return step != nullptr && step->ranks ? std::to_string(*step->ranks) : std::string("?");
    }());
    out += step != nullptr ? fmt::format(", on {}\n", shown(step->nodes)) : std::string("\n");

    std::vector<RankPhases> ranks;
    std::map<std::uint32_t, const StepEvent*> by_rank;
    ranks.reserve(startups.size());
    for (const StepEvent* event : startups) {
        ranks.push_back({*event->rank, event->member.host, &event->startup});
        by_rank.emplace(*event->rank, event);
    }
    return out + render_startup_figures(
                     summarize_startup(ranks),
                     [&by_rank](std::uint32_t rank) { return who(*by_rank.at(rank)); },
                     true);
}

} // namespace tfslurm
