// SPDX-License-Identifier: MIT
#include "process.hpp"
#include "temp_dir.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/shell/held_port.hpp>
#include <tfslurm/shell/launcher_shell.hpp>

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> base_env() {
    return {"PATH=/usr/bin:/bin", "LC_ALL=C"};
}

ExitStatus wait_for(pid_t pid) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return ExitStatus::from_wait_status(status);
}

ExitStatus run_sh(const std::string& script, std::vector<std::string> env = base_env()) {
    SpawnRequest request;
    request.argv = {"sh", "-c", script};
    request.env = std::move(env);
    return wait_for(spawn_process(request));
}

using tfslurm::test::TempDir;

bool alive(pid_t pid) {
    return ::kill(pid, 0) == 0;
}

} // namespace

TEST_CASE("spawn: the child gets exactly the environment given", "[spawn]") {
    CHECK(run_sh(R"(test "$FOO" = "bar baz" && test -z "$HOME")",
                 {"PATH=/usr/bin:/bin", "FOO=bar baz"}) == ExitStatus::exited(0));
}

TEST_CASE("spawn: commands are looked up in PATH like execvp", "[spawn]") {
    const TempDir dir;
    CHECK(find_executable("sh", "/nonexistent:/usr/bin:/bin") == "/usr/bin/sh");
    CHECK(find_executable("./x", "/usr/bin") == "./x");
    const auto script = dir.write("tool", "#!/bin/sh\nexit 4\n", 0755);
    CHECK(find_executable("tool", dir.path) == script);
    SECTION("not found") {
        try {
            (void)find_executable("no-such-command-xyz", "/usr/bin:/bin");
            FAIL("no exception");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::spawn_failed);
            CHECK(std::string(e.what()) ==
                  R"(trainer: command not found in PATH: "no-such-command-xyz")");
        }
    }
    SECTION("found but not executable") {
        const auto plain = dir.write("data", "x\n", 0644);
        CHECK_THROWS_WITH(find_executable("data", dir.path),
                          R"(trainer: cannot execute (Permission denied): ")" + plain + "\"");
    }
    SECTION("PATH from the child's environment") {
        SpawnRequest request;
        request.argv = {"tool"};
        request.env = {"PATH=" + dir.path};
        CHECK(wait_for(spawn_process(request)) == ExitStatus::exited(4));
    }
}

TEST_CASE("spawn: exec failures are reported by spawn_process", "[spawn]") {
    const TempDir dir;
    SpawnRequest request;
    request.env = base_env();
    SECTION("a script without #!") {
        const auto script = dir.write("noshebang", "exit 0\n", 0755);
        request.argv = {script};
        try {
            (void)spawn_process(request);
            FAIL("no exception");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::spawn_failed);
            CHECK(std::string(e.what()) ==
                  R"(trainer: cannot execute (Exec format error): ")" + script + "\"");
            CHECK(e.hint() == "a script needs a '#!' line");
        }
    }
    SECTION("a directory") {
        request.argv = {dir.path};
        CHECK_THROWS_WITH(spawn_process(request),
                          R"(trainer: cannot execute (Permission denied): ")" + dir.path + "\"");
    }
    SECTION("a missing file") {
        request.argv = {dir.path + "/missing"};
        CHECK_THROWS_WITH(spawn_process(request),
                          R"(trainer: cannot execute (No such file or directory): ")" + dir.path +
                              "/missing\"");
    }
    SECTION("no command") {
        request.argv = {};
        CHECK_THROWS_WITH(spawn_process(request), "trainer: empty command");
    }
    // Nothing is left behind: the failed child was reaped.
    CHECK(::waitpid(-1, nullptr, WNOHANG) < 0);
}

TEST_CASE("spawn: the child leads its own process group and signals reach all of it", "[spawn]") {
    const TempDir dir;
    SpawnRequest request;
    request.argv = {"sh", "-c", "sleep 30 & echo $! > " + dir.path + "/grandchild; wait"};
    request.env = base_env();
    const pid_t pid = spawn_process(request);
    CHECK(::getpgid(pid) == pid);
    CHECK(::getpgid(0) != pid);
    pid_t grandchild = 0;
    for (int i = 0; i < 500 && grandchild == 0; ++i) {
        std::ifstream(dir.path + "/grandchild") >> grandchild;
        std::this_thread::sleep_for(5ms);
    }
    REQUIRE(grandchild > 0);
    CHECK(::getpgid(grandchild) == pid);
    CHECK(signal_group(pid, SIGTERM));
    CHECK(wait_for(pid) == ExitStatus::signaled(SIGTERM));
    for (int i = 0; i < 500 && alive(grandchild); ++i) {
        std::this_thread::sleep_for(5ms);
    }
    CHECK_FALSE(alive(grandchild)); // a zombie of init at worst, but not sleeping
    CHECK_FALSE(signal_group(pid, 0));
}

TEST_CASE("spawn: signal dispositions and mask are reset in the child", "[spawn]") {
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    struct sigaction old {};
    ::sigaction(SIGTERM, &ignore, &old);
    sigset_t block;
    ::sigemptyset(&block);
    ::sigaddset(&block, SIGUSR1);
    sigset_t old_mask;
    ::sigprocmask(SIG_BLOCK, &block, &old_mask);
    const auto status = run_sh("kill -TERM $$; sleep 5; exit 0");
    const auto usr1 = run_sh("kill -USR1 $$; sleep 5; exit 0");
    ::sigaction(SIGTERM, &old, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    CHECK(status == ExitStatus::signaled(SIGTERM));
    CHECK(usr1 == ExitStatus::signaled(SIGUSR1));
}

TEST_CASE("spawn: only the descriptors asked for are inherited", "[spawn]") {
    int fds[2] = {-1, -1};
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    SpawnRequest request;
    request.argv = {"sh", "-c", "echo inherited >&" + std::to_string(fds[1])};
    request.env = base_env();
    request.inherit_fds = {fds[1]};
    const pid_t pid = spawn_process(request);
    CHECK(wait_for(pid) == ExitStatus::exited(0));
    // Still CLOEXEC in the parent.
    CHECK((::fcntl(fds[1], F_GETFD) & FD_CLOEXEC) != 0);
    ::close(fds[1]);
    std::array<char, 64> buffer{};
    const auto n = ::read(fds[0], buffer.data(), buffer.size());
    ::close(fds[0]);
    CHECK(std::string(buffer.data(), static_cast<std::size_t>(std::max<ssize_t>(n, 0))) ==
          "inherited\n");

    // Without inherit_fds, the child cannot write to it.
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    request.argv = {"sh", "-c", "exec 2>/dev/null; echo leaked >&" + std::to_string(fds[1])};
    request.inherit_fds = {};
    CHECK(wait_for(spawn_process(request)) != ExitStatus::exited(0));
    ::close(fds[0]);
    ::close(fds[1]);
}

TEST_CASE("spawn: the death signal reaches the child when its parent dies", "[spawn]") {
    const TempDir dir;
    // An intermediate process spawns the child with PR_SET_PDEATHSIG, then is killed.
    const pid_t middle = ::fork();
    REQUIRE(middle >= 0);
    if (middle == 0) {
        SpawnRequest request;
        request.argv = {"sh", "-c", "echo $$ > " + dir.path + "/child; exec sleep 30"};
        request.env = base_env();
        request.death_signal = SIGKILL;
        try {
            (void)spawn_process(request);
        } catch (...) {
            ::_exit(1);
        }
        ::pause();
        ::_exit(0);
    }
    pid_t child = 0;
    for (int i = 0; i < 500 && child == 0; ++i) {
        std::ifstream(dir.path + "/child") >> child;
        std::this_thread::sleep_for(5ms);
    }
    REQUIRE(child > 0);
    ::kill(middle, SIGKILL);
    CHECK(wait_for(middle) == ExitStatus::signaled(SIGKILL));
    for (int i = 0; i < 1000 && alive(child); ++i) {
        std::this_thread::sleep_for(5ms);
    }
    // The child was re-parented (to init or a subreaper) and killed.
    CHECK(test::ended(child));
}

TEST_CASE("spawn: kill_all_children kills and reaps every child", "[spawn]") {
    std::vector<pid_t> pids;
    for (int i = 0; i < 3; ++i) {
        SpawnRequest request;
        request.argv = {"sh", "-c", "sleep 30 & sleep 30"};
        request.env = base_env();
        pids.push_back(spawn_process(request));
    }
    auto children = list_children(::getpid());
    std::sort(children.begin(), children.end());
    for (const pid_t pid : pids) {
        CHECK(std::binary_search(children.begin(), children.end(), pid));
    }
    CHECK(kill_all_children() >= 3);
    CHECK(list_children(::getpid()).empty());
    for (const pid_t pid : pids) {
        CHECK_FALSE(alive(pid));
    }
}

TEST_CASE("spawn: kill_all_children finds another thread's child and an ended one, and none "
          "when there is none",
          "[spawn]") {
    // Nothing to kill: 0 at once (no walk of /proc: waitid says ECHILD first).
    REQUIRE(list_children(::getpid()).empty());
    CHECK(kill_all_children() == 0);
    // A child of another, still running, thread of ours, and one that already ended and waits
    // to be reaped: waitid's check sees both (a launcher's MUNGE threads never fork, but
    // nothing here may depend on that).
    SpawnRequest request;
    request.argv = {"sleep", "30"};
    request.env = base_env();
    pid_t threads_child = -1;
    bool spawned = false;
    bool release = false;
    std::mutex mutex;
    std::condition_variable changed;
    std::thread other([&] {
        std::unique_lock<std::mutex> lock(mutex);
        threads_child = spawn_process(request);
        spawned = true;
        changed.notify_all();
        changed.wait(lock, [&] { return release; });
    });
    {
        std::unique_lock<std::mutex> lock(mutex);
        changed.wait(lock, [&] { return spawned; });
    }
    request.argv = {"true"};
    const pid_t ended = spawn_process(request);
    siginfo_t info{};
    REQUIRE(::waitid(P_PID, static_cast<id_t>(ended), &info, WEXITED | WNOWAIT) == 0);
    CHECK(kill_all_children() >= 1);
    CHECK_FALSE(alive(threads_child));
    CHECK(::waitpid(ended, nullptr, WNOHANG) < 0); // reaped by kill_all_children
    {
        const std::lock_guard<std::mutex> lock(mutex);
        release = true;
    }
    changed.notify_all();
    other.join();
    CHECK(kill_all_children() == 0);
}

TEST_CASE("spawn: list_children reads each thread's children as the scan of /proc finds them",
          "[spawn]") {
    SpawnRequest request;
    request.argv = {"sleep", "30"};
    request.env = base_env();
    std::vector<pid_t> pids{spawn_process(request)};
    // A child forked by another thread is that thread's child in /proc/<pid>/task/<tid>/children.
    std::thread([&] { pids.push_back(spawn_process(request)); }).join();
    // A zombie is still a child until it is reaped.
    request.argv = {"true"};
    const pid_t zombie = spawn_process(request);
    pids.push_back(zombie);
    siginfo_t info{};
    REQUIRE(::waitid(P_PID, static_cast<id_t>(zombie), &info, WEXITED | WNOWAIT) == 0);

    auto listed = list_children(::getpid());
    auto scanned = list_children_by_scan(::getpid());
    std::sort(listed.begin(), listed.end());
    std::sort(scanned.begin(), scanned.end());
    std::sort(pids.begin(), pids.end());
    CHECK(listed == pids);
    CHECK(scanned == pids);
    CHECK(list_children(pids.front()).empty());
    CHECK(kill_all_children() >= 2);
    CHECK(list_children(::getpid()).empty());
    CHECK(list_children_by_scan(::getpid()).empty());
}

namespace {

/// The host pid a contained trainer wrote to `file` (`$$` is its namespace's pid).
pid_t read_pid(const std::string& file) {
    pid_t pid = 0;
    for (int i = 0; i < 1000 && pid == 0; ++i) {
        std::ifstream(file) >> pid;
        std::this_thread::sleep_for(5ms);
    }
    return pid;
}

/// A launcher-like parent: a child of the test that runs `spawn` (which starts what it
/// likes), then waits to be killed by SIGKILL, after which it runs no code. Returns its pid.
template <typename Spawn> pid_t fork_launcher(Spawn spawn) {
    const pid_t launcher = ::fork();
    REQUIRE(launcher >= 0);
    if (launcher == 0) {
        try {
            spawn();
        } catch (...) {
            ::_exit(1);
        }
        ::pause();
        ::_exit(0);
    }
    return launcher;
}

/// Gone, or a zombie waiting for its new parent to reap it.
bool gone(pid_t pid) {
    for (int i = 0; i < 1000; ++i) {
        if (test::ended(pid)) {
            return true;
        }
        std::this_thread::sleep_for(5ms);
    }
    return false;
}

/// A shell line that writes its own host pid (read from /proc/self, which is the host's) to
/// `file`, then sleeps.
std::string record_and_sleep(const std::string& file) {
    return "read -r pid rest < /proc/self/stat; echo $pid > " + file + "; exec sleep 30";
}

SpawnRequest contained(const std::string& script, Containment mode) {
    SpawnRequest request;
    request.argv = {"sh", "-c", script};
    request.env = base_env();
    request.death_signal = SIGKILL;
    request.contain = mode;
    return request;
}

/// Both containments: the keeper (the default of `tfslurm run`) and the PID namespace.
Containment any_containment() {
    return GENERATE(Containment::keeper, Containment::pid_namespace);
}

} // namespace

TEST_CASE("spawn: a contained trainer keeps its exit status and its signals", "[spawn]") {
    const Containment mode = any_containment();
    INFO("containment " << (mode == Containment::keeper ? "keeper" : "pid_namespace"));
    CHECK(wait_for(spawn_process(contained("exit 0", mode))) == ExitStatus::exited(0));
    CHECK(wait_for(spawn_process(contained("exit 3", mode))) == ExitStatus::exited(3));
    CHECK(wait_for(spawn_process(contained("kill -TERM $$; sleep 5", mode))) ==
          ExitStatus::signaled(SIGTERM));
    // In a namespace of its own (pid 2 under its init), unless namespaces are not available;
    // under a keeper with its real pid (the host's, which /proc/self/stat shows in both).
    const TempDir dir;
    CHECK(wait_for(spawn_process(contained("read -r pid rest < /proc/self/stat; echo $$ > " +
                                               dir.path + "/pid; echo $pid > " + dir.path + "/host",
                                           mode))) == ExitStatus::exited(0));
    const pid_t host_pid = read_pid(dir.path + "/host");
    CHECK(host_pid > 2);
    CHECK(read_pid(dir.path + "/pid") == (mode == Containment::keeper ? host_pid : 2));

    // A signal to the group reaches the trainer, not the supervisor.
    const pid_t pid = spawn_process(contained(record_and_sleep(dir.path + "/sleeper"), mode));
    const pid_t sleeper = read_pid(dir.path + "/sleeper");
    REQUIRE(sleeper > 0);
    CHECK(::getpgid(sleeper) == pid);
    CHECK(signal_group(pid, SIGTERM));
    CHECK(wait_for(pid) == ExitStatus::signaled(SIGTERM));
    CHECK(gone(sleeper));
}

TEST_CASE("spawn: a contained wrapper being stopped: the rest of its group gets the grace",
          "[spawn]") {
    const Containment mode = any_containment();
    INFO("containment " << (mode == Containment::keeper ? "keeper" : "pid_namespace"));
    const TempDir dir;
    // sh running a trainer without exec: sh dies at once of SIGTERM, the trainer's handler
    // takes a while and then saves its checkpoint.
    const std::string trainer = "(trap 'sleep 0.3; echo saved > " + dir.path +
                                "/checkpoint; exit 0' TERM; echo 1 > " + dir.path +
                                "/ready; while :; do sleep 0.05; done)";
    const pid_t pid =
        spawn_process(contained(trainer + "; echo survived > " + dir.path + "/w", mode));
    REQUIRE(read_pid(dir.path + "/ready") == 1);
    CHECK(signal_group(pid, SIGTERM));
    CHECK(wait_for(pid) == ExitStatus::signaled(SIGTERM)); // the wrapper's status
    std::string saved;
    std::ifstream(dir.path + "/checkpoint") >> saved;
    CHECK(saved == "saved");
    CHECK_FALSE(std::filesystem::exists(dir.path + "/w"));

    // slurmstepd signals the processes of a step one by one: the wrapper may die of its SIGTERM
    // before the namespace's init gets its own copy.
    std::filesystem::remove(dir.path + "/checkpoint");
    std::filesystem::remove(dir.path + "/ready");
    const std::string record = "read -r pid rest < /proc/self/stat; echo $pid > " + dir.path;
    const pid_t pid1 = spawn_process(contained(record + "/wrapper1; " + trainer, mode));
    const pid_t wrapper1 = read_pid(dir.path + "/wrapper1");
    REQUIRE(read_pid(dir.path + "/ready") == 1);
    REQUIRE(wrapper1 > 0);
    CHECK(::kill(wrapper1, SIGTERM) == 0);
    CHECK(gone(wrapper1));
    CHECK(signal_group(pid1, SIGTERM));
    CHECK(wait_for(pid1) == ExitStatus::signaled(SIGTERM));
    saved.clear();
    std::ifstream(dir.path + "/checkpoint") >> saved;
    CHECK(saved == "saved");

    // A leftover that ignores SIGTERM keeps the supervisor waiting until the group's SIGKILL.
    const std::string stubborn = "(trap '' TERM; " + record_and_sleep(dir.path + "/stubborn") +
                                 "); echo survived > " + dir.path + "/w";
    const pid_t pid2 = spawn_process(contained(record + "/wrapper; " + stubborn, mode));
    const pid_t wrapper = read_pid(dir.path + "/wrapper");
    const pid_t left = read_pid(dir.path + "/stubborn");
    REQUIRE(wrapper > 0);
    REQUIRE(left > 0);
    CHECK(signal_group(pid2, SIGTERM));
    CHECK(gone(wrapper));
    std::this_thread::sleep_for(100ms); // time enough for a supervisor that does not wait to end
    int status = 0;
    CHECK(::waitpid(pid2, &status, WNOHANG) == 0);
    CHECK(alive(left));
    CHECK(signal_group(pid2, SIGKILL));
    CHECK(wait_for(pid2) == ExitStatus::signaled(SIGKILL));
    CHECK(gone(left));
    CHECK_FALSE(std::filesystem::exists(dir.path + "/w"));

    // A wrapper killed by someone else, not stopped: what it leaves is killed (after 1 s).
    const pid_t pid3 = spawn_process(contained(record + "/wrapper3; " + stubborn, mode));
    const pid_t wrapper3 = read_pid(dir.path + "/wrapper3");
    REQUIRE(wrapper3 > 0);
    CHECK(::kill(wrapper3, SIGTERM) == 0);
    CHECK(wait_for(pid3) == ExitStatus::signaled(SIGTERM));
}

TEST_CASE("spawn: a contained trainer's exec failure is reported by spawn_process", "[spawn]") {
    const Containment mode = any_containment();
    INFO("containment " << (mode == Containment::keeper ? "keeper" : "pid_namespace"));
    const TempDir dir;
    const auto script = dir.write("script", "echo no shebang\n", 0755);
    SpawnRequest request = contained("", mode);
    request.argv = {script};
    CHECK_THROWS_WITH(spawn_process(request),
                      Catch::Contains("cannot execute (Exec format error)"));
    CHECK(::waitpid(-1, nullptr, WNOHANG) < 0);
}

TEST_CASE("spawn: a contained trainer's descendants end with it", "[spawn]") {
    const Containment mode = any_containment();
    INFO("containment " << (mode == Containment::keeper ? "keeper" : "pid_namespace"));
    const TempDir dir;
    // A daemon: double fork and setsid, out of the trainer's process group and session. The
    // trainer waits until both have written their pid (under load that takes a while).
    const std::string script = "(" + record_and_sleep(dir.path + "/child") + ") & " +
                               "setsid sh -c '(" + record_and_sleep(dir.path + "/daemon") +
                               ") &' ; " + "while [ ! -s " + dir.path + "/daemon ] || [ ! -s " +
                               dir.path + "/child ]; do sleep 0.01; done";
    const pid_t pid = spawn_process(contained(script, mode));
    const pid_t child = read_pid(dir.path + "/child");
    const pid_t daemon = read_pid(dir.path + "/daemon");
    REQUIRE(child > 0);
    REQUIRE(daemon > 0);
    CHECK(wait_for(pid) == ExitStatus::exited(0));
    CHECK(gone(child));
    CHECK(gone(daemon));
}

TEST_CASE("spawn: nothing a contained trainer starts outlives a parent killed by SIGKILL",
          "[spawn]") {
    const Containment mode = any_containment();
    INFO("containment " << (mode == Containment::keeper ? "keeper" : "pid_namespace"));
    const TempDir dir;
    const std::string script = "(" + record_and_sleep(dir.path + "/child") + ") & " +
                               "setsid sh -c '(" + record_and_sleep(dir.path + "/daemon") +
                               ") &' ; " + record_and_sleep(dir.path + "/trainer");
    // A launcher-like parent spawns the trainer, then is killed by SIGKILL: it runs no code.
    const pid_t launcher = fork_launcher([&] { (void)spawn_process(contained(script, mode)); });
    const pid_t trainer = read_pid(dir.path + "/trainer");
    const pid_t child = read_pid(dir.path + "/child");
    const pid_t daemon = read_pid(dir.path + "/daemon");
    REQUIRE(trainer > 0);
    REQUIRE(child > 0);
    REQUIRE(daemon > 0);
    CHECK(::getsid(daemon) != ::getsid(trainer));
    ::kill(launcher, SIGKILL);
    CHECK(wait_for(launcher) == ExitStatus::signaled(SIGKILL));
    CHECK(gone(trainer));
    CHECK(gone(child));
    CHECK(gone(daemon));
}

TEST_CASE("spawn: a keeper or a supervisor removes its caller's file when the caller is killed "
          "by SIGKILL, only then",
          "[spawn]") {
    const Containment mode = any_containment();
    INFO("containment " << (mode == Containment::keeper ? "keeper" : "pid_namespace"));
    const TempDir dir;
    const std::string file = dir.write("progress", "");
    const std::string other = dir.write("other", "");
    SECTION("the caller killed") {
        const std::string trainer = record_and_sleep(dir.path + "/trainer");
        const pid_t launcher = fork_launcher([&] {
            SpawnRequest request = contained(trainer, mode);
            request.remove_if_orphaned = file;
            std::ofstream(dir.path + "/contained") << spawn_process(request);
        });
        const pid_t pid = read_pid(dir.path + "/trainer");
        const pid_t contained_pid = read_pid(dir.path + "/contained");
        REQUIRE(pid > 0);
        REQUIRE(contained_pid > 0);
        CHECK(std::filesystem::exists(file));
        ::kill(launcher, SIGKILL);
        CHECK(wait_for(launcher) == ExitStatus::signaled(SIGKILL));
        CHECK(gone(contained_pid)); // it removes the file before it ends
        CHECK(gone(pid));
        CHECK_FALSE(std::filesystem::exists(file));
    }
    SECTION("a SIGHUP to the trainer's group, the caller alive: nothing is removed") {
        // The supervisor's death signal is SIGHUP: sent to the group, it is no death.
        SpawnRequest request = contained("trap 'exit 4' HUP; echo 1 > " + dir.path +
                                             "/ready; while :; do sleep 0.05; done",
                                         mode);
        request.remove_if_orphaned = file;
        const pid_t pid = spawn_process(request);
        REQUIRE(read_pid(dir.path + "/ready") == 1);
        CHECK(signal_group(pid, SIGHUP));
        CHECK(wait_for(pid) == ExitStatus::exited(4));
        CHECK(std::filesystem::exists(file));
    }
    SECTION("the trainer ended by itself: the caller removes its file") {
        SpawnRequest request = contained("exit 3", mode);
        request.remove_if_orphaned = file;
        CHECK(wait_for(spawn_process(request)) == ExitStatus::exited(3));
        CHECK(std::filesystem::exists(file));
    }
    CHECK(std::filesystem::exists(other));
}
