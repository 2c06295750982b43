// SPDX-License-Identifier: MIT
// A trainer's progress as /proc shows it (src/os/progress.cpp), on real processes: the tree below a
// process, the CPU time of that tree (its reaped children's included), and a file's mtime.
#include "os/detail/progress.hpp"
#include "temp_dir.hpp"

#include <tfslurm/os/spawn.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

/// `sh -c script` in a process group of its own, killed (the whole group) and reaped with the
/// object.
class Shell {
  public:
    explicit Shell(const std::string& script) {
        tfslurm::SpawnRequest request;
        request.argv = {"sh", "-c", script};
        request.env = {"PATH=/usr/bin:/bin"};
        m_pid = tfslurm::spawn_process(request);
    }
    ~Shell() {
        ::kill(-m_pid, SIGKILL);
        int status = 0;
        while (::waitpid(m_pid, &status, 0) < 0 && errno == EINTR) {
        }
    }
    Shell(const Shell&) = delete;
    Shell& operator=(const Shell&) = delete;
    Shell(Shell&&) = delete;
    Shell& operator=(Shell&&) = delete;
    [[nodiscard]] pid_t pid() const noexcept { return m_pid; }

  private:
    pid_t m_pid = -1;
};

/// Wait (at most 30 s, polling) until `done` holds.
template <typename Done> bool eventually(Done done) {
    for (int i = 0; i < 3000; ++i) {
        if (done()) {
            return true;
        }
        std::this_thread::sleep_for(10ms);
    }
    return done();
}

} // namespace

TEST_CASE("progress: the tree below a process, every level", "[progress]") {
    // sh -> { sleep, sh -> sleep }: four processes.
    const Shell shell("sleep 30 & sh -c 'sleep 30 & wait' & wait");
    std::vector<pid_t> tree;
    CHECK(eventually([&] {
        tree = tfslurm::detail::process_tree(shell.pid());
        return tree.size() == 4;
    }));
    CHECK(std::count(tree.begin(), tree.end(), shell.pid()) == 1);
}

TEST_CASE("progress: a tree's CPU time counts its reaped children", "[progress]") {
    const tfslurm::test::TempDir dir("progress");
    const std::string done = dir.path + "/busy-done";
    // A child burns CPU and ends (reaped by the shell); then only a sleep is left.
    const Shell shell("sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i + 1)); done'; touch " + done +
                      "; exec sleep 30");
    REQUIRE(eventually([&] { return tfslurm::test::path_exists(done); }));
    CHECK(tfslurm::detail::tree_cpu_ticks(shell.pid()) > 0);
}

TEST_CASE("progress: a file's modification time, 0 when it cannot be read", "[progress]") {
    const tfslurm::test::TempDir dir("progress");
    const std::string file = dir.write("progress", "");
    const timespec times[2] = {{1700000000, 123456789}, {1700000000, 123456789}};
    REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
    CHECK(tfslurm::detail::mtime_ns(file) == 1700000000123456789LL);
    CHECK(tfslurm::detail::mtime_ns(dir.path + "/missing") == 0);
}

TEST_CASE("progress: a progress file untouched until the trainer touches it, with its step",
          "[progress][startup]") {
    const tfslurm::test::TempDir dir("progress");
    const std::string file = dir.write("progress", "");
    const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
    REQUIRE(fd >= 0);
    CHECK(tfslurm::detail::set_untouched(fd));
    ::close(fd);
    CHECK(tfslurm::detail::mtime_ns(file) == 0);
    auto report = tfslurm::detail::read_progress_file(file);
    CHECK_FALSE(report.touched);
    CHECK_FALSE(report.step);
    // The trainer writes its step: the touch is its time, the step its first line.
    CHECK(dir.write("progress", "1200\nsaved to /ckpt/1200\n") == file);
    const timespec times[2] = {{1700000000, 500000000}, {1700000000, 500000000}};
    REQUIRE(::utimensat(AT_FDCWD, file.c_str(), times, 0) == 0);
    report = tfslurm::detail::read_progress_file(file);
    CHECK(report.touched == std::chrono::system_clock::time_point{1700000000500ms});
    CHECK(report.step == std::optional<std::uint64_t>(1200));
    // Gone (or never made): nothing reported.
    report = tfslurm::detail::read_progress_file(dir.path + "/missing");
    CHECK_FALSE(report.touched);
    CHECK_FALSE(tfslurm::detail::read_progress_file("").touched);
}

TEST_CASE("progress: this process began before now, after the machine booted",
          "[progress][startup]") {
    const auto start = tfslurm::detail::process_start_time();
    const auto now = std::chrono::system_clock::now();
    CHECK(start <= now);
    // The unit tests started less than a day ago.
    CHECK(now - start < 24h);
}

TEST_CASE("progress: a start is the earlier of the process's own entry and the end of /proc's "
          "tick",
          "[progress][startup]") {
    using tfslurm::detail::start_estimate;
    using Time = std::chrono::system_clock::time_point;
    const Time noon{std::chrono::hours{24 * 20000}};
    const auto tick = std::chrono::duration_cast<std::chrono::system_clock::duration>(10ms);
    struct Row {
        const char* what;
        std::optional<Time> entered;
        std::optional<Time> tick_start;
        Time now;
        Time expected;
    };
    const Time later = noon + 1s;
    const std::vector<Row> rows{
        {"entered within the tick", noon + 4300us, noon, later, noon + 4300us},
        {"entered at the tick's start", noon, noon, later, noon},
        {"entered after the tick (a slow loader): /proc's bound",
         noon + 15ms,
         noon,
         later,
         noon + 10ms},
        {"no entry known (a forked copy): the tick's end", std::nullopt, noon, later, noon + 10ms},
        {"a forked copy read within its tick: now", std::nullopt, noon, noon + 3ms, noon + 3ms},
        {"no /proc: the entry", noon + 4300us, std::nullopt, later, noon + 4300us},
        {"neither: now", std::nullopt, std::nullopt, later, later},
    };
    for (const Row& row : rows) {
        INFO(row.what);
        CHECK(start_estimate(row.entered, row.tick_start, tick, row.now) == row.expected);
    }
}

TEST_CASE("progress: a forked copy's start is its own, not the parent's", "[progress][startup]") {
    // Long enough that the child's start is past the parent's by several of /proc's ticks.
    std::this_thread::sleep_for(50ms);
    const auto parent = tfslurm::detail::process_start_time();
    std::array<int, 2> fds{};
    REQUIRE(::pipe(fds.data()) == 0);
    const auto forked = std::chrono::system_clock::now();
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        const auto start = tfslurm::detail::process_start_time();
        const auto now = std::chrono::system_clock::now();
        const std::array<std::int64_t, 2> sent{
            std::chrono::duration_cast<std::chrono::nanoseconds>(start - forked).count(),
            std::chrono::duration_cast<std::chrono::nanoseconds>(now - start).count()};
        ::_exit(::write(fds[1], sent.data(), sizeof sent) == sizeof sent ? 0 : 1);
    }
    ::close(fds[1]);
    std::array<std::int64_t, 2> got{};
    const bool read = ::read(fds[0], got.data(), sizeof got) == sizeof got;
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(read);
    // The child's start is its own: after the fork's clock reading to within /proc's tick (it
    // rounds down), where the parent's was 50 ms before it, and not after the child's now.
    const std::chrono::nanoseconds after_fork{got[0]};
    const std::chrono::nanoseconds before_now{got[1]};
    CHECK(after_fork > -10ms);
    CHECK(before_now >= 0ns);
    CHECK(forked - parent >= 50ms);
}
