// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/events.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;

namespace {

/// 2026-11-26T13:02:31.004Z plus `millis`.
WallClock::time_point at(long millis) {
    return WallClock::from_time_t(1'795'698'151) + Millis{4 + millis};
}

const Member k_ps{Role::ps, 0, "n1"};
const Member k_worker1{Role::worker, 1, "n3"};

/// The events of a failed step, one of each kind.
std::vector<StepEvent> failed_step() {
    StepEvent step;
    step.kind = EventKind::step;
    step.time = at(0);
    step.job = "94";
    step.step = "0";
    step.ranks = 3;
    step.nodes = "n[1-3]";
    StepEvent started = rank_event(EventKind::started, at(40), 2, k_worker1);
    started.restart = 0;
    StepEvent exited = rank_event(EventKind::exited, at(900), 2, k_worker1);
    exited.status = ExitStatus::exited(1);
    StepEvent restarted = rank_event(EventKind::restarted, at(950), 2, k_worker1);
    restarted.restart = 1;
    StepEvent killed = rank_event(EventKind::exited, at(1500), 2, k_worker1);
    killed.status = ExitStatus::signaled(9);
    StepEvent stalled = rank_event(EventKind::stalled, at(2000), 0, k_ps);
    stalled.millis = Millis{10000};
    StepEvent straggling = rank_event(EventKind::straggling, at(2100), 2, k_worker1);
    straggling.millis = Millis{4500};
    StepEvent checkpoint;
    checkpoint.kind = EventKind::checkpoint;
    checkpoint.time = at(3000);
    checkpoint.signal = 10;
    StepEvent lost = rank_event(EventKind::lost, at(6513), 2, k_worker1);
    lost.why = "connection closed";
    StepEvent verdict;
    verdict.kind = EventKind::verdict;
    verdict.time = at(6514);
    verdict.verdict = "aborted";
    verdict.status = ExitStatus::exited(8);
    verdict.cause = "lost";
    verdict.why = "rank 2 (worker:1) on n3 launcher lost (connection closed)";
    StepEvent requeue;
    requeue.kind = EventKind::requeue;
    requeue.time = at(6800);
    requeue.job = "94";
    requeue.excluded = {"n3"};
    requeue.why = "rank 2 (worker:1) on n3 launcher lost";
    return {step,
            rank_event(EventKind::registered, at(12), 0, k_ps),
            started,
            exited,
            restarted,
            killed,
            stalled,
            straggling,
            checkpoint,
            lost,
            verdict,
            requeue};
}

std::string file_of(const std::vector<StepEvent>& events) {
    std::string text;
    for (const auto& event : events) {
        text += to_json_line(event);
    }
    return text;
}

} // namespace

TEST_CASE("events: every kind is one line of version-1 JSON, keys in a fixed order", "[events]") {
    const auto events = failed_step();
    CHECK(
        file_of(events) ==
        R"x({"v":1,"time":"2026-11-26T13:02:31.004Z","event":"step","job":"94","step":"0","ranks":3,"nodes":"n[1-3]"}
{"v":1,"time":"2026-11-26T13:02:31.016Z","event":"registered","rank":0,"role":"ps","index":0,"host":"n1"}
{"v":1,"time":"2026-11-26T13:02:31.044Z","event":"started","rank":2,"role":"worker","index":1,"host":"n3","restart":0}
{"v":1,"time":"2026-11-26T13:02:31.904Z","event":"exited","rank":2,"role":"worker","index":1,"host":"n3","status":1}
{"v":1,"time":"2026-11-26T13:02:31.954Z","event":"restarted","rank":2,"role":"worker","index":1,"host":"n3","restart":1}
{"v":1,"time":"2026-11-26T13:02:32.504Z","event":"exited","rank":2,"role":"worker","index":1,"host":"n3","signal":9}
{"v":1,"time":"2026-11-26T13:02:33.004Z","event":"stalled","rank":0,"role":"ps","index":0,"host":"n1","silent_ms":10000}
{"v":1,"time":"2026-11-26T13:02:33.104Z","event":"straggling","rank":2,"role":"worker","index":1,"host":"n3","behind_ms":4500}
{"v":1,"time":"2026-11-26T13:02:34.004Z","event":"checkpoint","signal":10}
{"v":1,"time":"2026-11-26T13:02:37.517Z","event":"lost","rank":2,"role":"worker","index":1,"host":"n3","why":"connection closed"}
{"v":1,"time":"2026-11-26T13:02:37.518Z","event":"verdict","verdict":"aborted","status":8,"cause":"lost","why":"rank 2 (worker:1) on n3 launcher lost (connection closed)"}
{"v":1,"time":"2026-11-26T13:02:37.804Z","event":"requeue","job":"94","excluded":["n3"],"why":"rank 2 (worker:1) on n3 launcher lost"}
)x");
}

TEST_CASE("events: the file reads back as the events written, and tells the timeline", "[events]") {
    const auto events = failed_step();
    const auto read = parse_events(file_of(events), "run.events");
    REQUIRE(read.size() == events.size());
    CHECK(file_of(read) == file_of(events));
    CHECK(render_timeline(read) == R"x(from 2026-11-26 13:02:31.004 UTC
    +0.000 s  step 94.0: 3 ranks on n[1-3]
    +0.012 s  rank 0 (ps:0) on n1: registered
    +0.040 s  rank 2 (worker:1) on n3: trainer started
    +0.900 s  rank 2 (worker:1) on n3: trainer exited with status 1
    +0.950 s  rank 2 (worker:1) on n3: restarted (1 of its restarts)
    +1.500 s  rank 2 (worker:1) on n3: trainer was killed by signal 9 (Killed)
    +2.000 s  rank 0 (ps:0) on n1: stalled (no progress for 10.000 s)
    +2.100 s  rank 2 (worker:1) on n3: straggling (4.500 s behind the others)
    +3.000 s  checkpoint signal 10 (User defined signal 1) to the trainers
    +6.513 s  rank 2 (worker:1) on n3: launcher lost (connection closed)
    +6.514 s  verdict: aborted, status 8: rank 2 (worker:1) on n3 launcher lost (connection closed)
    +6.800 s  job 94 requeued without n3 (rank 2 (worker:1) on n3 launcher lost)
)x");
}

TEST_CASE("events: a last line cut short by a killed writer is left out and counted", "[events]") {
    const auto events = failed_step();
    std::string text = file_of(events);
    text += R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"exi)x";
    std::size_t incomplete = 0;
    const auto read = parse_events(text, "run.events", &incomplete);
    CHECK(read.size() == events.size());
    CHECK(incomplete == 1);
}

TEST_CASE("events: a bad line is refused with the file, the line number and the line quoted",
          "[events]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [line, message] = GENERATE(table<std::string, std::string>({
        Row{"not json", R"x(run.events: line 2: not a JSON object: "not json")x"},
        Row{R"x([1,2])x", R"x(run.events: line 2: not a JSON object: "[1,2]")x"},
        Row{R"x({"time":"2026-11-26T13:02:38.000Z","event":"registered"})x",
            R"x(run.events: line 2: no format version "v": "{\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"registered\"}")x"},
        Row{R"x({"v":2,"time":"2026-11-26T13:02:38.000Z","event":"step"})x",
            R"x(run.events: line 2: format version 2 is not one this tfslurm reads (it reads 1): "{\"v\":2,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"step\"}")x"},
        Row{R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"exploded"})x",
            R"x(run.events: line 2: unknown event "exploded": "{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"exploded\"}")x"},
        Row{R"x({"v":1,"time":"yesterday","event":"step"})x",
            R"x(run.events: line 2: no "time" of the form 2026-11-26T13:02:38.123Z: "{\"v\":1,\"time\":\"yesterday\",\"event\":\"step\"}")x"},
        Row{R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"exited","rank":1,"role":"worker","index":0,"host":"n2"})x",
            R"x(run.events: line 2: an exited event needs "status" or "signal": "{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"exited\",\"r"...)x"},
        Row{R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"lost","why":"x"})x",
            R"x(run.events: line 2: a lost event needs "rank": "{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"lost\",\"why"...)x"},
        Row{R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"lost","rank":1,"role":"boss","index":0,"host":"n2"})x",
            R"x(run.events: line 2: unknown role "boss": "{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"lost\",\"ran"...)x"},
        Row{R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"exited","rank":1,"role":"worker","index":0,"host":"n2","status":300})x",
            R"x(run.events: line 2: "status" is not a number from 0 to 255: "{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"exited\",\"r"...)x"},
        Row{"{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"step\x1b[2J\"}",
            R"x(run.events: line 2: not a JSON object: "{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"step\x1b[2J\"}")x"},
        Row{R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"step\u001b[2J"})x",
            R"x(run.events: line 2: unknown event "step\x1b[2J": "{\"v\":1,\"time\":\"2026-11-26T13:02:38.000Z\",\"event\":\"step\\u001b"...)x"},
    }));
    CAPTURE(line);
    const std::string text = to_json_line(failed_step().front()) + line + "\n";
    try {
        (void)parse_events(text, "run.events");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::invalid_argument);
        CHECK(std::string(e.what()) == message);
    }
}

TEST_CASE("events: fields a later version adds are ignored, and text from the file is shown safely",
          "[events]") {
    const std::string text =
        R"x({"v":1,"time":"2026-11-26T13:02:38.000Z","event":"lost","rank":1,"role":"worker","index":0,"host":"n2\u001b[31m","why":"gone\nforged line","extra":{"a":1}}
)x";
    const auto read = parse_events(text, "run.events");
    REQUIRE(read.size() == 1);
    CHECK(render_timeline(read) == R"x(from 2026-11-26 13:02:38.000 UTC
    +0.000 s  rank 1 (worker:0) on "n2\x1b[31m": launcher lost ("gone\nforged line")
)x");
}

TEST_CASE("events: an empty file has no events", "[events]") {
    CHECK(parse_events("", "run.events").empty());
    CHECK(render_timeline({}) == "no events\n");
}

TEST_CASE("events: a why names settings by their keys, the file having no face", "[events]") {
    StepEvent exited =
        rank_event(EventKind::exited, WallClock::time_point{}, 1, Member{Role::worker, 0, "n2"});
    exited.status = ExitStatus::exited(7);
    exited.why = setting_ref("output") + ": cannot open \"/x/1.log\": No such file or directory";
    CHECK(
        to_json_line(exited) ==
        R"x({"v":1,"time":"1970-01-01T00:00:00.000Z","event":"exited","rank":1,"role":"worker","index":0,"host":"n2","status":7,"why":"output: cannot open \"/x/1.log\": No such file or directory"})x"
        "\n");
}

namespace {

/// A step of 4 ranks on n1..n3 whose rank 2 on n3 was slow to its first progress.
std::vector<StepEvent> started_step() {
    StepEvent step;
    step.kind = EventKind::step;
    step.time = at(0);
    step.job = "95";
    step.step = "0";
    step.ranks = 4;
    step.nodes = "n[1-3]";
    step.run_id = "hpc-95-0";
    std::vector<StepEvent> out{step};
    const std::vector<Member> members{{Role::ps, 0, "n1"},
                                      {Role::worker, 0, "n2"},
                                      {Role::worker, 1, "n3"},
                                      {Role::worker, 2, "n1"}};
    // Per rank: task, up, registered, started, progress (ms after at(0)).
    const std::vector<std::array<long, 5>> phases{
        {0, 30, 50, 60, 100},
        {10, 45, 60, 70, 110},
        {12, 40, 62, 75, 3087},
        {0, 31, 55, 61, 90},
    };
    for (std::uint32_t rank = 0; rank < phases.size(); ++rank) {
        StepEvent event = rank_event(EventKind::startup, at(4000), rank, members[rank]);
        const auto& p = phases[rank];
        event.startup[StartupPhase::task] = at(p[0]);
        event.startup[StartupPhase::up] = at(p[1]);
        event.startup[StartupPhase::registered] = at(p[2]);
        event.startup[StartupPhase::started] = at(p[3]);
        event.startup[StartupPhase::progress] = at(p[4]);
        out.push_back(event);
    }
    return out;
}

} // namespace

TEST_CASE("events: a rank's start-up is one line, read back, told in the timeline",
          "[events][startup]") {
    const auto events = started_step();
    CHECK(
        to_json_line(events[0]) ==
        R"({"v":1,"time":"2026-11-26T13:02:31.004Z","event":"step","job":"95","step":"0","ranks":4,"nodes":"n[1-3]","run_id":"hpc-95-0"})"
        "\n");
    StepEvent third = events[3];
    third.progress_step = 1200;
    const std::string line = to_json_line(third);
    CHECK(
        line ==
        R"({"v":1,"time":"2026-11-26T13:02:35.004Z","event":"startup","rank":2,"role":"worker","index":1,"host":"n3","task":"2026-11-26T13:02:31.016Z","up":"2026-11-26T13:02:31.044Z","registered":"2026-11-26T13:02:31.066Z","started":"2026-11-26T13:02:31.079Z","progress":"2026-11-26T13:02:34.091Z","progress_step":1200})"
        "\n");
    const auto back = parse_events(to_json_line(events[0]) + line, "f");
    REQUIRE(back.size() == 2);
    CHECK(back[0].run_id == "hpc-95-0");
    CHECK(back[1].startup == third.startup);
    CHECK(back[1].progress_step == std::optional<std::uint64_t>(1200));
    CHECK(render_timeline(back) ==
          "from 2026-11-26 13:02:31.004 UTC\n"
          "    +0.000 s  step 95.0: 4 ranks on n[1-3] (run hpc-95-0)\n"
          "    +4.000 s  rank 2 (worker:1) on n3: start-up: launcher up +0.028 s, registered "
          "+0.050 s, trainer started +0.063 s, first progress +3.075 s, progress step 1200\n");
    CHECK_THROWS_WITH(
        parse_events(
            R"({"v":1,"time":"2026-11-26T13:02:35.004Z","event":"startup","rank":2,"role":"worker","index":1,"host":"n3","up":"soon"})",
            "f"),
        Catch::Contains(R"(line 1: "up" is no time of the form 2026-11-26T13:02:38.123Z)"));
    // A time past the wall clock's end (2262) is no time either: never an overflow.
    CHECK_THROWS_WITH(
        parse_events(
            R"({"v":1,"time":"2026-11-26T13:02:35.004Z","event":"startup","rank":2,"role":"worker","index":1,"host":"n3","up":"9999-12-31T23:59:59.999Z"})",
            "f"),
        Catch::Contains(R"(line 1: "up" is no time of the form 2026-11-26T13:02:38.123Z)"));
    CHECK_THROWS_WITH(
        parse_events(R"({"v":1,"time":"2262-04-12T00:00:00.000Z","event":"step"})", "f"),
        Catch::Contains("line 1: no \"time\" of the form"));
}

TEST_CASE("events: --startup names the slowest phase, rank and node", "[events][startup]") {
    CHECK(render_startup(started_step()) ==
          "start-up of step 95.0: 4 of 4 ranks reported, on n[1-3]\n"
          "phase                    median       p90       max  slowest\n"
          "task started            0.000 s   0.012 s   0.012 s  rank 2 (worker:1) on n3\n"
          "launcher up             0.030 s   0.035 s   0.035 s  rank 1 (worker:0) on n2\n"
          "registered              0.020 s   0.024 s   0.024 s  rank 3 (worker:2) on n1\n"
          "trainer started         0.010 s   0.013 s   0.013 s  rank 2 (worker:1) on n3\n"
          "first progress          0.040 s   3.012 s   3.012 s  rank 2 (worker:1) on n3\n"
          "slowest nodes to first progress: n3 3.087 s, n2 0.110 s, n1 0.100 s\n"
          "slowest: rank 2 (worker:1) on n3, 3.087 s from the step's first task to first "
          "progress; its first progress took 3.012 s (the other ranks' median: 0.040 s)\n");
    // Without any first progress: the trainers' start is the end; the record says why.
    auto events = started_step();
    for (auto& event : events) {
        event.startup[StartupPhase::progress].reset();
    }
    const std::string text = render_startup(events);
    CHECK_THAT(text,
               Catch::Contains("first progress       no trainer touched "
                               "$TFSLURM_PROGRESS_FILE\n"));
    CHECK_THAT(text,
               Catch::EndsWith("slowest: rank 2 (worker:1) on n3, 0.075 s from the step's "
                               "first task to trainer started; its task started took "
                               "0.012 s (the other ranks' median: 0.000 s)\n"));
    CHECK(render_startup({events[0]}) ==
          "start-up of step 95.0: no rank's start-up is in the record (its launchers exited "
          "before reporting it, or an older tfslurm wrote it)\n");
}

TEST_CASE("events: the step a trainer wrote in its progress file", "[events][startup]") {
    CHECK(progress_step("1200\n") == std::optional<std::uint64_t>(1200));
    CHECK(progress_step(" 7 \r\nrest") == std::optional<std::uint64_t>(7));
    CHECK(progress_step("") == std::nullopt);
    CHECK(progress_step("epoch 3") == std::nullopt);
    CHECK(progress_step("-1") == std::nullopt);
}

TEST_CASE("events: the failed rank's node check is one line, read back, told in the timeline",
          "[events][on_failure_check]") {
    StepEvent failed = rank_event(EventKind::checked, at(1200), 2, k_worker1);
    failed.result = "failed";
    failed.check = "command";
    failed.why = R"("nvidia-smi -L" exited with status 9)";
    StepEvent passed = rank_event(EventKind::checked, at(1300), 2, k_worker1);
    passed.result = "passed";
    const std::string text = file_of({failed, passed});
    CHECK(
        text ==
        R"x({"v":1,"time":"2026-11-26T13:02:32.204Z","event":"checked","rank":2,"role":"worker","index":1,"host":"n3","result":"failed","check":"command","why":"\"nvidia-smi -L\" exited with status 9"}
{"v":1,"time":"2026-11-26T13:02:32.304Z","event":"checked","rank":2,"role":"worker","index":1,"host":"n3","result":"passed"}
)x");
    const auto read = parse_events(text, "run.events");
    CHECK(file_of(read) == text);
    CHECK(render_timeline(read) == R"x(from 2026-11-26 13:02:32.204 UTC
    +0.000 s  rank 2 (worker:1) on n3: node check failed (command: "\"nvidia-smi -L\" exited with status 9")
    +0.100 s  rank 2 (worker:1) on n3: node check passed
)x");
    CHECK_THROWS_WITH(
        parse_events(
            R"x({"v":1,"time":"2026-11-26T13:02:32.304Z","event":"checked","rank":2,"role":"worker","index":1,"host":"n3","result":"maybe"})x"
            "\n",
            "run.events"),
        Catch::Contains(R"(a checked event needs "result": passed or failed)"));
}
