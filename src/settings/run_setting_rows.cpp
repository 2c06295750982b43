// SPDX-License-Identifier: MIT
// The registry's rows of `tfslurm run` (SettingGroup::launcher): each one parses its value into
// the one RunSettings (run_settings.hpp) that the launcher and the coordinator hold.
#include "resolve/plan/plan_shared.hpp"
#include "settings/detail/plan_settings.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/rank_output.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/run_settings.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <fmt/format.h>

#include <cstdint>
#include <string_view>
#include <vector>

namespace tfslurm::detail {
namespace {

/// The most restarts `max_restarts` and `max_total_restarts` take.
constexpr std::uint32_t k_max_restarts = 10000;

/// The progress sources as parse_stall_progress() reads them: `cpu,file`.
std::string progress_sources_text(const std::vector<ProgressSource>& sources) {
    std::vector<std::string> names;
    names.reserve(sources.size());
    for (const ProgressSource source : sources) {
        names.emplace_back(to_string(source));
    }
    return detail::join(names, ",");
}

} // namespace

/// Every run setting, one row each (key, option, variable, default, help, and the parser that
/// writes its RunSettings field): long because it is the table; adding a run setting is adding a
/// row here.
std::vector<SettingSpec> run_setting_rows() {
    using K = SettingKind;
    using G = SettingGroup;
    return {
        {"until",
         "TFSLURM_UNTIL",
         "--until",
         "workers|chief",
         "",
         K::value,
         G::launcher,
         "workers: stop ps and evaluator when every worker and the chief exited 0; "
         "chief: stop everyone when the chief exited 0 (TF2 PSS)",
         [](SettingValues& v, std::string_view s) {
             v.run.until = parse_until(s, setting_ref("until"));
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return std::string{to_string(v.run.until)}; }},
        {"grace",
         "TFSLURM_GRACE",
         "--grace",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds between SIGTERM and SIGKILL when a trainer is stopped",
         [](SettingValues& v, std::string_view s) { v.run.grace = parse_seconds(s, "grace"); },
         {},
         {},
         [](const SettingValues& v) -> std::string { return seconds_text(v.run.grace); }},
        {"heartbeat",
         "TFSLURM_HEARTBEAT",
         "--heartbeat",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds between heartbeats",
         [](SettingValues& v, std::string_view s) {
             v.run.heartbeat = parse_seconds(s, "heartbeat");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return seconds_text(v.run.heartbeat); }},
        {"heartbeat_timeout",
         "TFSLURM_HEARTBEAT_TIMEOUT",
         "--heartbeat-timeout",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds without heartbeat after which a launcher or the coordinator is lost",
         [](SettingValues& v, std::string_view s) {
             v.run.heartbeat_timeout = parse_seconds(s, "heartbeat_timeout");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return seconds_text(v.run.heartbeat_timeout);
         }},
        {"connect_timeout",
         "TFSLURM_CONNECT_TIMEOUT",
         "--connect-timeout",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds for every launcher to register with rank 0's coordinator",
         [](SettingValues& v, std::string_view s) {
             v.run.connect_timeout = parse_seconds(s, "connect_timeout");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return v.run.connect_timeout ? seconds_text(*v.run.connect_timeout)
                                          : "60 and 0.02 more per node of the step";
         }},
        {"stall_timeout",
         "TFSLURM_STALL_TIMEOUT",
         "--stall-timeout",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds without progress (CPU time of the trainer's processes, a touch of "
         "TFSLURM_PROGRESS_FILE, or its output with --stall-progress) after which a trainer is "
         "stuck and the step aborts; rank 0 warns of a straggler halfway",
         [](SettingValues& v, std::string_view s) {
             v.run.stall_timeout = parse_seconds(s, "stall_timeout");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return v.run.stall_timeout ? seconds_text(*v.run.stall_timeout) : "never";
         }},
        {"stall_roles",
         "TFSLURM_STALL_ROLES",
         "--stall-roles",
         "LIST",
         "",
         K::list,
         G::launcher,
         "The roles whose trainers --stall-timeout judges: a comma list of worker, chief, "
         "evaluator, ps, or all (a parameter server may rightly sit idle "
         "between requests)",
         [](SettingValues& v, std::string_view s) {
             v.run.stall_roles = parse_stall_roles(s, setting_ref("stall_roles"));
         },
         {},
         "worker chief evaluator ps all",
         [](const SettingValues& v) -> std::string {
             return detail::join_roles(v.run.stall_roles);
         }},
        {"stall_progress",
         "TFSLURM_STALL_PROGRESS",
         "--stall-progress",
         "LIST",
         "",
         K::list,
         G::launcher,
         "What counts as a trainer's progress for --stall-timeout: a comma list of cpu (its "
         "processes' CPU time), file (a touch of TFSLURM_PROGRESS_FILE), output (bytes it writes "
         "on stdout or stderr), or all",
         [](SettingValues& v, std::string_view s) {
             v.run.stall_progress = parse_stall_progress(s, setting_ref("stall_progress"));
         },
         {},
         "cpu file output all",
         [](const SettingValues& v) -> std::string {
             return progress_sources_text(v.run.stall_progress);
         }},
        {"stall_signal",
         "TFSLURM_STALL_SIGNAL",
         "--stall-signal",
         "SIGNAL",
         "",
         K::value,
         G::launcher,
         "Signal sent to a stuck trainer for its stack traces (with ABRT, Python's faulthandler "
         "dumps every thread, then the trainer ends)",
         [](SettingValues& v, std::string_view s) {
             v.run.stall_signal = parse_signal(s, "stall_signal");
         },
         {},
         "ABRT QUIT USR1 USR2 TERM INT HUP",
         [](const SettingValues& v) -> std::string { return signal_text(v.run.stall_signal); }},
        {"stall_grace",
         "TFSLURM_STALL_GRACE",
         "--stall-grace",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds between the stall signal and the step's abort",
         [](SettingValues& v, std::string_view s) {
             v.run.stall_grace = parse_seconds(s, "stall_grace");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return seconds_text(v.run.stall_grace); }},
        {"probe",
         "TFSLURM_PROBE",
         "--probe",
         "",
         "",
         K::flag,
         G::launcher,
         "Before any trainer starts, each launcher listens on its trainer's port and connects to "
         "the "
         "peers' trainer addresses (all up to 64 ranks, a sample beyond); the step aborts naming "
         "an "
         "unreachable pair instead of letting the framework hang",
         [](SettingValues& v, std::string_view s) {
             v.run.probe = detail::parse_bool(s, "probe") ? Probe::on : Probe::off;
         }},
        {"probe_timeout",
         "TFSLURM_PROBE_TIMEOUT",
         "--probe-timeout",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds each launcher keeps trying to reach its peers in the probe",
         [](SettingValues& v, std::string_view s) {
             v.run.probe_timeout = parse_seconds(s, "probe_timeout");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return seconds_text(v.run.probe_timeout); }},
        {"max_restarts",
         "TFSLURM_MAX_RESTARTS",
         "--max-restarts",
         "N",
         "",
         K::value,
         G::launcher,
         "Restarts of each rank's failed trainer (restart roles only), with the same TF_CONFIG and "
         "ports while the other ranks keep running; past it the step aborts",
         [](SettingValues& v, std::string_view s) {
             v.run.restarts.per_rank =
                 detail::parse_number<std::uint32_t>(s, "max_restarts", 0, k_max_restarts);
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return std::to_string(v.run.restarts.per_rank);
         }},
        {"max_total_restarts",
         "TFSLURM_MAX_TOTAL_RESTARTS",
         "--max-total-restarts",
         "N",
         "",
         K::value,
         G::launcher,
         "Restarts allowed in the whole step",
         [](SettingValues& v, std::string_view s) {
             v.run.restarts.total =
                 detail::parse_number<std::uint32_t>(s, "max_total_restarts", 0, k_max_restarts);
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return v.run.restarts.total ? std::to_string(*v.run.restarts.total)
                                         : "max-restarts for each rank of a restart role";
         }},
        {"restart_roles",
         "TFSLURM_RESTART_ROLES",
         "--restart-roles",
         "LIST",
         "",
         K::list,
         G::launcher,
         "The roles whose failed trainers are restarted: a comma list of worker, chief, evaluator "
         "(never ps: its state dies with it)",
         [](SettingValues& v, std::string_view s) {
             v.run.restarts.roles = parse_restart_roles(s, setting_ref("restart_roles"));
         },
         {},
         "worker chief evaluator",
         [](const SettingValues& v) -> std::string {
             return detail::join_roles(v.run.restarts.roles);
         }},
        {"restart_delay",
         "TFSLURM_RESTART_DELAY",
         "--restart-delay",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds between a trainer's failure and its restart, for what it held (a GPU's memory, a "
         "port) to be released",
         [](SettingValues& v, std::string_view s) {
             v.run.restarts.delay = parse_seconds(s, "restart_delay");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return seconds_text(v.run.restarts.delay); }},
        {"checkpoint_before",
         "TFSLURM_CHECKPOINT_BEFORE",
         "--checkpoint-before",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "Seconds before the job's time limit at which every trainer gets the checkpoint signal",
         [](SettingValues& v, std::string_view s) {
             v.run.checkpoint_before = parse_seconds(s, "checkpoint_before");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return v.run.checkpoint_before ? seconds_text(*v.run.checkpoint_before) : "never";
         }},
        {"checkpoint_signal",
         "TFSLURM_CHECKPOINT_SIGNAL",
         "--checkpoint-signal",
         "SIGNAL",
         "",
         K::value,
         G::launcher,
         "Signal that asks the trainers to save a checkpoint; the same signal from "
         "Slurm's own --signal counts too",
         [](SettingValues& v, std::string_view s) {
             v.run.checkpoint_signal = parse_signal(s, "checkpoint_signal");
         },
         {},
         "USR1 USR2 TERM INT HUP ABRT QUIT",
         [](const SettingValues& v) -> std::string {
             return signal_text(v.run.checkpoint_signal);
         }},
        {"requeue",
         "TFSLURM_REQUEUE",
         "--requeue",
         "",
         "",
         K::flag,
         G::launcher,
         "Requeue the job through Slurm when the step ended after the checkpoint signal or a "
         "preemption (a batch job that Slurm lets requeue)",
         [](SettingValues& v, std::string_view s) {
             v.run.requeue = detail::parse_bool(s, "requeue");
         }},
        {"max_requeues",
         "TFSLURM_MAX_REQUEUES",
         "--max-requeues",
         "N",
         "",
         K::value,
         G::launcher,
         "Requeue a job at most N times, counted by SLURM_RESTART_COUNT",
         [](SettingValues& v, std::string_view s) {
             v.run.max_requeues = detail::parse_number<std::uint32_t>(s, "max_requeues", 0, 1000);
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return std::to_string(v.run.max_requeues); }},
        {"requeue_min_run",
         "TFSLURM_REQUEUE_MIN_RUN",
         "--requeue-min-run",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "With --requeue: a run whose trainers reported no progress ($TFSLURM_PROGRESS_FILE "
         "untouched) and that ended within SECONDS made none; two such runs in a row, or two "
         "that ended at the same step, stop requeueing",
         [](SettingValues& v, std::string_view s) {
             v.run.requeue_min_run = parse_seconds(s, "requeue_min_run");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string { return seconds_text(v.run.requeue_min_run); }},
        {"auth",
         "TFSLURM_AUTH",
         "--auth",
         "METHOD",
         "",
         K::value,
         G::launcher,
         "auto (munge if munged answers, else TFSLURM_SECRET), munge or secret",
         [](SettingValues& v, std::string_view s) {
             v.run.auth = protocol::parse_auth_method(s, setting_ref("auth"));
         },
         {},
         "auto munge secret",
         [](const SettingValues& v) -> std::string {
             return std::string{protocol::to_string(v.run.auth)};
         }},
        {"port_range",
         "TFSLURM_PORT_RANGE",
         "--port-range",
         "LOW-HIGH",
         "",
         K::value,
         G::launcher,
         "Exact mode (--iface/--network): where a launcher looks for a free trainer port when the "
         "planned one is taken, unless SLURM_STEP_RESV_PORTS reserves the node's ports",
         [](SettingValues& v, std::string_view s) {
             v.run.port_range = parse_port_range(s, "port_range");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return fmt::format("{}-{}", v.run.port_range.first, v.run.port_range.last);
         }},
        {"contain",
         "TFSLURM_CONTAIN",
         "--contain",
         "",
         "",
         K::flag,
         G::launcher,
         "Run each trainer in a PID namespace of its own (it is pid 2 there) instead of under a "
         "keeper that leaves it its real pid; both end everything the trainer starts with the "
         "launcher. Costs what names peers by pid: CUDA IPC between ranks (UCX refuses it across "
         "PID "
         "namespaces), pidfd_getfd",
         [](SettingValues& v, std::string_view s) {
             v.run.contain = detail::parse_bool(s, "contain") ? Containment::pid_namespace
                                                              : Containment::keeper;
         }},
        {"label",
         "TFSLURM_LABEL",
         "--label",
         "",
         "",
         K::flag,
         G::launcher,
         "Prefix every line of the trainer's stdout and stderr with its rank ('3: '), like srun -l "
         "(which also labels tfslurm's own lines: under srun, use either)",
         [](SettingValues& v, std::string_view s) {
             v.run.label = detail::parse_bool(s, "label");
         }},
        {"output",
         "TFSLURM_OUTPUT",
         "--output",
         "PATTERN",
         "",
         K::value,
         G::launcher,
         "Each trainer's stdout (and its stderr, without --error) goes to a file of its own, like "
         "srun -o: %r rank (%3r zero-padded), %R role, %i index in its role, %h host, %j job, %s "
         "step, %% a %; two ranks never share a file (e.g. logs/%j-%R%i.out)",
         [](SettingValues& v, std::string_view s) {
             check_rank_pattern(s, "output");
             v.run.output = std::string{s};
         }},
        {"error",
         "TFSLURM_ERROR",
         "--error",
         "PATTERN",
         "",
         K::value,
         G::launcher,
         "Each trainer's stderr goes to a file of its own, named as with --output",
         [](SettingValues& v, std::string_view s) {
             check_rank_pattern(s, "error");
             v.run.error = std::string{s};
         }},
        {"events",
         "TFSLURM_EVENTS",
         "--events",
         "FILE",
         "",
         K::value,
         G::launcher,
         "Rank 0 records every event of the step in FILE as it happens, one JSON object per "
         "line (registered, started, exited, restarted, lost, stalled, checkpoint, requeue, "
         "verdict); 'tfslurm events FILE' prints it as a timeline",
         [](SettingValues& v, std::string_view s) {
             if (s.empty()) {
                 throw errors::invalid_setting(
                     "events", "empty (expected a file name)", s, "e.g. step.events");
             }
             v.run.events = std::string{s};
         }},
        {"preflight",
         "TFSLURM_PREFLIGHT",
         "--preflight",
         "",
         "",
         K::flag,
         G::launcher,
         "Before any trainer starts, each node checks its health once (its lowest rank): the "
         "chosen interface is up with its address, TMPDIR is writable with 1 GiB free, the "
         "visible GPUs answer NVML (skipped without NVML), and --preflight-command exits 0; a "
         "failed check aborts the step naming the node and the check (status 13)",
         [](SettingValues& v, std::string_view s) {
             v.run.preflight = detail::parse_bool(s, "preflight");
         }},
        {"preflight_command",
         "TFSLURM_PREFLIGHT_COMMAND",
         "--preflight-command",
         "CMD",
         "",
         K::value,
         G::launcher,
         "A site's own health check, run with /bin/sh -c once on each node before any trainer "
         "starts (within 60 s; exit 0 passes); implies --preflight",
         [](SettingValues& v, std::string_view s) {
             if (s.empty()) {
                 throw errors::invalid_setting("preflight_command",
                                               "empty (expected a shell command)",
                                               s,
                                               "e.g. 'nvidia-smi -L' or '/etc/slurm/healthy'");
             }
             v.run.preflight_command = std::string{s};
         }},
        {"on_failure_check",
         "TFSLURM_ON_FAILURE_CHECK",
         "--on-failure-check",
         "CMD",
         "",
         K::value,
         G::launcher,
         "After a trainer fails (or is stuck), its node checks its health before the step ends: "
         "the checks of --preflight, then CMD with /bin/sh -c (exit 0 passes); a failed check "
         "makes it a bad node, named in rank 0's line and left out of a --requeue",
         [](SettingValues& v, std::string_view s) {
             if (s.empty()) {
                 throw errors::invalid_setting("on_failure_check",
                                               "empty (expected a shell command)",
                                               s,
                                               "e.g. 'nvidia-smi -L' or true");
             }
             v.run.on_failure_check = std::string{s};
         }},
        {"on_failure_check_timeout",
         "TFSLURM_ON_FAILURE_CHECK_TIMEOUT",
         "--on-failure-check-timeout",
         "SECONDS",
         "",
         K::value,
         G::launcher,
         "The time --on-failure-check's command has; past it the command is killed and the "
         "check fails",
         [](SettingValues& v, std::string_view s) {
             v.run.on_failure_check_timeout = parse_seconds(s, "on_failure_check_timeout");
         },
         {},
         {},
         [](const SettingValues& v) -> std::string {
             return seconds_text(v.run.on_failure_check_timeout);
         }},
        {"metrics",
         "TFSLURM_METRICS",
         "--metrics",
         "[ADDR:]PORT",
         "",
         K::value,
         G::launcher,
         "Rank 0 serves the step's metrics in the Prometheus text format at "
         "http://ADDR:PORT/metrics while it runs (every address without ADDR; anyone who "
         "reaches the port can read them, as a node exporter's)",
         [](SettingValues& v, std::string_view s) {
             v.run.metrics = parse_metrics_endpoint(s, "metrics");
         }},
        {"metrics_ranks",
         "TFSLURM_METRICS_RANKS",
         "--metrics-ranks",
         "auto|yes|no",
         "",
         K::value,
         G::launcher,
         "Whether --metrics has a series per rank besides the step's: auto does up to 1000 "
         "ranks",
         [](SettingValues& v, std::string_view s) {
             if (s == "auto") {
                 v.run.metrics_ranks = MetricsRanks::automatic;
             } else if (s == "yes") {
                 v.run.metrics_ranks = MetricsRanks::yes;
             } else if (s == "no") {
                 v.run.metrics_ranks = MetricsRanks::no;
             } else {
                 throw errors::invalid_setting(
                     "metrics_ranks", "expected auto, yes or no", s, "e.g. no");
             }
         },
         {},
         "auto yes no",
         [](const SettingValues& v) -> std::string {
             return v.run.metrics_ranks == MetricsRanks::automatic ? "auto"
                    : v.run.metrics_ranks == MetricsRanks::yes     ? "yes"
                                                                   : "no";
         }},
    };
}

} // namespace tfslurm::detail
