// SPDX-License-Identifier: MIT
// `tfslurm run` end to end on this machine: the real CLI in local mode (and a few single
// launchers started by hand), with the fake TensorFlow trainer and small /bin/sh trainers
// (run_local_cli.hpp). Every test checks that no process carrying its marker survives. Stalls,
// output files, restarts, checkpoints and the barrier before the start have files of their own
// (test_run_local_*.cpp); the pure parts of local mode are tested in
// tests/unit/shell/test_local_run.cpp.
#include "run_local_cli.hpp"
#include "test_paths.hpp"

#include <tfslurm/common/env.hpp>
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/settings/plan_settings.hpp>
#include <tfslurm/shell/held_port.hpp>
#include <tfslurm/shell/local_run.hpp>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

using namespace tfslurm;
using namespace tfslurm::test;
using namespace std::chrono_literals;

TEST_CASE("run: local launchers get the CLI's options, without --local, and the command as given",
          "[run]") {
    // The trainer prints its arguments and its launcher's command line.
    const Ran ran =
        run_to_end({"-v",
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
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "args:--local 2 --job-id=1\n") == 1);
    CHECK(count(ran.output, " --verbose=true run --chief=0 --grace=3 -- sh -c ") == 1);
    CHECK(count(ran.output, "--job-id=" + std::to_string(job_id(30))) == 0);
    CHECK(count(ran.output, "--local=1") == 0);
}

TEST_CASE("run: options end at the trainer's command", "[run]") {
    const std::string id = std::to_string(job_id(31));
    SECTION("without '--'") {
        const Ran ran =
            run_to_end(local_defaults(1, 31, {"echo", "hello", "-v", "--rpc-layer", "grpc"}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "hello -v --rpc-layer grpc\n") == 1);
        CHECK(count(ran.output, "debug:") == 0); // -v went to the trainer
    }
    SECTION("tfslurm's own options before the command, the trainer's after it") {
        // The worker ends only once the ps has printed: the ps is stopped when the work is done.
        const TempDir scratch;
        const std::string printed = scratch.path + "/printed";
        const std::string script = R"(echo "$TFSLURM_ROLE:$*"; if [ "$TFSLURM_ROLE" = ps ]; )"
                                   "then touch " +
                                   printed + "; exec sleep 1000; fi; while [ ! -f " + printed +
                                   " ]; do sleep 0.01; done";
        const Ran ran = run_to_end(local_defaults(
            2, 31, {"--ps", "1", "sh", "-c", script, "sh", "--ps", "2", "--", "--local"}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "ps:--ps 2 -- --local\n") == 1);
        CHECK(count(ran.output, "worker:--ps 2 -- --local\n") == 1);
    }
    SECTION("a command named like a tfslurm command is the trainer") {
        const Ran ran = run_to_end(local_defaults(1, 31, {"env"}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "\nTFSLURM_RANK=0\n") == 1);
    }
    SECTION("'--' still ends the options") {
        const Ran ran = run_to_end(local_defaults(1, 31, {"--", "echo", "--ps", "2"}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "--ps 2\n") == 1);
    }
}

TEST_CASE("run: with no option on its command line, every setting still reads its variable",
          "[run]") {
    // `tfslurm run -- CMD` and `tfslurm run CMD` make none of run's options (no option can be
    // there): each setting of `run` must still read its TFSLURM_* variable, exactly as when
    // the options are made. Each variable gets a value its setting refuses (but for the few
    // free texts, taken as they are), in one task's step: `tfslurm -q run -- true` (no options
    // made) and `tfslurm run -q -- true` (every option made, -q left to the top level) must
    // end alike, with the error naming the variable.
    const std::vector<std::string_view> free_text{"TFSLURM_HOST_PATTERN",
                                                  "TFSLURM_RPC_LAYER",
                                                  "TFSLURM_EVENTS",
                                                  "TFSLURM_PREFLIGHT_COMMAND",
                                                  "TFSLURM_ON_FAILURE_CHECK"};
    TempDir scratch;
    const Environment task = local_task_environment(Environment{}, 1, 0, job_id(123));
    ExtraEnv base(task.vars().begin(), task.vars().end());
    base.emplace_back("TFSLURM_SECRET", std::string(64, 'a'));
    base.emplace_back("TFSLURM_AUTH", "secret");
    std::size_t checked = 0;
    for (const SettingSpec& spec : setting_registry()) {
        const bool runs = spec.group == SettingGroup::roles ||
                          spec.group == SettingGroup::network ||
                          spec.group == SettingGroup::launcher || spec.key == "only" ||
                          spec.key == "tf_config_file";
        if (!runs || spec.variable.empty() || spec.option.empty() ||
            spec.variable == "TFSLURM_SECRET" || spec.variable == "TFSLURM_AUTH") {
            continue;
        }
        // A free text is taken as it is: as a path (the events file), one in the scratch
        // directory, where it may be made.
        const bool as_is =
            std::find(free_text.begin(), free_text.end(), spec.variable) != free_text.end();
        ExtraEnv env = base;
        env.emplace_back(std::string{spec.variable}, as_is ? scratch.path + "/-1,x" : "-1,x");
        const Ran bare = run_to_end({"-q", "run", "--", "true"}, env);
        const Ran made = run_to_end({"run", "-q", "--", "true"}, env);
        INFO(spec.variable << " without the options: " << bare.status << "\n"
                           << bare.output << "with them: " << made.status << "\n"
                           << made.output);
        CHECK(bare.status == made.status);
        CHECK(bare.output == made.output);
        if (!as_is) {
            CHECK(bare.status == 2);
            CHECK_THAT(bare.output,
                       Catch::StartsWith("tfslurm: error: " + std::string{spec.variable} + ": "));
            ++checked;
        }
    }
    CHECK(checked >= 40);
}

TEST_CASE("run: --only and TFSLURM_ONLY select the variables given to the trainer", "[run]") {
    const std::string id = std::to_string(job_id(32));
    const std::string show = R"(echo "tf=${TF_CONFIG:+set} servers=${TFSLURM_SERVERS:+set} )"
                             R"(torch=${MASTER_ADDR:+set} rank=$TFSLURM_RANK")";
    SECTION("all by default") {
        const Ran ran = run_to_end(local_defaults(1, 32, {"sh", "-c", show}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "tf=set servers=set torch=set rank=0\n") == 1);
    }
    SECTION("--only tf") {
        const Ran ran = run_to_end(local_defaults(1, 32, {"--only", "tf", "sh", "-c", show}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "tf=set servers= torch= rank=0\n") == 1);
    }
    SECTION("TFSLURM_ONLY=torch,servers") {
        const Ran ran = run_to_end(local_defaults(1, 32, {"sh", "-c", show}),
                                   {{"TFSLURM_ONLY", "torch,servers"}});
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "tf= servers=set torch=set rank=0\n") == 1);
    }
    SECTION("a bad list") {
        const Ran ran = run_to_end(local_defaults(1, 32, {"--only", "tf,nope", "true"}));
        INFO(ran.output);
        CHECK(ran.status == exit_status(Errc::invalid_argument));
        CHECK_THAT(ran.output, Catch::StartsWith("tfslurm: error: --only: "));
    }
}

TEST_CASE("run: the exact output of a failing local job: one line, the culprit's status", "[run]") {
    const std::string script = "[ $TFSLURM_RANK = 2 ] && exit 5; exec sleep 1000";
    const Ran ran = run_to_end(local(4, 33, {"--ps", "1", "sh", "-c", script}));
    INFO(ran.output);
    CHECK(ran.status == 5);
    CHECK(ran.output ==
          "tfslurm: error: aborting: rank 2 (worker:1) on localhost exited with status 5\n");
}

TEST_CASE("run: ps that sleep forever are stopped once the workers exit 0", "[run]") {
    TempDir scratch;
    const Ran ran =
        run_to_end(local(4, 1, {"--ps", "2", "--", "sh", "-c", sh_trainer(scratch.path)}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "the work is done: stopping the trainer") == 2);
    CHECK(count(ran.output, "INHERITED-SOCKET") == 0);
    CHECK(count(ran.output, "tfslurm: error") == 0);
}

TEST_CASE("run: the fake TensorFlow job completes and its ps are stopped", "[run]") {
    const Ran ran = run_to_end(local(5, 2, {"--ps", "2", "--", k_trainer, "--work-ms", "50"}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    // Every worker reached every ps through its TF_CONFIG address.
    CHECK(count(ran.output, "exchanged with ps:") == 6);
    CHECK(count(ran.output, "]: listening on 127.0.0.1:") == 5);
    CHECK(count(ran.output, "exiting with status 0") == 3);
    CHECK(count(ran.output, "tf_trainer[ps:0 rank=0]: received SIGTERM, exiting") == 1);
    CHECK(count(ran.output, "tf_trainer[ps:1 rank=1]: received SIGTERM, exiting") == 1);
}

TEST_CASE("run: --until chief stops workers that never exit when the chief is done", "[run]") {
    const Ran ran = run_to_end(local(4,
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
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "tf_trainer[worker:0 rank=2]: serving forever") == 1);
    CHECK(count(ran.output, "tf_trainer[chief:0 rank=1]: exiting with status 0") == 1);
    CHECK(count(ran.output, "received SIGTERM, exiting") == 3);
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
        const Ran ran = run_to_end({"-v",
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
        INFO(ran.output);
        CHECK(ran.status == 3);
        CHECK(count(ran.output,
                    "tfslurm: error: aborting: rank 2 (worker:1) on localhost exited with status "
                    "3\n") == 1);
        CHECK(count(ran.output, "tfslurm: error:") == 1);
        // Every launcher exits with the failing rank's status (srun reports the highest).
        for (const int rank : {0, 1, 2, 3}) {
            CHECK(count(ran.output,
                        "local: launcher of rank " + std::to_string(rank) +
                            " exited with status 3\n") == 1);
        }
    }
    SECTION("killed by a signal") {
        const Ran ran = run_to_end(local(3,
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
        INFO(ran.output);
        CHECK(ran.status == 137);
        CHECK(
            count(ran.output,
                  "tfslurm: error: aborting: rank 1 (worker:0) on localhost was killed by signal 9 "
                  "(Killed)\n") == 1);
    }
    SECTION("a ps exiting non-zero") {
        // The workers wait before connecting, so the ps fails first.
        const Ran ran = run_to_end(local(3,
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
        INFO(ran.output);
        CHECK(ran.status == 1);
        CHECK(count(ran.output, "aborting: rank 0 (ps:0) on localhost exited with status 1") == 1);
    }
    SECTION("a trainer that cannot be started") {
        const Ran ran = run_to_end(local(3, 8, {"--ps", "1", "--", "/nonexistent/trainer"}));
        INFO(ran.output);
        CHECK(ran.status == 127);
        CHECK(
            count(
                ran.output,
                "could not start its trainer: trainer: cannot execute (No such file or directory): "
                "\"/nonexistent/trainer\"") == 1);
    }
}

TEST_CASE("run: a ps exiting 0 by itself is fine", "[run]") {
    const Ran ran = run_to_end(local(
        3, 9, {"--ps", "1", "--", "sh", "-c", "[ $TFSLURM_ROLE = ps ] && exit 0; sleep 0.3"}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "tfslurm: error") == 0);
}

TEST_CASE("run: SIGKILL, SIGTERM and signals sent to launchers", "[run]") {
    TempDir scratch;
    const std::string trainer =
        sh_trainer(scratch.path, "trap 'echo got USR1' USR1; sleep 1000 & wait; wait");
    // Rank 2's launcher killed by SIGKILL once every trainer runs: the rest abort, srun's
    // status is the killed task's, and nothing of the step is left, the killed launcher's
    // progress file included (its keeper, or with --contain its supervisor, removes it).
    const auto kill_rank2 = [&](int test, std::vector<std::string> options) {
        options.insert(options.end(), {"--ps", "1", "--", "sh", "-c", trainer});
        Cli cli(local(4, test, options));
        for (int rank = 0; rank < 4; ++rank) {
            (void)read_pid(scratch.path, "trainer", rank, cli); // everyone is running
        }
        ::kill(read_pid(scratch.path, "launcher", 2, cli), SIGKILL);
        // As srun: a task killed by a signal makes the step's status 128 + signo.
        CHECK(cli.wait() == 137);
        const auto output = cli.output();
        INFO(output);
        CHECK(count(output,
                    "tfslurm: error: aborting: rank 2 (worker:1) on localhost launcher lost "
                    "(connection closed)\n") == 1);
        cli.check_nothing_left();
    };
    SECTION("a launcher killed with SIGKILL is detected and the rest abort") {
        kill_rank2(11, {});
    }
    SECTION("with --contain too: nothing of the killed launcher's is left, its file neither") {
        kill_rank2(124, {"--contain"});
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
        const Ran ran = run_to_end(local(
            3,
            15,
            {"--grace", "0.5", "--ps", "1", "--", k_trainer, "--on", "ps", "--ignore-sigterm"}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "tf_trainer[ps:0 rank=0]: received SIGTERM, ignoring it") == 1);
        CHECK(count(ran.output,
                    "rank 0 (ps:0): the trainer did not stop within 0.5 s: killing it (SIGKILL)") ==
              1);
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
        const Ran ran =
            run_to_end(local(3, 16, {"--grace", "0.5", "--ps", "1", "--", "sh", "-c", script}));
        INFO(ran.output);
        CHECK(ran.status == 2);
        CHECK(
            count(
                ran.output,
                "rank 2 (worker:1): the trainer did not stop within 0.5 s: killing it (SIGKILL)") ==
            1);
        CHECK(count(ran.output,
                    "aborting: rank 1 (worker:0) on localhost exited with status 2\n") == 1);
    }
}

TEST_CASE("run: a trainer's grandchildren are killed too", "[run]") {
    const Ran ran = run_to_end(local(
        3,
        17,
        {"--ps", "1", "--", k_trainer, "--grandchild", "--grandchild-setsid", "--work-ms", "100"}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "grandchild pid=") == 3);
    CHECK(count(ran.output, "grandchild (new session) pid=") == 3);
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
    const Ran ran = run_to_end(args);
    INFO(ran.output);
    CHECK(ran.status == exit_status(Errc::io));
    ::close(fd);
    CHECK(ran.output ==
          "tfslurm: error: aborting: rank 1 (worker:0) on localhost could not start its "
          "trainer: trainer: port " +
              std::to_string(port) +
              " is already in use on localhost: another process holds it; choose other "
              "ports with --port-base, or let Slurm reserve them with srun --resv-ports "
              "(MpiParams=ports=... in slurm.conf)\n");
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

TEST_CASE("run: ranks that never register abort the step, which rank 0 then cancels", "[run]") {
    // Their node may hang before their tasks start: srun would wait for it. No Slurm here:
    // libslurm cannot be loaded and no scancel is in PATH, so the line says both, and the
    // launcher still exits with the registration timeout's status.
    const std::string missing = "/nonexistent/tfslurm-test-libslurm.so";
    auto env = task_env(0, 19, k_secret_a);
    env.emplace_back("TFSLURM_LIBSLURM", missing);
    env.emplace_back("PATH", "/nonexistent");
    const Ran rank0 = run_to_end(
        {"run", "--connect-timeout", "1", "--grace", "1", "--ps", "1", "--", "/bin/sleep", "1000"},
        env);
    INFO(rank0.output);
    CHECK(rank0.status == k_status_unregistered);
    const std::string step = std::to_string(job_id(19)) + ".0";
    CHECK(rank0.output ==
          "tfslurm: error: aborting: rank 1 (worker:0) on localhost did not register within 1 s; "
          "cancelling step " +
              step + " with scancel (libslurm cannot be called: libslurm: cannot load any of " +
              missing + ": " + missing +
              ": cannot open shared object file: No such file or directory)\n"
              "tfslurm: error: cannot cancel step " +
              step + ": scancel not found in PATH; end it with scancel " + step + "\n");
}

TEST_CASE("run: after an abort a launcher waits before exiting so that srun forwards its line",
          "[run]") {
    // Rank 1's trainer fails: its launcher says so, then waits.
    Cli rank0({"run", "--grace", "1", "--ps", "1", "--", "sleep", "1000"},
              task_env(0, 23, k_secret_a));
    const Ran rank1 =
        run_to_end({"-v", "run", "--grace", "1", "--ps", "1", "--", "sh", "-c", "exit 3"},
                   task_env(1, 23, k_secret_a));
    INFO(rank1.output);
    CHECK(rank1.status == 3);
    const std::string line =
        "tfslurm: error: aborting: rank 1 (worker:0) on localhost exited with status 3\n"
        "tfslurm: debug: waiting 200 ms before exiting so that srun forwards the line above\n";
    CHECK(rank1.output.size() >= line.size());
    CHECK(rank1.output.substr(rank1.output.size() - std::min(rank1.output.size(), line.size())) ==
          line);
    CHECK(rank0.wait() == 3);
    rank0.check_nothing_left();
}

TEST_CASE("run: a launcher with the wrong secret is rejected and does not disturb the step",
          "[run]") {
    Cli rank0({"run", "--heartbeat", "0.1", "--ps", "1", "--", "sleep", "1000"},
              task_env(0, 20, k_secret_a));
    // The reject is unproven: the intruder keeps looking until its connect timeout, then names
    // it (once as a warning, once as its error).
    const Ran intruder =
        run_to_end({"run", "--ps", "1", "--connect-timeout", "1", "--", "sleep", "1000"},
                   task_env(1, 20, k_secret_b));
    INFO(intruder.output);
    CHECK(intruder.status == exit_status(Errc::auth));
    CHECK(count(intruder.output, "rejected rank 1 (worker:0): bad secret proof") == 2);
    CHECK_THAT(intruder.output,
               Catch::Contains("tfslurm: error: coordinator: rank 0's relay @tfslurm-" +
                               std::to_string(::geteuid()) + "/relay-" +
                               std::to_string(job_id(20)) +
                               ".0-0 rejected rank 1 (worker:0): bad secret proof\n"
                               "tfslurm: hint: every task must run 'tfslurm run' with the same "
                               "options, the same TFSLURM_SECRET and as the same user\n"));
    const Ran rank1 =
        run_to_end({"run", "--heartbeat", "0.1", "--ps", "1", "--", "sh", "-c", "sleep 0.2"},
                   task_env(1, 20, k_secret_a));
    INFO(rank1.output);
    CHECK(rank1.status == 0);
    CHECK(rank0.wait() == 0);
    INFO(rank0.output());
    // Both ranks run on one node: rank 0's relay (the tree) checks rank 1's proof.
    CHECK_THAT(rank0.output(), Catch::Contains("relay: rejected rank 1 (pid "));
    CHECK_THAT(rank0.output(), Catch::Contains("): bad secret proof"));
    rank0.check_nothing_left();
}

TEST_CASE("run: the README demo job (examples/trainer.sh)", "[run]") {
    const std::string trainer = std::string(tfslurm::test::paths::examples_dir) + "/trainer.sh";
    SECTION("the ps is stopped when the workers are done") {
        const Ran ran =
            run_to_end(local(4, 21, {"--ps", "1", "--", trainer}), {{"DEMO_STEPS", "1"}});
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "] done\n") == 3);
        CHECK(count(ran.output, "[ps rank 0] SIGTERM: saving state and shutting down") == 1);
    }
    SECTION("a crashing worker stops everything") {
        const Ran ran = run_to_end(local(4, 22, {"--ps", "1", "--", trainer}),
                                   {{"DEMO_STEPS", "3"}, {"DEMO_FAIL_RANK", "2"}});
        INFO(ran.output);
        CHECK(ran.status == 3);
        CHECK(count(ran.output,
                    "tfslurm: error: aborting: rank 2 (worker:1) on localhost exited with status "
                    "3\n") == 1);
    }
}

TEST_CASE("run: a wrapper script's child gets the grace period too", "[run]") {
    // `tfslurm run -- sh -c '...'` without exec: when the ps is stopped, the wrapper sh dies at
    // once of SIGTERM while its child takes 0.5 s to "checkpoint"; the child must not be killed
    // when the wrapper dies, only when the grace runs out.
    TempDir scratch;
    const std::string ready = scratch.path + "/ready";
    // `ready` once the sleep runs: a SIGTERM before it would leave the sleep without one.
    const std::string ps = "sh -c 'trap \"sleep 0.5; echo checkpointed; exit 0\" TERM; "
                           "sleep 1000 & touch " +
                           ready + "; wait'; echo wrapper-after";
    const std::string script = "if [ \"$TFSLURM_ROLE\" = ps ]; then " + ps +
                               "; else while [ ! -f " + ready + " ]; do sleep 0.01; done; fi";
    const Ran ran =
        run_to_end(local(2, 34, {"--grace", "5", "--ps", "1", "--", "sh", "-c", script}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    CHECK(count(ran.output, "checkpointed\n") == 1);
    CHECK(count(ran.output, "wrapper-after") == 0);
    CHECK(count(ran.output, "killing it (SIGKILL)") == 0);
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
    const Ran ran = run_to_end(
        local_defaults(2, 41, {"--tf-config-file", "auto", "/usr/bin/python3", "-c", show}),
        {{"TMPDIR", tmp.path}});
    INFO(ran.output);
    CHECK(ran.status == 0);
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(ran.output,
                    "rank " + rank + " task worker " + rank + " workers 2 file tfslurm-" + id +
                        ".0." + rank + ".tf_config.json True\n") == 1);
    }
    CHECK(count(ran.output, "tfslurm: error") == 0);
    // Nothing left: the launchers removed the files and the shims (with Python's cache).
    CHECK(std::distance(std::filesystem::directory_iterator{tmp.path},
                        std::filesystem::directory_iterator{}) == 0);
}

TEST_CASE("run: --iface exchanges the chosen addresses through the coordinator", "[run]") {
    const std::string id = std::to_string(job_id(42));
    const std::string show = R"(echo "cfg $TFSLURM_RANK $TF_CONFIG $NCCL_SOCKET_IFNAME")";
    const Ran ran = run_to_end(
        local_defaults(2, 42, {"--iface", "lo", "--port-base", "24400", "sh", "-c", show}));
    INFO(ran.output);
    CHECK(ran.status == 0);
    const std::string cluster = R"({"cluster":{"worker":["127.0.0.1:24400","127.0.0.1:24401"]},)";
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(ran.output,
                    "cfg " + rank + " " + cluster + R"("task":{"type":"worker","index":)" + rank +
                        "}} lo\n") == 1);
    }
    const Ran missing = run_to_end(local_defaults(1, 42, {"--iface", "nosuch0", "true"}));
    INFO(missing.output);
    CHECK(missing.status == exit_status(Errc::invalid_argument));
    CHECK_THAT(missing.output,
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
    const Ran moved = run_to_end(local_defaults(2,
                                                73,
                                                {"--iface",
                                                 "lo",
                                                 "--port-base",
                                                 port(0),
                                                 "--port-range",
                                                 port(0) + "-" + port(9),
                                                 "sh",
                                                 "-c",
                                                 R"(echo "cfg $TFSLURM_RANK $TF_CONFIG")"}));
    INFO(moved.output);
    CHECK(moved.status == 0);
    const std::string cluster =
        R"({"cluster":{"worker":["127.0.0.1:)" + port(0) + R"(","127.0.0.1:)" + port(3) + R"("]},)";
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(moved.output,
                    "cfg " + rank + " " + cluster + R"("task":{"type":"worker","index":)" + rank +
                        "}}\n") == 1);
    }
    const Ran none = run_to_end(local_defaults(2,
                                               73,
                                               {"--iface",
                                                "lo",
                                                "--port-base",
                                                port(0),
                                                "--port-range",
                                                port(1) + "-" + port(1),
                                                "--",
                                                "sleep",
                                                "1000"}));
    INFO(none.output);
    CHECK(none.status == exit_status(Errc::io));
    ::close(fd);
    CHECK(none.output == "tfslurm: error: aborting: rank 1 (worker:1) on localhost could not "
                         "start its trainer: trainer: no free port on localhost in " +
                             port(1) + "-" + port(1) +
                             " (--port-range): other processes hold every one\n");
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
    const Ran ran = run_to_end(local_defaults(2,
                                              43,
                                              {"--iface",
                                               "lo",
                                               "--port-base",
                                               "24410",
                                               "--tf-config-file",
                                               "auto",
                                               "/usr/bin/python3",
                                               "-c",
                                               show}),
                               {{"TMPDIR", tmp.path}});
    INFO(ran.output);
    CHECK(ran.status == 0);
    for (const std::string rank : {"0", "1"}) {
        CHECK(count(ran.output, "rank " + rank + " 127.0.0.1:24410 127.0.0.1:24411 lo\n") == 1);
    }
    CHECK(count(ran.output, "tfslurm: error") == 0);
    CHECK(std::distance(std::filesystem::directory_iterator{tmp.path},
                        std::filesystem::directory_iterator{}) == 0);
}

TEST_CASE("run: trainers keep their real pids, --contain gives each a PID namespace",
          "[run][contain]") {
    // Each trainer writes $$ (its pid as it sees it) and its host pid (/proc/self/stat).
    const std::string script = "read -r host _ < /proc/self/stat; echo \"rank $TFSLURM_RANK pid "
                               "$$ host $host\"";
    SECTION("by default (the keeper): distinct, real pids") {
        const Ran ran = run_to_end(local(2, 86, {"--", "sh", "-c", script}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        std::vector<std::pair<long, long>> pids;
        std::istringstream lines(ran.output);
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
    }
    SECTION("--contain: pid 2 in a namespace of its own, the host's pid differs") {
        const Ran ran = run_to_end(local(2, 75, {"--contain", "--", "sh", "-c", script}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, " pid 2 host ") == 2);
        CHECK(count(ran.output, "rank 0 pid 2 host ") == 1);
        CHECK(count(ran.output, "rank 1 pid 2 host ") == 1);
    }
    SECTION("TFSLURM_CONTAIN=yes is --contain; a bad value is refused naming the variable") {
        const Ran ran =
            run_to_end(local(1, 76, {"--", "sh", "-c", script}), {{"TFSLURM_CONTAIN", "yes"}});
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "rank 0 pid 2 host ") == 1);
        const Ran bad = run_to_end(local(1, 76, {"--", "true"}), {{"TFSLURM_CONTAIN", "maybe"}});
        INFO(bad.output);
        CHECK(bad.status == 2);
        CHECK(bad.output == "tfslurm: error: TFSLURM_CONTAIN: expected yes/no, true/false, "
                            "on/off or 1/0: \"maybe\"\n");
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
    const Ran verbose =
        run_to_end({"-v", "run", "--grace", "soon", "--", "true"}, task_env(1, 79, k_secret_a));
    INFO(verbose.output);
    CHECK(verbose.status == 2);
    CHECK_THAT(verbose.output,
               Catch::Contains("tfslurm: debug: --grace: ") &&
                   Catch::Contains(" (rank 0 shows this error)\n"));
    CHECK(count(verbose.output, "tfslurm: error:") == 0);
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

TEST_CASE("run: a launcher option given twice takes its last value, like srun's", "[run]") {
    SECTION("the first value is bad, the last good") {
        const Ran ran =
            run_to_end(local_defaults(1, 122, {"--grace", "soon", "--grace", "1", "--", "true"}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(ran.output.empty());
    }
    SECTION("the first value is good, the last bad") {
        const Ran ran =
            run_to_end(local_defaults(1, 122, {"--grace", "1", "--grace", "soon", "--", "true"}));
        INFO(ran.output);
        CHECK(ran.status == 2);
        CHECK(ran.output == "tfslurm: error: --grace: expected a number of seconds from 0.001 "
                            "to 86400: \"soon\"\ntfslurm: hint: e.g. 10 or 0.5\n");
    }
    SECTION("a flag") {
        const Ran labeled =
            run_to_end(local_defaults(1, 122, {"--no-label", "--label", "--", "echo", "hi"}));
        INFO(labeled.output);
        CHECK(labeled.status == 0);
        CHECK(labeled.output == "0: hi\n");
        const Ran plain =
            run_to_end(local_defaults(1, 122, {"--label", "--no-label", "--", "echo", "hi"}));
        INFO(plain.output);
        CHECK(plain.status == 0);
        CHECK(plain.output == "hi\n");
    }
}

TEST_CASE("run: every trainer gets one TFSLURM_RUN_ID, the user's when set, and a progress file",
          "[run][run_id]") {
    const std::string show =
        R"x(echo "run=$TFSLURM_RUN_ID progress=$(stat -c %Y "$TFSLURM_PROGRESS_FILE")")x";
    SECTION("made once for the whole local job") {
        const Ran ran = run_to_end(local_defaults(2, 120, {"sh", "-c", show}));
        INFO(ran.output);
        CHECK(ran.status == 0);
        // `local-<job>-<seconds>`, the same for both; the progress file untouched (time 0).
        const auto first = ran.output.find("run=local-" + std::to_string(job_id(120)) + "-");
        REQUIRE(first != std::string::npos);
        const std::string line = ran.output.substr(first, ran.output.find('\n', first) - first);
        CHECK_THAT(line, Catch::EndsWith(" progress=0"));
        CHECK(count(ran.output, line + "\n") == 2);
    }
    SECTION("the user's") {
        const Ran ran = run_to_end(local_defaults(2, 120, {"sh", "-c", show}),
                                   {{"TFSLURM_RUN_ID", "exp-7.b_2"}});
        INFO(ran.output);
        CHECK(ran.status == 0);
        CHECK(count(ran.output, "run=exp-7.b_2 progress=0\n") == 2);
    }
    SECTION("one no logger takes") {
        const Ran ran = run_to_end(local_defaults(2, 120, {"true"}), {{"TFSLURM_RUN_ID", "a b"}});
        CHECK(ran.status == exit_status(Errc::invalid_argument));
        CHECK(ran.output == "tfslurm: error: TFSLURM_RUN_ID: expected 1 to 128 letters, digits, "
                            "'.', '_' or '-': \"a b\"\n");
    }
}

TEST_CASE("run: the record's first progress is the trainer's first touch, and its step the last",
          "[run][startup]") {
    const TempDir scratch;
    const std::string events = scratch.path + "/step.events";
    // The trainer notes its first write's time (the file's own), writes again 3 s later.
    const std::string script = R"x(echo 1 >"$TFSLURM_PROGRESS_FILE"; date -u -d @$(stat -c %.3Y )x"
                               R"x("$TFSLURM_PROGRESS_FILE") +%Y-%m-%dT%H:%M:%S.%3NZ >")x" +
                               scratch.path +
                               R"x(/first"; sleep 3; echo 2 >"$TFSLURM_PROGRESS_FILE")x";
    const Ran ran =
        run_to_end(local_defaults(1, 121, {"--events", events, "--", "sh", "-c", script}));
    INFO(ran.output);
    REQUIRE(ran.status == 0);
    std::ifstream first_file(scratch.path + "/first");
    std::string first;
    std::getline(first_file, first);
    std::ifstream record(events);
    std::string line;
    std::string startup;
    while (std::getline(record, line)) {
        if (line.find(R"("event":"startup")") != std::string::npos) {
            startup = line;
        }
    }
    INFO(startup);
    REQUIRE(first.size() == 24);
    // Never before the trainer's start: the first write, unless the file's clock ticked behind
    // the launcher's (then the start itself, less than a tick before).
    const auto at = [&startup](const std::string& key) {
        const auto from = startup.find("\"" + key + "\":\"");
        return from == std::string::npos ? std::string()
                                         : startup.substr(from + key.size() + 4, 24);
    };
    // (The second write, 3 s later, would be neither.)
    CHECK((at("progress") == first || at("progress") == at("started")));
    CHECK_THAT(startup, Catch::EndsWith(R"("progress_step":2})"));
}
