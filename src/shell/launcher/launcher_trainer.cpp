// SPDX-License-Identifier: MIT
// The launcher's trainer (launcher/launcher_shell.hpp): what comes before its start on this node
// (the probe's listener and attempts, the node's checks in a child process), its start (ports,
// environment, the held port's release, the spawn, its output files or labelled pipes) and the
// watch for a stuck trainer (the progress file). Performed for LauncherMachine's actions.
#include "os/detail/fd.hpp"
#include "os/detail/progress.hpp"
#include "os/detail/signal_reader.hpp"
#include "os/detail/user_file.hpp"
#include "shell/launcher/launcher_shell.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/preflight.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/slurm_config.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/rank_output.hpp>
#include <tfslurm/shell/coordinator_server.hpp>
#include <tfslurm/shell/launcher_shell.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <sstream>
#include <unordered_map>
#include <utility>

namespace tfslurm::detail {

namespace asio = boost::asio;

void LauncherShell::set_trainer_variable(std::string_view name, const std::string& value) {
    std::string entry = fmt::format("{}={}", name, value);
    const auto found = std::find_if(m_env.begin(), m_env.end(), [name](const std::string& e) {
        return e.size() > name.size() && e.compare(0, name.size(), name) == 0 &&
               e[name.size()] == '=';
    });
    if (found != m_env.end()) {
        *found = std::move(entry);
    } else {
        m_env.push_back(std::move(entry));
    }
}

void LauncherShell::start_probe(const std::vector<ProbeTarget>& targets) {
    m_probe.listen(m_trainer_port, m_self.port);
    logger().debug("{}: probing {} peers for up to {}",
                   label(),
                   targets.size(),
                   format_seconds(m_options.run.probe_timeout));
    m_probe.start(
        targets, m_options.run.probe_timeout, [this](std::vector<protocol::ProbeFailure> failures) {
            m_machine.probe_finished(std::move(failures), Clock::now());
            perform();
        });
}

PreflightSettings LauncherShell::preflight_settings(launcher_action::NodeCheckTime when) const {
    PreflightSettings settings;
    if (!m_options.address.empty() && !m_plan.socket_interface.empty()) {
        settings.address = InterfaceAddress{
            m_plan.socket_interface,
            m_options.address,
            m_options.address.find(':') != std::string::npos ? IpFamily::v6 : IpFamily::v4};
    }
    // The trainers' TMPDIR (Slurm's job_container/tmpfs gives each job its own).
    for (const std::string& entry : m_env) {
        if (entry.rfind("TMPDIR=/", 0) == 0) {
            settings.tmpdir = entry.substr(7);
        }
    }
    // Every GPU a trainer of this node will see, once each, in the plan's order.
    for (const RankPlan& rank : m_plan.ranks) {
        if (rank.host != m_self.host) {
            continue;
        }
        for (const std::string& gpu : rank.gpus) {
            if (std::find(settings.gpus.begin(), settings.gpus.end(), gpu) == settings.gpus.end()) {
                settings.gpus.push_back(gpu);
            }
        }
    }
    if (when == launcher_action::NodeCheckTime::after_failure) {
        settings.command = m_options.run.on_failure_check;
        settings.command_timeout = m_options.run.on_failure_check_timeout;
    } else {
        settings.command = m_options.run.preflight_command;
    }
    return settings;
}

void LauncherShell::check_node(launcher_action::NodeCheckTime when) {
    const PreflightSettings settings = preflight_settings(when);
    const auto started = Clock::now();
    const bool has_gpus = !settings.gpus.empty();
    const std::string_view what =
        when == launcher_action::NodeCheckTime::after_failure ? "node check" : "preflight";
    const auto done =
        [this, started, has_gpus, when, what](const std::vector<PreflightCheck>& checks) {
            const auto took = std::chrono::duration_cast<Millis>(Clock::now() - started);
            std::optional<protocol::PreflightFailure> failure;
            for (const PreflightCheck& check : checks) {
                const bool note = check.result == PreflightCheck::Result::skipped &&
                                  check.name == "gpus" && has_gpus;
                // A skipped GPU check on a node whose trainers have GPUs is worth a note; the rest
                // is in the debug log (and a failure in the step's abort line).
                logger().log(note ? LogLevel::info : LogLevel::debug,
                             "{}: {} on {}: {} {}: {}",
                             label(),
                             what,
                             m_self.host,
                             check.name,
                             check.result == PreflightCheck::Result::passed   ? "passed"
                             : check.result == PreflightCheck::Result::failed ? "failed"
                                                                              : "skipped",
                             check.detail);
                if (check.result == PreflightCheck::Result::failed && !failure) {
                    failure = protocol::PreflightFailure{check.name, check.detail};
                }
            }
            logger().debug("{}: {} took {}", label(), what, format_seconds(took));
            if (when == launcher_action::NodeCheckTime::after_failure) {
                m_machine.node_checked(std::move(failure), Clock::now());
            } else {
                m_machine.preflight_finished(std::move(failure), Clock::now());
            }
            perform();
        };
    try {
        m_node_check.start(settings, done);
    } catch (const std::exception& e) {
        done({PreflightCheck{"preflight", PreflightCheck::Result::failed, e.what()}});
    }
}

// Everything between the start decision and a running trainer (~65 lines): port checks, the
// environment (exchanged addresses, restart count), the held port's release and the spawn, in
// the order they must happen.
void LauncherShell::start_trainer(std::uint32_t restart) {
    // No probe connection may meet the trainer: the listener closes before it binds the port.
    m_probe.close();
    try {
        if (!m_options.port_candidates.empty() && m_trainer_port.port() == 0) {
            m_machine.trainer_failed(
                ExitStatus::exited(exit_status(Errc::io)),
                fmt::format("trainer: no free port on {} in {}: other processes hold every one",
                            m_self.host,
                            m_options.port_pool),
                Clock::now());
            return;
        }
        if (m_options.port_candidates.empty() && !port_is_free(m_self.port)) {
            // The step fails before any trainer binds a port of another job. Reported as text
            // (not thrown): the setting reference must reach the CLI that renders it.
            m_machine.trainer_failed(
                ExitStatus::exited(exit_status(Errc::io)),
                fmt::format("trainer: port {} is already in use on {}: another process holds it; "
                            "choose other ports with {}, or let Slurm reserve them with srun "
                            "--resv-ports (MpiParams=ports=... in slurm.conf)",
                            m_self.port,
                            m_self.host,
                            setting_ref("port_base")),
                Clock::now());
            return;
        }
        if (m_options.trainer_environment) {
            // Every node's address is known now (`cluster`): the plan is rebuilt with them.
            m_env = m_options.trainer_environment(m_machine.cluster()).to_strings();
        }
        prepare_progress_watch();
        // A restarted trainer has the same environment (same TF_CONFIG, same ports) but for
        // its restart count, which tells it to resume from its checkpoint.
        set_trainer_variable("TFSLURM_RESTART_COUNT", std::to_string(restart));
        if (!m_options.run_id.empty()) {
            set_trainer_variable("TFSLURM_RUN_ID", m_options.run_id);
        }
        const bool torch = std::any_of(m_env.begin(), m_env.end(), [](const std::string& e) {
            return e.rfind("MASTER_ADDR=", 0) == 0;
        });
        if (torch) {
            // As torchrun sets them for its restarts.
            set_trainer_variable("TORCHELASTIC_RESTART_COUNT", std::to_string(restart));
            set_trainer_variable("TORCHELASTIC_MAX_RESTARTS",
                                 std::to_string(m_options.run.restarts.per_rank));
        }
        // The port is free for the trainer from here: another process binding it in the few
        // milliseconds until the trainer does is the window that remains (docs/protocol.md).
        m_trainer_port.release();
        SpawnRequest request;
        request.argv = m_argv;
        request.env = m_env;
        request.group = ProcessGroup::new_group;
        request.death_signal = SIGKILL;
        // Nothing the trainer starts outlives us, even if we are killed by SIGKILL.
        request.contain = m_options.run.contain;
        // Our destructor removes the progress file; killed by SIGKILL, the keeper (or with
        // --contain the supervisor) does.
        request.remove_if_orphaned = m_progress_file;
        request.before_fork = [this] { m_io.notify_fork(asio::execution_context::fork_prepare); };
        request.after_fork = [this] { m_io.notify_fork(asio::execution_context::fork_parent); };
        m_pid = spawn_trainer(request);
        logger().debug("{}: trainer started (pid {})", label(), m_pid);
        m_machine.trainer_started(Clock::now());
    } catch (const Error& e) {
        // Unrendered: the text crosses the wire to the face that renders its setting references
        // (`--output`, or TFSLURM_OUTPUT), as the user typed them.
        m_machine.trainer_failed(
            ExitStatus::exited(exit_status(e.code())), e.unrendered(), Clock::now());
    } catch (const std::exception& e) {
        m_machine.trainer_failed(
            ExitStatus::exited(exit_status(Errc::spawn_failed)), e.what(), Clock::now());
    }
}

void LauncherShell::open_output_files() {
    if (m_output_fd >= 0 || m_error_fd >= 0 ||
        (m_options.run.output.empty() && m_options.run.error.empty())) {
        return;
    }
    const RankOutputFields fields{
        m_rank,
        Member{m_self.role, m_self.index, m_self.host},
        m_plan.job_id ? std::to_string(*m_plan.job_id) : std::string(),
        m_plan.step_id ? std::to_string(*m_plan.step_id) : std::string(),
    };
    const auto open_file = [&fields](const std::string& pattern, std::string_view key) {
        const std::string path = expand_rank_pattern(pattern, key, fields);
        // Truncated once, at the first start; a restarted trainer appends (like srun -o).
        return open_user_file(path, setting_ref(key), UserFileMode::truncate);
    };
    if (!m_options.run.output.empty()) {
        m_output_fd = open_file(m_options.run.output, "output");
    }
    if (!m_options.run.error.empty()) {
        m_error_fd = open_file(m_options.run.error, "error");
    } else {
        m_error_fd = m_output_fd; // stderr with stdout, as srun -o without -e
    }
}

pid_t LauncherShell::spawn_trainer(SpawnRequest& request) {
    open_output_files();
    const int out = m_output_fd >= 0 ? m_output_fd : STDOUT_FILENO;
    const int err = m_error_fd >= 0 ? m_error_fd : STDERR_FILENO;
    const bool label = m_options.run.label;
    // Output as progress without --label: the same bytes through a plain relay that counts
    // them. A terminal stays the trainer's own: through a pipe its buffering would change
    // (Python buffers a pipe by blocks), so output to a terminal does not count.
    const bool relay_out = label || (m_machine.counts_output() && ::isatty(out) == 0);
    const bool relay_err = label || (m_machine.counts_output() && ::isatty(err) == 0);
    const std::string prefix = label ? fmt::format("{}: ", m_rank) : std::string();
    if (relay_out && !m_stdout) {
        m_stdout = std::make_unique<LabeledStream>(m_io, out, prefix);
    }
    if (relay_err && !m_stderr) {
        m_stderr = std::make_unique<LabeledStream>(m_io, err, prefix);
    }
    request.stdout_fd = relay_out ? m_stdout->open() : m_output_fd;
    request.stderr_fd = relay_err ? m_stderr->open() : m_error_fd;
    const auto start_relays = [&] {
        if (relay_out) {
            m_stdout->start(); // closes our write end
        }
        if (relay_err) {
            m_stderr->start();
        }
    };
    pid_t pid = 0;
    try {
        pid = spawn_process(request);
    } catch (...) {
        start_relays();
        throw;
    }
    start_relays();
    return pid;
}

void LauncherShell::prepare_progress_watch() {
    const auto has = [this](std::string_view name) {
        return std::any_of(m_env.begin(), m_env.end(), [name](const std::string& entry) {
            return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
                   entry[name.size()] == '=';
        });
    };
    if (m_options.run.stall_timeout && !has("PYTHONFAULTHANDLER")) {
        m_env.emplace_back("PYTHONFAULTHANDLER=1"); // the stall signal dumps every thread
    }
    if (!m_progress_file.empty()) {
        // A restart: the same file (the environment may have been rebuilt without it).
        set_trainer_variable("TFSLURM_PROGRESS_FILE", m_progress_file);
        return;
    }
    const auto tmpdir = std::find_if(m_env.begin(), m_env.end(), [](const std::string& entry) {
        return entry.rfind("TMPDIR=/", 0) == 0;
    });
    std::string path = fmt::format("{}/tfslurm-progress-{}.{}-{}-XXXXXX",
                                   tmpdir != m_env.end() ? tmpdir->substr(7) : "/tmp",
                                   m_plan.job_id.value_or(0),
                                   m_plan.step_id.value_or(0),
                                   m_rank);
    const int fd = ::mkstemp(path.data());
    if (fd < 0) {
        // Without a stall timeout only the record's first progress misses it.
        logger().log(m_options.run.stall_timeout ? LogLevel::warn : LogLevel::debug,
                     "{}: cannot create a progress file ({}): only CPU time tells progress",
                     label(),
                     std::strerror(errno));
        return;
    }
    // A modification time of 0 until the trainer touches it: its first touch is its own time.
    detail::set_untouched(fd);
    ::close(fd);
    m_progress_file = path;
    m_env.push_back("TFSLURM_PROGRESS_FILE=" + path);
}

} // namespace tfslurm::detail
