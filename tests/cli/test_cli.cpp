// SPDX-License-Identifier: MIT
#include "cli_runner.hpp"
#include "process.hpp"
#include "temp_dir.hpp"
#include "test_paths.hpp"

#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

using tfslurm::test::Result;
using tfslurm::test::tfslurm_cli;

namespace {

/// `NAME=value` lines of a captured task environment (optionally one `srun -l` label).
std::vector<std::string> task_env(const std::string& file, const std::string& label = "") {
    std::ifstream in{std::string{tfslurm::test::paths::test_data_dir} + "/slurm-env/" + file};
    std::vector<std::string> vars;
    for (std::string line; std::getline(in, line);) {
        if (!label.empty()) {
            if (line.rfind(label + ": ", 0) != 0) {
                continue;
            }
            line = line.substr(label.size() + 2);
        }
        if (line.find('=') != std::string::npos && line.rfind("SLURM", 0) == 0) {
            vars.push_back(line);
        }
    }
    return vars;
}

} // namespace

TEST_CASE("cli: hostnames expands like scontrol show hostnames", "[cli]") {
    auto r = tfslurm_cli({"hostnames", "n[01-03],x[1-2]-y[1-2]"});
    CHECK(r.status == 0);
    CHECK(r.out == "n01\nn02\nn03\nx1-y1\nx1-y2\nx2-y1\nx2-y2\n");
    CHECK(r.err.empty());

    r = tfslurm_cli({"hostnames", "-"}, {}, "n[1-2]\nm3\n");
    CHECK(r.out == "n1\nn2\nm3\n");

    r = tfslurm_cli({"hostnames"}, {"SLURM_NODELIST=n[1-2]", "SLURM_JOB_NODELIST=m1"});
    CHECK(r.out == "m1\n");
    r = tfslurm_cli(
        {"hostnames"},
        {"SLURM_NODELIST=n[1-2]", "SLURM_JOB_NODELIST=m1", "SLURM_STEP_NODELIST=s[7-8]"});
    CHECK(r.out == "s7\ns8\n");
}

TEST_CASE("cli: a million hosts stream out and fold back without expansion", "[cli]") {
    auto r = tfslurm_cli({"hostnames", "a[1-1000]b[1-1000]"});
    REQUIRE(r.status == 0);
    CHECK(std::count(r.out.begin(), r.out.end(), '\n') == 1'000'000);
    CHECK(r.out.rfind("a1b1\na1b2\n", 0) == 0);
    CHECK(r.out.size() == 8'786'000);
    CHECK(r.out.substr(r.out.size() - 21) == "a1000b999\na1000b1000\n");
    // Longer than the output buffer: a name is never split between two writes.
    const std::string long_name(70'000, 'q');
    r = tfslurm_cli({"hostnames", "x[1-2]," + long_name + ",y[9-10]"});
    CHECK(r.out == "x1\nx2\n" + long_name + "\ny9\ny10\n");

    r = tfslurm_cli({"hostlist", "a[1-1000]b[1-1000]"});
    REQUIRE(r.status == 0);
    CHECK(r.out.rfind("a1b[1-1000],a2b[1-1000],", 0) == 0);
    CHECK(r.out.substr(r.out.size() - 29) == "a999b[1-1000],a1000b[1-1000]\n");
}

TEST_CASE("cli: hostnames errors name the input and exit with documented statuses", "[cli]") {
    auto r = tfslurm_cli({"hostnames", "n[3-1]"});
    CHECK(r.status == 4);
    CHECK(r.out.empty());
    CHECK(r.err == "tfslurm: error: LIST: invalid range '3-1' at offset 2 (low bound above high "
                   "bound): \"n[3-1]\"\n");

    r = tfslurm_cli({"hostnames"}, {"SLURM_JOB_NODELIST=n[1-"});
    CHECK(r.status == 4);
    CHECK(r.err == "tfslurm: error: SLURM_JOB_NODELIST: unterminated '[' at offset 1: \"n[1-\"\n");

    r = tfslurm_cli({"hostnames"});
    CHECK(r.status == 3);
    CHECK(r.err == "tfslurm: error: SLURM_STEP_NODELIST: not set\n"
                   "tfslurm: hint: not inside Slurm? give the list: tfslurm hostnames 'n[1-3]'\n");
}

TEST_CASE("cli: hostlist compresses arguments or standard input", "[cli]") {
    auto r = tfslurm_cli({"hostlist", "n1", "n2", "n3", "n5", "m[1-2]"});
    CHECK(r.status == 0);
    CHECK(r.out == "n[1-3,5],m[1-2]\n");
    r = tfslurm_cli({"hostlist"}, {}, "n3 n1\nn2\tn1\n");
    CHECK(r.out == "n[3,1-2,1]\n");
}

TEST_CASE("cli: env prints a real task's settings as export lines", "[cli]") {
    const auto env = task_env("srun-N3-n6-SLURM-env-task3.txt");
    auto r = tfslurm_cli({"env", "--ps", "1"}, env);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out ==
          "export TF_CONFIG='{\"cluster\":{\"ps\":[\"n1:31007\"],\"worker\":[\"n1:31008\","
          "\"n2:31007\",\"n2:31008\",\"n3:31007\",\"n3:31008\"]},\"task\":{\"type\":\"worker\","
          "\"index\":2}}'\n"
          "export TFSLURM_SERVERS='{\"ps\":[\"n1:31007\"],\"worker\":[\"n1:31008\",\"n2:31007\","
          "\"n2:31008\",\"n3:31007\",\"n3:31008\"]}'\n"
          "export TFSLURM_TASK_TYPE='worker'\n"
          "export TFSLURM_TASK_INDEX='2'\n"
          "export MASTER_ADDR='n1'\n"
          "export MASTER_PORT='31007'\n"
          "export RANK='3'\n"
          "export WORLD_SIZE='6'\n"
          "export LOCAL_RANK='1'\n"
          "export LOCAL_WORLD_SIZE='2'\n"
          "export NODE_RANK='1'\n"
          "export TFSLURM_RANK='3'\n"
          "export TFSLURM_ROLE='worker'\n"
          "export TFSLURM_CONTROL='n1:31009'\n"
          "export OMP_NUM_THREADS='1'\n");

    r = tfslurm_cli({"env", "--format", "json", "--only", "tf"}, env);
    CHECK(r.status == 0);
    CHECK(r.out ==
          "{\n  \"TF_CONFIG\": \"{\\\"cluster\\\":{\\\"worker\\\":[\\\"n1:31007\\\","
          "\\\"n1:31008\\\",\\\"n2:31007\\\",\\\"n2:31008\\\",\\\"n3:31007\\\","
          "\\\"n3:31008\\\"]},\\\"task\\\":{\\\"type\\\":\\\"worker\\\",\\\"index\\\":3}}\",\n"
          "  \"TFSLURM_RANK\": \"3\",\n  \"TFSLURM_ROLE\": \"worker\",\n"
          "  \"TFSLURM_CONTROL\": \"n1:31009\"\n}\n");

    // Settings also come from TFSLURM_* variables; options win over them.
    auto with_env = env;
    with_env.emplace_back("TFSLURM_PS=2");
    r = tfslurm_cli({"env", "--format", "env", "--only", "servers"}, with_env);
    CHECK(r.out.rfind("TFSLURM_SERVERS={\"ps\":[\"n1:31007\",\"n1:31008\"],", 0) == 0);
    r = tfslurm_cli({"env", "--ps", "0", "--format", "env", "--only", "servers"}, with_env);
    CHECK(r.out.rfind("TFSLURM_SERVERS={\"ps\":[],", 0) == 0);
    with_env.back() = "TFSLURM_PS=many";
    r = tfslurm_cli({"env"}, with_env);
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: TFSLURM_PS: expected an integer from 0 to 4194304: \"many\"\n");
}

TEST_CASE("cli: env in a batch script describes rank 0 of the job", "[cli]") {
    auto env = task_env("sbatch-N3-ntpn2-gpn2-output.txt");
    auto r = tfslurm_cli({"env", "--format", "env", "--only", "torch,gpus"}, env);
    CHECK(r.status == 0);
    CHECK(r.out.find("RANK=0\nWORLD_SIZE=6\nLOCAL_RANK=0\nLOCAL_WORLD_SIZE=2\nNODE_RANK=0\n") !=
          std::string::npos);
    // Said on stderr: eval'd here, the variables would make every task of an srun rank 0.
    CHECK(r.err == "tfslurm: warning: batch script: not a task of a step: these variables "
                   "describe rank 0 of the job's 6 tasks, and every task started with them would "
                   "be rank 0; set them in each task instead: srun bash -c 'eval "
                   "\"$(tfslurm env)\"; exec python train.py'\n");
    // stdout is the same with the warning silenced.
    const auto quiet = tfslurm_cli({"env", "-q", "--format", "env", "--only", "torch,gpus"}, env);
    CHECK(quiet.out == r.out);
    CHECK(quiet.err.empty());
    // A one-task job's batch script is that task: nothing to say.
    const auto set = [&env](const std::string& name, const std::string& value) {
        env.erase(std::remove_if(
                      env.begin(),
                      env.end(),
                      [&name](const std::string& var) { return var.rfind(name + "=", 0) == 0; }),
                  env.end());
        env.push_back(name + "=" + value);
    };
    for (const auto* name :
         {"SLURM_NTASKS", "SLURM_NPROCS", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"}) {
        set(name, "1");
    }
    set("SLURM_TASKS_PER_NODE", "1");
    set("SLURM_NTASKS_PER_NODE", "1");
    set("SLURM_JOB_NODELIST", "n1");
    set("SLURM_NODELIST", "n1");
    set("SLURM_JOB_CPUS_PER_NODE", "2");
    const auto single = tfslurm_cli({"env", "--format", "env", "--only", "torch"}, env);
    CHECK(single.status == 0);
    CHECK(single.out.find("WORLD_SIZE=1\n") != std::string::npos);
    CHECK(single.err.empty());
}

TEST_CASE("cli: inconsistent environments fail loudly", "[cli]") {
    auto env = task_env("srun-N3-n6-SLURM-env-task3.txt");
    env.emplace_back("SLURM_DISTRIBUTION=cyclic");
    auto r = tfslurm_cli({"env"}, env);
    CHECK(r.status == 5);
    CHECK(r.err.rfind("tfslurm: error: SLURM_NODEID: disagrees with the computed placement: cyclic "
                      "distribution of SLURM_STEP_TASKS_PER_NODE=2(x3) over "
                      "SLURM_STEP_NODELIST=n[1-3] puts rank 3 on node 0 (n1) as local task 1: "
                      "\"1\"\ntfslurm: hint: ",
                      0) == 0);
}

TEST_CASE("cli: plan previews a layout without Slurm", "[cli]") {
    auto r = tfslurm_cli({"plan",
                          "--nodelist",
                          "n[1-2]",
                          "--tasks-per-node",
                          "2,1",
                          "--ps",
                          "1",
                          "--job-id",
                          "1234",
                          "--step-id",
                          "0"});
    CHECK(r.status == 0);
    CHECK(r.out == "# job 1234, step 0: 3 tasks on 2 nodes (n[1-2]), native layout\n"
                   "# ports: derived; launcher control endpoint n1:21865\n"
                   "RANK  ROLE      HOST  ADDRESS  PORT   GPUS\n"
                   "0     ps:0      n1    n1       21863  -\n"
                   "1     worker:0  n1    n1       21864  -\n"
                   "2     worker:1  n2    n2       21863  -\n");
    r = tfslurm_cli({"plan", "--nodelist", "n[1-2]", "--json"});
    CHECK(r.status == 0);
    CHECK(r.out.find(
              "\"cluster\": {\n    \"worker\": [\n      \"n1:30110\",\n      \"n2:30110\"\n") !=
          std::string::npos);
}

TEST_CASE("cli: plan previews an arbitrary distribution from a hostfile", "[cli]") {
    const std::string path = "cli-test-hostfile-" + std::to_string(::getpid());
    {
        std::ofstream file(path);
        file << "n2\nn1*2\n# spare\nn3\n";
    }
    auto r = tfslurm_cli({"plan",
                          "--nodelist",
                          "n[1-3]",
                          "--hostfile",
                          path,
                          "--ps",
                          "1",
                          "--job-id",
                          "1234",
                          "--step-id",
                          "0"});
    CHECK(r.status == 0);
    CHECK(r.out == "# job 1234, step 0: 4 tasks on 3 nodes (n[1-3]), native layout\n"
                   "# ports: derived; launcher control endpoint n2:21865\n"
                   "RANK  ROLE      HOST  ADDRESS  PORT   GPUS\n"
                   "0     ps:0      n2    n2       21863  -\n"
                   "1     worker:0  n1    n1       21863  -\n"
                   "2     worker:1  n1    n1       21864  -\n"
                   "3     worker:2  n3    n3       21863  -\n");
    std::remove(path.c_str());
    r = tfslurm_cli({"plan", "--nodelist", "n[1-3]", "--hostfile", path});
    CHECK(r.status == 7);
    CHECK(r.err == "tfslurm: error: --hostfile (" + path + "): cannot open \"" + path +
                       "\": No such file or directory\n"
                       "tfslurm: hint: check the path and its permissions; with srun -m "
                       "arbitrary the file must stay readable on every node while the step "
                       "runs\n");
}

TEST_CASE("cli: usage errors exit 2 with the option named", "[cli]") {
    auto r = tfslurm_cli({"plan", "--nodelist", "n1", "--ps", "x"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --ps: expected an integer from 0 to 4194304: \"x\"\n");
    r = tfslurm_cli({"plan", "--tasks-per-node", "2"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: preview options: need --nodelist\ntfslurm: hint: give "
                   "--nodelist to describe an allocation, or run inside Slurm without them\n");
    r = tfslurm_cli({"env", "--nodelist", "n[1-2]"});
    CHECK(r.status == 2);
    CHECK(r.err.rfind("tfslurm: error: preview options: tfslurm env describes one task: need "
                      "--rank\n",
                      0) == 0);
    r = tfslurm_cli({"plan", "--nodelist", "n[1-2]", "--layout", "sorted"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --layout: expected native or tf-compat: \"sorted\"\n");
    r = tfslurm_cli({});
    CHECK(r.status == 2);
    CHECK(r.err ==
          "tfslurm: error: command: missing\ntfslurm: hint: the commands are hostnames, "
          "hostlist, plan, env, run, events, top, completion; 'tfslurm --help' describes them\n");
    r = tfslurm_cli({"plan", "--bogus"});
    CHECK(r.status == 2);
    r = tfslurm_cli({"--version"});
    CHECK(r.status == 0);
    CHECK(r.out == "0.1.0\n");
    r = tfslurm_cli({"env", "--help"});
    CHECK(r.status == 0);
    CHECK(r.out.find("--format") != std::string::npos);
}

TEST_CASE("cli: a TF_CONFIG larger than the environment allows", "[cli]") {
    auto r = tfslurm_cli({"env",
                          "--nodelist",
                          "a-rather-long-node-name-[00001-04000]",
                          "--tasks-per-node",
                          "2",
                          "--rank",
                          "0"});
    CHECK(r.status == 6);
    CHECK(r.err.find("tfslurm: error: TF_CONFIG, TFSLURM_SERVERS: ") == 0);
    CHECK(r.out.empty());
}

TEST_CASE("cli: the man page documents every option of every command", "[cli]") {
    const std::string man =
        tfslurm::test::file_text(std::string{tfslurm::test::paths::source_dir} + "/man/tfslurm.1");
    REQUIRE(!man.empty());
    for (const std::string sub : {"", "hostnames", "hostlist", "plan", "env", "run", "events"}) {
        INFO("tfslurm " << sub << " --help");
        std::vector<std::string> args;
        if (!sub.empty()) {
            args.push_back(sub);
            // Every command is named in the man page.
            CHECK(man.find(".B " + sub) != std::string::npos);
        }
        args.emplace_back("--help");
        const auto r = tfslurm_cli(args);
        REQUIRE(r.status == 0);
        // Every "--long-option" in the help text, as roff writes it ("\-\-long\-option").
        for (std::size_t pos = r.out.find("--"); pos != std::string::npos;
             pos = r.out.find("--", pos + 2)) {
            std::size_t end = pos + 2;
            while (
                end < r.out.size() &&
                (std::isalnum(static_cast<unsigned char>(r.out[end])) != 0 || r.out[end] == '-')) {
                ++end;
            }
            const auto option = r.out.substr(pos, end - pos);
            if (option.size() <= 2) {
                continue; // the "--" separator of `run`
            }
            std::string roff;
            for (const char c : option) {
                roff += c == '-' ? std::string{"\\-"} : std::string(1, c);
            }
            INFO(option);
            CHECK(man.find(roff) != std::string::npos);
        }
    }
}

TEST_CASE("cli: the man page lists every setting's variable", "[cli]") {
    const std::string man =
        tfslurm::test::file_text(std::string{tfslurm::test::paths::source_dir} + "/man/tfslurm.1");
    REQUIRE(!man.empty());
    for (const auto& spec : tfslurm::setting_registry()) {
        if (!spec.variable.empty()) {
            INFO(spec.variable);
            CHECK(man.find(std::string(spec.variable)) != std::string::npos);
        }
    }
}

TEST_CASE("cli: env --format task-prolog prints what Slurm's TaskProlog reads", "[cli]") {
    auto env = task_env("srun-N3-n6-SLURM-env-task3.txt");
    auto r = tfslurm_cli({"env", "--format", "task-prolog", "--only", "torch"}, env);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    CHECK(r.out.rfind("export MASTER_ADDR=n1\nexport MASTER_PORT=", 0) == 0);
    CHECK(r.out.find("\nexport RANK=3\nexport WORLD_SIZE=6\nexport LOCAL_RANK=1\n") !=
          std::string::npos);
    env.emplace_back("TFSLURM_FORMAT=task-prolog");
    const auto by_variable = tfslurm_cli({"env", "--only", "torch"}, env);
    CHECK(by_variable.out == r.out);
    // No input can put a newline into a value any more (host names, patterns and device
    // lists are printable ASCII); render_env's own refusal is unit-tested in test_tf_config.
    r = tfslurm_cli({"env",
                     "--nodelist",
                     "n1",
                     "--rank",
                     "0",
                     "--only",
                     "gpus",
                     "--gpus",
                     "0,1\nprint x",
                     "-f",
                     "task-prolog"});
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "tfslurm: error: --gpus: device names are printable ASCII: byte 0x0a at "
                   "offset 3: \"0,1\\nprint x\"\n");
    // An empty item, where CUDA would stop reading: refused, not silently dropped.
    r = tfslurm_cli({"plan", "--nodelist", "n1", "--tasks-per-node", "2", "--gpus", "0,,1"});
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "tfslurm: error: --gpus: item 2 is empty (expected GPU indices or names "
                   "separated by single commas, as in CUDA_VISIBLE_DEVICES, which ends at an "
                   "empty item): \"0,,1\"\n");
}

TEST_CASE("cli: a bad setting is named as the user typed it", "[cli]") {
    const std::string problem = R"(expected an integer from 0 to 65536: "8x")";
    auto r = tfslurm_cli({"plan", "--nodelist", "n1", "--gpus-per-task", "8x"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --gpus-per-task: " + problem + "\n");
    r = tfslurm_cli({"plan", "--nodelist", "n1"}, {"TFSLURM_GPUS_PER_TASK=8x"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: TFSLURM_GPUS_PER_TASK: " + problem + "\n");
    // The option wins over the variable: a bad variable under a good option is not read.
    r = tfslurm_cli({"plan", "--nodelist", "n1", "--gpus-per-task", "0"},
                    {"TFSLURM_GPUS_PER_TASK=8x"});
    CHECK(r.status == 0);

    r = tfslurm_cli({"env", "--nodelist", "n1", "--rank", "0"}, {"TFSLURM_FORMAT=xml"});
    CHECK(r.status == 2);
    CHECK(r.err ==
          "tfslurm: error: TFSLURM_FORMAT: expected export, env, json or task-prolog: \"xml\"\n");
    r = tfslurm_cli({"env", "-f", "xml", "--nodelist", "n1", "--rank", "0"});
    CHECK(r.err ==
          "tfslurm: error: --format: expected export, env, json or task-prolog: \"xml\"\n");
    // Output settings are checked before the step is read.
    r = tfslurm_cli({"env"}, {"TFSLURM_ONLY=tf,bogus"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: TFSLURM_ONLY: expected all, or a comma list of tf, servers, "
                   "torch, gpus: \"tf,bogus\"\n");
    // plan has no --only: TFSLURM_ONLY is not its business.
    r = tfslurm_cli({"plan", "--nodelist", "n1"}, {"TFSLURM_ONLY=bogus"});
    CHECK(r.status == 0);
}

TEST_CASE("cli: library messages and hints name options or variables", "[cli]") {
    const std::string no_gpu =
        R"(no GPU is visible to this task (CUDA_VISIBLE_DEVICES is unset or empty): "1")";
    auto r = tfslurm_cli({"plan", "--nodelist", "n1", "--gpus-per-task", "1"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --gpus-per-task: " + no_gpu +
                       "\ntfslurm: hint: request GPUs from Slurm (srun --gpus-per-node, "
                       "--gres=gpu:N) or drop --gpus-per-task\n");
    r = tfslurm_cli({"plan", "--nodelist", "n1"}, {"TFSLURM_GPUS_PER_TASK=1"});
    CHECK(r.err == "tfslurm: error: TFSLURM_GPUS_PER_TASK: " + no_gpu +
                       "\ntfslurm: hint: request GPUs from Slurm (srun --gpus-per-node, "
                       "--gres=gpu:N) or drop TFSLURM_GPUS_PER_TASK\n");
    r = tfslurm_cli({"plan", "--nodelist", "n1", "--gpus-per-node", "2"});
    CHECK(r.err.rfind("tfslurm: error: --gpus-per-node: applies to --layout tf-compat only: "
                      "\"2\"\n",
                      0) == 0);
    r = tfslurm_cli({"plan", "--nodelist", "n1", "--roles", "ps"}, {"TFSLURM_LAYOUT=tf-compat"});
    CHECK(r.err == "tfslurm: error: --roles: the tf-compat layout takes role counts only (--ps, "
                   "--chief, --evaluator): \"ps\"\n");
    r = tfslurm_cli({"plan", "--nodelist", "n1", "--distribution", "arbitrary"});
    CHECK(r.err.rfind(
              "tfslurm: error: --distribution: arbitrary needs --hostfile FILE: \"arbitrary\"\n",
              0) == 0);
    r = tfslurm_cli({"plan", "--nodelist", "n[1-2]", "--tasks-per-node", "1,1,1"});
    CHECK(r.err.rfind("tfslurm: error: --tasks-per-node: gives counts for 3 nodes but --nodelist "
                      "has 2: \"1,1,1\"\n",
                      0) == 0);
    r = tfslurm_cli({"run", "--local", "1", "--", "true"}, {"TFSLURM_HEARTBEAT_TIMEOUT=0.5"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: TFSLURM_HEARTBEAT_TIMEOUT: must be longer than --heartbeat: "
                   "\"0.5\"\ntfslurm: hint: e.g. --heartbeat 1 TFSLURM_HEARTBEAT_TIMEOUT=10\n");
    r = tfslurm_cli({"run", "--local", "1", "--auth", "none", "--", "true"});
    CHECK(r.err == "tfslurm: error: --auth: expected auto, munge or secret: \"none\"\n"
                   "tfslurm: hint: e.g. --auth secret\n");
}

TEST_CASE("cli: env --iface reads this node's interface", "[cli]") {
    const std::vector<std::string> preview{
        "env", "--nodelist", "n1", "--tasks-per-node", "2", "--rank", "1", "--port-base", "2222"};
    auto args = preview;
    args.insert(args.end(), {"--iface", "nosuch1,lo", "--format", "env", "--only", "tf,torch"});
    auto r = tfslurm_cli(args);
    CHECK(r.status == 0);
    CHECK(r.out == "TF_CONFIG={\"cluster\":{\"worker\":[\"127.0.0.1:2222\",\"127.0.0.1:2223\"]},"
                   "\"task\":{\"type\":\"worker\",\"index\":1}}\n"
                   "MASTER_ADDR=127.0.0.1\nMASTER_PORT=2222\nRANK=1\nWORLD_SIZE=2\nLOCAL_RANK=1\n"
                   "LOCAL_WORLD_SIZE=2\nNODE_RANK=0\nTFSLURM_RANK=1\nTFSLURM_ROLE=worker\n"
                   "TFSLURM_CONTROL=n1:2224\nGLOO_SOCKET_IFNAME=lo\nNCCL_SOCKET_IFNAME=lo\n"
                   "TP_SOCKET_IFNAME=lo\nOMP_NUM_THREADS=1\n");

    // A variable the user set is theirs: kept, and not printed.
    args = preview;
    args.insert(args.end(), {"--network", "127.0.0.0/8", "--format", "env", "--only", "gpus"});
    r = tfslurm_cli(args, {"NCCL_SOCKET_IFNAME=ib1"});
    CHECK(r.status == 0);
    CHECK(r.out == "TFSLURM_RANK=1\nTFSLURM_ROLE=worker\nTFSLURM_CONTROL=n1:2224\n"
                   "GLOO_SOCKET_IFNAME=lo\nTP_SOCKET_IFNAME=lo\n");

    // No such interface: the node's own interfaces are listed (they vary: lo is always there).
    args = preview;
    args.insert(args.end(), {"--iface", "nosuch0"});
    r = tfslurm_cli(args);
    CHECK(r.status == 2);
    CHECK(r.err.rfind("tfslurm: error: --iface: node n1 has no address on nosuch0 (its "
                      "interfaces: lo 127.0.0.1",
                      0) == 0);
    CHECK(r.err.find("): \"nosuch0\"\n") != std::string::npos);

    // Other nodes' addresses are unknown to `env` without PMI2: it says so and points to `run`
    // and to srun --mpi=pmi2.
    r = tfslurm_cli({"env", "--iface", "lo"}, task_env("srun-N3-n6-SLURM-env-task3.txt"));
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --iface: the chosen addresses of n1, n3 are unknown here "
                   "(each node reads only its own interfaces): \"lo\"\n"
                   "tfslurm: hint: use tfslurm run (its coordinator exchanges every node's "
                   "address before the trainers start) or tfslurm env under srun --mpi=pmi2 (it "
                   "exchanges them through PMI2); a single-node step works anywhere\n");
    auto with_env = task_env("srun-N3-n6-SLURM-env-task3.txt");
    with_env.emplace_back("TFSLURM_NETWORK=10.0.0.0/33");
    r = tfslurm_cli({"env"}, with_env);
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: TFSLURM_NETWORK: expected an IPv4 or IPv6 network such as "
                   "10.1.0.0/16 or fd00::/64: \"10.0.0.0/33\"\n");
}

TEST_CASE("cli: --exchange", "[cli]") {
    const auto task3 = [](std::vector<std::string> extra = {}) {
        auto env = task_env("srun-N3-n6-SLURM-env-task3.txt");
        env.insert(env.end(), extra.begin(), extra.end());
        return env;
    };
    // pmi2 outside a PMI2 step: Slurm's libpmi2 hands out a singleton, which is refused.
    auto r = tfslurm_cli({"env", "--iface", "lo", "--exchange", "pmi2"}, task3());
    CHECK(r.status == 5);
    CHECK(r.out.empty());
    CHECK(r.err == "tfslurm: error: --exchange pmi2: PMI2 sees 1 task (a singleton), the step "
                   "has 6: this step was not started with srun --mpi=pmi2\n"
                   "tfslurm: hint: run the step with srun --mpi=pmi2 (or set MpiDefault=pmi2 in "
                   "slurm.conf)\n");
    // The same from the variable, named as the user wrote it.
    r = tfslurm_cli({"env", "--iface", "lo"}, task3({"TFSLURM_EXCHANGE=pmi2"}));
    CHECK(r.status == 5);
    CHECK(r.err.rfind("tfslurm: error: TFSLURM_EXCHANGE=pmi2: PMI2 sees 1 task (a singleton)", 0) ==
          0);
    // auto without a PMI2 server: this node's address only (the error of the env exchange); -v
    // shows the choice.
    r = tfslurm_cli({"-v", "env", "--iface", "lo"}, task3());
    CHECK(r.status == 2);
    CHECK(r.err.find("tfslurm: debug: exchange: env (asked for auto; iface/network set; PMI2 "
                     "server absent)\n") != std::string::npos);
    // Impossible combinations name the setting.
    r = tfslurm_cli({"env", "--iface", "lo", "--exchange", "coordinator"}, task3());
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --exchange: only tfslurm run has a coordinator: "
                   "\"coordinator\"\n"
                   "tfslurm: hint: use pmi2 under srun --mpi=pmi2 (or auto)\n");
    r = tfslurm_cli({"env", "--exchange", "pmi2"}, task3());
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --exchange: exchanges the addresses chosen with iface or "
                   "network, and neither is set: \"pmi2\"\n"
                   "tfslurm: hint: set --iface or --network, or leave the exchange at auto\n");
    r = tfslurm_cli({"run", "--iface", "lo", "--exchange", "pmi2", "--", "true"}, task3());
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --exchange: tfslurm run exchanges the addresses through its "
                   "coordinator, not PMI2: \"pmi2\"\n"
                   "tfslurm: hint: use coordinator (or auto)\n");
    r = tfslurm_cli({"plan", "--nodelist", "n1", "--exchange", "coordinator"});
    CHECK(r.status == 2);
    CHECK(r.err == "tfslurm: error: --exchange: tfslurm plan describes the step in one process "
                   "and exchanges nothing: \"coordinator\"\n");
    r = tfslurm_cli({"env", "--exchange", "mpi"}, task3());
    CHECK(r.status == 2);
    CHECK(r.err ==
          "tfslurm: error: --exchange: expected auto, env, pmi2 or coordinator: \"mpi\"\n");
    // env exchanges nothing, and without iface/network auto is env: the usual output.
    r = tfslurm_cli({"env", "--exchange", "env", "--only", "tf", "--format", "env"}, task3());
    CHECK(r.status == 0);
    CHECK(r.out.rfind("TF_CONFIG=", 0) == 0);
}

TEST_CASE("cli: a control port outside SLURM_STEP_RESV_PORTS is said once, by rank 0", "[cli]") {
    auto rank0 = task_env("srun-N3-n6-SLURM-env-all-tasks.txt", "0");
    rank0.emplace_back("SLURM_STEP_RESV_PORTS=23000-23001");
    auto r = tfslurm_cli({"env", "--format", "env", "--only", "servers"}, rank0);
    CHECK(r.status == 0);
    CHECK(r.out.find("\"worker\":[\"n1:23000\",\"n1:23001\",") != std::string::npos);
    CHECK(r.err == "tfslurm: warning: launcher control port 31009: derived, outside "
                   "SLURM_STEP_RESV_PORTS \"23000-23001\": it reserves 2 ports for 2 tasks on a "
                   "node and none for the launcher; srun --resv-ports=3 reserves one\n");
    // The other ranks say nothing (one line for the step, not one per task).
    auto rank3 = task_env("srun-N3-n6-SLURM-env-task3.txt");
    rank3.emplace_back("SLURM_STEP_RESV_PORTS=23000-23001");
    r = tfslurm_cli({"env", "--format", "env", "--only", "servers"}, rank3);
    CHECK(r.status == 0);
    CHECK(r.err.empty());
    // A spare reserved port is the control port: nothing to say.
    rank0.back() = "SLURM_STEP_RESV_PORTS=23000-23002";
    r = tfslurm_cli({"env", "--format", "env", "--only", "servers"}, rank0);
    CHECK(r.err.empty());
}
