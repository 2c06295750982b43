// SPDX-License-Identifier: MIT
#include "log_capture.hpp"
#include "temp_dir.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/events_file.hpp>

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>

using namespace tfslurm;

namespace {

std::string contents(const std::string& path) {
    std::ifstream in(path);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

StepEvent lost_rank() {
    StepEvent event = rank_event(
        EventKind::lost, WallClock::from_time_t(1'795'698'151), 2, Member{Role::worker, 1, "n3"});
    event.why = "connection closed";
    return event;
}

} // namespace

TEST_CASE("events file: each event is on disk as soon as it is written, one line each",
          "[events]") {
    test::TempDir dir("events");
    const std::string path = dir.write("run.events", "an older step's record\n");
    EventWriter writer(path, "--events");
    CHECK(contents(path).empty()); // truncated
    writer.write(lost_rank());
    const std::string line =
        R"({"v":1,"time":"2026-11-26T13:02:31.000Z","event":"lost","rank":2,"role":"worker","index":1,"host":"n3","why":"connection closed"})"
        "\n";
    CHECK(contents(path) == line);
    writer.write(lost_rank());
    CHECK(contents(path) == line + line);
    CHECK(parse_events(contents(path), path).size() == 2);
}

TEST_CASE("events file: a file that cannot be created is an error naming the setting and path",
          "[events]") {
    test::TempDir dir("events");
    const std::string path = dir.path + "/no-such-dir/run.events";
    try {
        EventWriter writer(path, "--events");
        FAIL("no error");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::io);
        CHECK(std::string(e.what()) ==
              "--events: cannot open \"" + path + "\": No such file or directory");
    }
}

TEST_CASE("events file: a failed write is one warning, and the step goes on without a record",
          "[events]") {
    test::LogCapture log(spdlog::level::warn);
    EventWriter writer("/dev/full", "--events");
    writer.write(lost_rank());
    CHECK_FALSE(writer.writing());
    writer.write(lost_rank()); // nothing more, no second warning
    CHECK(log.text() == "warning: --events: cannot write to \"/dev/full\": No space left on "
                        "device; no more events are recorded\n");
}
