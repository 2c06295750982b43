// SPDX-License-Identifier: MIT
// Benchmark: expand_hostlist() and compress_hostlist() next to Slurm's own
// `scontrol show hostnames` / `scontrol show hostlist`. Prints figures; asserts nothing.
//
//   bench_hostlist [--runs N] [--scontrol PATH] [--tfslurm PATH]
//
// The last table runs whole processes, the yardsticks: `tfslurm hostnames` and
// `tfslurm hostlist` (the binary next to this one, or --tfslurm) against scontrol, each with
// its output drained from a pipe, with its peak RSS measured from a small parent (--peak-rss mode).
//
// scontrol is spawned (posix_spawn, no shell) with SLURM_CONF pointing at a two-line
// slurm.conf in a temporary directory; its stdout goes to a pipe that is drained (and its
// lines counted), so its times include process start-up, reading the configuration and
// printing every host. `scontrol show hostnames n1` is printed as the start-up baseline.
#include <tfslurm/common/error.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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

/// What one whole process did: the lines it printed and its peak resident set.
struct ProcessRun {
    std::size_t lines = 0;
    long max_rss_kib = 0;
};

/// Spawn `args` (no shell) with `env`, standard input from `input` ("" = /dev/null), standard
/// output drained from a pipe and counted; wait for it with wait4() to read its peak RSS.
/// \throws std::runtime_error when it does not exit 0.
ProcessRun run_process(std::vector<std::string> args,
                       const std::vector<std::string>& env,
                       const std::string& input = {}) {
    std::array<int, 2> out{};
    if (pipe2(out.data(), O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(
        &actions, 0, input.empty() ? "/dev/null" : input.c_str(), O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& arg : args) {
        argv.push_back(arg.data());
    }
    argv.push_back(nullptr);
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (const auto& entry : env) {
        envp.push_back(const_cast<char*>(entry.c_str()));
    }
    envp.push_back(nullptr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0].c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    if (rc != 0) {
        close(out[0]);
        throw std::system_error(rc, std::generic_category(), "posix_spawn " + args[0]);
    }
    ProcessRun result;
    std::vector<char> buffer(1 << 16);
    while (true) {
        const ssize_t n = read(out[0], buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        result.lines +=
            static_cast<std::size_t>(std::count(buffer.begin(), buffer.begin() + n, '\n'));
    }
    close(out[0]);
    int status = 0;
    rusage usage{};
    while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        throw std::runtime_error(args[0] + " " + (args.size() > 1 ? args[1] : "") + " failed");
    }
    result.max_rss_kib = usage.ru_maxrss; // an upper bound: see peak_rss_kib()
    return result;
}

/// The peak RSS of `args`, measured through a fresh copy of this program in --peak-rss mode.
/// A process spawned from this one would inherit our own (large) high-water mark at exec, so
/// the measuring parent must be small: see peak_rss_main().
long peak_rss_kib(const std::vector<std::string>& args,
                  const std::vector<std::string>& env,
                  const std::string& input = {}) {
    const std::string report = "/tmp/tfslurm-bench-rss-" + std::to_string(getpid());
    std::vector<std::string> wrapped{"/proc/self/exe", "--peak-rss", report};
    wrapped.insert(wrapped.end(), args.begin(), args.end());
    wrapped[0] = std::filesystem::read_symlink("/proc/self/exe").string();
    static_cast<void>(run_process(wrapped, env, input));
    long kib = 0;
    std::ifstream(report) >> kib;
    unlink(report.c_str());
    return kib;
}

/// --peak-rss FILE CMD...: run CMD (standard streams inherited), write its ru_maxrss to FILE,
/// exit with its status. This process is small, so CMD's figure is its own.
int peak_rss_main(int argc, char** argv) {
    pid_t pid = 0;
    if (posix_spawn(&pid, argv[3], nullptr, nullptr, argv + 3, environ) != 0) {
        return 127;
    }
    int status = 0;
    rusage usage{};
    while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    std::ofstream(argv[2]) << usage.ru_maxrss << "\n";
    static_cast<void>(argc);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
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
        return run_process({m_path, "show", what, list}, m_env).lines;
    }

    [[nodiscard]] const std::vector<std::string>& env() const noexcept { return m_env; }
    [[nodiscard]] const std::string& path() const noexcept { return m_path; }

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

/// The tfslurm binary of the same build tree (bench/bench_hostlist -> cli/tfslurm), or "".
std::string sibling_tfslurm() {
    std::error_code error;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) {
        return {};
    }
    const auto candidate = self.parent_path().parent_path() / "cli" / "tfslurm";
    return std::filesystem::exists(candidate, error) ? candidate.string() : std::string{};
}

/// The yardsticks, whole process against whole process, output to a pipe: time and
/// peak resident set of `tfslurm hostnames|hostlist` next to `scontrol show ...`.
void whole_processes(std::size_t runs, const std::string& tfslurm, const Scontrol& scontrol) {
    // 65,536 names, one a line, in a file: scontrol reads a hostlist argument that contains a
    // '/' as a file of names, tfslurm reads them on standard input.
    const std::string names = "/tmp/tfslurm-bench-names-" + std::to_string(getpid());
    {
        std::ofstream file(names);
        for (int i = 1; i <= 65536; ++i) {
            file << "n" << static_cast<std::uint64_t>(i) * 40503 % 65536 + 1 << "\n";
        }
    }
    struct Row {
        std::string label;
        std::vector<std::string> ours;
        std::string input;
        std::vector<std::string> theirs;
    };
    const std::string big = "a[1-1000]b[1-1000]";
    const std::vector<Row> rows = {
        {"hostnames " + big,
         {tfslurm, "hostnames", big},
         {},
         {scontrol.path(), "show", "hostnames", big}},
        {"hostlist " + big,
         {tfslurm, "hostlist", big},
         {},
         {scontrol.path(), "show", "hostlist", big}},
        {"hostlist of 65,536 names",
         {tfslurm, "hostlist", "-"},
         names,
         {scontrol.path(), "show", "hostlist", names}},
    };
    std::cout << "\nwhole processes, output to a pipe: wall ms median / min of " << runs
              << ", peak RSS in KiB\n"
              << std::left << std::setw(40) << "command" << std::right << std::setw(18) << "tfslurm"
              << std::setw(10) << "RSS" << std::setw(18) << "scontrol" << std::setw(10) << "RSS"
              << std::setw(12) << "speed-up\n";
    for (const auto& row : rows) {
        ProcessRun ours;
        ProcessRun theirs;
        const Timing our_time =
            measure(runs, [&] { ours = run_process(row.ours, scontrol.env(), row.input); });
        const Timing their_time =
            measure(runs, [&] { theirs = run_process(row.theirs, scontrol.env()); });
        ours.max_rss_kib = peak_rss_kib(row.ours, scontrol.env(), row.input);
        theirs.max_rss_kib = peak_rss_kib(row.theirs, scontrol.env());
        std::ostringstream ratio;
        ratio << std::fixed << std::setprecision(1) << their_time.median_ms / our_time.median_ms
              << "x";
        std::cout << std::left << std::setw(40) << row.label << std::right << std::setw(18)
                  << figure(our_time) << std::setw(10) << ours.max_rss_kib << std::setw(18)
                  << figure(their_time) << std::setw(10) << theirs.max_rss_kib << std::setw(11)
                  << ratio.str() << (ours.lines == theirs.lines ? "" : "  (line counts differ!)")
                  << "\n";
    }
    unlink(names.c_str());
}

int run(int argc, char** argv) {
    std::size_t runs = 7;
    std::string scontrol_path;
    std::string tfslurm_path;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--runs" && i + 1 < argc) {
            runs = std::max<std::size_t>(1, std::stoul(argv[++i]));
        } else if (arg == "--scontrol" && i + 1 < argc) {
            scontrol_path = argv[++i];
        } else if (arg == "--tfslurm" && i + 1 < argc) {
            tfslurm_path = argv[++i];
        } else {
            std::cerr << "usage: bench_hostlist [--runs N] [--scontrol PATH] [--tfslurm PATH]\n";
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
    if (tfslurm_path.empty()) {
        tfslurm_path = sibling_tfslurm();
    }
    if (scontrol && !tfslurm_path.empty()) {
        whole_processes(runs, tfslurm_path, *scontrol);
    }
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    if (argc > 3 && std::string_view(argv[1]) == "--peak-rss") {
        return peak_rss_main(argc, argv);
    }
    try {
        return run(argc, argv);
    } catch (const std::exception& error) {
        std::cerr << "bench_hostlist: " << error.what() << "\n";
        return 1;
    }
}
