// SPDX-License-Identifier: MIT
// `tfslurm run --local` under test (run_local_cli.hpp).
#include "run_local_cli.hpp"

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/plan.hpp>

#include <catch2/catch.hpp>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string_view>
#include <thread>

extern char** environ;

using namespace std::chrono_literals;

namespace tfslurm::test {

namespace {

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
        const std::string environment = file_text(dir + "/environ");
        if (environment.find(needle) == std::string::npos) {
            continue;
        }
        const std::string stat = file_text(dir + "/stat");
        const auto close = stat.rfind(')');
        if (close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z') {
            continue;
        }
        found.push_back(static_cast<pid_t>(std::atoi(entry->d_name)));
    }
    ::closedir(proc);
    return found;
}

} // namespace

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

std::size_t count(const std::string& text, const std::string& needle) {
    std::size_t n = 0;
    for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) {
        ++n;
    }
    return n;
}

Cli::Cli(const std::vector<std::string>& args, const ExtraEnv& extra_env) {
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
    // A TMPDIR of the run's own (unless the test sets one): nothing of tfslurm's may stay in it.
    m_tmpdir = m_dir.path + "/tmp";
    REQUIRE(::mkdir(m_tmpdir.c_str(), 0700) == 0);
    env.set("TMPDIR", m_tmpdir);
    for (const auto& [name, value] : extra_env) {
        env.set(name, value);
    }
    std::vector<std::string> argv{k_cli};
    argv.insert(argv.end(), args.begin(), args.end());
    m_process.emplace(test::Command{argv, env.to_strings()}, m_output);
}

Cli::~Cli() {
    m_process.reset(); // kills the process group unless the run was waited for
    // Clean up whatever a failed test left, so that other tests are not disturbed.
    for (const pid_t pid : marked_processes(m_marker)) {
        ::kill(pid, SIGKILL);
    }
}

int Cli::wait(std::chrono::seconds timeout) {
    auto status = m_process->wait_for(timeout);
    if (!status) {
        m_process->kill_group(SIGKILL);
        status = m_process->wait_for(timeout);
        FAIL("tfslurm run did not finish within " << timeout.count() << " s:\n" << output());
    }
    m_status = ExitStatus::from_wait_status(*status);
    return m_status->shell_status();
}

std::string Cli::output() const {
    return file_text(m_output);
}

void Cli::check_nothing_left() const {
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
    // Its files too (the progress files: a launcher killed by SIGKILL leaves them to its keeper).
    std::vector<std::string> files;
    if (DIR* tmp = ::opendir(m_tmpdir.c_str())) {
        while (const dirent* entry = ::readdir(tmp)) {
            if (std::string_view{entry->d_name}.rfind("tfslurm-", 0) == 0) {
                files.emplace_back(entry->d_name);
            }
        }
        ::closedir(tmp);
    }
    CHECK(files == std::vector<std::string>{});
}

Ran run_to_end(const std::vector<std::string>& args, const ExtraEnv& extra_env) {
    Cli cli(args, extra_env);
    Ran ran;
    ran.status = cli.wait();
    ran.output = cli.output();
    cli.check_nothing_left();
    return ran;
}

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

std::vector<std::string> local_defaults(int ntasks, int test, std::vector<std::string> rest) {
    std::vector<std::string> args{
        "run", "--local", std::to_string(ntasks), "--job-id", std::to_string(job_id(test))};
    args.insert(args.end(), rest.begin(), rest.end());
    return args;
}

const char* const k_find_launcher =
    "read -r me _ _ launcher _ < /proc/self/stat; "
    "while read -r _ name _ up _ < /proc/$launcher/stat && "
    "{ [ \"$name\" = '(tfslurm-init)' ] || [ \"$name\" = '(tfslurm-super)' ] || "
    "[ \"$name\" = '(tfslurm-keeper)' ]; }; "
    "do launcher=$up; done; ";

std::string sh_trainer(const std::string& dir, const std::string& worker_body) {
    // A trainer inherits no socket of its launcher (the control connection, the coordinator).
    return std::string(k_find_launcher) +
           "ls -l /proc/$me/fd | grep -q socket: && echo INHERITED-SOCKET; "
           "echo $launcher > " +
           dir + "/launcher.$TFSLURM_RANK; echo $me > " + dir +
           "/trainer.$TFSLURM_RANK; if [ \"$TFSLURM_ROLE\" = ps ]; then exec sleep 1000; fi; " +
           worker_body;
}

} // namespace tfslurm::test
