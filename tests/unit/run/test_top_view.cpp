// SPDX-License-Identifier: MIT
// What `tfslurm top` shows (tfslurm/run/top_view.hpp): scontrol's records read, the step
// chosen, the ranks sorted and filtered, and the exact text, JSON and live screen.
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/snapshot.hpp>
#include <tfslurm/run/top_view.hpp>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;

namespace {

/// The watcher's clock (seconds since the Unix epoch).
constexpr std::int64_t k_topv_now = 1'800'000'000;

/// A rank of a hand-built snapshot.
SnapshotRank topv_rank(std::uint32_t rank,
                       Role role,
                       std::uint32_t index,
                       const std::string& host,
                       RankActivity activity) {
    return SnapshotRank{rank,
                        role,
                        index,
                        host,
                        activity,
                        0,
                        std::nullopt,
                        std::nullopt,
                        std::nullopt,
                        std::nullopt};
}

/// ps 0 running on n1 (usage, no output rate), worker 0 stuck on n1 (every number), worker 1
/// restarting on n2 (no usage).
Snapshot topv_snapshot() {
    Snapshot s;
    s.job = 94;
    s.step = 0;
    s.run_id = "c-94-0";
    s.elapsed = Millis{3723000};
    s.nodes = 2;
    s.verdict = Verdict::none;
    s.failure = "";
    s.restarts = 1;
    s.stall_timeout = Millis{60000};
    SnapshotRank ps = topv_rank(0, Role::ps, 0, "n1", RankActivity::running);
    ps.usage = protocol::Usage{1200, 52428800, {}};
    ps.cpu_percent = 12;
    SnapshotRank stuck = topv_rank(1, Role::worker, 0, "n1", RankActivity::stuck);
    stuck.progress_age = Millis{125000};
    stuck.usage = protocol::Usage{90000, 1536, {}};
    stuck.cpu_percent = 0;
    stuck.output_rate = 2048;
    SnapshotRank restarting = topv_rank(2, Role::worker, 1, "n2", RankActivity::restarting);
    restarting.restarts = 1;
    s.ranks = {ps, stuck, restarting};
    return s;
}

TopJob topv_job() {
    TopJob job;
    job.job = 94;
    job.state = "RUNNING";
    job.user = "alice";
    job.uid = 1000;
    job.end = k_topv_now + 5400;
    job.requeues = 1;
    job.nodes = "n[1-2]";
    return job;
}

/// The lines of `text` (each without its newline).
std::vector<std::string> topv_lines(const std::string& text) {
    std::vector<std::string> out;
    for (std::size_t at = 0; at < text.size();) {
        const std::size_t end = text.find('\n', at);
        out.push_back(text.substr(at, end - at));
        at = end == std::string::npos ? text.size() : end + 1;
    }
    return out;
}

/// The message of the Error (Errc::invalid_argument) that `action` throws.
std::string topv_error(const std::function<void()>& action) {
    try {
        action();
    } catch (const Error& e) {
        CHECK(e.code() == Errc::invalid_argument);
        return e.what();
    }
    FAIL("no error");
    return {};
}

/// A record's fields.
using TopvFields = std::map<std::string, std::string, std::less<>>;

/// A to_utc for a zone one hour ahead of UTC, which remembers what it was given.
struct TopvZone {
    std::int64_t given = -1;
    std::function<std::int64_t(std::int64_t)> to_utc() {
        return [this](std::int64_t local) {
            given = local;
            return local - 3600;
        };
    }
};

/// Ranks of every state and assorted numbers, for the sorts.
Snapshot topv_sortable() {
    Snapshot s;
    const auto add = [&s](const std::string& host,
                          RankActivity activity,
                          std::optional<std::uint64_t> cpu,
                          std::optional<std::uint64_t> rss,
                          std::optional<Millis> age) {
        SnapshotRank rank =
            topv_rank(static_cast<std::uint32_t>(s.ranks.size()), Role::worker, 0, host, activity);
        rank.cpu_percent = cpu;
        if (rss) {
            rank.usage = protocol::Usage{0, *rss, {}};
        }
        rank.progress_age = age;
        s.ranks.push_back(rank);
    };
    add("n3", RankActivity::running, 50, 100, Millis{1000});          // 0
    add("n1", RankActivity::exited, std::nullopt, std::nullopt, {});  // 1
    add("n2", RankActivity::stuck, 50, 300, Millis{9000});            // 2
    add("n1", RankActivity::waiting, std::nullopt, std::nullopt, {}); // 3
    add("n2", RankActivity::straggling, 200, 100, Millis{9000});      // 4
    add("n10", RankActivity::failed, 0, 50, Millis{0});               // 5
    add("n3", RankActivity::lost, std::nullopt, std::nullopt, {});    // 6
    add("n1", RankActivity::restarting, std::nullopt, 0, {});         // 7
    return s;
}

using TopvOrder = std::vector<std::size_t>;

const std::string k_topv_status_keys = "  keys: q quit, s sort, f filter, j/k/PgUp/PgDn scroll";

} // namespace

TEST_CASE("top: scontrol's one-line record read", "[top]") {
    const auto fields = parse_scontrol_record(
        "JobId=12 JobName=t x UserId=root(0) GroupId=root(0) Comment=a b --opt=c "
        "TRES=cpu=2,mem=1G Socks/Node=* Reason=None Empty= EndTime=2026-11-29T22:00:00\n");
    CHECK(fields == TopvFields{{"JobId", "12"},
                               {"JobName", "t x"},
                               {"UserId", "root(0)"},
                               {"GroupId", "root(0)"},
                               {"Comment", "a b --opt=c"},
                               {"TRES", "cpu=2,mem=1G"},
                               {"Socks/Node", "*"},
                               {"Reason", "None"},
                               {"Empty", ""},
                               {"EndTime", "2026-11-29T22:00:00"}});
    // The example of the header.
    CHECK(parse_scontrol_record("JobId=12 JobName=t x UserId=u(5)") ==
          TopvFields{{"JobId", "12"}, {"JobName", "t x"}, {"UserId", "u(5)"}});
    // The multi-line form; words before the first key are dropped.
    CHECK(parse_scontrol_record("stray JobId=12 JobName=x\n   UserId=root(0) NodeList=n[1-2]\n") ==
          TopvFields{
              {"JobId", "12"}, {"JobName", "x"}, {"UserId", "root(0)"}, {"NodeList", "n[1-2]"}});
    CHECK(parse_scontrol_record("").empty());
    CHECK(parse_scontrol_record("no keys here =x").empty());
}

TEST_CASE("top: a job's record read", "[top]") {
    TopvZone zone;
    const TopJob job =
        job_from_record(parse_scontrol_record("JobId=12 JobState=RUNNING UserId=root(0) "
                                              "Restarts=2 NodeList=n[1-2] "
                                              "EndTime=2026-11-29T22:00:00"),
                        zone.to_utc());
    CHECK(job.job == 12);
    CHECK(job.state == "RUNNING");
    CHECK(job.user == "root");
    CHECK(job.uid == std::optional<std::uint32_t>{0});
    CHECK(job.requeues == 2);
    CHECK(job.nodes == "n[1-2]");
    CHECK(zone.given == 1795989600); // 2026-11-29T22:00:00 as if it were UTC
    CHECK(job.end == std::optional<std::int64_t>{1795989600 - 3600});
}

TEST_CASE("top: the end times of a job's record", "[top]") {
    const auto utc = [](std::int64_t local) { return local; };
    const auto end_of = [&utc](const std::string& end) {
        return job_from_record(
                   TopvFields{
                       {"JobId", "1"}, {"JobState", "R"}, {"UserId", "u(1)"}, {"EndTime", end}},
                   utc)
            .end;
    };
    CHECK(end_of("1970-01-01T00:00:00") == std::optional<std::int64_t>{0});
    CHECK(end_of("2024-02-29T23:59:59") == std::optional<std::int64_t>{1709251199});
    CHECK(end_of("2000-03-01T00:00:00") == std::optional<std::int64_t>{951868800});
    CHECK(end_of("2026-11-29T22:00:00") == std::optional<std::int64_t>{1795989600});
    CHECK_FALSE(end_of("Unknown"));
    CHECK_FALSE(end_of("None"));
    CHECK_FALSE(end_of(""));
    CHECK_FALSE(end_of("2026-11-29T22:00:00Z")); // not scontrol's local time
    CHECK_FALSE(
        job_from_record(TopvFields{{"JobId", "1"}, {"JobState", "R"}, {"UserId", "u"}}, utc).end);
}

TEST_CASE("top: the user of a job's record", "[top]") {
    const auto utc = [](std::int64_t local) { return local; };
    const auto job_of = [&utc](const std::string& user) {
        return job_from_record(TopvFields{{"JobId", "1"}, {"JobState", "R"}, {"UserId", user}},
                               utc);
    };
    TopJob job = job_of("alice(1000)");
    CHECK(job.user == "alice");
    CHECK(job.uid == std::optional<std::uint32_t>{1000});
    job = job_of("alice");
    CHECK(job.user == "alice");
    CHECK_FALSE(job.uid);
    job = job_of("alice(x)");
    CHECK(job.user == "alice");
    CHECK_FALSE(job.uid);
    job = job_of("alice(4294967296)");
    CHECK(job.user == "alice");
    CHECK_FALSE(job.uid);
    job = job_of("alice(4294967295)");
    CHECK(job.uid == std::optional<std::uint32_t>{4294967295U});
    // Without Restarts or NodeList: none; a NodeList of `(null)` (pending): none.
    CHECK(job.requeues == 0);
    CHECK(job.nodes.empty());
    job = job_from_record(
        TopvFields{
            {"JobId", "1"}, {"JobState", "PENDING"}, {"UserId", "u(1)"}, {"NodeList", "(null)"}},
        utc);
    CHECK(job.nodes.empty());
    CHECK(job.state == "PENDING");
}

TEST_CASE("top: a job's record that is not right", "[top]") {
    const auto utc = [](std::int64_t local) { return local; };
    using Row = std::tuple<std::string, std::string>;
    const auto [line, message] = GENERATE(table<std::string, std::string>({
        Row{"JobState=R UserId=u(1)", R"(top: scontrol's record of the job has no JobId)"},
        Row{"JobId=1 UserId=u(1)", R"(top: scontrol's record of the job has no JobState)"},
        Row{"JobId=1 JobState=R", R"(top: scontrol's record of the job has no UserId)"},
        Row{"JobId=x1 JobState=R UserId=u(1)",
            R"(top: scontrol's record of the job has an unreadable JobId: "x1")"},
        Row{"JobId=1 JobState=R UserId=u(1) Restarts=-1",
            R"(top: scontrol's record of the job has an unreadable Restarts: "-1")"},
        Row{"JobId=1 JobState=R UserId=u(1) Restarts=4294967296",
            R"(top: scontrol's record of the job has an unreadable Restarts: "4294967296")"},
    }));
    INFO(line);
    const std::string record = line; // a lambda captures no structured binding (C++17)
    CHECK(topv_error([&] { (void)job_from_record(parse_scontrol_record(record), utc); }) ==
          message);
}

TEST_CASE("top: what to watch is JOB or JOB.STEP", "[top]") {
    WatchRequest request = parse_watch_request("12");
    CHECK(request.job == 12);
    CHECK_FALSE(request.step);
    request = parse_watch_request("12.3");
    CHECK(request.job == 12);
    CHECK(request.step == std::optional<std::uint64_t>{3});
    request = parse_watch_request("18446744073709551615.0");
    CHECK(request.job == 18446744073709551615ULL);
    CHECK(request.step == std::optional<std::uint64_t>{0});
    CHECK(topv_error([] { (void)parse_watch_request("12."); }) ==
          R"(top: expected JOB or JOB.STEP (numbers, e.g. 12345 or 12345.0): "12.")");
    const auto text = GENERATE(as<std::string>{},
                               "",
                               "x",
                               "12.",
                               ".3",
                               "12.3.4",
                               "12.batch",
                               "-1",
                               "+1",
                               " 12",
                               "12 ",
                               "12_3",
                               "18446744073709551616");
    INFO(text);
    CHECK(topv_error([&] { (void)parse_watch_request(text); }) ==
          "top: expected JOB or JOB.STEP (numbers, e.g. 12345 or 12345.0): " + quote(text));
}

TEST_CASE("top: the step watched is the newest numbered one or the one asked", "[top]") {
    const std::vector<std::string> running{
        "12.batch", "12.extern", "12.9", "12.10", "12.0", "120.11", "12.3+0", "4.12"};
    CHECK(choose_step(WatchRequest{12, std::nullopt}, running) == 10);
    CHECK(choose_step(WatchRequest{12, 9}, running) == 9);
    CHECK(choose_step(WatchRequest{12, 0}, running) == 0);
    CHECK(choose_step(WatchRequest{120, std::nullopt}, running) == 11);
    CHECK(choose_step(WatchRequest{12, std::nullopt}, {"12.0"}) == 0);
}

TEST_CASE("top: a step that does not run cannot be watched", "[top]") {
    CHECK(topv_error([] {
              (void)choose_step(WatchRequest{12, 4}, {"12.batch", "12.1", "12.0", "13.4"});
          }) == R"(top: step 12.4 is not running (running: 12.0, 12.1): "12.4")");
    CHECK(topv_error([] {
              (void)choose_step(WatchRequest{12, 4}, {"12.batch", "12.extern"});
          }) == R"(top: step 12.4 is not running (the job runs no numbered step now): "12.4")");
    CHECK(topv_error([] {
              (void)choose_step(WatchRequest{12, std::nullopt}, {"12.batch", "12.extern", "13.0"});
          }) == R"(top: job 12 runs no step to watch now (no srun is running in it): "12")");
    CHECK(topv_error([] {
              (void)choose_step(WatchRequest{12, std::nullopt}, {});
          }) == R"(top: job 12 runs no step to watch now (no srun is running in it): "12")");
}

TEST_CASE("top: the sorts and filters go round", "[top]") {
    CHECK(to_string(TopSort::rank) == "rank");
    CHECK(to_string(TopSort::state) == "state");
    CHECK(to_string(TopSort::cpu) == "cpu");
    CHECK(to_string(TopSort::memory) == "memory");
    CHECK(to_string(TopSort::progress) == "progress");
    CHECK(to_string(TopSort::host) == "host");
    CHECK(next(TopSort::rank) == TopSort::state);
    CHECK(next(TopSort::state) == TopSort::cpu);
    CHECK(next(TopSort::cpu) == TopSort::memory);
    CHECK(next(TopSort::memory) == TopSort::progress);
    CHECK(next(TopSort::progress) == TopSort::host);
    CHECK(next(TopSort::host) == TopSort::rank);
    CHECK(to_string(TopFilter::all) == "all");
    CHECK(to_string(TopFilter::attention) == "attention");
    CHECK(next(TopFilter::all) == TopFilter::attention);
    CHECK(next(TopFilter::attention) == TopFilter::all);
}

TEST_CASE("top: the ranks listed in each order (ties in rank order)", "[top]") {
    const Snapshot s = topv_sortable();
    CHECK(listed_ranks(s, TopSort::rank, TopFilter::all) == TopvOrder{0, 1, 2, 3, 4, 5, 6, 7});
    // Stuck, failed, lost, straggling, restarting, waiting, running, exited.
    CHECK(listed_ranks(s, TopSort::state, TopFilter::all) == TopvOrder{2, 5, 6, 4, 7, 3, 0, 1});
    // The busiest first; none counts as 0.
    CHECK(listed_ranks(s, TopSort::cpu, TopFilter::all) == TopvOrder{4, 0, 2, 1, 3, 5, 6, 7});
    // The largest first; none counts as 0.
    CHECK(listed_ranks(s, TopSort::memory, TopFilter::all) == TopvOrder{2, 0, 4, 5, 1, 3, 6, 7});
    // The longest without progress first; an age of 0 before none.
    CHECK(listed_ranks(s, TopSort::progress, TopFilter::all) == TopvOrder{2, 4, 0, 5, 1, 3, 6, 7});
    // By name, as text (n10 before n2).
    CHECK(listed_ranks(s, TopSort::host, TopFilter::all) == TopvOrder{1, 3, 7, 5, 2, 4, 0, 6});
}

TEST_CASE("top: the ranks that need attention", "[top]") {
    const Snapshot s = topv_sortable();
    CHECK(listed_ranks(s, TopSort::rank, TopFilter::attention) == TopvOrder{2, 3, 4, 5, 6, 7});
    CHECK(listed_ranks(s, TopSort::state, TopFilter::attention) == TopvOrder{2, 5, 6, 4, 7, 3});
    CHECK(listed_ranks(s, TopSort::cpu, TopFilter::attention) == TopvOrder{4, 2, 3, 5, 6, 7});
    CHECK(listed_ranks(s, TopSort::host, TopFilter::attention) == TopvOrder{3, 7, 5, 2, 4, 6});
    CHECK(listed_ranks(Snapshot{}, TopSort::state, TopFilter::attention).empty());
}

TEST_CASE("top: the plain text of a step", "[top]") {
    CHECK(render_top_text(topv_snapshot(), topv_job(), k_topv_now) ==
          R"(job 94 step 0 (run c-94-0) on n[1-2]: 2 nodes, 3 ranks
state RUNNING, elapsed 1:02:03, left 1:30:00, requeued 1 time, restarts 1
verdict: none yet

ROLE       RANKS    WAITING    RUNNING STRAGGLING      STUCK RESTARTING     EXITED     FAILED       LOST
worker         2          0          0          0          1          1          0          0          0
ps             1          0          1          0          0          0          0          0          0

   RANK  ROLE           HOST             STATE         CPU%     MEMORY  PROGRESS RESTARTS   OUTPUT/S
      0  ps:0           n1                running        12    50.0MiB         -        0          -
      1  worker:0       n1               *stuck           0     1.5KiB     2m05s        0     2.0KiB
      2  worker:1       n2               !restarting      -          -         -        1          -
)");
}

TEST_CASE("top: the header of the plain text in other cases", "[top]") {
    Snapshot s = topv_snapshot();
    TopJob job = topv_job();
    const auto head = [&] {
        const auto lines = topv_lines(render_top_text(s, job, k_topv_now));
        return std::vector<std::string>(lines.begin(), lines.begin() + 3);
    };
    s.run_id = "";
    s.elapsed = Millis{59999};
    s.verdict = Verdict::aborted;
    s.failure = "rank 1 (worker:0) on n1 is stuck: no progress for 60 s";
    job.state = "";
    job.nodes = "";
    job.end = std::nullopt;
    job.requeues = 0;
    CHECK(head() ==
          std::vector<std::string>{
              "job 94 step 0 on ?: 2 nodes, 3 ranks",
              "state ?, elapsed 0:59, no time limit, requeued 0 times, restarts 1",
              "verdict: aborted: rank 1 (worker:0) on n1 is stuck: no progress for 60 s"});
    s.verdict = Verdict::done;
    s.failure = "";
    job.end = k_topv_now - 10; // past its limit: no time left
    job.requeues = 2;
    CHECK(head()[1] == "state ?, elapsed 0:59, left 0:00, requeued 2 times, restarts 1");
    CHECK(head()[2] == "verdict: done");
}

TEST_CASE("top: the numbers of a rank's line", "[top]") {
    Snapshot s;
    SnapshotRank rank = topv_rank(3, Role::chief, 0, "n1", RankActivity::straggling);
    rank.usage = protocol::Usage{0, 1023, {}};
    rank.cpu_percent = 400;
    rank.progress_age = Millis{59999};
    rank.output_rate = 1024;
    s.ranks.push_back(rank);
    rank = topv_rank(4, Role::evaluator, 0, "n2", RankActivity::exited);
    rank.usage = protocol::Usage{0, 1610612736, {}};
    rank.progress_age = Millis{3720000};
    rank.output_rate = 0;
    s.ranks.push_back(rank);
    const auto lines = topv_lines(render_top_text(s, TopJob{}, 0));
    REQUIRE(lines.size() == 11);
    CHECK(lines[5] == "chief          1          0          0          1          0          0"
                      "          0          0          0");
    CHECK(lines[6] == "evaluator      1          0          0          0          0          0"
                      "          1          0          0");
    CHECK(lines[9] == "      3  chief:0        n1               !straggling    400      1023B"
                      "       59s        0     1.0KiB");
    CHECK(lines[10] == "      4  evaluator:0    n2                exited          -     1.5GiB"
                       "     1h02m        0         0B");
}

TEST_CASE("top: the JSON document of a step", "[top]") {
    const std::string text = render_top_json(topv_snapshot(), topv_job(), k_topv_now);
    CHECK(text.rfind("{\n  \"elapsed_s\": 3723.0,\n", 0) == 0);
    CHECK(text.back() == '\n');
    const auto doc = nlohmann::json::parse(text);
    CHECK(doc.size() == 17);
    CHECK(doc["startup"].is_null()); // no rank reported its start-up phases
    CHECK(doc["job"] == 94);
    CHECK(doc["step"] == 0);
    CHECK(doc["run_id"] == "c-94-0");
    CHECK(doc["job_state"] == "RUNNING");
    CHECK(doc["user"] == "alice");
    CHECK(doc["nodelist"] == "n[1-2]");
    CHECK(doc["nodes"] == 2);
    CHECK(doc["size"] == 3);
    CHECK(doc["elapsed_s"] == 3723.0);
    CHECK(doc["time_left_s"] == 5400);
    CHECK(doc["requeues"] == 1);
    CHECK(doc["restarts"] == 1);
    CHECK(doc["verdict"] == "none");
    CHECK(doc["failure"].is_null());
    CHECK(doc["roles"] ==
          nlohmann::json::parse(
              R"({"ps":{"waiting":0,"running":1,"straggling":0,"stuck":0,"restarting":0,)"
              R"("exited":0,"failed":0,"lost":0},"worker":{"waiting":0,"running":0,)"
              R"("straggling":0,"stuck":1,"restarting":1,"exited":0,"failed":0,"lost":0}})"));
    REQUIRE(doc["ranks"].size() == 3);
    CHECK(doc["ranks"][0] ==
          nlohmann::json::parse(R"({"rank":0,"role":"ps","index":0,"host":"n1","state":"running",)"
                                R"("restarts":0,"progress_age_s":null,"cpu_seconds":1.2,)"
                                R"("cpu_percent":12,"memory_bytes":52428800,)"
                                R"("output_bytes_per_second":null})"));
    CHECK(doc["ranks"][1] ==
          nlohmann::json::parse(R"({"rank":1,"role":"worker","index":0,"host":"n1",)"
                                R"("state":"stuck","restarts":0,"progress_age_s":125.0,)"
                                R"("cpu_seconds":90.0,"cpu_percent":0,"memory_bytes":1536,)"
                                R"("output_bytes_per_second":2048})"));
    CHECK(doc["ranks"][2] ==
          nlohmann::json::parse(R"({"rank":2,"role":"worker","index":1,"host":"n2",)"
                                R"("state":"restarting","restarts":1,"progress_age_s":null,)"
                                R"("cpu_seconds":null,"cpu_percent":null,"memory_bytes":null,)"
                                R"("output_bytes_per_second":null})"));
}

TEST_CASE("top: the JSON document's time left and failure", "[top]") {
    Snapshot s = topv_snapshot();
    TopJob job = topv_job();
    job.end = k_topv_now - 1;
    s.verdict = Verdict::aborted;
    s.failure = "rank 1 failed";
    s.ranks[2].host = "n\xff"; // not UTF-8: replaced, never thrown
    auto doc = nlohmann::json::parse(render_top_json(s, job, k_topv_now));
    CHECK(doc["time_left_s"] == 0);
    CHECK(doc["verdict"] == "aborted");
    CHECK(doc["failure"] == "rank 1 failed");
    CHECK(doc["ranks"][2]["host"] == "n\xef\xbf\xbd");
    job.end = std::nullopt;
    s.ranks.clear();
    doc = nlohmann::json::parse(render_top_json(s, job, k_topv_now));
    CHECK(doc["time_left_s"].is_null());
    CHECK(doc["size"] == 0);
    CHECK(doc["roles"] == nlohmann::json::object());
    CHECK(doc["ranks"] == nlohmann::json::array());
}

TEST_CASE("top: the live screen is the plain text and a status line", "[top]") {
    const Snapshot s = topv_snapshot();
    TopScreen screen;
    screen.width = 200;
    screen.height = 30;
    const auto lines = render_top_screen(s, topv_job(), k_topv_now, screen);
    REQUIRE(lines.size() == 30);
    const auto text = topv_lines(render_top_text(s, topv_job(), k_topv_now));
    REQUIRE(text.size() == 12);
    for (std::size_t i = 0; i < text.size(); ++i) {
        CHECK(lines[i] == text[i]);
    }
    for (std::size_t i = text.size(); i + 1 < lines.size(); ++i) {
        CHECK(lines[i].empty());
    }
    CHECK(lines.back() ==
          "ranks 1-3 of 3 listed (3 in the step)  sort: rank  filter: all" + k_topv_status_keys);
    CHECK(screen.first == 0);
    for (const auto& line : lines) {
        CHECK(line.find('\x1b') == std::string::npos);
    }
}

TEST_CASE("top: the live screen's rows for its height", "[top]") {
    const Snapshot s = topv_snapshot();
    // 3 header lines, a blank, the roles' header and 2 roles, a blank, the ranks' header and
    // the status line: 10.
    CHECK(top_page_rows(s, 30) == 20);
    CHECK(top_page_rows(s, 12) == 2);
    CHECK(top_page_rows(s, 11) == 1);
    CHECK(top_page_rows(s, 10) == 1);
    CHECK(top_page_rows(s, 0) == 1);
    CHECK(top_page_rows(Snapshot{}, 30) == 22);
    // One role, and a rank still waiting: the start-up line.
    CHECK(top_page_rows(topv_sortable(), 30) == 20);
}

TEST_CASE("top: while ranks have not registered the header names the nodes waited for", "[top]") {
    Snapshot s = topv_sortable();
    s.elapsed = Millis{12000};
    for (const std::string host : {"n2", "n2", "n5", "n9", "n7", "n7", "n7"}) {
        SnapshotRank rank = s.ranks.back();
        rank.rank = static_cast<std::uint32_t>(s.ranks.size());
        rank.host = host;
        rank.activity = RankActivity::waiting;
        s.ranks.push_back(rank);
    }
    const std::string text = render_top_text(s, TopJob{}, 0);
    CHECK(text.find("\nstart-up: 7 of 15 ranks registered after 0:12; waiting on n7 (3 ranks), "
                    "n2 (2 ranks), n1 (1 rank) and 2 more nodes\n") != std::string::npos);
    // Every rank registered: no such line.
    CHECK(render_top_text(topv_snapshot(), topv_job(), k_topv_now).find("start-up:") ==
          std::string::npos);
}

namespace {

/// topv_snapshot() with its start-up so far: every rank up, ranks 0 and 1 registered and started,
/// rank 2 (restarting, on n2) not yet registered by its own clock.
Snapshot topv_starting() {
    Snapshot s = topv_snapshot();
    s.startup.reported = 3;
    s.startup.end = StartupPhase::started;
    s.startup.phases = {{StartupPhase::task, 3, Millis{0}, Millis{5}, Millis{5}, 2},
                        {StartupPhase::up, 3, Millis{30}, Millis{400}, Millis{400}, 2},
                        {StartupPhase::registered, 2, Millis{20}, Millis{22}, Millis{22}, 1},
                        {StartupPhase::started, 2, Millis{10}, Millis{10}, Millis{10}, 0}};
    s.startup.nodes = {{"n1", Millis{62}}};
    s.startup.slowest =
        SlowestStartup{1, Millis{62}, StartupPhase::registered, Millis{22}, Millis{20}};
    return s;
}

} // namespace

TEST_CASE("top: while trainers have not started the header shows where the start-up time went",
          "[top][startup]") {
    const Snapshot s = topv_starting();
    const auto lines = topv_lines(render_top_text(s, topv_job(), k_topv_now));
    REQUIRE(lines.size() > 11);
    CHECK(std::vector<std::string>(lines.begin() + 3, lines.begin() + 11) ==
          std::vector<std::string>{
              "start-up so far: 3 of 3 ranks reported, 2 trainers started",
              "phase                    median       p90       max  slowest",
              "task started            0.000 s   0.005 s   0.005 s  rank 2 (worker:1) on n2",
              "launcher up             0.030 s   0.400 s   0.400 s  rank 2 (worker:1) on n2",
              "registered              0.020 s   0.022 s   0.022 s  rank 1 (worker:0) on n1",
              "trainer started         0.010 s   0.010 s   0.010 s  rank 0 (ps:0) on n1",
              "slowest nodes to trainer started: n1 0.062 s",
              std::string("slowest: rank 1 (worker:0) on n1, 0.062 s from the step's first task "
                          "to trainer started; its registered took 0.022 s (the other ranks' "
                          "median: 0.020 s)"),
          });
    CHECK(lines[11].empty());
    // The live screen keeps 8 rows fewer for the ranks.
    CHECK(top_page_rows(s, 30) == top_page_rows(topv_snapshot(), 30) - 8);
    // Every trainer started: the start-up is over, and the header is the usual one.
    Snapshot started = s;
    started.startup.phases.back().ranks = 3;
    CHECK(render_top_text(started, topv_job(), k_topv_now) ==
          render_top_text(topv_snapshot(), topv_job(), k_topv_now));
}

TEST_CASE("top: the JSON document's start-up", "[top][startup]") {
    const auto doc =
        nlohmann::json::parse(render_top_json(topv_starting(), topv_job(), k_topv_now));
    CHECK(doc["startup"] ==
          nlohmann::json::parse(
              R"({"reported":3,"end":"started","more_nodes":0,)"
              R"("phases":[{"phase":"task","ranks":3,"median_s":0.0,"p90_s":0.005,"max_s":0.005,)"
              R"("slowest_rank":2},{"phase":"up","ranks":3,"median_s":0.03,"p90_s":0.4,)"
              R"("max_s":0.4,"slowest_rank":2},{"phase":"registered","ranks":2,"median_s":0.02,)"
              R"("p90_s":0.022,"max_s":0.022,"slowest_rank":1},{"phase":"started","ranks":2,)"
              R"("median_s":0.01,"p90_s":0.01,"max_s":0.01,"slowest_rank":0}],)"
              R"("slowest_nodes":[{"host":"n1","seconds":0.062}],)"
              R"("slowest":{"rank":1,"seconds":0.062,"phase":"registered","phase_s":0.022,)"
              R"("others_median_s":0.02}})"));
}

TEST_CASE("top: the live screen scrolls", "[top]") {
    const Snapshot s = topv_snapshot();
    const TopJob job = topv_job();
    TopScreen screen;
    screen.width = 200;
    screen.height = 12; // room for 2 ranks
    auto lines = render_top_screen(s, job, k_topv_now, screen);
    REQUIRE(lines.size() == 12);
    CHECK(lines[9].rfind("      0  ps:0", 0) == 0);
    CHECK(lines[10].rfind("      1  worker:0", 0) == 0);
    CHECK(lines[11] ==
          "ranks 1-2 of 3 listed (3 in the step)  sort: rank  filter: all" + k_topv_status_keys);

    screen.first = 1;
    lines = render_top_screen(s, job, k_topv_now, screen);
    REQUIRE(lines.size() == 12);
    CHECK(lines[9].rfind("      1  worker:0", 0) == 0);
    CHECK(lines[10].rfind("      2  worker:1", 0) == 0);
    CHECK(lines[11].rfind("ranks 2-3 of 3 listed", 0) == 0);
    CHECK(screen.first == 1);

    screen.first = 7; // past the end: the last page
    lines = render_top_screen(s, job, k_topv_now, screen);
    CHECK(screen.first == 1);
    CHECK(lines[11].rfind("ranks 2-3 of 3 listed", 0) == 0);

    screen.height = 11; // room for 1 rank
    screen.first = 99;
    lines = render_top_screen(s, job, k_topv_now, screen);
    REQUIRE(lines.size() == 11);
    CHECK(screen.first == 2);
    CHECK(lines[9].rfind("      2  worker:1", 0) == 0);
    CHECK(lines[10].rfind("ranks 3-3 of 3 listed", 0) == 0);

    screen.height = 30; // all fit: back to the top
    lines = render_top_screen(s, job, k_topv_now, screen);
    CHECK(screen.first == 0);
}

TEST_CASE("top: the live screen is cut to its height", "[top]") {
    const Snapshot s = topv_snapshot();
    const auto text = topv_lines(render_top_text(s, topv_job(), k_topv_now));
    TopScreen screen;
    screen.width = 200;
    screen.height = 5; // too small even for the fixed lines: the first 5
    auto lines = render_top_screen(s, topv_job(), k_topv_now, screen);
    CHECK(lines == std::vector<std::string>(text.begin(), text.begin() + 5));
    screen.height = 0;
    CHECK(render_top_screen(s, topv_job(), k_topv_now, screen).empty());
}

TEST_CASE("top: the live screen sorts and filters", "[top]") {
    const Snapshot s = topv_snapshot();
    TopScreen screen;
    screen.width = 200;
    screen.height = 30;
    screen.sort = TopSort::state;
    screen.filter = TopFilter::attention;
    auto lines = render_top_screen(s, topv_job(), k_topv_now, screen);
    REQUIRE(lines.size() == 30);
    CHECK(lines[9].rfind("      1  worker:0", 0) == 0);
    CHECK(lines[10].rfind("      2  worker:1", 0) == 0);
    CHECK(lines[11].empty());
    CHECK(lines.back() == "ranks 1-2 of 2 listed (3 in the step)  sort: state  filter: attention" +
                              k_topv_status_keys);
    // Nothing listed.
    Snapshot calm = s;
    calm.ranks[1].activity = RankActivity::running;
    calm.ranks[2].activity = RankActivity::exited;
    screen.first = 3;
    lines = render_top_screen(calm, topv_job(), k_topv_now, screen);
    CHECK(screen.first == 0);
    CHECK(lines[9].empty());
    CHECK(lines.back() == "ranks 0-0 of 0 listed (3 in the step)  sort: state  filter: attention" +
                              k_topv_status_keys);
}

TEST_CASE("top: the live screen's colours", "[top]") {
    Snapshot s = topv_snapshot();
    s.ranks.push_back(topv_rank(3, Role::worker, 2, "n2", RankActivity::exited));
    const auto plain = topv_lines(render_top_text(s, topv_job(), k_topv_now));
    TopScreen screen;
    screen.width = 200;
    screen.height = 30;
    screen.color = true;
    const auto lines = render_top_screen(s, topv_job(), k_topv_now, screen);
    REQUIRE(lines.size() == 30);
    for (std::size_t i = 0; i < 8; ++i) {
        CHECK(lines[i] == plain[i]); // the header and the roles: never coloured
    }
    CHECK(lines[8] == "\x1b[7m" + plain[8] + "\x1b[0m");    // the ranks' header
    CHECK(lines[9] == plain[9]);                            // running
    CHECK(lines[10] == "\x1b[31m" + plain[10] + "\x1b[0m"); // stuck
    CHECK(lines[11] == "\x1b[33m" + plain[11] + "\x1b[0m"); // restarting
    CHECK(lines[12] == "\x1b[2m" + plain[12] + "\x1b[0m");  // exited
    CHECK(lines.back() == "\x1b[7mranks 1-4 of 4 listed (4 in the step)  sort: rank  filter: all" +
                              k_topv_status_keys + "\x1b[0m");
}

TEST_CASE("top: the live screen is cut to its width", "[top]") {
    const Snapshot s = topv_snapshot();
    TopScreen screen;
    screen.width = 20;
    screen.height = 30;
    auto lines = render_top_screen(s, topv_job(), k_topv_now, screen);
    REQUIRE(lines.size() == 30);
    for (const auto& line : lines) {
        CHECK(line.size() <= 20);
    }
    CHECK(lines[0] == "job 94 step 0 (run c");
    CHECK(lines[8] == "   RANK  ROLE       ");
    CHECK(lines[10] == "      1  worker:0   ");
    CHECK(lines.back() == "ranks 1-3 of 3 liste");
    // With colours, the codes come on top of the 20 columns.
    screen.color = true;
    lines = render_top_screen(s, topv_job(), k_topv_now, screen);
    CHECK(lines[10] == "\x1b[31m      1  worker:0   \x1b[0m");
    CHECK(lines.back() == "\x1b[7mranks 1-3 of 3 liste\x1b[0m");
}
