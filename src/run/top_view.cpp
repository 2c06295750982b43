// SPDX-License-Identifier: MIT
#include "common/detail/text.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/events.hpp>
#include <tfslurm/run/top_view.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>

namespace tfslurm {

namespace {

using TopJson = nlohmann::json;

/// The states in the roles' table, in this order (RankActivity's).
constexpr std::array<RankActivity, k_rank_activities> k_top_states{RankActivity::waiting,
                                                                   RankActivity::running,
                                                                   RankActivity::straggling,
                                                                   RankActivity::stuck,
                                                                   RankActivity::restarting,
                                                                   RankActivity::exited,
                                                                   RankActivity::failed,
                                                                   RankActivity::lost};

constexpr std::array<Role, 4> k_top_roles{Role::chief, Role::worker, Role::ps, Role::evaluator};

/// `1:02:03` or `2:03`.
std::string clock_text(std::int64_t seconds) {
    seconds = std::max<std::int64_t>(0, seconds);
    const std::int64_t hours = seconds / 3600;
    const std::int64_t minutes = seconds / 60 % 60;
    const std::int64_t rest = seconds % 60;
    return hours > 0 ? fmt::format("{}:{:02}:{:02}", hours, minutes, rest)
                     : fmt::format("{}:{:02}", minutes, rest);
}

/// `512B`, `12.0KiB`, `1.5GiB`: one word, so that a script's columns stay columns.
std::string bytes_text(std::uint64_t bytes) {
    constexpr std::array<std::string_view, 5> k_units{"B", "KiB", "MiB", "GiB", "TiB"};
    auto value = static_cast<double>(bytes);
    std::size_t unit = 0;
    while (value >= 1024.0 && unit + 1 < k_units.size()) {
        value /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{}B", bytes) : fmt::format("{:.1f}{}", value, k_units.at(unit));
}

/// `3s`, `2m05s`, `1h02m`.
std::string age_text(Millis age) {
    const std::int64_t seconds = std::max<std::int64_t>(0, age.count() / 1000);
    if (seconds < 60) {
        return fmt::format("{}s", seconds);
    }
    if (seconds < 3600) {
        return fmt::format("{}m{:02}s", seconds / 60, seconds % 60);
    }
    return fmt::format("{}h{:02}m", seconds / 3600, seconds / 60 % 60);
}

/// The marker before a rank's state: it stands out without colour too.
std::string_view marker(RankActivity activity) noexcept {
    switch (activity) {
    case RankActivity::stuck:
    case RankActivity::failed:
    case RankActivity::lost:
        return "*";
    case RankActivity::straggling:
    case RankActivity::restarting:
        return "!";
    default:
        return " ";
    }
}

/// The ANSI colour of a rank's row; empty for none.
std::string_view colour(RankActivity activity) noexcept {
    switch (activity) {
    case RankActivity::stuck:
    case RankActivity::failed:
    case RankActivity::lost:
        return "\x1b[31m"; // red
    case RankActivity::straggling:
    case RankActivity::restarting:
        return "\x1b[33m"; // yellow
    case RankActivity::exited:
        return "\x1b[2m"; // dim
    default:
        return {};
    }
}

/// While ranks have not registered: how many did, and the nodes still waited for (the three
/// with the most ranks missing), e.g. `start-up: 2 of 4 ranks registered after 0:12; waiting on
/// n2 (2 ranks)`; empty once every rank registered.
std::string startup_text(const Snapshot& snapshot) {
    std::vector<std::pair<std::string, std::size_t>> hosts; // in rank order of first appearance
    std::size_t waiting = 0;
    for (const SnapshotRank& rank : snapshot.ranks) {
        if (rank.activity != RankActivity::waiting) {
            continue;
        }
        ++waiting;
        const auto it = std::find_if(hosts.begin(), hosts.end(), [&rank](const auto& entry) {
            return entry.first == rank.host;
        });
        if (it == hosts.end()) {
            hosts.emplace_back(rank.host, 1);
        } else {
            ++it->second;
        }
    }
    if (waiting == 0) {
        return {};
    }
    std::stable_sort(hosts.begin(), hosts.end(), [](const auto& a, const auto& b) {
        return a.second > b.second;
    });
    constexpr std::size_t k_named_hosts = 3;
    std::vector<std::string> named;
    for (std::size_t i = 0; i < hosts.size() && i < k_named_hosts; ++i) {
        named.push_back(fmt::format("{} ({} {})",
                                    hosts[i].first,
                                    hosts[i].second,
                                    hosts[i].second == 1 ? "rank" : "ranks"));
    }
    std::string more;
    if (hosts.size() > k_named_hosts) {
        more = fmt::format(" and {} more nodes", hosts.size() - k_named_hosts);
    }
    return fmt::format("start-up: {} of {} ranks registered after {}; waiting on {}{}\n",
                       snapshot.ranks.size() - waiting,
                       snapshot.ranks.size(),
                       clock_text(snapshot.elapsed.count() / 1000),
                       fmt::join(named, ", "),
                       more);
}

/// Whether the step is still starting: a rank has not registered, or has not said that its
/// trainer started.
bool starting(const Snapshot& snapshot) {
    const bool waiting =
        std::any_of(snapshot.ranks.begin(), snapshot.ranks.end(), [](const SnapshotRank& rank) {
            return rank.activity == RankActivity::waiting;
        });
    const auto started =
        std::find_if(snapshot.startup.phases.begin(),
                     snapshot.startup.phases.end(),
                     [](const auto& figures) { return figures.phase == StartupPhase::started; });
    return waiting || started == snapshot.startup.phases.end() ||
           started->ranks < snapshot.ranks.size();
}

/// While the step starts and ranks reported phases: where the start-up time went so far, as
/// `tfslurm events --startup` tells it (render_startup_figures()), under `start-up so far: 3 of
/// 4 ranks reported, 2 trainers started`.
std::string startup_figures_text(const Snapshot& snapshot) {
    if (snapshot.startup.reported == 0 || !starting(snapshot)) {
        return {};
    }
    std::size_t started = 0;
    for (const PhaseFigures& figures : snapshot.startup.phases) {
        if (figures.phase == StartupPhase::started) {
            started = figures.ranks;
        }
    }
    return fmt::format("start-up so far: {} of {} ranks reported, {} {} started\n",
                       snapshot.startup.reported,
                       snapshot.ranks.size(),
                       started,
                       started == 1 ? "trainer" : "trainers") +
           render_startup_figures(
               snapshot.startup,
               [&snapshot](std::uint32_t rank) {
                   const SnapshotRank& row = snapshot.ranks.at(rank);
                   return fmt::format(
                       "rank {} ({}:{}) on {}", row.rank, to_string(row.role), row.index, row.host);
               },
               false);
}

std::string header_text(const Snapshot& snapshot, const TopJob& job, std::int64_t now) {
    std::string out = fmt::format(
        "job {} step {}{} on {}: {} nodes, {} ranks\n",
        snapshot.job,
        snapshot.step,
        snapshot.run_id.empty() ? std::string() : fmt::format(" (run {})", snapshot.run_id),
        job.nodes.empty() ? std::string("?") : job.nodes,
        snapshot.nodes,
        snapshot.ranks.size());
    out += fmt::format("state {}, elapsed {}, {}, requeued {} {}, restarts {}\n",
                       job.state.empty() ? std::string("?") : job.state,
                       clock_text(snapshot.elapsed.count() / 1000),
                       job.end ? fmt::format("left {}", clock_text(*job.end - now))
                               : std::string("no time limit"),
                       job.requeues,
                       job.requeues == 1 ? "time" : "times",
                       snapshot.restarts);
    out += snapshot.verdict == Verdict::none
               ? std::string("verdict: none yet\n")
               : fmt::format("verdict: {}{}\n",
                             to_string(snapshot.verdict),
                             snapshot.failure.empty() ? std::string()
                                                      : fmt::format(": {}", snapshot.failure));
    out += startup_text(snapshot);
    out += startup_figures_text(snapshot);
    return out;
}

std::vector<std::string> role_lines(const Snapshot& snapshot) {
    std::vector<std::string> out;
    std::string head = fmt::format("{:<10}{:>6}", "ROLE", "RANKS");
    for (const RankActivity state : k_top_states) {
        std::string name(to_string(state));
        std::transform(name.begin(), name.end(), name.begin(), [](char c) {
            return static_cast<char>(c - 'a' + 'A');
        });
        head += fmt::format(" {:>10}", name);
    }
    out.push_back(head);
    for (const Role role : k_top_roles) {
        std::array<std::size_t, k_rank_activities> counts{};
        std::size_t total = 0;
        for (const SnapshotRank& rank : snapshot.ranks) {
            if (rank.role == role) {
                ++counts.at(static_cast<std::size_t>(rank.activity));
                ++total;
            }
        }
        if (total == 0) {
            continue;
        }
        std::string line = fmt::format("{:<10}{:>6}", to_string(role), total);
        for (const RankActivity state : k_top_states) {
            line += fmt::format(" {:>10}", counts.at(static_cast<std::size_t>(state)));
        }
        out.push_back(line);
    }
    return out;
}

std::string rank_header() {
    return fmt::format("{:>7}  {:<14} {:<16} {:<12} {:>5} {:>10} {:>9} {:>8} {:>10}",
                       "RANK",
                       "ROLE",
                       "HOST",
                       "STATE",
                       "CPU%",
                       "MEMORY",
                       "PROGRESS",
                       "RESTARTS",
                       "OUTPUT/S");
}

std::string rank_line(const SnapshotRank& rank) {
    const std::string state = fmt::format("{}{}", marker(rank.activity), to_string(rank.activity));
    return fmt::format("{:>7}  {:<14} {:<16} {:<12} {:>5} {:>10} {:>9} {:>8} {:>10}",
                       rank.rank,
                       fmt::format("{}:{}", to_string(rank.role), rank.index),
                       rank.host,
                       state,
                       rank.cpu_percent ? std::to_string(*rank.cpu_percent) : std::string("-"),
                       rank.usage ? bytes_text(rank.usage->rss_bytes) : std::string("-"),
                       rank.progress_age ? age_text(*rank.progress_age) : std::string("-"),
                       rank.restarts,
                       rank.output_rate ? bytes_text(*rank.output_rate) : std::string("-"));
}

/// `text` cut to `width` columns (the screen's lines are ASCII but for a host's own bytes).
std::string fit(std::string text, std::size_t width) {
    if (text.size() > width) {
        text.resize(width);
    }
    return text;
}

/// How a state sorts: the ones that need attention first.
int state_rank(RankActivity activity) noexcept {
    switch (activity) {
    case RankActivity::stuck:
        return 0;
    case RankActivity::failed:
        return 1;
    case RankActivity::lost:
        return 2;
    case RankActivity::straggling:
        return 3;
    case RankActivity::restarting:
        return 4;
    case RankActivity::waiting:
        return 5;
    case RankActivity::running:
        return 6;
    case RankActivity::exited:
        return 7;
    }
    return 8;
}

} // namespace

std::map<std::string, std::string, std::less<>> parse_scontrol_record(std::string_view line) {
    std::map<std::string, std::string, std::less<>> out;
    std::string* last = nullptr;
    std::size_t at = 0;
    while (at < line.size()) {
        const std::size_t end = std::min(line.find_first_of(" \n", at), line.size());
        const std::string_view word = line.substr(at, end - at);
        at = end + 1;
        if (word.empty()) {
            continue;
        }
        const std::size_t equals = word.find('=');
        const std::string_view key = word.substr(0, equals);
        const bool is_key = equals != std::string_view::npos && !key.empty() &&
                            std::all_of(key.begin(), key.end(), [](char c) {
                                return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                                       (c >= '0' && c <= '9') || c == '/' || c == ':';
                            });
        if (is_key) {
            last = &(out[std::string(key)] = std::string(word.substr(equals + 1)));
        } else if (last != nullptr) {
            *last += ' ';
            *last += word;
        }
    }
    return out;
}

TopJob job_from_record(const std::map<std::string, std::string, std::less<>>& fields,
                       const std::function<std::int64_t(std::int64_t)>& to_utc) {
    const auto field = [&](std::string_view key) -> const std::string& {
        const auto it = fields.find(key);
        if (it == fields.end()) {
            throw errors::make(Errc::invalid_argument,
                               "top",
                               fmt::format("scontrol's record of the job has no {}", key));
        }
        return it->second;
    };
    const auto bad = [](std::string_view key, const std::string& value) {
        return errors::invalid_argument(
            "top", fmt::format("scontrol's record of the job has an unreadable {}", key), value);
    };
    TopJob job;
    const auto id = detail::parse_decimal(field("JobId"));
    if (!id) {
        throw bad("JobId", field("JobId"));
    }
    job.job = *id;
    job.state = field("JobState");
    const std::string& user = field("UserId");
    const std::size_t open = user.rfind('(');
    job.user = user.substr(0, open);
    if (open != std::string::npos && user.back() == ')') {
        if (const auto uid = detail::parse_decimal(user.substr(open + 1, user.size() - open - 2));
            uid && *uid <= UINT32_MAX) {
            job.uid = static_cast<std::uint32_t>(*uid);
        }
    }
    if (const auto restarts = fields.find("Restarts"); restarts != fields.end()) {
        const auto count = detail::parse_decimal(restarts->second);
        if (!count || *count > UINT32_MAX) {
            throw bad("Restarts", restarts->second);
        }
        job.requeues = static_cast<std::uint32_t>(*count);
    }
    if (const auto nodes = fields.find("NodeList");
        nodes != fields.end() && nodes->second != "(null)") {
        job.nodes = nodes->second;
    }
    if (const auto end = fields.find("EndTime"); end != fields.end()) {
        const std::string& text = end->second;
        // 2026-11-29T22:00:00, local time.
        int year = 0;
        int month = 0;
        int day = 0;
        int hour = 0;
        int minute = 0;
        int second = 0;
        char tail = 0;
        if (std::sscanf(text.c_str(),
                        "%4d-%2d-%2dT%2d:%2d:%2d%c",
                        &year,
                        &month,
                        &day,
                        &hour,
                        &minute,
                        &second,
                        &tail) == 6) {
            // Days from the civil date (proleptic Gregorian), as seconds of a UTC clock; the
            // face's to_utc() takes the local zone's offset away.
            const int y = year - (month <= 2 ? 1 : 0);
            const int era = (y >= 0 ? y : y - 399) / 400;
            const int yoe = y - era * 400;
            const int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
            const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
            const std::int64_t days = static_cast<std::int64_t>(era) * 146097 + doe - 719468;
            job.end = to_utc(days * 86400 + std::int64_t{hour} * 3600 + std::int64_t{minute} * 60 +
                             second);
        }
    }
    return job;
}

WatchRequest parse_watch_request(std::string_view text) {
    const auto bad = [&] {
        return errors::invalid_argument(
            "top", "expected JOB or JOB.STEP (numbers, e.g. 12345 or 12345.0)", text);
    };
    const std::size_t dot = text.find('.');
    const auto job = detail::parse_decimal(text.substr(0, dot));
    if (!job) {
        throw bad();
    }
    WatchRequest request{*job, std::nullopt};
    if (dot != std::string_view::npos) {
        const auto step = detail::parse_decimal(text.substr(dot + 1));
        if (!step) {
            throw bad();
        }
        request.step = *step;
    }
    return request;
}

std::uint64_t choose_step(const WatchRequest& request, const std::vector<std::string>& running) {
    std::vector<std::uint64_t> numbered;
    const std::string prefix = fmt::format("{}.", request.job);
    for (const std::string& id : running) {
        if (id.compare(0, prefix.size(), prefix) == 0) {
            if (const auto step =
                    detail::parse_decimal(std::string_view(id).substr(prefix.size()))) {
                numbered.push_back(*step);
            }
        }
    }
    std::sort(numbered.begin(), numbered.end());
    if (request.step) {
        if (std::binary_search(numbered.begin(), numbered.end(), *request.step)) {
            return *request.step;
        }
        std::vector<std::string> names;
        names.reserve(numbered.size());
        for (const std::uint64_t step : numbered) {
            names.push_back(fmt::format("{}.{}", request.job, step));
        }
        throw errors::invalid_argument(
            "top",
            fmt::format("step {}.{} is not running ({})",
                        request.job,
                        *request.step,
                        names.empty() ? std::string("the job runs no numbered step now")
                                      : fmt::format("running: {}", fmt::join(names, ", "))),
            fmt::format("{}.{}", request.job, *request.step));
    }
    if (numbered.empty()) {
        throw errors::invalid_argument(
            "top",
            fmt::format("job {} runs no step to watch now (no srun is running in it)", request.job),
            std::to_string(request.job));
    }
    return numbered.back();
}

std::string_view to_string(TopSort sort) noexcept {
    constexpr std::array<std::string_view, 6> k_names{
        "rank", "state", "cpu", "memory", "progress", "host"};
    return k_names.at(static_cast<std::size_t>(sort));
}

std::string_view to_string(TopFilter filter) noexcept {
    return filter == TopFilter::all ? "all" : "attention";
}

TopSort next(TopSort sort) noexcept {
    return sort == TopSort::host ? TopSort::rank : static_cast<TopSort>(static_cast<int>(sort) + 1);
}

TopFilter next(TopFilter filter) noexcept {
    return filter == TopFilter::all ? TopFilter::attention : TopFilter::all;
}

std::vector<std::size_t> listed_ranks(const Snapshot& snapshot, TopSort sort, TopFilter filter) {
    std::vector<std::size_t> out;
    out.reserve(snapshot.ranks.size());
    for (std::size_t i = 0; i < snapshot.ranks.size(); ++i) {
        const RankActivity activity = snapshot.ranks[i].activity;
        if (filter == TopFilter::all ||
            (activity != RankActivity::running && activity != RankActivity::exited)) {
            out.push_back(i);
        }
    }
    const auto& ranks = snapshot.ranks;
    const auto key_less = [&](std::size_t a, std::size_t b) {
        const SnapshotRank& x = ranks[a];
        const SnapshotRank& y = ranks[b];
        switch (sort) {
        case TopSort::rank:
            return false;
        case TopSort::state:
            return state_rank(x.activity) < state_rank(y.activity);
        case TopSort::cpu:
            return x.cpu_percent.value_or(0) > y.cpu_percent.value_or(0);
        case TopSort::memory:
            return (x.usage ? x.usage->rss_bytes : 0) > (y.usage ? y.usage->rss_bytes : 0);
        case TopSort::progress:
            return x.progress_age.value_or(Millis{-1}) > y.progress_age.value_or(Millis{-1});
        case TopSort::host:
            return x.host < y.host;
        }
        return false;
    };
    // Stable: ties stay in rank order.
    std::stable_sort(out.begin(), out.end(), key_less);
    return out;
}

std::string render_top_text(const Snapshot& snapshot, const TopJob& job, std::int64_t now) {
    std::string out = header_text(snapshot, job, now);
    out += '\n';
    for (const std::string& line : role_lines(snapshot)) {
        out += line;
        out += '\n';
    }
    out += '\n';
    out += rank_header();
    out += '\n';
    for (const SnapshotRank& rank : snapshot.ranks) {
        out += rank_line(rank);
        out += '\n';
    }
    return out;
}

namespace {

/// The start-up summary for --json (null before any rank reported a phase).
TopJson top_startup_json(const StartupSummary& summary) {
    if (summary.reported == 0) {
        return nullptr;
    }
    TopJson phases = TopJson::array();
    for (const PhaseFigures& f : summary.phases) {
        phases.push_back({{"phase", std::string(to_string(f.phase))},
                          {"ranks", f.ranks},
                          {"median_s", static_cast<double>(f.median.count()) / 1000.0},
                          {"p90_s", static_cast<double>(f.p90.count()) / 1000.0},
                          {"max_s", static_cast<double>(f.max.count()) / 1000.0},
                          {"slowest_rank", f.slowest}});
    }
    TopJson nodes = TopJson::array();
    for (const NodeStartup& node : summary.nodes) {
        nodes.push_back(
            {{"host", node.host}, {"seconds", static_cast<double>(node.took.count()) / 1000.0}});
    }
    TopJson slowest = nullptr;
    if (const auto& last = summary.slowest) {
        slowest = {
            {"rank", last->rank},
            {"seconds", static_cast<double>(last->total.count()) / 1000.0},
            {"phase", last->lost ? TopJson(std::string(to_string(*last->lost))) : TopJson(nullptr)},
            {"phase_s", static_cast<double>(last->took.count()) / 1000.0},
            {"others_median_s",
             last->others_median
                 ? TopJson(static_cast<double>(last->others_median->count()) / 1000.0)
                 : TopJson(nullptr)},
        };
    }
    return {{"reported", summary.reported},
            {"end", std::string(to_string(summary.end))},
            {"phases", std::move(phases)},
            {"slowest_nodes", std::move(nodes)},
            {"more_nodes", summary.more_nodes},
            {"slowest", std::move(slowest)}};
}

} // namespace

std::string render_top_json(const Snapshot& snapshot, const TopJob& job, std::int64_t now) {
    TopJson roles = TopJson::object();
    for (const Role role : k_top_roles) {
        TopJson counts = TopJson::object();
        std::size_t total = 0;
        for (const RankActivity state : k_top_states) {
            counts[std::string(to_string(state))] = 0;
        }
        for (const SnapshotRank& rank : snapshot.ranks) {
            if (rank.role == role) {
                auto& count = counts[std::string(to_string(rank.activity))];
                count = count.get<std::size_t>() + 1;
                ++total;
            }
        }
        if (total > 0) {
            roles[std::string(to_string(role))] = std::move(counts);
        }
    }
    TopJson ranks = TopJson::array();
    for (const SnapshotRank& rank : snapshot.ranks) {
        ranks.push_back({
            {"rank", rank.rank},
            {"role", std::string(to_string(rank.role))},
            {"index", rank.index},
            {"host", rank.host},
            {"state", std::string(to_string(rank.activity))},
            {"restarts", rank.restarts},
            {"progress_age_s",
             rank.progress_age ? TopJson(static_cast<double>(rank.progress_age->count()) / 1000.0)
                               : TopJson(nullptr)},
            {"cpu_seconds",
             rank.usage ? TopJson(static_cast<double>(rank.usage->cpu_ms) / 1000.0)
                        : TopJson(nullptr)},
            {"cpu_percent", rank.cpu_percent ? TopJson(*rank.cpu_percent) : TopJson(nullptr)},
            {"memory_bytes", rank.usage ? TopJson(rank.usage->rss_bytes) : TopJson(nullptr)},
            {"output_bytes_per_second",
             rank.output_rate ? TopJson(*rank.output_rate) : TopJson(nullptr)},
        });
    }
    TopJson out = {
        {"job", snapshot.job},
        {"step", snapshot.step},
        {"run_id", snapshot.run_id},
        {"job_state", job.state},
        {"user", job.user},
        {"nodelist", job.nodes},
        {"nodes", snapshot.nodes},
        {"size", snapshot.ranks.size()},
        {"elapsed_s", static_cast<double>(snapshot.elapsed.count()) / 1000.0},
        {"time_left_s",
         job.end ? TopJson(std::max<std::int64_t>(0, *job.end - now)) : TopJson(nullptr)},
        {"requeues", job.requeues},
        {"restarts", snapshot.restarts},
        {"verdict", std::string(to_string(snapshot.verdict))},
        {"failure", snapshot.failure.empty() ? TopJson(nullptr) : TopJson(snapshot.failure)},
        {"roles", std::move(roles)},
        {"ranks", std::move(ranks)},
        {"startup", top_startup_json(snapshot.startup)},
    };
    return out.dump(2, ' ', false, TopJson::error_handler_t::replace) + "\n";
}

std::size_t top_page_rows(const Snapshot& snapshot, std::size_t height) {
    std::size_t roles = 0;
    for (const Role role : k_top_roles) {
        roles += std::any_of(snapshot.ranks.begin(),
                             snapshot.ranks.end(),
                             [role](const SnapshotRank& rank) { return rank.role == role; })
                     ? 1U
                     : 0U;
    }
    const std::string startup = startup_text(snapshot) + startup_figures_text(snapshot);
    // Header (3, and the start-up lines while the step starts), blank, roles' header and rows,
    // blank, ranks' header; the status line.
    const std::size_t fixed =
        3 + static_cast<std::size_t>(std::count(startup.begin(), startup.end(), '\n')) + 1 + 1 +
        roles + 1 + 1 + 1;
    return height > fixed ? height - fixed : 1;
}

std::vector<std::string> render_top_screen(const Snapshot& snapshot,
                                           const TopJob& job,
                                           std::int64_t now,
                                           TopScreen& screen) {
    std::vector<std::string> out;
    const std::string header = header_text(snapshot, job, now);
    for (std::size_t at = 0; at < header.size();) {
        const std::size_t end = header.find('\n', at);
        out.push_back(fit(header.substr(at, end - at), screen.width));
        at = end + 1;
    }
    out.emplace_back();
    for (const std::string& line : role_lines(snapshot)) {
        out.push_back(fit(line, screen.width));
    }
    out.emplace_back();
    const std::string bold = screen.color ? "\x1b[7m" : "";
    const std::string reset = screen.color ? "\x1b[0m" : "";
    out.push_back(bold + fit(rank_header(), screen.width) + reset);
    const std::vector<std::size_t> listed = listed_ranks(snapshot, screen.sort, screen.filter);
    const std::size_t page = top_page_rows(snapshot, screen.height);
    const std::size_t last_first = listed.size() > page ? listed.size() - page : 0;
    screen.first = std::min(screen.first, last_first);
    const std::size_t end = std::min(listed.size(), screen.first + page);
    for (std::size_t i = screen.first; i < end; ++i) {
        const SnapshotRank& rank = snapshot.ranks[listed[i]];
        const std::string line = fit(rank_line(rank), screen.width);
        const std::string_view paint = screen.color ? colour(rank.activity) : std::string_view();
        out.push_back(paint.empty() ? line : fmt::format("{}{}{}", paint, line, "\x1b[0m"));
    }
    const std::string status = fmt::format(
        "ranks {}-{} of {} listed ({} in the step)  sort: {}  filter: {}  keys: q quit, s sort, f "
        "filter, j/k/PgUp/PgDn scroll",
        listed.empty() ? 0 : screen.first + 1,
        end,
        listed.size(),
        snapshot.ranks.size(),
        to_string(screen.sort),
        to_string(screen.filter));
    while (out.size() + 1 < screen.height) {
        out.emplace_back();
    }
    out.push_back(bold + fit(status, screen.width) + reset);
    if (out.size() > screen.height) {
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(screen.height), out.end());
    }
    return out;
}

} // namespace tfslurm
