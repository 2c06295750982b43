// SPDX-License-Identifier: MIT
// `tfslurm run` end to end on this machine: the real CLI in local mode (and a few single
// launchers started by hand), with the fake TensorFlow trainer and small /bin/sh trainers.
// Every test checks that no process carrying its marker survives. (Integration tests: the
// pure parts of local mode are tested in tests/unit/test_run_local.cpp.)
#include "process.hpp"
#include "temp_dir.hpp"

#include <tfslurm/env.hpp>
#include <tfslurm/error.hpp>
#include <tfslurm/held_port.hpp>
#include <tfslurm/launcher.hpp>
#include <tfslurm/launcher_shell.hpp>
#include <tfslurm/local_run.hpp>
#include <tfslurm/plan.hpp>
#include <tfslurm/run.hpp>
#include <tfslurm/spawn.hpp>

#include <catch2/catch.hpp>

#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

extern char** environ;

namespace {

const std::string k_cli = TFSLURM_CLI_PATH;
const std::string k_trainer = TFSLURM_TEST_TRAINER_PATH;

/// Job ids pick the derived port windows (derive_port_base(), a hash of job and step): two
/// tests that ctest runs at once must not share a port, and distinct ids alone do not promise
/// that (the ids of tests 3 and 6 used to share 26636-26639). Test N gets the N-th id of a
/// fixed sequence in which no two ids' windows overlap, for every window size a test uses (1
/// to 8 tasks per node, plus the control port), far from the ids other test files use.
std::uint64_t job_id(int test) {
    static const std::vector<std::uint64_t> k_ids = [] {
        constexpr std::size_t k_tests = 128;
        constexpr std::uint32_t k_max_stride = 9;
        std::vector<bool> taken(65536, false);
        std::vector<std::uint64_t> ids;
        for (std::uint64_t id = 880000; ids.size() < k_tests && id < 980000; ++id) {
            std::vector<std::uint32_t> ports;
            for (std::uint32_t stride = 2; stride <= k_max_stride; ++stride) {
                const std::uint32_t base = derive_port_base(id, 0, stride);
                for (std::uint32_t port = base; port < base + stride; ++port) {
                    ports.push_back(port);
                }
            }
            if (std::none_of(
                    ports.begin(), ports.end(), [&](std::uint32_t p) { return taken[p]; })) {
                for (const std::uint32_t port : ports) {
                    taken[port] = true;
                }
                ids.push_back(id);
            }
        }
        return ids;
    }();
    return k_ids.at(static_cast<std::size_t>(test));
}

using tfslurm::test::TempDir;

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::size_t count(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
        ++n;
    }
    return n;
}

/// Pids of live (non-zombie) processes whose environment holds `marker`.
std::vector<pid_t> marked_processes(const std::string& marker) {
    std::vector<pid_t> found;
    const std::string needle = "TEST_TFSLURM_MARKER=" + marker;
    DIR* proc = ::opendir("/proc");
    REQUIRE(proc != nullptr);
    while (const dirent* entry = ::readdir(proc)) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') {
            continue;
        }
        const std::string dir = std::string("/proc/") + entry->d_name;
        const std::string environment = read_file(dir + "/environ");
        if (environment.find(needle) == std::string::npos) {
            continue;
        }
        const std::string stat = read_file(dir + "/stat");
        const auto close = stat.rfind(')');
        if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') {
            continue;
        }
        found.push_back(static_cast<pid_t>(std::atoi(entry->d_name)));
    }
    ::closedir(proc);
    return found;
}

/// One run of the CLI: its own process group, output captured, a generous timeout.
class Cli {
  public:
    Cli(const std::vector<std::string>& args,
        const std::vector<std::pair<std::string, std::string>>& extra_env = {}) {
        static int counter = 0;
        m_marker = std::to_string(::getpid()) + "-" + std::to_string(++counter);
        m_output = m_dir.path + "/output";
        Environment env = Environment::from_envp(environ);
        const Environment inherited = env;
        for (const auto& [name, value] : inherited.vars()) {
            if (name.rfind("SLURM_", 0) == 0 || name.rfind("TFSLURM_", 0) == 0) {
                env.unset(name);
            }
        }
        env.set("TEST_TFSLURM_MARKER", m_marker);
        for (const auto& [name, value] : extra_env) {
            env.set(name, value);
        }
        std::vector<std::string> argv{k_cli};
        argv.insert(argv.end(), args.begin(), args.end());
        m_process.emplace(test::Command{argv, env.to_strings()}, m_output);
    }
    ~Cli() {
        m_process.reset(); // kills the process group unless the run was waited for
        // Clean up whatever a failed test left, so that other tests are not disturbed.
        for (const pid_t pid : marked_processes(m_marker)) {
            ::kill(pid, SIGKILL);
        }
    }
    Cli(const Cli&) = delete;
    Cli& operator=(const Cli&) = delete;

    /// Wait for the exit (at most `timeout`, then kill: a hang is a failure).
    int wait(std::chrono::seconds timeout = 30s) {
        auto status = m_process->wait_for(timeout);
        if (!status) {
            m_process->kill_group(SIGKILL);
            status = m_process->wait_for(timeout);
            FAIL("tfslurm run did not finish within " << timeout.count() << " s:\n" << output());
        }
        m_status = ExitStatus::from_wait_status(*status);
        return m_status->shell_status();
    }

    [[nodiscard]] std::string output() const { return read_file(m_output); }
    [[nodiscard]] pid_t pid() const noexcept { return m_process->pid(); }
    [[nodiscard]] const std::string& dir() const noexcept { return m_dir.path; }

    /// No process of this run is left (polling briefly: the kernel may still be tearing down).
    void check_nothing_left() const {
        std::vector<pid_t> left;
        for (int i = 0; i < 200; ++i) {
            left = marked_processes(m_marker);
            if (left.empty()) {
                break;
            }
            std::this_thread::sleep_for(10ms);
        }
        INFO(output());
        CHECK(left.empty());
    }

  private:
    TempDir m_dir;
    std::string m_marker;
    std::string m_output;
    std::optional<test::Process> m_process;
    std::optional<ExitStatus> m_status;
};

/// The pid a sh trainer of `rank` wrote to `<dir>/<name>.<rank>`.
pid_t read_pid(const std::string& dir, const std::string& name, int rank, const Cli& cli) {
    const std::string path = dir + "/" + name + "." + std::to_string(rank);
    for (int i = 0; i < 2000; ++i) {
        std::ifstream in(path);
        pid_t pid = 0;
        if (in >> pid && pid > 0) {
            return pid;
        }
        std::this_thread::sleep_for(5ms);
    }
    FAIL("no " << path << ":\n" << cli.output());
    return 0;
}

std::vector<std::string> local(int ntasks, int test, std::vector<std::string> rest) {
    std::vector<std::string> args{"run",
                                  "--local",
                                  std::to_string(ntasks),
                                  "--job-id",
                                  std::to_string(job_id(test)),
                                  "--heartbeat",
                                  "0.1",
                                  "--heartbeat-timeout",
                                  "2",
                                  "--grace",
                                  "2"};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
}

/// Shell code that sets `me` to the trainer's pid and `launcher` to its launcher's, as the host
/// sees them: the trainer runs under its launcher's keeper (tfslurm-keeper), or with --contain
/// in a PID namespace of its own ($$ is 2, $PPID 1) under the launcher's supervisors
/// (tfslurm-super, tfslurm-init); /proc is the host's.
const char* const k_find_launcher =
    "read -r me _ _ launcher _ < /proc/self/stat; "
    "while read -r _ name _ up _ < /proc/$launcher/stat && "
    "{ [ \"$name\" = '(tfslurm-init)' ] || [ \"$name\" = '(tfslurm-super)' ] || "
    "[ \"$name\" = '(tfslurm-keeper)' ]; }; "
    "do launcher=$up; done; ";

/// A sh trainer: ps sleep forever, workers sleep a little and exit 0; each writes its
/// launcher's pid (see k_find_launcher) to `<dir>/launcher.<rank>` first.
std::string sh_trainer(const std::string& dir, const std::string& worker_body = "sleep 0.2") {
    // A trainer inherits no socket of its launcher (the control connection, the coordinator).
    return std::string(k_find_launcher) +
           "ls -l /proc/$me/fd | grep -q socket: && echo INHERITED-SOCKET; "
           "echo $launcher > " +
           dir + "/launcher.$TFSLURM_RANK; echo $me > " + dir +
           "/trainer.$TFSLURM_RANK; if [ \"$TFSLURM_ROLE\" = ps ]; then exec sleep 1000; fi; " +
           worker_body;
}

} // namespace

TEST_CASE("run: local launchers get the CLI's options, without --local, and the command as given",
          "[run]") {
    // The trainer prints its arguments and its launcher's command line.
    Cli cli({"-v",
             "run",
             "--local",
             "1",
             "--job-id",
             std::to_string(job_id(30)),
             "--grace=3",
             "--no-chief",
             "--",
             "sh",
             "-c",
             std::string(k_find_launcher) +
                 R"(echo "args:$*"; tr '\0' ' ' < /proc/$launcher/cmdline; echo)",
             "sh",
             "--local",
             "2",
             "--job-id=1"});
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "args:--local 2 --job-id=1\n") == 1);
    CHECK(count(output, " --verbose=true run --chief=0 --grace=3 -- sh -c ") == 1);
    CHECK(count(output, "--job-id=" + std::to_string(job_id(30))) == 0);
    CHECK(count(output, "--local=1") == 0);
    cli.check_nothing_left();
}

TEST_CASE("run: options end at the trainer's command", "[run]") {
    const std::string id = std::to_string(job_id(31));
    SECTION("without '--'") {
        Cli cli(
            {"run", "--local", "1", "--job-id", id, "echo", "hello", "-v", "--rpc-layer", "grpc"});
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output, "hello -v --rpc-layer grpc\n") == 1);
        CHECK(count(output, "debug:") == 0); // -v went to the trainer
        cli.check_nothing_left();
    }
    SECTION("tfslurm's own options before the command, the trainer's after it") {
        Cli cli({"run",
                 "--local",
                 "2",
                 "--job-id",
                 id,
                 "--ps",
                 "1",
                 "sh",
                 "-c",
                 R"(echo "$TFSLURM_ROLE:$*")",
                 "sh",
                 "--ps",
                 "2",
                 "--",
                 "--local"});
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output, "ps:--ps 2 -- --local\n") == 1);
        CHECK(count(output, "worker:--ps 2 -- --local\n") == 1);
        cli.check_nothing_left();
    }
    SECTION("a command named like a tfslurm command is the trainer") {
        Cli cli({"run", "--local", "1", "--job-id", id, "env"});
        CHECK(cli.wait() == 0);
        CHECK(count(cli.output(), "\nTFSLURM_RANK=0\n") == 1);
        cli.check_nothing_left();
    }
    SECTION("'--' still ends the options") {
        Cli cli({"run", "--local", "1", "--job-id", id, "--", "echo", "--ps", "2"});
        CHECK(cli.wait() == 0);
        CHECK(count(cli.output(), "--ps 2\n") == 1);
        cli.check_nothing_left();
    }
}

TEST_CASE("run: --only and TFSLURM_ONLY select the variables given to the trainer", "[run]") {
    const std::string id = std::to_string(job_id(32));
    const std::string show = R"(echo "tf=${TF_CONFIG:+set} servers=${TFSLURM_SERVERS:+set} )"
                             R"(torch=${MASTER_ADDR:+set} rank=$TFSLURM_RANK")";
    SECTION("all by default") {
        Cli cli({"run", "--local", "1", "--job-id", id, "sh", "-c", show});
        CHECK(cli.wait() == 0);
        CHECK(count(cli.output(), "tf=set servers=set torch=set rank=0\n") == 1);
    }
    SECTION("--only tf") {
        Cli cli({"run", "--local", "1", "--job-id", id, "--only", "tf", "sh", "-c", show});
        CHECK(cli.wait() == 0);
        CHECK(count(cli.output(), "tf=set servers= torch= rank=0\n") == 1);
    }
    SECTION("TFSLURM_ONLY=torch,servers") {
        Cli cli({"run", "--local", "1", "--job-id", id, "sh", "-c", show},
                {{"TFSLURM_ONLY", "torch,servers"}});
        CHECK(cli.wait() == 0);
        CHECK(count(cli.output(), "tf= servers=set torch=set rank=0\n") == 1);
    }
    SECTION("a bad list") {
        Cli cli({"run", "--local", "1", "--job-id", id, "--only", "tf,nope", "true"});
        CHECK(cli.wait() == exit_status(Errc::invalid_argument));
        CHECK_THAT(cli.output(), Catch::StartsWith("tfslurm: error: --only: "));
    }
}

TEST_CASE("run: the exact output of a failing local job: one line, the culprit's status", "[run]") {
    const std::string script = "[ $TFSLURM_RANK = 2 ] && exit 5; exec sleep 1000";
    Cli cli(local(4, 33, {"--ps", "1", "sh", "-c", script}));
    CHECK(cli.wait() == 5);
    CHECK(cli.output() ==
          "tfslurm: error: aborting: rank 2 (worker:1) on localhost exited with status 5\n");
    cli.check_nothing_left();
}

TEST_CASE("run: ps that sleep forever are stopped once the workers exit 0", "[run]") {
    TempDir scratch;
    Cli cli(local(4, 1, {"--ps", "2", "--", "sh", "-c", sh_trainer(scratch.path)}));
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "the work is done: stopping the trainer") == 2);
    CHECK(count(output, "INHERITED-SOCKET") == 0);
    CHECK(count(output, "tfslurm: error") == 0);
    cli.check_nothing_left();
}

TEST_CASE("run: the fake TensorFlow job completes and its ps are stopped", "[run]") {
    Cli cli(local(5, 2, {"--ps", "2", "--", k_trainer, "--work-ms", "50"}));
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    // Every worker reached every ps through its TF_CONFIG address.
    CHECK(count(output, "exchanged with ps:") == 6);
    CHECK(count(output, "]: listening on 127.0.0.1:") == 5);
    CHECK(count(output, "exiting with status 0") == 3);
    CHECK(count(output, "tf_trainer[ps:0 rank=0]: received SIGTERM, exiting") == 1);
    CHECK(count(output, "tf_trainer[ps:1 rank=1]: received SIGTERM, exiting") == 1);
    cli.check_nothing_left();
}

TEST_CASE("run: --until chief stops workers that never exit when the chief is done", "[run]") {
    Cli cli(local(4,
                  3,
                  {"--ps",
                   "1",
                   "--chief",
                   "--until",
                   "chief",
                   "--",
                   k_trainer,
                   "--on",
                   "worker",
                   "--serve",
                   "--on",
                   "chief",
                   "--work-ms",
                   "200"}));
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "tf_trainer[worker:0 rank=2]: serving forever") == 1);
    CHECK(count(output, "tf_trainer[chief:0 rank=1]: exiting with status 0") == 1);
    CHECK(count(output, "received SIGTERM, exiting") == 3);
    cli.check_nothing_left();
}

TEST_CASE("run: a failing worker aborts every rank, the line saying why is printed once", "[run]") {
    SECTION("exit status 3") {
        // Rank 2 fails once every trainer runs (so that every launcher has one to stop).
        TempDir scratch;
        const std::string script =
            "touch " + scratch.path +
            "/started.$TFSLURM_RANK; [ $TFSLURM_RANK = 2 ] || exec sleep 1000; "
            "while [ $(ls " +
            scratch.path + " | grep -c started) -lt 4 ]; do sleep 0.01; done; exit 3";
        Cli cli({"-v",
                 "run",
                 "--local",
                 "4",
                 "--job-id",
                 std::to_string(job_id(5)),
                 "--heartbeat",
                 "0.1",
                 "--grace",
                 "2",
                 "--ps",
                 "1",
                 "--",
                 "sh",
                 "-c",
                 script});
        CHECK(cli.wait() == 3);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output,
                    "tfslurm: error: aborting: rank 2 (worker:1) on localhost exited with status "
                    "3\n") == 1);
        CHECK(count(output, "tfslurm: error:") == 1);
        // Every launcher exits with the failing rank's status (srun reports the highest).
        for (const int rank : {0, 1, 2, 3}) {
            CHECK(count(output,
                        "local: launcher of rank " + std::to_string(rank) +
                            " exited with status 3\n") == 1);
        }
        cli.check_nothing_left();
    }
    SECTION("killed by a signal") {
        Cli cli(local(3,
                      6,
                      {"--ps",
                       "1",
                       "--",
                       k_trainer,
                       "--work-ms",
                       "5000",
                       "--on",
                       "worker:0",
                       "--work-ms",
                       "0",
                       "--signal",
                       "9"}));
        CHECK(cli.wait() == 137);
        const auto output = cli.output();
        INFO(output);
        CHECK(
            count(output,
                  "tfslurm: error: aborting: rank 1 (worker:0) on localhost was killed by signal 9 "
                  "(Killed)\n") == 1);
        cli.check_nothing_left();
    }
    SECTION("a ps exiting non-zero") {
        // The workers wait before connecting, so the ps fails first.
        Cli cli(local(3,
                      7,
                      {"--ps",
                       "1",
                       "--",
                       k_trainer,
                       "--sleep-ms",
                       "3000",
                       "--on",
                       "ps",
                       "--sleep-ms",
                       "0",
                       "--exit-code",
                       "1"}));
        CHECK(cli.wait() == 1);
        CHECK(count(cli.output(), "aborting: rank 0 (ps:0) on localhost exited with status 1") ==
              1);
        cli.check_nothing_left();
    }
    SECTION("a trainer that cannot be started") {
        Cli cli(local(3, 8, {"--ps", "1", "--", "/nonexistent/trainer"}));
        CHECK(cli.wait() == 127);
        const auto output = cli.output();
        INFO(output);
        CHECK(
            count(
                output,
                "could not start its trainer: trainer: cannot execute (No such file or directory): "
                "\"/nonexistent/trainer\"") == 1);
        cli.check_nothing_left();
    }
}

TEST_CASE("run: a ps exiting 0 by itself is fine", "[run]") {
    Cli cli(local(
        3, 9, {"--ps", "1", "--", "sh", "-c", "[ $TFSLURM_ROLE = ps ] && exit 0; sleep 0.3"}));
    CHECK(cli.wait() == 0);
    CHECK(count(cli.output(), "tfslurm: error") == 0);
    cli.check_nothing_left();
}

TEST_CASE("run: SIGKILL, SIGTERM and signals sent to launchers", "[run]") {
    TempDir scratch;
    const std::string trainer =
        sh_trainer(scratch.path, "trap 'echo got USR1' USR1; sleep 1000 & wait; wait");
    SECTION("a launcher killed with SIGKILL is detected and the rest abort") {
        Cli cli(local(4, 11, {"--ps", "1", "--", "sh", "-c", trainer}));
        for (int rank = 0; rank < 4; ++rank) {
            (void)read_pid(scratch.path, "trainer", rank, cli); // everyone is running
        }
        const pid_t launcher = read_pid(scratch.path, "launcher", 2, cli);
        ::kill(launcher, SIGKILL);
        // As srun: a task killed by a signal makes the step's status 128 + signo.
        CHECK(cli.wait() == 137);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output,
                    "tfslurm: error: aborting: rank 2 (worker:1) on localhost launcher lost "
                    "(connection "
                    "closed)\n") == 1);
        cli.check_nothing_left();
    }
    SECTION("SIGTERM to one launcher stops the whole step") {
        Cli cli(local(4, 12, {"--ps", "1", "--", "sh", "-c", trainer}));
        for (int rank = 0; rank < 4; ++rank) {
            (void)read_pid(scratch.path, "trainer", rank, cli);
        }
        ::kill(read_pid(scratch.path, "launcher", 1, cli), SIGTERM);
        CHECK(cli.wait() == 143);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output,
                    "tfslurm: warning: stopping: rank 1 (worker:0) on localhost received signal 15 "
                    "(Terminated)\n") == 1);
        CHECK(count(output, "tfslurm: error") == 0);
        cli.check_nothing_left();
    }
    SECTION("SIGTERM to the local parent (like srun) stops the whole step") {
        Cli cli(local(3, 13, {"--ps", "1", "--", "sh", "-c", trainer}));
        for (int rank = 0; rank < 3; ++rank) {
            (void)read_pid(scratch.path, "trainer", rank, cli);
        }
        ::kill(cli.pid(), SIGTERM);
        CHECK(cli.wait() == 143);
        CHECK(count(cli.output(), "tfslurm: warning: stopping: rank ") == 1);
        cli.check_nothing_left();
    }
    SECTION("SIGUSR1 is forwarded to the trainer only") {
        Cli cli(local(
            2,
            14,
            {"--",
             "sh",
             "-c",
             sh_trainer(scratch.path, "trap 'echo got USR1; exit 0' USR1; sleep 1000 & wait")}));
        (void)read_pid(scratch.path, "trainer", 0, cli);
        (void)read_pid(scratch.path, "trainer", 1, cli);
        std::this_thread::sleep_for(100ms); // let the traps be installed
        ::kill(read_pid(scratch.path, "launcher", 0, cli), SIGUSR1);
        ::kill(read_pid(scratch.path, "launcher", 1, cli), SIGUSR1);
        CHECK(cli.wait() == 0);
        CHECK(count(cli.output(), "got USR1") == 2);
        cli.check_nothing_left();
    }
}

TEST_CASE("run: a trainer that ignores SIGTERM is killed after the grace period", "[run]") {
    SECTION("a ps stopped because the work is done: still a success") {
        Cli cli(local(
            3,
            15,
            {"--grace", "0.5", "--ps", "1", "--", k_trainer, "--on", "ps", "--ignore-sigterm"}));
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output, "tf_trainer[ps:0 rank=0]: received SIGTERM, ignoring it") == 1);
        CHECK(count(output,
                    "rank 0 (ps:0): the trainer did not stop within 0.5 s: killing it (SIGKILL)") ==
              1);
        cli.check_nothing_left();
    }
    SECTION("a worker stopped by an abort") {
        // worker:1 ignores SIGTERM (and so does its sleep); worker:0 fails once it is ready.
        TempDir scratch;
        const std::string ready = scratch.path + "/ready";
        const std::string script = "case $TFSLURM_ROLE:$TFSLURM_RANK in "
                                   "ps:*) exec sleep 1000 ;; "
                                   "worker:2) trap 'echo ignoring SIGTERM' TERM; touch " +
                                   ready +
                                   "; sleep 1000; sleep 1000 ;; "
                                   "*) while [ ! -f " +
                                   ready + " ]; do sleep 0.01; done; exit 2 ;; esac";
        Cli cli(local(3, 16, {"--grace", "0.5", "--ps", "1", "--", "sh", "-c", script}));
        CHECK(cli.wait() == 2);
        const auto output = cli.output();
        INFO(output);
        CHECK(
            count(
                output,
                "rank 2 (worker:1): the trainer did not stop within 0.5 s: killing it (SIGKILL)") ==
            1);
        CHECK(count(output, "aborting: rank 1 (worker:0) on localhost exited with status 2\n") ==
              1);
        cli.check_nothing_left();
    }
}

TEST_CASE("run: a trainer's grandchildren are killed too", "[run]") {
    Cli cli(local(
        3,
        17,
        {"--ps", "1", "--", k_trainer, "--grandchild", "--grandchild-setsid", "--work-ms", "100"}));
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "grandchild pid=") == 3);
    CHECK(count(output, "grandchild (new session) pid=") == 3);
    cli.check_nothing_left();
}

TEST_CASE("run: a trainer port already in use aborts the job with a clear message", "[run]") {
    // Hold rank 1's derived port (3 tasks on one node: stride 4; outside the ephemeral range,
    // so no outgoing connection of another test can hold it by chance). If some other process
    // uses that window, try another job id.
    int fd = -1;
    std::uint64_t job = 0;
    int port = 0;
    for (std::uint64_t attempt = 0; attempt < 20 && fd < 0; ++attempt) {
        job = job_id(18) + attempt * 1000;
        const auto base = derive_port_base(job, 0, 4);
        port = base + 1;
        if (!port_is_free(base) || !port_is_free(static_cast<std::uint16_t>(base + 2)) ||
            !port_is_free(static_cast<std::uint16_t>(base + 3))) {
            continue;
        }
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(static_cast<std::uint16_t>(port));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(fd, 1) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    REQUIRE(fd >= 0);
    std::vector<std::string> args{
        "run", "--local", "3", "--job-id", std::to_string(job), "--ps", "1", "--", "sleep", "1000"};
    Cli cli(args);
    CHECK(cli.wait() == exit_status(Errc::io));
    ::close(fd);
    const auto output = cli.output();
    INFO(output);
    CHECK(output == "tfslurm: error: aborting: rank 1 (worker:0) on localhost could not start its "
                    "trainer: trainer: port " +
                        std::to_string(port) +
                        " is already in use on localhost: another process holds it; choose other "
                        "ports with --port-base, or let Slurm reserve them with srun --resv-ports "
                        "(MpiParams=ports=... in slurm.conf)\n");
    cli.check_nothing_left();
}

namespace {

/// The environment of task `rank` of a 2-task step run by hand (no --local).
std::vector<std::pair<std::string, std::string>>
task_env(int rank, int test, const std::string& secret) {
    std::vector<std::pair<std::string, std::string>> env;
    const Environment task =
        local_task_environment(Environment{}, 2, static_cast<std::uint32_t>(rank), job_id(test));
    for (const auto& [name, value] : task.vars()) {
        env.emplace_back(name, value);
    }
    env.emplace_back("TFSLURM_SECRET", secret);
    env.emplace_back("TFSLURM_AUTH", "secret");
    return env;
}

const std::string k_secret_a(64, 'a');
const std::string k_secret_b(64, 'b');

} // namespace

TEST_CASE("run: ranks that never register abort the step", "[run]") {
    Cli rank0({"run", "--connect-timeout", "1", "--grace", "1", "--ps", "1", "--", "sleep", "1000"},
              task_env(0, 19, k_secret_a));
    CHECK(rank0.wait() == k_status_unregistered);
    CHECK(rank0.output() ==
          "tfslurm: error: aborting: rank 1 (worker:0) on localhost did not register within 1 s\n");
    rank0.check_nothing_left();
}

TEST_CASE("run: after an abort a launcher waits before exiting so that srun forwards its line",
          "[run]") {
    Cli rank0(
        {"-v", "run", "--connect-timeout", "1", "--grace", "1", "--ps", "1", "--", "sleep", "1000"},
        task_env(0, 23, k_secret_a));
    CHECK(rank0.wait() == k_status_unregistered);
    const std::string output = rank0.output();
    INFO(output);
    const std::string line =
        "tfslurm: error: aborting: rank 1 (worker:0) on localhost did not register within 1 s\n"
        "tfslurm: debug: waiting 200 ms before exiting so that srun forwards the line above\n";
    CHECK(output.size() >= line.size());
    CHECK(output.substr(output.size() - std::min(output.size(), line.size())) == line);
    rank0.check_nothing_left();
}

TEST_CASE("run: a launcher with the wrong secret is rejected and does not disturb the step",
          "[run]") {
    Cli rank0({"run", "--heartbeat", "0.1", "--ps", "1", "--", "sleep", "1000"},
              task_env(0, 20, k_secret_a));
    // The reject is unproven: the intruder keeps looking until its connect timeout, then names
    // it (once as a warning, once as its error).
    Cli intruder({"run", "--ps", "1", "--connect-timeout", "1", "--", "sleep", "1000"},
                 task_env(1, 20, k_secret_b));
    CHECK(intruder.wait() == exit_status(Errc::auth));
    CHECK(count(intruder.output(), "rejected rank 1 (worker:0): bad secret proof") == 2);
    CHECK_THAT(intruder.output(),
               Catch::Contains("tfslurm: error: coordinator: rank 0's relay /tmp/tfslurm-"));
    CHECK_THAT(intruder.output(),
               Catch::Contains(".sock rejected rank 1 (worker:0): bad secret proof\n"
                               "tfslurm: hint: every task must run 'tfslurm run' with the same "
                               "options, the same TFSLURM_SECRET and as the same user\n"));
    Cli rank1({"run", "--heartbeat", "0.1", "--ps", "1", "--", "sh", "-c", "sleep 0.2"},
              task_env(1, 20, k_secret_a));
    CHECK(rank1.wait() == 0);
    CHECK(rank0.wait() == 0);
    INFO(rank0.output());
    // Both ranks run on one node: rank 0's relay (the tree) checks rank 1's proof.
    CHECK_THAT(rank0.output(), Catch::Contains("relay: rejected rank 1 (pid "));
    CHECK_THAT(rank0.output(), Catch::Contains("): bad secret proof"));
    rank0.check_nothing_left();
    rank1.check_nothing_left();
}

TEST_CASE("run: the README demo job (examples/trainer.sh)", "[run]") {
    const std::string trainer = std::string(TFSLURM_EXAMPLES_DIR) + "/trainer.sh";
    SECTION("the ps is stopped when the workers are done") {
        Cli cli(local(4, 21, {"--ps", "1", "--", trainer}), {{"DEMO_STEPS", "1"}});
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output, "] done\n") == 3);
        CHECK(count(output, "[ps rank 0] SIGTERM: saving state and shutting down") == 1);
        cli.check_nothing_left();
    }
    SECTION("a crashing worker stops everything") {
        Cli cli(local(4, 22, {"--ps", "1", "--", trainer}),
                {{"DEMO_STEPS", "3"}, {"DEMO_FAIL_RANK", "2"}});
        CHECK(cli.wait() == 3);
        CHECK(count(cli.output(),
                    "tfslurm: error: aborting: rank 2 (worker:1) on localhost exited with status "
                    "3\n") == 1);
        cli.check_nothing_left();
    }
}

TEST_CASE("run: a wrapper script's child gets the grace period too", "[run]") {
    // `tfslurm run -- sh -c '...'` without exec: when the ps is stopped, the wrapper sh dies at
    // once of SIGTERM while its child takes 0.5 s to "checkpoint"; the child must not be killed
    // when the wrapper dies, only when the grace runs out.
    TempDir scratch;
    const std::string ready = scratch.path + "/ready";
    const std::string ps = "sh -c 'trap \"sleep 0.5; echo checkpointed; exit 0\" TERM; touch " +
                           ready + "; sleep 1000 & wait'; echo wrapper-after";
    const std::string script = "if [ \"$TFSLURM_ROLE\" = ps ]; then " + ps +
                               "; else while [ ! -f " + ready + " ]; do sleep 0.01; done; fi";
    Cli cli(local(2, 34, {"--grace", "5", "--ps", "1", "--", "sh", "-c", script}));
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "checkpointed\n") == 1);
    CHECK(count(output, "wrapper-after") == 0);
    CHECK(count(output, "killing it (SIGKILL)") == 0);
    cli.check_nothing_left();
}

TEST_CASE("run: --tf-config-file gives Python trainers TF_CONFIG and leaves nothing behind",
          "[run]") {
    const std::string id = std::to_string(job_id(41));
    const TempDir tmp{"tfconfig-run"};
    // The trainer: Debian's Python, TF_CONFIG as the shim set it, and whether the file exists.
    const std::string show = "import json, os\n"
                             "c = json.loads(os.environ['TF_CONFIG'])\n"
                             "f = os.environ['TFSLURM_TF_CONFIG_FILE']\n"
                             // One write per line: two trainers share the output pipe.
                             "line = ' '.join(str(x) for x in ('rank', os.environ['TFSLURM_RANK'], "
                             "'task', c['task']['type'], c['task']['index'], 'workers', "
                             "len(c['cluster']['worker']), 'file', os.path.basename(f), "
                             "os.path.exists(f)))\n"
                             "os.write(1, (line + '\\n').encode())\n";
    Cli cli({"run",
             "--local",
             "2",
             "--job-id",
             id,
             "--tf-config-file",
             "auto",
             "/usr/bin/python3",
             "-c",
             show},
            {{"TMPDIR", tmp.path}});
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(output,
                    "rank " + rank + " task worker " + rank + " workers 2 file tfslurm-" + id +
                        ".0." + rank + ".tf_config.json True\n") == 1);
    }
    CHECK(count(output, "tfslurm: error") == 0);
    // Nothing left: the launchers removed the files and the shims (with Python's cache).
    CHECK(std::distance(std::filesystem::directory_iterator{tmp.path},
                        std::filesystem::directory_iterator{}) == 0);
    cli.check_nothing_left();
}

TEST_CASE("run: a stuck trainer is named and the step aborts with status 9", "[run][stall]") {
    // Rank 0 (a ps) shows progress (CPU time and its progress file) and says what it was given;
    // rank 1 sleeps without a sound: stuck after 1 s, its sleep ended by the stall signal.
    const std::string script = "if [ $TFSLURM_RANK = 1 ]; then exec sleep 1000; fi; "
                               "echo \"faulthandler=$PYTHONFAULTHANDLER file=$(test -f "
                               "\"$TFSLURM_PROGRESS_FILE\" && echo yes)\"; "
                               "while :; do touch \"$TFSLURM_PROGRESS_FILE\"; sleep 0.1; done";
    Cli cli(local(
        2,
        44,
        {"--ps", "1", "--stall-timeout", "1", "--stall-grace", "0.5", "--", "sh", "-c", script}));
    CHECK(cli.wait() == k_status_stalled);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "faulthandler=1 file=yes\n") == 1);
    CHECK(count(output,
                "rank 1 (worker:0): no progress for 1 s: the trainer is stuck; asking for "
                "its stack traces (signal 6 (Aborted)), aborting the step 0.5 s later") == 1);
    CHECK(count(output,
                "tfslurm: error: aborting: rank 1 (worker:0) on localhost is stuck: no progress "
                "for 1 s\n") == 1);
    CHECK(count(output, "tfslurm: error") == 1);
    cli.check_nothing_left();
}

TEST_CASE("run: an idle ps is not judged by --stall-timeout unless --stall-roles names it",
          "[run][stall]") {
    // Rank 0, a ps, sits idle (no CPU time, no progress file) like one between requests; rank
    // 1, a worker, touches its progress file every 0.1 s: for 4 s, or for ever.
    const auto script = [](const std::string& worker_loop) {
        return "if [ $TFSLURM_RANK = 0 ]; then exec sleep 1000; fi; " + worker_loop;
    };
    SECTION("by default the ps is left alone and the worker's end ends the step") {
        Cli cli(local(2,
                      80,
                      {"--ps",
                       "1",
                       "--stall-timeout",
                       "2",
                       "--",
                       "sh",
                       "-c",
                       script("i=0; while [ $i -lt 40 ]; do touch \"$TFSLURM_PROGRESS_FILE\"; "
                              "sleep 0.1; i=$((i+1)); done")}));
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output, "stuck") == 0);
        CHECK(count(output, "tfslurm: error") == 0);
        cli.check_nothing_left();
    }
    SECTION("--stall-roles all judges the ps too") {
        Cli cli(local(2,
                      81,
                      {"--ps",
                       "1",
                       "--stall-timeout",
                       "2",
                       "--stall-grace",
                       "0.5",
                       "--stall-roles",
                       "all",
                       "--",
                       "sh",
                       "-c",
                       script("while :; do touch \"$TFSLURM_PROGRESS_FILE\"; sleep 0.1; done")}));
        CHECK(cli.wait() == k_status_stalled);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output,
                    "tfslurm: error: aborting: rank 0 (ps:0) on localhost is stuck: no progress "
                    "for 2 s\n") == 1);
        cli.check_nothing_left();
    }
}

TEST_CASE("run: --stall-roles takes roles or all", "[run][stall]") {
    Cli cli({"run", "--local", "1", "--stall-roles", "worker,boss", "--", "true"});
    CHECK(cli.wait() == exit_status(Errc::invalid_argument));
    CHECK(cli.output() == "tfslurm: error: --stall-roles: expected a role: ps, worker, chief or "
                          "evaluator: \"boss\"\n");
}

TEST_CASE("run: --stall-progress takes cpu, file, output or all", "[run][stall]") {
    const std::string value = GENERATE(as<std::string>{}, "cpu,disk", "output,", "all,cpu");
    Cli cli({"run", "--local", "1", "--stall-progress", value, "--", "true"});
    CHECK(cli.wait() == exit_status(Errc::invalid_argument));
    CHECK(cli.output() == "tfslurm: error: --stall-progress: expected a comma list of cpu, file "
                          "and output, or all: \"" +
                              value + "\"\ntfslurm: hint: e.g. cpu,file,output\n");
}

TEST_CASE("run: --output and --error give each rank's trainer files of its own", "[run][output]") {
    TempDir dir;
    const std::string script = R"(echo "out $TFSLURM_RANK"; echo "err $TFSLURM_RANK" >&2)";
    SECTION("stdout and stderr to one file per rank, by pattern") {
        Cli cli(
            local(2, 82, {"--output", dir.path + "/%j.%s-%R%i-%2r.log", "--", "sh", "-c", script}));
        CHECK(cli.wait() == 0);
        const std::string id = std::to_string(job_id(82));
        for (const std::string rank : {"0", "1"}) {
            std::ifstream in(dir.path + "/" + id + ".0-worker" + rank + "-0" + rank + ".log");
            const std::string text{std::istreambuf_iterator<char>{in},
                                   std::istreambuf_iterator<char>{}};
            CHECK(text == "out " + rank + "\nerr " + rank + "\n");
        }
        CHECK(count(cli.output(), "out ") == 0); // nothing of the trainers' on ours
        cli.check_nothing_left();
    }
    SECTION("--error apart, labelled with --label") {
        Cli cli(local(1,
                      83,
                      {"--label",
                       "--output",
                       dir.path + "/%r.out",
                       "--error",
                       dir.path + "/%r.err",
                       "--",
                       "sh",
                       "-c",
                       script}));
        CHECK(cli.wait() == 0);
        std::ifstream out(dir.path + "/0.out");
        std::ifstream err(dir.path + "/0.err");
        CHECK(std::string{std::istreambuf_iterator<char>{out}, std::istreambuf_iterator<char>{}} ==
              "0: out 0\n");
        CHECK(std::string{std::istreambuf_iterator<char>{err}, std::istreambuf_iterator<char>{}} ==
              "0: err 0\n");
    }
    SECTION("a pattern two ranks would share is refused before anything starts") {
        Cli cli(local(2, 49, {"--output", dir.path + "/all.log", "--", "sh", "-c", script}));
        CHECK(cli.wait() == exit_status(Errc::invalid_argument));
        CHECK(cli.output() == "tfslurm: error: --output: every rank would write the same file (put "
                              "%r, or %R and %i, in the name): \"" +
                                  dir.path + "/all.log\"\n");
    }
    SECTION("a file that cannot be opened fails the trainer's start, naming it as typed") {
        // The error crosses the wire (rank 0's exit report, then the abort) with its setting
        // reference intact: the CLI names the option, or the variable it came from.
        Cli cli(local(1, 50, {"--output", dir.path + "/missing/%r.log", "--", "true"}));
        CHECK(cli.wait() == exit_status(Errc::io));
        CHECK(cli.output() == "tfslurm: error: aborting: rank 0 (worker:0) on localhost could not "
                              "start its trainer: --output: cannot open \"" +
                                  dir.path + "/missing/0.log\": No such file or directory\n");
        Cli variable(local(2, 90, {"--", "true"}),
                     {{"TFSLURM_OUTPUT", dir.path + "/missing/%r.log"}});
        CHECK(variable.wait() == exit_status(Errc::io));
        const std::string output = variable.output();
        INFO(output);
        CHECK(count(output, "tfslurm: error: aborting: rank ") == 1);
        CHECK(count(output,
                    " could not start its trainer: TFSLURM_OUTPUT: cannot open \"" + dir.path +
                        "/missing/") == 1);
        variable.check_nothing_left();
    }
}

TEST_CASE("run: --stall-signal takes a signal name or number", "[run][stall]") {
    Cli cli({"run", "--local", "1", "--stall-signal", "BOGUS", "--", "true"});
    CHECK(cli.wait() == exit_status(Errc::invalid_argument));
    CHECK(cli.output() == "tfslurm: error: --stall-signal: expected a signal name or number: "
                          "\"BOGUS\"\ntfslurm: hint: e.g. ABRT, USR1 or 10\n");
}

TEST_CASE("run: --iface exchanges the chosen addresses through the coordinator", "[run]") {
    const std::string id = std::to_string(job_id(42));
    const std::string show = R"(echo "cfg $TFSLURM_RANK $TF_CONFIG $NCCL_SOCKET_IFNAME")";
    Cli cli({"run",
             "--local",
             "2",
             "--job-id",
             id,
             "--iface",
             "lo",
             "--port-base",
             "24400",
             "sh",
             "-c",
             show});
    CHECK(cli.wait() == 0);
    const std::string cluster = R"({"cluster":{"worker":["127.0.0.1:24400","127.0.0.1:24401"]},)";
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(cli.output(),
                    "cfg " + rank + " " + cluster + R"("task":{"type":"worker","index":)" + rank +
                        "}} lo\n") == 1);
    }
    Cli missing({"run", "--local", "1", "--job-id", id, "--iface", "nosuch0", "true"});
    CHECK(missing.wait() == exit_status(Errc::invalid_argument));
    CHECK_THAT(missing.output(),
               Catch::StartsWith("tfslurm: error: --iface: node ") &&
                   Catch::Contains(" has no address on nosuch0 (its interfaces: lo 127.0.0.1"));
}

TEST_CASE("run: exact mode moves a rank whose port is held, and says when none is free", "[run]") {
    // Ten free ports; rank 1's planned port (base + 1) held on loopback. The control port is
    // base + 2, never a trainer's: rank 1 binds base + 3.
    int fd = -1;
    std::uint16_t base = 0;
    for (std::uint16_t first = 24500; first < 25500 && fd < 0; first += 10) {
        bool free = true;
        for (std::uint16_t port = first; port < first + 10; ++port) {
            free = free && port_is_free(port);
        }
        if (!free) {
            continue;
        }
        fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_port = htons(static_cast<std::uint16_t>(first + 1));
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
            ::listen(fd, 1) != 0) {
            ::close(fd);
            fd = -1;
        } else {
            base = first;
        }
    }
    REQUIRE(fd >= 0);
    const auto port = [base](int offset) { return std::to_string(base + offset); };
    const std::string id = std::to_string(job_id(73));
    Cli moved({"run",
               "--local",
               "2",
               "--job-id",
               id,
               "--iface",
               "lo",
               "--port-base",
               port(0),
               "--port-range",
               port(0) + "-" + port(9),
               "sh",
               "-c",
               R"(echo "cfg $TFSLURM_RANK $TF_CONFIG")"});
    CHECK(moved.wait() == 0);
    const std::string cluster =
        R"({"cluster":{"worker":["127.0.0.1:)" + port(0) + R"(","127.0.0.1:)" + port(3) + R"("]},)";
    for (const std::string rank : {"0", "1"}) {
        INFO(moved.output());
        CHECK(count(moved.output(),
                    "cfg " + rank + " " + cluster + R"("task":{"type":"worker","index":)" + rank +
                        "}}\n") == 1);
    }
    Cli none({"run",
              "--local",
              "2",
              "--job-id",
              id,
              "--iface",
              "lo",
              "--port-base",
              port(0),
              "--port-range",
              port(1) + "-" + port(1),
              "--",
              "sleep",
              "1000"});
    CHECK(none.wait() == exit_status(Errc::io));
    ::close(fd);
    CHECK(none.output() == "tfslurm: error: aborting: rank 1 (worker:1) on localhost could not "
                           "start its trainer: trainer: no free port on localhost in " +
                               port(1) + "-" + port(1) +
                               " (--port-range): other processes hold every one\n");
    none.check_nothing_left();
}

TEST_CASE("run: --iface with --tf-config-file writes the file from the exchanged addresses",
          "[run]") {
    const std::string id = std::to_string(job_id(43));
    const TempDir tmp{"tfconfig-iface"};
    const std::string show = "import json, os\n"
                             "c = json.loads(os.environ['TF_CONFIG'])\n"
                             // One write per line: two trainers share the output pipe.
                             "os.write(1, ('rank ' + os.environ['TFSLURM_RANK'] + ' ' + ' '.join("
                             "c['cluster']['worker']) + ' ' + os.environ['NCCL_SOCKET_IFNAME'] + "
                             "'\\n').encode())\n";
    Cli cli({"run",
             "--local",
             "2",
             "--job-id",
             id,
             "--iface",
             "lo",
             "--port-base",
             "24410",
             "--tf-config-file",
             "auto",
             "/usr/bin/python3",
             "-c",
             show},
            {{"TMPDIR", tmp.path}});
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(output, "rank " + rank + " 127.0.0.1:24410 127.0.0.1:24411 lo\n") == 1);
    }
    CHECK(count(output, "tfslurm: error") == 0);
    CHECK(std::distance(std::filesystem::directory_iterator{tmp.path},
                        std::filesystem::directory_iterator{}) == 0);
    cli.check_nothing_left();
}

TEST_CASE("run: --local restarts a failed worker with the same environment", "[run][restart]") {
    // Rank 1 (worker:0) fails its first run; its second run sees the restart count.
    TempDir scratch;
    const std::string script =
        "echo \"rank $TFSLURM_RANK run $TFSLURM_RESTART_COUNT \"; "
        "if [ $TFSLURM_RANK = 1 ] && [ ! -e " +
        scratch.path + "/ran ]; then touch " + scratch.path +
        "/ran; exit 3; fi; if [ $TFSLURM_ROLE = ps ]; then exec sleep 1000; fi";
    SECTION("within the budget: the step succeeds") {
        Cli cli(local(3, 70, {"--ps", "1", "--max-restarts", "1", "--", "sh", "-c", script}));
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output,
                    "tfslurm: warning: restarting rank 1 (worker:0) on localhost (restart 1 of "
                    "1): exited with status 3\n") == 1);
        CHECK(count(output, "rank 1 run 0 ") == 1);
        CHECK(count(output, "rank 1 run 1 ") == 1);
        CHECK(count(output, "rank 0 run 0 ") == 1); // the ps kept running
        CHECK(count(output, "tfslurm: error") == 0);
        cli.check_nothing_left();
    }
    SECTION("--restart-delay: the restart waits that long") {
        Cli cli(local(3,
                      74,
                      {"--ps",
                       "1",
                       "--max-restarts",
                       "1",
                       "--restart-delay",
                       "0.2",
                       "--",
                       "sh",
                       "-c",
                       script}),
                {{"TFSLURM_LOG_LEVEL", "debug"}});
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output,
                    "tfslurm: debug: rank 1 (worker:0): restarting the trainer (restart 1 of 1) "
                    "in 0.2 s\n") == 1);
        CHECK(count(output, "rank 1 run 1 ") == 1);
        cli.check_nothing_left();
    }
    SECTION("restarts off (the default): the step aborts") {
        Cli cli(local(3, 71, {"--ps", "1", "--", "sh", "-c", script}));
        CHECK(cli.wait() == 3);
        CHECK(count(cli.output(),
                    "tfslurm: error: aborting: rank 1 (worker:0) on localhost exited with status "
                    "3\n") == 1);
        CHECK(count(cli.output(), "restarting") == 0);
        cli.check_nothing_left();
    }
}

TEST_CASE("run: restart settings are checked", "[run][restart]") {
    using Row = std::tuple<std::vector<std::string>, std::string>;
    const auto [args, message] = GENERATE(table<std::vector<std::string>, std::string>({
        Row{{"--max-restarts", "-1"},
            "tfslurm: error: --max-restarts: expected an integer from 0 to 10000: \"-1\"\n"},
        Row{{"--max-total-restarts", "x"},
            "tfslurm: error: --max-total-restarts: expected an integer from 0 to 10000: \"x\"\n"},
        Row{{"--restart-delay", "0"},
            "tfslurm: error: --restart-delay: expected a number of seconds from 0.001 to 86400: "
            "\"0\"\ntfslurm: hint: e.g. 10 or 0.5\n"},
        Row{{"--restart-roles", "worker,ps"},
            "tfslurm: error: --restart-roles: a parameter server cannot be restarted: "
            "\"worker,ps\"\ntfslurm: hint: its state (the model's variables) is gone when it "
            "fails: the step aborts\n"},
    }));
    std::vector<std::string> argv{"run", "--local", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), {"--", "true"});
    Cli cli(argv);
    CHECK(cli.wait() == exit_status(Errc::invalid_argument));
    CHECK(cli.output() == message);
}

// --- checkpoint and requeue ----------------------------------------------------------------------

namespace {

/// SLURM_JOB_END_TIME `seconds` from now.
std::pair<std::string, std::string> job_ends_in(int seconds) {
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    return {
        "SLURM_JOB_END_TIME",
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count() + seconds)};
}

} // namespace

TEST_CASE("run: the checkpoint signal reaches every trainer ahead of the job's end, status 10",
          "[run][checkpoint]") {
    // The contract: the handler sets a flag, the saving happens outside it.
    const std::string script = "saved=0; trap 'saved=1' USR1; "
                               "while [ $saved = 0 ]; do sleep 0.05; done; "
                               "echo \"rank $TFSLURM_RANK saved\"";
    // --requeue without a Slurm job is ignored: the step still says it was checkpointed.
    // The signal comes 1 to 2 s after the start (the end time is in whole seconds): the trap is
    // set by then.
    Cli cli(local(2, 45, {"--checkpoint-before", "2", "--requeue", "--", "sh", "-c", script}),
            {job_ends_in(4)});
    CHECK(cli.wait() == k_status_checkpointed);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "rank 0 saved\n") == 1);
    CHECK(count(output, "rank 1 saved\n") == 1);
    CHECK(count(output,
                "tfslurm: warning: checkpointed: the trainers got signal 10 (User defined signal "
                "1) before the job's time limit (--checkpoint-before 2)\n") == 1);
    CHECK(count(output, "tfslurm: warning") == 1);
    cli.check_nothing_left();
}

TEST_CASE("run: a trainer that starts after the checkpoint moment gets no signal",
          "[run][checkpoint]") {
    // USR1 at its start would kill it (its default action) and fail the step.
    Cli cli(local(1, 48, {"--checkpoint-before", "50", "--", "sh", "-c", "sleep 0.5; echo done"}),
            {job_ends_in(30)});
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    CHECK(count(output, "done\n") == 1);
    // However slow the machine, the job ends in under 50 s (30 s after the test started).
    CHECK_THAT(output,
               Catch::Matches("tfslurm: warning: rank 0 \\(worker:0\\): the job ends in "
                              "[1-4]?[0-9](\\.[0-9]+)? s, sooner than --checkpoint-before 50 "
                              "after the trainer started: no checkpoint signal\n"
                              "done\n"));
    cli.check_nothing_left();
}

TEST_CASE("run: --checkpoint-signal picks the signal, and without an end time there is none",
          "[run][checkpoint]") {
    const std::string script = "trap 'echo \"rank $TFSLURM_RANK got USR2\"; exit 0' USR2; "
                               "while :; do sleep 0.05; done";
    Cli cli(local(1,
                  46,
                  {"--checkpoint-before",
                   "58",
                   "--checkpoint-signal",
                   "SIGUSR2",
                   "--",
                   "sh",
                   "-c",
                   script}),
            {job_ends_in(60)});
    CHECK(cli.wait() == k_status_checkpointed);
    CHECK(count(cli.output(), "rank 0 got USR2\n") == 1);
    // No SLURM_JOB_END_TIME under --local: a warning, and the step runs as without the option.
    Cli unknown(local(1, 47, {"--checkpoint-before", "10", "--", "true"}));
    CHECK(unknown.wait() == 0);
    CHECK(count(unknown.output(),
                "tfslurm: warning: --checkpoint-before: cannot read the job's end time: not in a "
                "Slurm job and SLURM_JOB_END_TIME is not set; no checkpoint signal\n") == 1);
    CHECK(count(unknown.output(), "tfslurm: warning") == 1);
}

TEST_CASE("run: the checkpoint and requeue options are checked", "[run][checkpoint]") {
    const auto error = [](std::vector<std::string> args,
                          const std::vector<std::pair<std::string, std::string>>& env = {}) {
        std::vector<std::string> argv{"run", "--local", "1"};
        argv.insert(argv.end(), args.begin(), args.end());
        argv.insert(argv.end(), {"--", "true"});
        Cli cli(argv, env);
        CHECK(cli.wait() == exit_status(Errc::invalid_argument));
        return cli.output();
    };
    CHECK(error({"--checkpoint-before", "0"}) ==
          "tfslurm: error: --checkpoint-before: expected a number of seconds from 0.001 to "
          "86400: \"0\"\ntfslurm: hint: e.g. 10 or 0.5\n");
    // Less than a millisecond would be a 0 ms timer: a heartbeat of 0 ms spun forever.
    CHECK(error({"--heartbeat", "0.0001"}) ==
          "tfslurm: error: --heartbeat: expected a number of seconds from 0.001 to 86400: "
          "\"0.0001\"\ntfslurm: hint: e.g. 10 or 0.5\n");
    CHECK(error({"--checkpoint-signal", "BOGUS"}) ==
          "tfslurm: error: --checkpoint-signal: expected a signal name or number: "
          "\"BOGUS\"\ntfslurm: hint: e.g. ABRT, USR1 or 10\n");
    CHECK(error({"--max-requeues", "-1"}) ==
          "tfslurm: error: --max-requeues: expected an integer from 0 to 1000: \"-1\"\n");
    CHECK(error({}, {{"TFSLURM_REQUEUE", "maybe"}}) ==
          "tfslurm: error: TFSLURM_REQUEUE: expected yes/no, true/false, on/off or 1/0: "
          "\"maybe\"\n");
    CHECK(error({"--checkpoint-before", "1"}, {{"SLURM_JOB_END_TIME", "soon"}}) ==
          "tfslurm: error: SLURM_JOB_END_TIME: expected an integer from 0 to "
          "9223372036854775807: \"soon\"\n");
}

TEST_CASE("run: --probe starts the trainers once every peer is reachable, else names the pair",
          "[run][probe]") {
    const std::string id = std::to_string(job_id(72));
    const std::string show = R"(echo "started $TFSLURM_RANK")";
    // Each trainer prints, then waits until all 3 have printed: the workers' exit stops the ps,
    // which must not happen before it printed (a loaded machine may start it late).
    const TempDir barrier;
    const std::string show_all = show + "; touch " + barrier.path + "/$TFSLURM_RANK; while [ " +
                                 "$(ls " + barrier.path + " | wc -l) -lt 3 ]; do sleep 0.05; done";
    // Exact mode (--iface lo): each launcher listens on the port it holds.
    Cli reachable({"run",
                   "--local",
                   "3",
                   "--job-id",
                   id,
                   "--ps",
                   "1",
                   "--iface",
                   "lo",
                   "--port-base",
                   "24700",
                   "--probe",
                   "sh",
                   "-c",
                   show_all});
    CHECK(reachable.wait() == 0);
    for (const std::string rank : {"0", "1", "2"}) {
        CHECK(count(reachable.output(), "started " + rank + "\n") == 1);
    }
    reachable.check_nothing_left();

    // Rank 1's port is bound by another process, not listening: nothing answers there, and
    // its own launcher cannot listen on it. Ranks 0 and 2 cannot reach rank 1 (two votes).
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(24711);
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    Cli cut({"run",
             "--local",
             "3",
             "--job-id",
             id,
             "--ps",
             "1",
             "--port-base",
             "24710",
             "--probe",
             "--probe-timeout",
             "1",
             "sh",
             "-c",
             show});
    CHECK(cut.wait() == 12);
    ::close(fd);
    CHECK(cut.output() == "tfslurm: error: aborting: rank 0 (ps:0) on localhost cannot reach "
                          "rank 1 (worker:0) at localhost:24711: Connection refused\n");
    cut.check_nothing_left();

    Cli bad({"run", "--local", "1", "--probe-timeout", "0", "true"});
    CHECK(bad.wait() == exit_status(Errc::invalid_argument));
    CHECK_THAT(bad.output(),
               Catch::StartsWith("tfslurm: error: --probe-timeout: expected a "
                                 "number of seconds from 0.001 to 86400: \"0\""));
}

TEST_CASE("run: trainers keep their real pids, --contain gives each a PID namespace",
          "[run][contain]") {
    // Each trainer writes $$ (its pid as it sees it) and its host pid (/proc/self/stat).
    const std::string script = "read -r host _ < /proc/self/stat; echo \"rank $TFSLURM_RANK pid "
                               "$$ host $host\"";
    SECTION("by default (the keeper): distinct, real pids") {
        Cli cli(local(2, 86, {"--", "sh", "-c", script}));
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        std::vector<std::pair<long, long>> pids;
        std::istringstream lines(output);
        std::string line;
        while (std::getline(lines, line)) {
            if (line.rfind("rank ", 0) != 0) {
                continue; // not the trainer's
            }
            long rank = 0;
            long pid = 0;
            long host = 0;
            REQUIRE(std::sscanf(line.c_str(), "rank %ld pid %ld host %ld", &rank, &pid, &host) ==
                    3);
            pids.emplace_back(pid, host);
        }
        REQUIRE(pids.size() == 2);
        CHECK(pids[0].first == pids[0].second);
        CHECK(pids[1].first == pids[1].second);
        CHECK(pids[0].first != pids[1].first);
        cli.check_nothing_left();
    }
    SECTION("--contain: pid 2 in a namespace of its own, the host's pid differs") {
        Cli cli(local(2, 75, {"--contain", "--", "sh", "-c", script}));
        CHECK(cli.wait() == 0);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output, " pid 2 host ") == 2);
        CHECK(count(output, "rank 0 pid 2 host ") == 1);
        CHECK(count(output, "rank 1 pid 2 host ") == 1);
        cli.check_nothing_left();
    }
    SECTION("TFSLURM_CONTAIN=yes is --contain; a bad value is refused naming the variable") {
        Cli cli(local(1, 76, {"--", "sh", "-c", script}), {{"TFSLURM_CONTAIN", "yes"}});
        CHECK(cli.wait() == 0);
        CHECK(count(cli.output(), "rank 0 pid 2 host ") == 1);
        Cli bad(local(1, 76, {"--", "true"}), {{"TFSLURM_CONTAIN", "maybe"}});
        CHECK(bad.wait() == 2);
        CHECK(bad.output() == "tfslurm: error: TFSLURM_CONTAIN: expected yes/no, true/false, "
                              "on/off or 1/0: \"maybe\"\n");
    }
}

TEST_CASE("run: --label prefixes every line of each trainer's stdout and stderr with its rank",
          "[run][label]") {
    // Two lines on stdout, one on stderr, and a last line without a newline.
    const std::string script =
        "echo out $TFSLURM_RANK; echo err $TFSLURM_RANK >&2; echo second; printf partial";
    Cli cli(local(2, 77, {"--label", "--", "sh", "-c", script}));
    CHECK(cli.wait() == 0);
    const auto output = cli.output();
    INFO(output);
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(output, rank + ": out " + rank + "\n") == 1);
        CHECK(count(output, rank + ": err " + rank + "\n") == 1);
        CHECK(count(output, rank + ": second\n") == 1);
        CHECK(count(output, rank + ": partial\n") == 1);
        // One stream's lines in order.
        CHECK(output.find(rank + ": out " + rank + "\n") < output.find(rank + ": second\n"));
        CHECK(output.find(rank + ": second\n") < output.find(rank + ": partial\n"));
    }
    // Nothing else: every line is labelled, and a normal end prints no line of tfslurm's.
    CHECK(count(output, "\n") == 8);
    cli.check_nothing_left();

    SECTION("without --label the lines are the trainer's own") {
        Cli plain(local(1, 78, {"--", "sh", "-c", script}));
        CHECK(plain.wait() == 0);
        CHECK(count(plain.output(), "out 0\n") == 1);
        CHECK(count(plain.output(), ": ") == 0);
        CHECK(plain.output().substr(plain.output().size() - 7) == "partial");
    }
}

TEST_CASE("run: a settings error is printed by rank 0 only, every task exits with its status",
          "[run]") {
    Cli rank0({"run", "--grace", "soon", "--", "true"}, task_env(0, 79, k_secret_a));
    Cli rank1({"run", "--grace", "soon", "--", "true"}, task_env(1, 79, k_secret_a));
    CHECK(rank0.wait() == 2);
    CHECK(rank1.wait() == 2);
    CHECK_THAT(rank0.output(), Catch::StartsWith("tfslurm: error: --grace: "));
    CHECK(count(rank0.output(), "tfslurm: error:") == 1);
    CHECK(rank1.output().empty());
    // At debug level the other tasks still say it.
    Cli verbose({"-v", "run", "--grace", "soon", "--", "true"}, task_env(1, 79, k_secret_a));
    CHECK(verbose.wait() == 2);
    CHECK_THAT(verbose.output(),
               Catch::Contains("tfslurm: debug: --grace: ") &&
                   Catch::Contains(" (rank 0 shows this error)\n"));
    CHECK(count(verbose.output(), "tfslurm: error:") == 0);
    // A plan setting from a variable is named as the variable.
    auto env0 = task_env(0, 79, k_secret_a);
    env0.emplace_back("TFSLURM_PS", "two");
    auto env1 = task_env(1, 79, k_secret_a);
    env1.emplace_back("TFSLURM_PS", "two");
    Cli ps0({"run", "--", "true"}, env0);
    Cli ps1({"run", "--", "true"}, env1);
    CHECK(ps0.wait() == 2);
    CHECK(ps1.wait() == 2);
    CHECK(ps0.output() ==
          "tfslurm: error: TFSLURM_PS: expected an integer from 0 to 4194304: \"two\"\n");
    CHECK(ps1.output().empty());
}

// --- health before start (--preflight)
// ----------------------------------------------------------------------------

TEST_CASE("run: --preflight checks the node once, then the trainers run", "[run][preflight]") {
    TempDir dir;
    // The site command appends a line per run: one node (localhost), one run, whatever the ranks.
    const std::string command = "echo checked >> " + dir.path + "/checks";
    // Workers only: each one ends by itself (a ps might be stopped before it printed).
    Cli cli(local(3,
                  91,
                  {"--preflight",
                   "--preflight-command",
                   command,
                   "--",
                   "sh",
                   "-c",
                   "echo \"ran $TFSLURM_RANK\""}));
    CHECK(cli.wait() == 0);
    const std::string output = cli.output();
    INFO(output);
    for (const std::string rank : {"0", "1", "2"}) {
        CHECK(count(output, "ran " + rank + "\n") == 1);
    }
    CHECK(count(output, "tfslurm:") == 0);
    CHECK(read_file(dir.path + "/checks") == "checked\n");
    cli.check_nothing_left();
}

TEST_CASE("run: a failed preflight check aborts before any trainer starts, naming the node",
          "[run][preflight]") {
    TempDir dir;
    const std::vector<std::string> trainer{
        "--", "sh", "-c", "touch " + dir.path + "/started.$TFSLURM_RANK"};
    const auto with = [&trainer](std::vector<std::string> options) {
        options.insert(options.end(), trainer.begin(), trainer.end());
        return options;
    };
    SECTION("the site's command fails; what it left running goes with it") {
        Cli cli(local(3, 92, with({"--ps", "1", "--preflight-command", "sleep 300 & exit 3"})));
        CHECK(cli.wait() == k_status_preflight);
        CHECK(cli.output() == "tfslurm: error: aborting: preflight failed on localhost (rank 0, "
                              "ps:0): command: \"sleep 300 & exit 3\" exited with status 3\n");
        cli.check_nothing_left();
    }
    SECTION("TMPDIR is not writable") {
        Cli cli(local(2, 93, with({"--preflight"})), {{"TMPDIR", dir.path + "/none"}});
        CHECK(cli.wait() == k_status_preflight);
        CHECK(cli.output() == "tfslurm: error: aborting: preflight failed on localhost (rank 0, "
                              "worker:0): tmpdir: \"" +
                                  dir.path +
                                  "/none\" is not writable: No such file or directory\n");
        cli.check_nothing_left();
    }
    SECTION("with --probe too: one barrier, the check named") {
        Cli cli(local(2, 94, with({"--probe", "--preflight-command", "false"})));
        CHECK(cli.wait() == k_status_preflight);
        CHECK(cli.output() == "tfslurm: error: aborting: preflight failed on localhost (rank 0, "
                              "worker:0): command: \"false\" exited with status 1\n");
        cli.check_nothing_left();
    }
    for (const std::string rank : {"0", "1", "2"}) {
        CHECK_FALSE(std::filesystem::exists(dir.path + "/started." + rank));
    }
}

TEST_CASE("run: --preflight with --probe passes as one barrier", "[run][preflight]") {
    Cli cli(
        local(2, 95, {"--probe", "--preflight", "--", "sh", "-c", "echo \"ran $TFSLURM_RANK\""}));
    CHECK(cli.wait() == 0);
    const std::string output = cli.output();
    INFO(output);
    CHECK(count(output, "ran 0\n") == 1);
    CHECK(count(output, "ran 1\n") == 1);
    CHECK(count(output, "tfslurm:") == 0);
    cli.check_nothing_left();
}

TEST_CASE("run: --preflight-command needs a command", "[run][preflight]") {
    Cli cli({"run", "--local", "1", "--preflight-command", "", "--", "true"});
    CHECK(cli.wait() == exit_status(Errc::invalid_argument));
    CHECK(cli.output() == "tfslurm: error: --preflight-command: expected CMD: \"\"\n");
}
