// SPDX-License-Identifier: MIT
// One task's launcher, the Asio shell around LauncherMachine: everything that waits does so on
// one single-threaded io_context: sockets, timers and signals (SIGCHLD included) are Asio
// handlers, and handlers never throw (fatal errors are recorded and re-thrown once
// io_context::run() has returned). Until `welcome` the Connector decides (its failures are
// setup errors, thrown); after it every decision is the machine's, and the shell only performs
// their actions. The link to the coordinator is in
// launcher_connection.cpp (the Connector's shell).
#include "shell/detail/launcher_shell.hpp"

#include "os/detail/fd.hpp"
#include "os/detail/progress.hpp"
#include "os/detail/signal_reader.hpp"
#include "os/detail/user_file.hpp"

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

namespace tfslurm {

namespace asio = boost::asio;
namespace action = launcher_action;
using Tcp = asio::ip::tcp;
using boost::system::error_code;

namespace detail {

LauncherSettings machine_settings(const Plan& plan, const LauncherOptions& options) {
    LauncherSettings settings;
    settings.run = options.run;
    settings.rank = plan.self_rank.value_or(0);
    settings.ranks = members_of(plan);
    settings.control = fmt::format("{}:{}", plan.control_address, plan.control_port);
    settings.host = settings.rank == 0 ? CoordinatorHost::here : CoordinatorHost::elsewhere;
    settings.slurm_step = options.slurm_step;
    if (options.job_end) {
        // The machine counts on the steady clock: the end time as a distance from now.
        settings.job_end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                              *options.job_end - std::chrono::system_clock::now());
    }
    settings.requeue = options.requeue;
    settings.exchange =
        options.trainer_environment ? AddressExchange::coordinator : AddressExchange::none;
    for (const RankPlan& rank : plan.ranks) {
        settings.ports.push_back(rank.port);
    }
    return settings;
}

void LauncherShell::fatal(Error error) {
    if (!m_fatal) {
        m_fatal = std::move(error);
    }
    m_io.stop();
}

void LauncherShell::start_coordinator(std::uint64_t job) {
    CoordinatorSettings settings;
    settings.ranks = members_of(m_plan);
    for (const RankPlan& rank : m_plan.ranks) {
        settings.ports.push_back(rank.port);
    }
    settings.run = m_options.run;
    settings.linger = m_options.run.grace + m_options.run.heartbeat_timeout + Millis{2000};
    settings.hello_timeout = std::min(m_options.run.connect_timeout, Millis{10000});
    settings.tree = m_options.slurm_step.has_value(); // plan_tree(): `--local` stays flat
    if (!m_options.run.events.empty()) {
        try {
            m_events = std::make_unique<EventWriter>(m_options.run.events, setting_ref("events"));
        } catch (const Error& e) {
            // The record never stops the step: without it the step runs as it would.
            logger().warn("{}; the step runs without a record", e.unrendered());
        }
    }
    if (m_events) {
        StepEvent step;
        step.kind = EventKind::step;
        step.time = WallClock::now();
        step.job = m_plan.job_id ? std::to_string(*m_plan.job_id) : std::string("local");
        step.step = m_plan.step_id ? std::to_string(*m_plan.step_id) : std::string("local");
        step.ranks = static_cast<std::uint32_t>(m_plan.ranks.size());
        try {
            step.nodes = compress_hostlist(m_plan.hosts);
        } catch (const Error&) {
            step.nodes = fmt::format("{} nodes", m_plan.hosts.size()); // names no hostlist holds
        }
        m_events->write(step);
    }
    m_server =
        std::make_unique<CoordinatorServer>(m_io,
                                            std::move(settings),
                                            *m_auth,
                                            protocol::StepId{job, m_plan.step_id.value_or(0)},
                                            bind_address_for(m_plan.control_address),
                                            m_candidates);
    m_candidates = {m_server->port()};
    if (m_events) {
        m_server->on_event([this](const StepEvent& event) { m_events->write(event); });
    }
    m_server->on_finished([this] {
        m_machine.server_finished(Clock::now());
        perform();
    });
}

// The launcher's life in order: coordinator, held port, signals, the connector (the tree, the
// connect deadline), then the event loop and the cleanup after it; the order is the point.
LaunchResult LauncherShell::run() {
    m_auth = protocol::Authenticator::create(m_options.auth);
    logger().debug("{}: authentication: {}", label(), protocol::to_string(m_auth->method()));
    if (m_rank == 0) {
        start_coordinator(m_plan.job_id.value_or(0));
    }
    if (!m_options.port_candidates.empty()) {
        // Exact mode: held from before the hello that reports it until just before the trainer
        // starts (start_trainer()).
        m_trainer_port = HeldPort::first_free(m_options.port_candidates);
        logger().debug("{}: holding trainer port {} (planned {})",
                       label(),
                       m_trainer_port.port(),
                       m_self.port);
    }
    wait_signal();
    const auto now = Clock::now();
    m_connect_deadline = now + m_options.run.connect_timeout;
    start_connecting(now);
    // Handlers do not throw; should one ever do (bad_alloc), the trainer must still not outlive
    // us: clean up first, then report.
    std::optional<std::string> internal_error;
    try {
        m_io.run();
    } catch (const std::exception& e) {
        internal_error = e.what();
    }

    // Whatever happened, nothing we started survives us.
    if (m_machine.trainer_running()) {
        signal_group(m_pid, SIGKILL);
    }
    const std::size_t killed = kill_all_children();
    if (killed > 0) {
        logger().debug("{}: killed {} leftover processes", label(), killed);
    }
    // Every writer is gone: the rest of the trainer's labelled output, its last line included.
    for (auto* stream : {m_stdout.get(), m_stderr.get()}) {
        if (stream != nullptr) {
            stream->drain(k_label_drain);
        }
    }
    if (internal_error) {
        throw errors::make(
            Errc::io, "launcher", fmt::format("internal error: {}", *internal_error));
    }
    if (const auto& result = m_machine.result()) {
        return *result;
    }
    if (m_fatal) {
        throw Error(*m_fatal);
    }
    throw errors::make(Errc::io, "launcher", "internal error: stopped without a result");
}

void LauncherShell::wait_signal() {
    m_signals.async_wait([this](int signo, SignalOrigin origin) {
        if (signo == SIGCHLD) {
            reap();
        } else {
            if (origin == SignalOrigin::step) {
                logger().debug("{}: signal {} from slurmstepd (to the whole step)", label(), signo);
            }
            m_machine.signal_received(signo, Clock::now(), origin);
            perform();
        }
        wait_signal();
    });
}

void LauncherShell::reap() {
    if (m_machine.trainer_running()) {
        // Exited but not yet reaped (WNOWAIT): while it is a zombie its pid, hence its process
        // group id, cannot be reused, so the rest of its group can be killed safely first.
        siginfo_t info{};
        if (::waitid(P_PID, static_cast<id_t>(m_pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            info.si_pid == m_pid) {
            signal_group(m_pid, SIGKILL);
            int wait_status = 0;
            while (::waitpid(m_pid, &wait_status, 0) < 0 && errno == EINTR) {
            }
            // Its last labelled lines before anything the launcher says about its end.
            for (auto* stream : {m_stdout.get(), m_stderr.get()}) {
                if (stream != nullptr) {
                    stream->drain(Millis{0});
                }
            }
            m_machine.trainer_exited(ExitStatus::from_wait_status(wait_status), Clock::now());
        }
    }
    // Orphans re-parented to us (we are a child subreaper).
    int wait_status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &wait_status, WNOHANG)) > 0) {
        logger().debug("{}: reaped orphan {}", label(), pid);
    }
    perform();
}

// --- actions -------------------------------------------------------------------------------------

void LauncherShell::perform() {
    // Performing an action may feed the machine again (StartTrainer): drain until quiet.
    for (auto actions = m_machine.take_actions(); !actions.empty();
         actions = m_machine.take_actions()) {
        for (const auto& action : actions) {
            perform(action);
        }
    }
}

void LauncherShell::perform(const LauncherAction& action) {
    if (defer(action)) {
        return;
    }
    if (const auto* send_action = std::get_if<action::Send>(&action)) {
        send(send_action->message);
    } else if (const auto* signal = std::get_if<action::SignalTrainer>(&action)) {
        if (signal->no_core) {
            // A stack dump is asked for, not a core file of a (perhaps huge) trainer.
            const rlimit none{0, 0};
            for (const pid_t pid : detail::process_tree(m_pid)) {
                ::prlimit(pid, RLIMIT_CORE, &none, nullptr);
            }
        }
        signal_group(m_pid, signal->signo);
    } else if (std::holds_alternative<action::SampleProgress>(action)) {
        ProgressSample sample{detail::tree_cpu_ticks(m_pid), detail::mtime_ns(m_progress_file)};
        for (const auto* stream : {m_stdout.get(), m_stderr.get()}) {
            sample.output_bytes += stream != nullptr ? stream->bytes() : 0;
        }
        m_machine.progress_sampled(sample, Clock::now());
    } else if (const auto* arm_action = std::get_if<action::ArmTimer>(&action)) {
        arm(arm_action->timer, arm_action->at);
    } else if (const auto* cancel = std::get_if<action::CancelTimer>(&action)) {
        timer(cancel->timer).cancel();
    } else if (std::holds_alternative<action::ScheduleStart>(action)) {
        asio::post(m_io, [this] {
            m_machine.start_due(Clock::now());
            perform();
        });
    } else if (const auto* start = std::get_if<action::StartTrainer>(&action)) {
        start_trainer(start->restart);
    } else if (const auto* probe = std::get_if<action::ProbePeers>(&action)) {
        start_probe(probe->targets);
    } else if (std::holds_alternative<action::CheckNode>(action)) {
        check_node();
    } else if (std::holds_alternative<action::HalfClose>(action)) {
        close_socket(Tcp::socket::shutdown_send);
    } else if (std::holds_alternative<action::Disconnect>(action)) {
        close_socket(Tcp::socket::shutdown_both);
    } else if (std::holds_alternative<action::Finish>(action)) {
        finish();
    }
}

void LauncherShell::arm(LauncherTimer which, Clock::time_point at) {
    timer(which).expires_at(at);
    timer(which).async_wait([this, which](const error_code& ec) {
        if (!ec) {
            const bool signalled = m_machine.checkpoint_signalled();
            m_machine.timer_fired(which, Clock::now());
            if (m_events && which == LauncherTimer::checkpoint && !signalled &&
                m_machine.checkpoint_signalled()) {
                StepEvent event;
                event.kind = EventKind::checkpoint;
                event.time = WallClock::now();
                event.signal = m_options.run.checkpoint_signal;
                m_events->write(event);
            }
            perform();
        }
    });
}

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

PreflightSettings LauncherShell::preflight_settings() const {
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
    settings.command = m_options.run.preflight_command;
    return settings;
}

void LauncherShell::check_node() {
    const PreflightSettings settings = preflight_settings();
    const auto started = Clock::now();
    const bool has_gpus = !settings.gpus.empty();
    const auto done = [this, started, has_gpus](const std::vector<PreflightCheck>& checks) {
        const auto took = std::chrono::duration_cast<Millis>(Clock::now() - started);
        std::optional<protocol::PreflightFailure> failure;
        for (const PreflightCheck& check : checks) {
            const bool note =
                check.result == PreflightCheck::Result::skipped && check.name == "gpus" && has_gpus;
            // A skipped GPU check on a node whose trainers have GPUs is worth a note; the rest
            // is in the debug log (and a failure in the step's abort line).
            logger().log(note ? spdlog::level::info : spdlog::level::debug,
                         "{}: preflight on {}: {} {}: {}",
                         label(),
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
        logger().debug("{}: preflight took {}", label(), format_seconds(took));
        m_machine.preflight_finished(std::move(failure), Clock::now());
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
        prepare_stall_watch();
        // A restarted trainer has the same environment (same TF_CONFIG, same ports) but for
        // its restart count, which tells it to resume from its checkpoint.
        set_trainer_variable("TFSLURM_RESTART_COUNT", std::to_string(restart));
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

void LauncherShell::prepare_stall_watch() {
    if (!m_options.run.stall_timeout) {
        return;
    }
    const auto has = [this](std::string_view name) {
        return std::any_of(m_env.begin(), m_env.end(), [name](const std::string& entry) {
            return entry.size() > name.size() && entry.compare(0, name.size(), name) == 0 &&
                   entry[name.size()] == '=';
        });
    };
    if (!has("PYTHONFAULTHANDLER")) {
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
        logger().warn("{}: cannot create a progress file ({}): only CPU time tells progress",
                      label(),
                      std::strerror(errno));
        return;
    }
    ::close(fd);
    m_progress_file = path;
    m_env.push_back("TFSLURM_PROGRESS_FILE=" + path);
}

void LauncherShell::finish() {
    m_probe.close();
    m_node_check.close();
    for (auto& connect_timer : m_connect_timers) {
        connect_timer.cancel();
    }
    timer(LauncherTimer::grace).cancel();
    m_signals.cancel();
    if (m_relay) {
        m_relay->close();
    }
    if (m_server) {
        m_server->close();
    }
    m_io.stop();
}

} // namespace detail

LaunchResult run_launcher(const Plan& plan,
                          const std::vector<std::string>& argv,
                          const Environment& trainer_env,
                          const LauncherOptions& options) {
    if (!plan.self_rank || *plan.self_rank >= plan.ranks.size()) {
        throw errors::missing_env("SLURM_PROCID",
                                  "a launcher runs one task of a Slurm step: run it with srun");
    }
    if (argv.empty()) {
        throw errors::invalid_argument(
            "tfslurm run", "no trainer command", "", "give the command after '--'");
    }
    detail::ignore_sigpipe();
    try {
        become_subreaper();
    } catch (const std::system_error& e) {
        logger().warn("cannot become a child subreaper: {}", e.what());
    }
    // Where slurmstepd signals the task's process group only (proctrack/pgid), its signals do
    // not reach the trainer's group: the launcher forwards them like any other.
    const bool step_reaches_trainer = step_signals_reach_every_process(trainer_env);
    detail::LauncherShell launcher(plan, argv, trainer_env, options, step_reaches_trainer);
    return launcher.run();
}

} // namespace tfslurm
