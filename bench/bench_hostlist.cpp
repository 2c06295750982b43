// SPDX-License-Identifier: MIT
// Benchmark: expand_hostlist() and compress_hostlist() next to Slurm's own
// `scontrol show hostnames` / `scontrol show hostlist`. Prints figures; asserts nothing.
//
//   bench_hostlist [--runs N] [--scontrol PATH]
//
// scontrol is spawned (posix_spawn, no shell) with SLURM_CONF pointing at a two-line
// slurm.conf in a temporary directory; its stdout goes to a pipe that is drained (and its
// lines counted), so its times include process start-up, reading the configuration and
// printing every host. `scontrol show hostnames n1` is printed as the start-up baseline.
#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>
#include <tfslurm/spawn.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iomanip>
#include <iostream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Timing {
    double median_ms = 0;
    double min_ms = 0;
};

Timing summarize(std::vector<double> samples) {
    std::sort(samples.begin(), samples.end());
    const std::size_t n = samples.size();
    const double median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    return {median, samples.front()};
}

Timing measure(std::size_t runs, const std::function<void()>& action) {
    std::vector<double> samples;
    for (std::size_t i = 0; i < runs; ++i) {
        const auto start = Clock::now();
        action();
        samples.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    return summarize(samples);
}

/// `name` resolved through PATH with the launcher's own lookup; "" when it is not found.
std::string find_in_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    try {
        return tfslurm::find_executable(name, path != nullptr ? path : "/usr/bin:/bin");
    } catch (const tfslurm::Error&) {
        return {};
    }
}

class Scontrol {
  public:
    explicit Scontrol(std::string path) : m_path(std::move(path)) {
        std::string dir = "/tmp/tfslurm-bench-XXXXXX";
        if (mkdtemp(dir.data()) == nullptr) {
            throw std::system_error(errno, std::generic_category(), "mkdtemp");
        }
        m_dir = dir;
        m_conf = m_dir + "/slurm.conf";
        std::ofstream(m_conf) << "ClusterName=x\nSlurmctldHost=localhost\n";
        for (char** entry = environ; *entry != nullptr; ++entry) {
            if (std::string_view(*entry).rfind("SLURM_", 0) != 0) {
                m_env.emplace_back(*entry);
            }
        }
        m_env.push_back("SLURM_CONF=" + m_conf);
    }
    Scontrol(const Scontrol&) = delete;
    Scontrol& operator=(const Scontrol&) = delete;
    ~Scontrol() {
        unlink(m_conf.c_str());
        rmdir(m_dir.c_str());
    }

    /// Run `scontrol show WHAT LIST`, drain its stdout; returns the number of lines printed.
    [[nodiscard]] std::size_t show(const std::string& what, const std::string& list) const {
        std::array<int, 2> out{};
        if (pipe2(out.data(), O_CLOEXEC) != 0) {
            throw std::system_error(errno, std::generic_category(), "pipe2");
        }
        posix_spawn_file_actions_t actions;
        posix_spawn_file_actions_init(&actions);
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&actions, out[1], 1);
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
        std::vector<std::string> args{m_path, "show", what, list};
        std::vector<char*> argv;
        argv.reserve(args.size() + 1);
        for (auto& arg : args) {
            argv.push_back(arg.data());
        }
        argv.push_back(nullptr);
        std::vector<char*> envp;
        envp.reserve(m_env.size() + 1);
        for (const auto& entry : m_env) {
            envp.push_back(const_cast<char*>(entry.c_str()));
        }
        envp.push_back(nullptr);
        pid_t pid = 0;
        const int rc =
            posix_spawn(&pid, m_path.c_str(), &actions, nullptr, argv.data(), envp.data());
        posix_spawn_file_actions_destroy(&actions);
        close(out[1]);
        if (rc != 0) {
            close(out[0]);
            throw std::system_error(rc, std::generic_category(), "posix_spawn " + m_path);
        }
        std::size_t lines = 0;
        std::vector<char> buffer(1 << 16);
        while (true) {
            const ssize_t n = read(out[0], buffer.data(), buffer.size());
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                break;
            }
            lines += static_cast<std::size_t>(std::count(buffer.begin(), buffer.begin() + n, '\n'));
        }
        close(out[0]);
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            throw std::runtime_error("scontrol show " + what + " failed");
        }
        return lines;
    }

  private:
    std::string m_path;
    std::string m_dir;
    std::string m_conf;
    std::vector<std::string> m_env;
};

std::string figure(const Timing& timing) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(timing.median_ms < 10 ? 3 : 1) << timing.median_ms
        << " / " << timing.min_ms;
    return out.str();
}

struct Case {
    std::string label;
    std::string list;
};

std::string many_ranges(std::size_t count) {
    std::string list = "n[";
    for (std::size_t i = 0; i < count; ++i) {
        list += (i > 0 ? "," : "") + std::to_string(4 * i + 1) + "-" + std::to_string(4 * i + 3);
    }
    return list + "]";
}

std::string many_items(std::size_t count) {
    std::string list;
    for (std::size_t i = 0; i < count; ++i) {
        list += (i > 0 ? ",h" : "h") + std::to_string(i * 7 % 1000) + "-ib";
    }
    return list;
}

int run(int argc, char** argv) {
    std::size_t runs = 7;
    std::string scontrol_path;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--runs" && i + 1 < argc) {
            runs = std::max<std::size_t>(1, std::stoul(argv[++i]));
        } else if (arg == "--scontrol" && i + 1 < argc) {
            scontrol_path = argv[++i];
        } else {
            std::cerr << "usage: bench_hostlist [--runs N] [--scontrol PATH]\n";
            return 2;
        }
    }
    if (scontrol_path.empty()) {
        scontrol_path = find_in_path("scontrol");
    }
    std::optional<Scontrol> scontrol;
    if (!scontrol_path.empty()) {
        scontrol.emplace(scontrol_path);
    }

    const std::vector<Case> cases = {
        {"n1 (start-up baseline)", "n1"},
        {"n[1-65536]", "n[1-65536]"},
        {"a[1-1000]b[1-1000]", "a[1-1000]b[1-1000]"},
        {"1000 ranges n[1-3,5-7,...]", many_ranges(1000)},
        {"1000 items h7-ib,h14-ib,...", many_items(1000)},
    };

    std::cout << "tfslurm hostlist benchmark: wall time in ms, median / min of " << runs
              << " runs\n";
    if (scontrol) {
        std::cout << "scontrol = " << scontrol_path
                  << "; its times INCLUDE process start-up, reading slurm.conf and printing\n"
                     "every host to a pipe (see the n1 row for the start-up baseline)\n";
    } else {
        std::cout << "scontrol not found: only tfslurm's figures are shown\n";
    }
    std::cout << "\n"
              << std::left << std::setw(30) << "expand" << std::right << std::setw(9) << "hosts"
              << std::setw(22) << "expand_hostlist" << std::setw(26) << "scontrol show hostnames"
              << "\n";
    for (const auto& c : cases) {
        std::size_t hosts = 0;
        const Timing ours = measure(runs, [&] { hosts = tfslurm::expand_hostlist(c.list).size(); });
        std::string theirs = "-";
        if (scontrol) {
            std::size_t lines = 0;
            theirs = figure(measure(runs, [&] { lines = scontrol->show("hostnames", c.list); }));
            if (lines != hosts) {
                theirs += " (printed " + std::to_string(lines) + " lines!)";
            }
        }
        std::cout << std::left << std::setw(30) << c.label << std::right << std::setw(9) << hosts
                  << std::setw(22) << figure(ours) << std::setw(26) << theirs << "\n";
    }

    std::cout << "\n"
              << std::left << std::setw(30) << "compress" << std::right << std::setw(9) << "hosts"
              << std::setw(22) << "compress_hostlist" << std::setw(26) << "scontrol show hostlist"
              << "\n";
    for (const auto& c : cases) {
        const std::vector<std::string> hosts = tfslurm::expand_hostlist(c.list);
        std::string compressed;
        const Timing ours = measure(runs, [&] { compressed = tfslurm::compress_hostlist(hosts); });
        std::string theirs = "-";
        if (scontrol) {
            // scontrol takes a hostlist, so this is its expand + compress of the same list.
            theirs = figure(
                measure(runs, [&] { static_cast<void>(scontrol->show("hostlist", c.list)); }));
        }
        std::cout << std::left << std::setw(30) << c.label << std::right << std::setw(9)
                  << hosts.size() << std::setw(22) << figure(ours) << std::setw(26) << theirs
                  << "\n";
    }
    std::cout << "\n(scontrol show hostlist parses the list and re-compresses it; "
                 "compress_hostlist starts from the expanded hosts)\n";
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& error) {
        std::cerr << "bench_hostlist: " << error.what() << "\n";
        return 1;
    }
}
