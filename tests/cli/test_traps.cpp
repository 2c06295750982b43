// SPDX-License-Identifier: MIT
// The traps a new user hits in the first hour (issue #21): each case runs the real tfslurm
// binary with an exact argv and environment and pins its stdout, stderr and exit status.
#include "cli_runner.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using tfslurm::test::Result;
using tfslurm::test::tfslurm_cli;

namespace {

/// The `SLURM*=value` and `CUDA_VISIBLE_DEVICES=` lines of a captured task environment.
std::vector<std::string> task_env(const std::string& file) {
    std::ifstream in{std::string{tfslurm::test::paths::test_data_dir} + "/slurm-env/" + file};
    std::vector<std::string> vars;
    for (std::string line; std::getline(in, line);) {
        if (line.find('=') != std::string::npos &&
            (line.rfind("SLURM", 0) == 0 || line.rfind("CUDA_VISIBLE_DEVICES=", 0) == 0)) {
            vars.push_back(line);
        }
    }
    return vars;
}

/// The value of `name` in `NAME=value` lines, or `<unset>`.
std::string value_of(const std::string& lines, const std::string& name) {
    const auto at = ("\n" + lines).find("\n" + name + "=");
    if (at == std::string::npos) {
        return "<unset>";
    }
    const auto start = at + name.size() + 1;
    return lines.substr(start, lines.find('\n', start) - start);
}

/// `tfslurm ARGS...` with standard input on a new pseudo-terminal (stdout and stderr are
/// pipes): what a user at a shell prompt gets. Killed after 10 s.
Result run_on_terminal(const std::vector<std::string>& args) {
    std::vector<std::string> argv{tfslurm::test::paths::cli};
    argv.insert(argv.end(), args.begin(), args.end());
    const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
    REQUIRE(master >= 0);
    REQUIRE(::grantpt(master) == 0);
    REQUIRE(::unlockpt(master) == 0);
    const std::string slave_name = ::ptsname(master);
    std::array<int, 2> err{};
    REQUIRE(::pipe(err.data()) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const int slave = ::open(slave_name.c_str(), O_RDWR | O_NOCTTY);
        ::dup2(slave, STDIN_FILENO);
        ::dup2(err[1], STDERR_FILENO);
        ::dup2(err[1], STDOUT_FILENO);
        std::vector<char*> raw;
        raw.reserve(argv.size() + 1);
        for (auto& arg : argv) {
            raw.push_back(arg.data());
        }
        raw.push_back(nullptr);
        char* no_env[] = {nullptr};
        ::alarm(10); // never hang the test: SIGALRM ends a tfslurm that waits for input
        ::execve(raw[0], raw.data(), no_env);
        ::_exit(127);
    }
    ::close(err[1]);
    Result result;
    std::array<char, 4096> buffer{};
    for (ssize_t got = 0; (got = ::read(err[0], buffer.data(), buffer.size())) > 0;) {
        result.err.append(buffer.data(), static_cast<std::size_t>(got));
    }
    ::close(err[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ::close(master);
    result.wait_status = status;
    result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return result;
}

} // namespace

TEST_CASE("traps: run --until chief without a chief is refused by every task at once", "[cli]") {
    // Rank 3 of 6: before, it waited for rank 0's coordinator (which refused the plan and never
    // listened) until --connect-timeout, then exited 7 with "cannot register". Now it exits 2
    // at once; rank 0 shows the error for the step (every task would print the same line).
    const auto env = task_env("srun-N3-n6-SLURM-env-task3.txt");
    for (const std::vector<std::string>& until :
         {std::vector<std::string>{"--until=chief"}, {"--until=chief", "--ps=1"}}) {
        std::vector<std::string> args{"run", "--connect-timeout", "30"};
        args.insert(args.end(), until.begin(), until.end());
        args.insert(args.end(), {"--", "true"});
        const auto r = tfslurm_cli(args, env);
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK(r.err.empty());
    }
    // The line, as rank 0 (and --local, which checks the plan once for all) shows it.
    auto r = tfslurm_cli({"run", "--local", "2", "--until", "chief", "--", "true"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --until: the plan has no chief: \"chief\"\n"
                   "tfslurm: hint: add --chief, or use --until workers\n");
    r = tfslurm_cli({"run", "--local", "2", "--", "true"}, {"TFSLURM_UNTIL=chief"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: TFSLURM_UNTIL: the plan has no chief: \"chief\"\n"
                   "tfslurm: hint: add --chief, or use TFSLURM_UNTIL=workers\n");
}

TEST_CASE("traps: a group's values do not depend on which groups --only prints", "[cli]") {
    // Task 3 of `srun -N3 -n6 --gpus-per-node=2`: LOCAL_RANK 1, GPUs 0,1 on its node. Before,
    // `--only gpus` alone split them (CUDA_VISIBLE_DEVICES=1) while `--only torch,gpus` gave
    // 0,1: evaluated separately, torch's set_device(LOCAL_RANK=1) had one device to pick from.
    const auto env = task_env("srun-N3-n6-gpus-per-node2-env-task3.txt");
    const auto gpus = tfslurm_cli({"env", "--format", "env", "--only", "gpus"}, env);
    const auto torch = tfslurm_cli({"env", "--format", "env", "--only", "torch"}, env);
    const auto both = tfslurm_cli({"env", "--format", "env", "--only", "torch,gpus"}, env);
    REQUIRE(gpus.status == 0);
    REQUIRE(torch.status == 0);
    REQUIRE(both.status == 0);
    CHECK(value_of(gpus.out, "CUDA_VISIBLE_DEVICES") == "0,1");
    CHECK(value_of(both.out, "CUDA_VISIBLE_DEVICES") == "0,1");
    CHECK(value_of(torch.out, "LOCAL_RANK") == "1");
    CHECK(value_of(both.out, "LOCAL_RANK") == "1");
    // Every line of a group printed alone is a line of both printed together.
    for (const auto* alone : {&torch.out, &gpus.out}) {
        std::istringstream lines{*alone};
        for (std::string line; std::getline(lines, line);) {
            INFO(line);
            CHECK(("\n" + both.out).find("\n" + line + "\n") != std::string::npos);
        }
    }
    // TensorFlow's split is asked for by name.
    const auto task =
        tfslurm_cli({"env", "--format", "env", "--only", "gpus", "--gpu-bind", "task"}, env);
    CHECK(value_of(task.out, "CUDA_VISIBLE_DEVICES") == "1");
}

TEST_CASE("traps: several tasks on a node get OMP_NUM_THREADS like under torchrun", "[cli]") {
    // Two tasks per node. OpenMP/MKL start one thread per core in each process otherwise.
    auto env = task_env("srun-N3-n6-gpus-per-node2-env-task3.txt");
    auto r = tfslurm_cli({"env", "--format", "env"}, env);
    REQUIRE(r.status == 0);
    CHECK(value_of(r.out, "OMP_NUM_THREADS") == "1");
    auto with_cpus = env;
    with_cpus.emplace_back("SLURM_CPUS_PER_TASK=3");
    r = tfslurm_cli({"env", "--format", "env", "--only", "torch"}, with_cpus);
    REQUIRE(r.status == 0);
    CHECK(value_of(r.out, "OMP_NUM_THREADS") == "3");
    // The user's own value stays (and is not printed); without the torch variables, none.
    auto with_omp = with_cpus;
    with_omp.emplace_back("OMP_NUM_THREADS=7");
    r = tfslurm_cli({"env", "--format", "env"}, with_omp);
    CHECK(value_of(r.out, "OMP_NUM_THREADS") == "<unset>");
    r = tfslurm_cli({"env", "--format", "env", "--only", "tf,gpus"}, with_cpus);
    CHECK(value_of(r.out, "OMP_NUM_THREADS") == "<unset>");
    // One task per node: the node's cores are the task's.
    r = tfslurm_cli({"env", "--format", "env", "--nodelist", "n[1-2]", "--rank", "1"});
    REQUIRE(r.status == 0);
    CHECK(value_of(r.out, "OMP_NUM_THREADS") == "<unset>");
}

TEST_CASE("traps: a misspelt or unknown TFSLURM_* variable is named, once", "[cli]") {
    const std::vector<std::string> env{"TFSLURM_PSS=2",
                                       "TFSLURM_XYZZY=1",
                                       "TFSLURM_RANK=3",
                                       "TFSLURM_SECRET=00",
                                       "TFSLURM_GPUS_PER_TSK=1",
                                       "TFSLURM_PS_PLACEMENT=spread"};
    const std::string warnings =
        "tfslurm: warning: TFSLURM_GPUS_PER_TSK: not a tfslurm variable, ignored (did you mean "
        "TFSLURM_GPUS_PER_TASK?)\n"
        "tfslurm: warning: TFSLURM_PSS: not a tfslurm variable, ignored (did you mean "
        "TFSLURM_PS?)\n"
        "tfslurm: warning: TFSLURM_XYZZY: not a tfslurm variable, ignored\n";
    auto r = tfslurm_cli({"plan", "--nodelist", "n[1-2]", "--json"}, env);
    CHECK(r.status == 0);
    CHECK(r.err == warnings);
    r = tfslurm_cli({"env", "--nodelist", "n[1-2]", "--rank", "0", "--only", "tf"}, env);
    CHECK(r.status == 0);
    CHECK(r.err == warnings);
    // In a step only rank 0 says it (every task sees the same environment).
    auto task = task_env("srun-N3-n6-SLURM-env-task3.txt");
    task.insert(task.end(), env.begin(), env.end());
    r = tfslurm_cli({"env", "--only", "tf"}, task);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    // A name that is not an identifier is quoted.
    r = tfslurm_cli({"plan", "--nodelist", "n1"}, {"TFSLURM_A\x1b[31m=1"});
    CHECK(r.err == "tfslurm: warning: \"TFSLURM_A\\x1b[31m\": not a tfslurm variable, ignored\n");
}

TEST_CASE("traps: every variable too large for the environment in one error", "[cli]") {
    // 80,000 tasks: TF_CONFIG and the tf4slurm dictionary are both too large. Before, the
    // first error's hint (--tf-config-file auto) led straight to a second one.
    const std::vector<std::string> preview{
        "env", "--nodelist", "node-[00001-10000]", "--tasks-per-node", "8", "--rank", "0"};
    auto r = tfslurm_cli(preview);
    CHECK(r.status == 6);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("tfslurm: error: TF_CONFIG, TFSLURM_SERVERS: "));
    CHECK_THAT(r.err,
               Catch::Contains(" bytes for 80000 tasks do not fit in one environment variable "
                               "each (Linux allows 131072 bytes per NAME=value string)\n"));
    CHECK_THAT(r.err,
               Catch::EndsWith("tfslurm: hint: write TF_CONFIG to a file on the node that Python "
                               "trainers load, and leave the tf4slurm dictionary out: "
                               "--tf-config-file auto --only tf,torch,gpus\n"));
    // The way out works for both at once.
    auto followed = preview;
    followed.insert(followed.end(), {"--tf-config-file", "auto", "--only", "tf,torch,gpus"});
    const tfslurm::test::TempDir tmp{"traps-size"};
    r = tfslurm_cli(followed, {"TMPDIR=" + tmp.path});
    CHECK(r.err.empty());
    CHECK(r.status == 0);
    CHECK_THAT(r.out, Catch::StartsWith("export TFSLURM_TF_CONFIG_FILE="));
    // An `only` that had no torch: the hint keeps the user's groups.
    auto tf_servers = preview;
    tf_servers.insert(tf_servers.end(), {"--only", "tf,servers"});
    r = tfslurm_cli(tf_servers);
    CHECK_THAT(r.err, Catch::EndsWith("--tf-config-file auto --only tf\n"));
}

TEST_CASE("traps: env previews need --rank, not SLURM_PROCID", "[cli]") {
    // A preview reads no SLURM_* variable: SLURM_PROCID set or not, --rank names the task.
    for (const std::vector<std::string>& env :
         {std::vector<std::string>{}, std::vector<std::string>{"SLURM_PROCID=1"}}) {
        const auto r = tfslurm_cli({"env", "--nodelist", "n[1-2]", "--tasks-per-node", "2"}, env);
        CHECK(r.status == 2);
        CHECK(r.err == "tfslurm: error: preview options: tfslurm env describes one task: need "
                       "--rank\ntfslurm: hint: a preview reads no SLURM_* variable: name the "
                       "task, e.g. --rank 0\n");
    }
}

TEST_CASE("traps: scontrol's habits in hostlist and hostnames", "[cli]") {
    const tfslurm::test::TempDir tmp{"traps-hosts"};
    const std::string file = tmp.path + "/hosts.txt";
    {
        std::ofstream out{file};
        out << "n1\nn2 n3,n7\n";
    }
    // An argument with a '/' is a file of hosts, as scontrol reads it.
    auto r = tfslurm_cli({"hostlist", file, "m1"});
    CHECK(r.status == 0);
    CHECK(r.out == "n[1-3,7],m1\n");
    r = tfslurm_cli({"hostlist", "./no/such/file"});
    CHECK(r.status == 7);
    CHECK(r.err == "tfslurm: error: HOST file \"./no/such/file\": cannot open \"./no/such/file\": "
                   "No such file or directory\n");
    // Without HOST on a terminal it refuses instead of waiting in silence.
    r = run_on_terminal({"hostlist"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: hostlist: no HOST given and standard input is a terminal\n"
                   "tfslurm: hint: give the hosts (tfslurm hostlist n1 n2), pipe them in (... | "
                   "tfslurm hostlist), or type them after 'tfslurm hostlist -'\n");
    // An empty nodelist variable is an error, not "no hosts".
    r = tfslurm_cli({"hostnames"}, {"SLURM_STEP_NODELIST="});
    CHECK(r.status == 4);
    CHECK(r.out.empty());
    CHECK(r.err == "tfslurm: error: SLURM_STEP_NODELIST: empty host list: \"\"\n");
    r = tfslurm_cli({"hostnames", ""});
    CHECK(r.status == 4);
    CHECK(r.err == "tfslurm: error: LIST: empty host list: \"\"\n");
}

TEST_CASE("traps: srun's options after tfslurm are named as srun's", "[cli]") {
    auto r = tfslurm_cli({"run", "-N2", "--ntasks-per-node", "2", "--ps", "1", "python", "t.py"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: run: an option of srun, not of tfslurm run: \"-N2\"\n"
                   "tfslurm: hint: srun makes the allocation and starts one tfslurm per task: "
                   "srun -N2 --ntasks-per-node 2 tfslurm run --ps 1 python t.py\n");
    r = tfslurm_cli({"run", "--ps", "1", "-w", "n[1-2]", "--", "python", "t.py"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: run: an option of srun, not of tfslurm run: \"-w\"\n"
                   "tfslurm: hint: srun makes the allocation and starts one tfslurm per task: "
                   "srun -w n[1-2] tfslurm run --ps 1 -- python t.py\n");
    // The same with `--` before the trainer's command (CLI11 names `--` itself there).
    r = tfslurm_cli({"run", "-N2", "--", "python", "train.py"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: run: an option of srun, not of tfslurm run: \"-N2\"\n"
                   "tfslurm: hint: srun makes the allocation and starts one tfslurm per task: "
                   "srun -N2 tfslurm run -- python train.py\n");
    r = tfslurm_cli({"plan", "--nodes=3"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: plan: an option of srun, not of tfslurm plan: \"--nodes=3\"\n"
                   "tfslurm: hint: preview an allocation with --nodelist, --tasks-per-node and "
                   "--distribution, or run tfslurm plan inside srun\n");
}

TEST_CASE("traps: a value given to a global flag names the flag, not the command", "[cli]") {
    for (const auto& args : {std::vector<std::string>{"--verbose=abc", "hostnames", "n1"},
                             std::vector<std::string>{"hostnames", "--verbose=abc", "n1"}}) {
        const auto r = tfslurm_cli(args);
        CHECK(r.status == 2);
        CHECK(r.out.empty());
        CHECK(r.err == "tfslurm: error: --verbose: an option of every command, a flag that takes "
                       "no value: \"abc\"\n"
                       "tfslurm: hint: -v for more log output on stderr, -vv for trace\n");
    }
}

TEST_CASE("traps: options after '--' and empty values follow one rule", "[cli]") {
    auto r = tfslurm_cli({"plan", "--nodelist", "n1", "--", "--ps", "1"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: plan: an option after '--' is no longer read as one, and plan "
                   "takes no arguments: \"--ps\"\n"
                   "tfslurm: hint: put the options before '--', or leave '--' out\n");
    // `--only ''` is refused like `--only ','`; an empty TFSLURM_ONLY is an unset one.
    for (const std::string only : {"", ","}) {
        r = tfslurm_cli({"env", "--nodelist", "n1", "--rank", "0", "--only", only});
        CHECK(r.status == 2);
        CHECK(r.err == "tfslurm: error: --only: expected all, or a comma list of tf, servers, "
                       "torch, gpus: \"" +
                           only + "\"\n");
    }
    r = tfslurm_cli({"env", "--nodelist", "n1", "--rank", "0", "--format", "env"},
                    {"TFSLURM_ONLY="});
    CHECK(r.status == 0);
    CHECK(value_of(r.out, "TF_CONFIG") != "<unset>");
    // The same rule for run's own copy of --only.
    r = tfslurm_cli({"run", "--local", "2", "--only", "", "--", "true"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --only: expected all, or a comma list of tf, servers, torch, "
                   "gpus: \"\"\n");
    r = tfslurm_cli({"run", "--local", "2", "--grace", "", "--", "true"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --grace: expected SECONDS: \"\"\n");
}

TEST_CASE("traps: the man page renders every entry, with no roff left in the text", "[cli]") {
    const std::string page = std::string{tfslurm::test::paths::source_dir} + "/man/tfslurm.1";
    const auto rendered = tfslurm::test::run(
        {{"/usr/bin/groff", "-man", "-Tascii", "-ww", "-P-cbou", "-rLL=100n", page},
         {"PATH=/usr/bin:/bin", "LC_ALL=C"}});
    REQUIRE(rendered.status == 0);
    CHECK(rendered.err.empty()); // groff's warnings (-ww)
    // A request glued to the text before it (`later..TP`) is printed, not obeyed.
    for (const std::string request : {".TP", ".IP", ".PP", ".SH", ".SS", ".BR", ".BI", ".B "}) {
        INFO(request);
        CHECK(rendered.out.find(request) == std::string::npos);
    }
    // Every option of every command starts an entry: a line of its own, indented as a tag, that
    // is as far in as the text of a section (7 columns with groff 1.22, 5 with groff 1.24).
    std::vector<std::string> tags;
    std::istringstream lines{rendered.out};
    std::string margin;
    bool after_name = false;
    for (std::string line; std::getline(lines, line);) {
        const auto text = line.find_first_not_of(' ');
        if (margin.empty()) {
            if (after_name && text != std::string::npos) {
                margin.assign(text, ' ');
                REQUIRE(!margin.empty());
            }
            after_name = after_name || line == "NAME";
        } else if (line.rfind(margin + "-", 0) == 0) {
            tags.push_back(line);
        }
    }
    for (const std::string sub : {"", "hostnames", "hostlist", "plan", "env", "run"}) {
        std::vector<std::string> args;
        if (!sub.empty()) {
            args.push_back(sub);
        }
        args.emplace_back("--help");
        const auto help = tfslurm_cli(args);
        // The options' own lines (two spaces, then the names), not mentions in descriptions.
        std::istringstream help_lines{help.out};
        for (std::string line; std::getline(help_lines, line);) {
            if (line.rfind("  -", 0) != 0) {
                continue;
            }
            const auto names = line.substr(2, line.find("  ", 2) - 2);
            const auto pos = names.find("--");
            if (pos == std::string::npos) {
                continue;
            }
            auto end = pos + 2;
            while (
                end < names.size() &&
                (std::isalnum(static_cast<unsigned char>(names[end])) != 0 || names[end] == '-')) {
                ++end;
            }
            const auto option = names.substr(pos, end - pos);
            INFO(sub << ": " << option);
            CHECK(std::any_of(tags.begin(), tags.end(), [&option](const std::string& tag) {
                const auto at = tag.find(option);
                return at != std::string::npos &&
                       (at + option.size() == tag.size() ||
                        std::string{" ,["}.find(tag[at + option.size()]) != std::string::npos);
            }));
        }
    }
}
