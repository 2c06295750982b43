// SPDX-License-Identifier: MIT
// `tfslurm run --local N`: N launchers on this machine, each in a Slurm-like environment.
#include "os/detail/fd.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/resolve/slurm_config.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/shell/local_run.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdint>
#include <optional>
#include <system_error>

namespace tfslurm {

namespace asio = boost::asio;
using boost::system::error_code;

// --- local mode ----------------------------------------------------------------------------------

Environment local_task_environment(const Environment& base,
                                   std::uint32_t ntasks,
                                   std::uint32_t rank,
                                   std::uint64_t job_id) {
    Environment::Map vars;
    for (const auto& [name, value] : base.vars()) {
        // SLURM_CONF stays: it says where Slurm's configuration is (munged's socket), not
        // which step this is; so does SLURM_JOB_END_TIME (`--checkpoint-before` tried locally).
        const bool slurm_step = (name.rfind("SLURM_", 0) == 0 && name != "SLURM_CONF" &&
                                 name != "SLURM_JOB_END_TIME") ||
                                name.rfind("SLURMD_", 0) == 0;
        if (slurm_step || name == k_local_status_variable || name == "TFSLURM_HOST_PATTERN") {
            continue;
        }
        vars.emplace(name, value);
    }
    Environment env(std::move(vars));
    std::string gtids;
    for (std::uint32_t i = 0; i < ntasks; ++i) {
        gtids += (i == 0 ? "" : ",") + std::to_string(i);
    }
    const std::string n = std::to_string(ntasks);
    const std::string job = std::to_string(job_id);
    env.set("SLURM_JOB_ID", job);
    env.set("SLURM_JOBID", job);
    env.set("SLURM_STEP_ID", "0");
    env.set("SLURM_STEPID", "0");
    env.set("SLURM_JOB_NODELIST", "localhost");
    env.set("SLURM_NODELIST", "localhost");
    env.set("SLURM_JOB_NUM_NODES", "1");
    env.set("SLURM_NNODES", "1");
    env.set("SLURM_NTASKS", n);
    env.set("SLURM_NPROCS", n);
    env.set("SLURM_TASKS_PER_NODE", n);
    env.set("SLURM_STEP_NODELIST", "localhost");
    env.set("SLURM_STEP_NUM_NODES", "1");
    env.set("SLURM_STEP_NUM_TASKS", n);
    env.set("SLURM_STEP_TASKS_PER_NODE", n);
    env.set("SLURM_PROCID", std::to_string(rank));
    env.set("SLURM_LOCALID", std::to_string(rank));
    env.set("SLURM_NODEID", "0");
    env.set("SLURM_GTIDS", gtids);
    env.set("SLURMD_NODENAME", "localhost");
    if (!env.contains("TFSLURM_ADDRESS")) {
        // Peers connect to 127.0.0.1: nothing leaves loopback.
        env.set("TFSLURM_ADDRESS", "ip");
    }
    return env;
}

// --- the status channel
// ----------------------------------------------------------------------------

std::string format_local_report(const LocalReport& report) {
    std::string out =
        fmt::format("{} {} {}", report.rank, to_string(report.outcome), report.step_status);
    if (!report.message.empty()) {
        std::string message = report.message;
        std::replace(message.begin(), message.end(), '\n', ' '); // one report, one line
        out += " " + message;
    }
    return out + "\n";
}

namespace {

[[noreturn]] void bad_report(std::string_view problem, std::string_view line) {
    throw errors::make(Errc::protocol, "local report", fmt::format("{}: {}", problem, quote(line)));
}

/// A decimal number without sign or padding, at most `max`; nullopt otherwise.
std::optional<unsigned long> decimal(std::string_view text, unsigned long max) {
    unsigned long value = 0;
    const char* end = text.data() + text.size();
    const auto [ptr, ec] = std::from_chars(text.data(), end, value);
    if (text.empty() || ec != std::errc{} || ptr != end || value > max ||
        (text.size() > 1 && text.front() == '0')) {
        return std::nullopt;
    }
    return value;
}

std::optional<Outcome> parse_outcome(std::string_view text) {
    for (const Outcome outcome : {Outcome::done,
                                  Outcome::interrupted,
                                  Outcome::aborted,
                                  Outcome::coordinator_lost,
                                  Outcome::checkpointed}) {
        if (text == to_string(outcome)) {
            return outcome;
        }
    }
    return std::nullopt;
}

} // namespace

LocalReport parse_local_report(std::string_view line) {
    const auto first = line.find(' ');
    const auto second = first == std::string_view::npos ? first : line.find(' ', first + 1);
    if (second == std::string_view::npos) {
        bad_report("expected \"<rank> <outcome> <step_status>\"", line);
    }
    const auto rank = decimal(line.substr(0, first), UINT32_MAX);
    const std::string_view outcome_text = line.substr(first + 1, second - first - 1);
    const auto outcome = parse_outcome(outcome_text);
    const auto third = line.find(' ', second + 1);
    const std::string_view status_text = third == std::string_view::npos
                                             ? line.substr(second + 1)
                                             : line.substr(second + 1, third - second - 1);
    const auto status = decimal(status_text, 255);
    if (!rank) {
        bad_report("bad rank", line);
    }
    if (!outcome) {
        bad_report(fmt::format("unknown outcome {}", quote(outcome_text)), line);
    }
    if (!status) {
        bad_report("bad step status (expected 0 to 255)", line);
    }
    LocalReport report{static_cast<std::uint32_t>(*rank), *outcome, static_cast<int>(*status), {}};
    if (third != std::string_view::npos) {
        report.message = std::string(line.substr(third + 1));
        if (report.message.empty()) {
            bad_report("empty message after the step status", line);
        }
    }
    return report;
}

std::optional<int> local_status_channel(const Environment& env) {
    const auto text = env.get(k_local_status_variable);
    if (!text) {
        return std::nullopt;
    }
    const auto fd = decimal(*text, INT_MAX);
    if (!fd || *fd < 3 || ::fcntl(static_cast<int>(*fd), F_GETFD) < 0) {
        return std::nullopt; // not ours: ignored
    }
    const int channel = static_cast<int>(*fd);
    detail::set_cloexec(channel);
    return channel;
}

void write_local_report(int fd, const LocalReport& report) noexcept {
    try {
        detail::write_all(fd, format_local_report(report));
    } catch (const std::exception&) {
        // Formatting failed (bad_alloc): the parent uses the exit status instead.
    }
}

namespace {

/// How long a killed launcher's keeper, left to us, may take to end by itself (it needs
/// milliseconds) before whatever is left is killed.
constexpr std::chrono::milliseconds k_orphans_grace{2000};

class LocalRun {
  public:
    explicit LocalRun(const LocalOptions& options)
        : m_options(options), m_signals(m_io), m_reports(m_io) {
        for (const int signo : k_handled_signals) {
            m_signals.add(signo);
        }
    }

    LocalResult run();

  private:
    /// Spawn one launcher per task, each inheriting `report_fd`; on failure, stop those started.
    void start_launchers(int report_fd);
    void read_remaining_reports();
    /// What srun would report for these launchers, and their messages.
    [[nodiscard]] LocalResult result();
    void wait_signal();
    void read_reports();
    void parse_reports();
    void reap();

    const LocalOptions& m_options;
    asio::io_context m_io;
    asio::signal_set m_signals;
    asio::posix::stream_descriptor m_reports;
    std::array<char, 1024> m_buffer{};
    std::string m_text;
    std::vector<pid_t> m_pids;
    std::vector<std::optional<ExitStatus>> m_statuses;
    std::size_t m_running = 0;
    std::vector<LocalReport> m_messages; ///< each distinct message once, in arrival order
};

LocalResult LocalRun::run() {
    int pipe_fds[2] = {-1, -1};
    if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    m_reports.assign(pipe_fds[0]);
    const int report_fd = pipe_fds[1];
    wait_signal();
    start_launchers(report_fd);
    ::close(report_fd);
    logger().debug("local: {} launchers started (job {})", m_options.ntasks, m_options.job_id);
    read_reports();
    reap();
    // Run even when every launcher is gone already (reap() then cancelled the waits): Asio may
    // have read a report at once when read_reports() started the read, and only run() hands
    // that report to its handler; skipped, the line naming a fast failure was lost.
    try {
        m_io.run();
    } catch (const std::exception& e) {
        // Never leave launchers behind (they stop their trainers on SIGTERM).
        for (std::size_t i = 0; i < m_pids.size(); ++i) {
            if (!m_statuses[i]) {
                ::kill(m_pids[i], SIGTERM);
            }
        }
        kill_all_children();
        throw errors::make(Errc::io, "local", fmt::format("internal error: {}", e.what()));
    }
    // Launchers are gone; read what they reported, then make sure nothing else survives. A
    // launcher killed by SIGKILL left its keeper to us (a subreaper): it kills that launcher's
    // trainer, removes its progress file and ends by itself, so it may end first.
    read_remaining_reports();
    (void)await_children(k_orphans_grace);
    kill_all_children();
    return result();
}

void LocalRun::start_launchers(int report_fd) {
    m_pids.assign(m_options.ntasks, 0);
    m_statuses.assign(m_options.ntasks, std::nullopt);
    try {
        for (std::uint32_t rank = 0; rank < m_options.ntasks; ++rank) {
            Environment env =
                local_task_environment(m_options.env, m_options.ntasks, rank, m_options.job_id);
            env.set(std::string(k_local_status_variable), std::to_string(report_fd));
            SpawnRequest request;
            request.argv = m_options.launcher_argv;
            request.env = env.to_strings();
            request.group = ProcessGroup::new_group;
            // If this parent dies, the launchers stop the step cleanly.
            request.death_signal = SIGTERM;
            request.inherit_fds = {report_fd};
            request.before_fork = [this] {
                m_io.notify_fork(asio::execution_context::fork_prepare);
            };
            request.after_fork = [this] { m_io.notify_fork(asio::execution_context::fork_parent); };
            m_pids[rank] = spawn_process(request);
            ++m_running;
        }
    } catch (...) {
        ::close(report_fd);
        for (const pid_t pid : m_pids) {
            if (pid > 0) {
                ::kill(pid, SIGTERM);
            }
        }
        kill_all_children();
        throw;
    }
}

void LocalRun::read_remaining_reports() {
    error_code ec;
    m_reports.non_blocking(true, ec);
    for (;;) {
        const std::size_t n = m_reports.read_some(asio::buffer(m_buffer), ec);
        if (ec || n == 0) {
            break;
        }
        m_text.append(m_buffer.data(), n);
    }
    parse_reports();
}

LocalResult LocalRun::result() {
    // What srun reports for the same launchers: a launcher killed by a signal wins (128 +
    // signo), else the highest exit status (on an abort, every launcher exits with the step's
    // status).
    LocalResult result;
    result.messages = std::move(m_messages);
    int highest = 0;
    for (const auto& status : m_statuses) {
        if (status && status->kind == ExitStatus::Kind::signaled) {
            result.exit_status = status->shell_status();
            return result;
        }
        highest = std::max(highest, status ? status->shell_status() : k_status_lost);
    }
    result.exit_status = highest;
    return result;
}

void LocalRun::wait_signal() {
    m_signals.async_wait([this](const error_code& ec, int signo) {
        if (ec) {
            return;
        }
        if (signo == SIGCHLD) {
            reap();
        } else {
            logger().debug("local: forwarding signal {} to the launchers", signo);
            for (std::size_t i = 0; i < m_pids.size(); ++i) {
                if (m_pids[i] > 0 && !m_statuses[i]) {
                    ::kill(m_pids[i], signo);
                }
            }
        }
        if (m_running > 0) {
            wait_signal();
        }
    });
}

void LocalRun::read_reports() {
    m_reports.async_read_some(asio::buffer(m_buffer), [this](const error_code& ec, std::size_t n) {
        if (ec) {
            return;
        }
        m_text.append(m_buffer.data(), n);
        parse_reports();
        if (m_running > 0) {
            read_reports(); // after the last launcher, read_remaining_reports() takes the rest
        }
    });
}

void LocalRun::parse_reports() {
    std::size_t end = 0;
    while ((end = m_text.find('\n')) != std::string::npos) {
        const std::string line = m_text.substr(0, end);
        m_text.erase(0, end + 1);
        try {
            LocalReport report = parse_local_report(line);
            const bool known = std::any_of(
                m_messages.begin(), m_messages.end(), [&report](const LocalReport& seen) {
                    return seen.message == report.message;
                });
            if (!report.message.empty() && !known) {
                m_messages.push_back(std::move(report));
            }
        } catch (const Error& e) {
            logger().warn("local: ignoring a launcher's report: {}", e.what());
        }
    }
}

void LocalRun::reap() {
    int wait_status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &wait_status, WNOHANG)) > 0) {
        const auto it = std::find(m_pids.begin(), m_pids.end(), pid);
        if (it == m_pids.end()) {
            continue; // an orphan re-parented to us
        }
        const auto index = static_cast<std::size_t>(it - m_pids.begin());
        m_statuses[index] = ExitStatus::from_wait_status(wait_status);
        --m_running;
        logger().debug("local: launcher of rank {} {}", index, describe(*m_statuses[index]));
    }
    if (m_running == 0) {
        // Not m_io.stop(): a read that has completed but whose handler has not run yet would
        // be dropped with the report it read (the line that names a failure). Cancelled, the
        // operations still pending end, every completed one runs, and run() returns.
        error_code ignored;
        m_signals.cancel(ignored);
        m_reports.cancel(ignored);
    }
}

} // namespace

LocalResult run_local(const LocalOptions& options) {
    if (options.ntasks == 0) {
        throw errors::invalid_argument("local run", "needs at least one task", "0");
    }
    if (options.launcher_argv.empty()) {
        throw errors::invalid_argument("local run", "no launcher command", "");
    }
    detail::ignore_sigpipe();
    try {
        become_subreaper();
    } catch (const std::system_error& e) {
        logger().warn("cannot become a child subreaper: {}", e.what());
    }
    LocalRun local(options);
    return local.run();
}

void add_local_secret(Environment& env, protocol::AuthMethod auth) {
    if (env.contains(k_secret_variable) || auth == protocol::AuthMethod::munge ||
        (auth == protocol::AuthMethod::automatic &&
         protocol::munge_available(find_munge_socket(env).path))) {
        return;
    }
    env.set(std::string(k_secret_variable), protocol::to_hex(protocol::random_bytes(32)));
    if (auth == protocol::AuthMethod::automatic) {
        env.set("TFSLURM_AUTH", "secret");
    }
    logger().debug("local: munge unavailable, using a fresh TFSLURM_SECRET");
}

} // namespace tfslurm
