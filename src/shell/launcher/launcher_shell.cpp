// SPDX-License-Identifier: MIT
// One task's launcher, the Asio shell around LauncherMachine: everything that waits does so on
// one single-threaded io_context: sockets, timers and signals (SIGCHLD included) are Asio
// handlers, and handlers never throw (fatal errors are recorded and re-thrown once
// io_context::run() has returned). Until `welcome` the Connector decides (its failures are
// setup errors, thrown); after it every decision is the machine's, and the shell only performs
// their actions. The link to the coordinator is a LauncherLink (launcher_link.cpp); starting
// and watching the trainer is in launcher_trainer.cpp.
#include "shell/launcher/launcher_shell.hpp"

#include "os/detail/fd.hpp"
#include "os/detail/progress.hpp"
#include "os/detail/signal_reader.hpp"
#include "os/detail/user_file.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/preflight.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/os/watch_endpoint.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/slurm_config.hpp>
#include <tfslurm/run/auth.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/metrics.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/rank_output.hpp>
#include <tfslurm/run/requeue_policy.hpp>
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
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

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
    settings.task_start = process_start_time();
    settings.up = WallAnchor{Clock::now(), WallClock::now()};
    return settings;
}

void LauncherShell::fatal(Error error) {
    if (!m_fatal) {
        m_fatal = std::move(error);
    }
    if (m_link) {
        m_link->close(); // nothing more is read: the step ends with this error
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
    settings.linger = coordinator_linger(m_options.run);
    settings.hello_timeout =
        std::min(connect_timeout_for(m_options.run, m_plan.hosts.size()), Millis{10000});
    settings.tree = m_options.slurm_step.has_value(); // plan_tree(): `--local` stays flat
    settings.run_id = m_options.run_id;
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
        step.run_id = m_options.run_id;
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
        if (m_metrics) {
            m_metrics->close(); // the step is over: a scrape now finds no endpoint
        }
        m_published.withdraw();
        m_machine.server_finished(
            Clock::now(), m_server->state().run_progress(), m_server->state().node_check());
        perform();
    });
    if (m_options.run.metrics) {
        start_metrics(*m_options.run.metrics);
    }
    if (m_options.slurm_step && m_plan.job_id) {
        publish_endpoint();
    }
}

void LauncherShell::PublishedEndpoint::withdraw() noexcept {
    if (!path.empty()) {
        remove_watch_endpoint(path);
        path.clear();
    }
}

void LauncherShell::publish_endpoint() {
    WatchEndpoint endpoint;
    endpoint.job = *m_plan.job_id;
    endpoint.step = m_plan.step_id.value_or(0);
    endpoint.host = m_self.host;
    endpoint.address = m_plan.control_address;
    endpoint.port = m_server->port();
    endpoint.pid = ::getpid();
    try {
        m_published.path = publish_watch_endpoint(Environment::from_process(), endpoint);
        logger().debug("{}: endpoint for tfslurm top in {}", label(), quote(m_published.path));
    } catch (const Error& e) {
        // `tfslurm top` then needs its --control option; the step runs as it would.
        logger().debug("{}: no endpoint published for tfslurm top: {}", label(), e.what());
    }
}

void LauncherShell::start_metrics(const MetricsEndpoint& endpoint) {
    MetricsStep step;
    step.job = m_plan.job_id ? std::to_string(*m_plan.job_id) : std::string("local");
    step.step = m_plan.step_id ? std::to_string(*m_plan.step_id) : std::string("local");
    step.run_id = m_options.run_id;
    const bool per_rank = per_rank_metrics(m_options.run.metrics_ranks, m_plan.ranks.size());
    try {
        m_metrics = std::make_unique<MetricsServer>(m_io, endpoint, [this, step, per_rank] {
            return render_metrics(m_server->state(), Clock::now(), step, per_rank);
        });
        logger().debug("{}: metrics at http://{}:{}/metrics{}",
                       label(),
                       endpoint.address.empty() ? m_self.host : endpoint.address,
                       m_metrics->port(),
                       per_rank ? "" : " (the step's series only)");
    } catch (const Error& e) {
        // The metrics never stop the step: without them it runs as it would.
        logger().warn("{}; the step runs without metrics", e.unrendered());
    }
}

// The launcher's life in order: coordinator, held port, signals, the connector (the tree, the
// connect deadline), then the event loop and the cleanup after it; the order is the point.
LaunchResult LauncherShell::run() {
    if (m_rank == 0) {
        // Our own registration is proved with this process's key, not through munged, and the
        // coordinator verifies the others' hellos whatever our method: it listens first, and
        // the method is resolved after (the `auto` method's MUNGE probe off the path of every
        // launcher that dials it; its errors are create()'s).
        m_auth = protocol::Authenticator::create_unresolved(m_options.auth);
        m_auth->host_own_coordinator(m_rank);
        start_coordinator(m_plan.job_id.value_or(0));
        m_auth->resolve_method();
    } else {
        m_auth = protocol::Authenticator::create(m_options.auth);
    }
    logger().debug("{}: authentication: {}", label(), protocol::to_string(m_auth->method()));
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
    m_connect_deadline = now + connect_timeout_for(m_options.run, m_plan.hosts.size());
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
            // Its last word through the progress file (a first progress within the last
            // poll, the step it ended at) before its exit is reported.
            const auto progress = detail::read_progress_file(m_progress_file);
            m_machine.progress_file_sampled(progress.touched, progress.step, Clock::now());
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
        if (const auto* beat = std::get_if<protocol::Heartbeat>(&send_action->message)) {
            send(heartbeat_with_usage(*beat));
        } else {
            send(send_action->message);
        }
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
    } else if (std::holds_alternative<action::SampleProgressFile>(action)) {
        const auto progress = detail::read_progress_file(m_progress_file);
        m_machine.progress_file_sampled(progress.touched, progress.step, Clock::now());
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
    } else if (const auto* check = std::get_if<action::CheckNode>(&action)) {
        check_node(check->when);
    } else if (std::holds_alternative<action::HalfClose>(action)) {
        close_link(false);
    } else if (std::holds_alternative<action::Disconnect>(action)) {
        close_link(true);
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

void LauncherShell::plan_tree() {
    // `--local`: N launchers of one machine for development and tests stay flat, so that the
    // control port's defences (impostors, fallback ports) stay exercised there.
    m_place =
        node_place(members_of(m_plan), m_rank, m_options.slurm_step ? Tree::per_node : Tree::flat);
    if (m_place.leader != m_rank) {
        m_relay_path = relay_path(step_id(), m_place.leader);
        m_candidates = {m_plan.control_port};
    }
}

void LauncherShell::start_connecting(Clock::time_point now) {
    plan_tree();
    if (leads_node()) {
        listen_relay();
    }
    ConnectorSettings settings;
    settings.rank = m_rank;
    settings.self = Member{m_self.role, m_self.index, m_self.host};
    settings.step = step_id();
    settings.pid = ::getpid();
    settings.auth = m_auth->method_for(m_rank);
    settings.address = m_options.address;
    settings.trainer_port = m_trainer_port.port();
    settings.leads_node = leads_node();
    settings.control_address = m_plan.control_address;
    settings.control_port = m_plan.control_port;
    settings.candidates = m_candidates;
    // In the tree a node's leader alone dials the control ports, and its node's followers its
    // relay; `--local` stays flat.
    settings.dialers = !m_relay_path.empty()  ? m_place.node_followers
                       : m_options.slurm_step ? m_plan.hosts.size()
                                              : m_plan.ranks.size();
    settings.leader = m_place.leader;
    settings.relay_path = m_relay_path;
    settings.connect_timeout = connect_timeout_for(m_options.run, m_plan.hosts.size());
    LinkEvents events;
    events.opened = [this](const std::string& control) { on_opened(control); };
    events.received = [this](const protocol::Message& message) { on_message(message); };
    events.lost = [this](const std::string& reason, CoordinatorLoss loss) {
        on_lost(reason, loss);
    };
    events.written = [this] {
        m_machine.written(Clock::now());
        perform();
    };
    events.failed = [this](Error error) { fatal(std::move(error)); };
    m_link.emplace(m_io, *m_auth, step_id(), m_rank, std::move(events));
    m_link->start(std::move(settings), now);
}

void LauncherShell::on_opened(const std::string& control) {
    m_machine.registered(control, Clock::now());
    if (leads_node()) {
        start_relay();
    }
    perform();
}

void LauncherShell::on_message(const protocol::Message& message) {
    if (const auto* relay = std::get_if<protocol::Relay>(&message); relay != nullptr && m_relay) {
        m_relay->downstream(*relay);
        return;
    }
    if (m_relay && std::holds_alternative<protocol::Heartbeat>(message)) {
        m_relay->pulse(); // the coordinator is alive for the followers too
    }
    m_machine.received(message, Clock::now());
    perform();
}

void LauncherShell::on_lost(const std::string& reason, CoordinatorLoss loss) {
    if (m_relay) {
        m_relay->upstream_lost();
    }
    m_machine.connection_lost(reason, Clock::now(), loss);
    perform();
}

protocol::Heartbeat LauncherShell::heartbeat_with_usage(protocol::Heartbeat beat) {
    /// How often the trainer's usage is read from /proc; heartbeats in between repeat it.
    constexpr Millis k_usage_interval{5000};
    const auto now = Clock::now();
    if (m_pid > 0 && m_machine.trainer_running()) {
        if (!m_usage_at || now - *m_usage_at >= k_usage_interval) {
            static const long ticks_per_second = ::sysconf(_SC_CLK_TCK);
            const detail::TreeUsage usage = detail::tree_usage(m_pid);
            m_usage = protocol::Usage{ticks_per_second > 0
                                          ? usage.cpu_ticks * 1000 /
                                                static_cast<std::uint64_t>(ticks_per_second)
                                          : 0,
                                      usage.rss_bytes,
                                      {}};
            // The output counted where the launcher reads it (labels, output progress).
            if (m_stdout || m_stderr) {
                std::uint64_t bytes = 0;
                for (const auto* stream : {m_stdout.get(), m_stderr.get()}) {
                    bytes += stream != nullptr ? stream->bytes() : 0;
                }
                m_usage->output_bytes = bytes;
            }
            m_usage_at = now;
        }
        beat.usage = m_usage;
    }
    if (m_relay) {
        beat.followers = m_relay->follower_usages();
        beat.startups = m_relay->take_follower_startups();
    }
    return beat;
}

void LauncherShell::send(const protocol::Message& message, bool own) {
    if (!m_link) {
        return;
    }
    // A relayed message or the shell's own (no written() for it) is not the machine's.
    m_link->send(message, !own && !std::holds_alternative<protocol::Relay>(message));
}

void LauncherShell::listen_relay() {
    RelaySettings settings;
    settings.step = step_id();
    settings.ranks = m_place.followers;
    settings.heartbeat = m_options.run.heartbeat;
    settings.heartbeat_timeout = m_options.run.heartbeat_timeout;
    settings.wait_until = m_connect_deadline;
    settings.upstream_waits = true; // until start_relay()
    m_listening_relay = std::make_unique<NodeRelay>(
        m_io,
        *m_auth,
        std::move(settings),
        [this](const protocol::Message& message) { send(message, true); },
        [this] {
            // Every local launcher finished: what the machine decided can happen now.
            auto deferred = std::move(m_deferred);
            m_deferred.clear();
            for (const auto& action : deferred) {
                perform(action);
            }
            perform();
        });
    try {
        m_listening_relay->listen(relay_path(step_id(), m_rank));
    } catch (const Error& e) {
        // Said once registered (start_relay()), where the step fails with it at once.
        m_relay_error = e;
        m_listening_relay.reset();
        return;
    }
    // The followers' handshakes while we register (issue #33): by our welcome their hellos
    // are checked and held, instead of their challenges only starting then (their MUNGE round
    // trips off the step's critical path). None is welcomed before the coordinator says so:
    // the relay proves itself to a follower with the coordinator's welcome only.
    m_listening_relay->serve();
}

void LauncherShell::start_relay() {
    if (!m_listening_relay) {
        // Never a relay that someone else can reach, and never a node whose ranks wait for the
        // connect timeout: the step fails at once, with this line (docs/protocol.md, "Threat
        // model").
        fatal(m_relay_error ? *m_relay_error
                            : errors::make(Errc::io, "relay", "the relay is not listening"));
        return;
    }
    m_relay = std::move(m_listening_relay);
    m_relay->upstream_open();
    logger().debug("{}: relaying for ranks {}", label(), fmt::join(m_place.followers, ","));
}

bool LauncherShell::defer(const LauncherAction& action) {
    const bool closing = std::holds_alternative<launcher_action::HalfClose>(action) ||
                         std::holds_alternative<launcher_action::Disconnect>(action) ||
                         std::holds_alternative<launcher_action::Finish>(action);
    if (!closing || !m_relay || !m_relay->hold()) {
        return false;
    }
    // The leader's connection carries its node: it stays until every local launcher is done.
    m_deferred.push_back(action);
    return true;
}

void LauncherShell::close_link(bool both) {
    timer(LauncherTimer::heartbeat).cancel();
    timer(LauncherTimer::watch).cancel();
    if (!both) {
        if (m_link) {
            m_link->half_close();
        }
        return;
    }
    timer(LauncherTimer::close).cancel();
    if (m_link) {
        m_link->close();
    }
}

void LauncherShell::finish() {
    m_probe.close();
    m_node_check.close();
    if (m_link) {
        m_link->cancel_timers();
    }
    timer(LauncherTimer::grace).cancel();
    m_signals.cancel();
    for (auto* relay : {m_relay.get(), m_listening_relay.get()}) {
        if (relay != nullptr) {
            relay->close();
        }
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
