// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The settings of `tfslurm run`, typed: the registry's launcher rows (plan_settings.hpp) parse
/// into one RunSettings, and the launcher, its state machine and the coordinator hold that
/// RunSettings rather than copies of its fields. A run setting is one registry row whose parser
/// writes a field here, plus the code that uses it; its default is written once, below.

#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <csignal>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// Where `metrics` listens: an address (empty: every IPv4 address) and a port.
struct MetricsEndpoint {
    std::string address;
    std::uint16_t port = 0;

    friend bool operator==(const MetricsEndpoint& a, const MetricsEndpoint& b) noexcept {
        return a.address == b.address && a.port == b.port;
    }
};

/// `[ADDR:]PORT`: a port from 1 to 65535, after an IPv4 address or a bracketed IPv6 one.
/// Input: `9400`. Output: {"", 9400}. Input: `127.0.0.1:9400`. Output: {"127.0.0.1", 9400}.
/// Input: `[::1]:9400`. Output: {"::1", 9400}.
/// \throws Error (Errc::invalid_argument) naming setting `key`, hint `e.g. 9400 or
///         127.0.0.1:9400`.
[[nodiscard]] MetricsEndpoint parse_metrics_endpoint(std::string_view text, std::string_view key);

/// Which series a scrape returns: per rank or only per step (`metrics_ranks`).
enum class MetricsRanks { automatic, yes, no };

/// Every setting of `tfslurm run`, with its default. Set by resolve_settings() (one registry row
/// each, named in the comments), checked there by check_run_settings().
struct RunSettings {
    Until until = Until::workers;           ///< `until`
    Millis grace{10000};                    ///< `grace`: SIGTERM to SIGKILL of a stopped trainer
    Millis heartbeat = k_default_heartbeat; ///< `heartbeat`: between two heartbeats
    /// `heartbeat_timeout`: a launcher, relay or coordinator silent this long is lost
    /// (silent_too_long() in run.hpp).
    Millis heartbeat_timeout = k_default_heartbeat_timeout;
    /// `connect_timeout`: every rank registers within this (nullopt: the default, which grows
    /// with the step's nodes: connect_timeout_for()).
    std::optional<Millis> connect_timeout;
    /// `stall_timeout`: a trainer that makes no progress for this long is stuck (nullopt: never).
    std::optional<Millis> stall_timeout;
    /// `stall_roles`: the roles whose trainers stall_timeout judges (default: all but ps, which
    /// may rightly sit idle between requests).
    std::vector<Role> stall_roles{Role::chief, Role::evaluator, Role::worker};
    /// `stall_progress`: what counts as a trainer's progress (default: its CPU time and its
    /// progress file; its output only when asked for).
    std::vector<ProgressSource> stall_progress{ProgressSource::cpu, ProgressSource::file};
    int stall_signal = SIGABRT;  ///< `stall_signal`: asks a stuck trainer for its stack traces
    Millis stall_grace{5000};    ///< `stall_grace`: the stall signal to the step's abort
    Probe probe = Probe::off;    ///< `probe`
    Millis probe_timeout{30000}; ///< `probe_timeout`
    /// `max_restarts`, `max_total_restarts`, `restart_roles`, `restart_delay`.
    RestartPolicy restarts;
    /// `checkpoint_before`: the checkpoint signal this long before the job's end (nullopt:
    /// never).
    std::optional<Millis> checkpoint_before;
    int checkpoint_signal = SIGUSR1; ///< `checkpoint_signal`
    bool requeue = false;            ///< `requeue`: rank 0 requeues a checkpointed job
    std::uint32_t max_requeues = 3;  ///< `max_requeues`, counted by SLURM_RESTART_COUNT
    /// `requeue_min_run`: a run whose trainers reported no progress and that ended sooner made
    /// none (the requeue storm rule, progress_mark()).
    Millis requeue_min_run{600000};
    protocol::AuthMethod auth = protocol::AuthMethod::automatic; ///< `auth`
    /// `port_range`: exact mode's trainer ports without SLURM_STEP_RESV_PORTS.
    PortRange port_range;
    /// `contain`: a keeper (real pids) or a PID namespace of its own (spawn.hpp).
    Containment contain = Containment::keeper;
    bool label = false; ///< `label`: prefix the trainer's lines with its rank
    /// `events`: rank 0 records the step's events in this file (events.hpp); empty: no record.
    std::string events;
    /// `output`, `error`: each rank's trainer writes its stdout (and its stderr, without
    /// `error`) and its stderr to a file of its own, named by these patterns (rank_output.hpp);
    /// empty: inherited from the launcher (srun's).
    std::string output;
    std::string error;
    /// `preflight`: before any trainer starts, each node checks its health (preflight.hpp);
    /// a failed check aborts the step (k_status_preflight).
    bool preflight = false;
    /// `preflight_command`: a site's own check, run with /bin/sh -c on each node; exit 0 passes.
    /// Turns `preflight` on. Empty: none.
    std::string preflight_command;
    /// `on_failure_check`: after an abort for a rank's failure (its trainer failed or was
    /// stuck), that rank's node runs the built-in checks of `preflight` and this command
    /// (/bin/sh -c; exit 0 passes) before the step ends; a failed check makes it a bad node,
    /// left out of a requeue (failure_checked()). Empty: no check.
    std::string on_failure_check;
    /// `on_failure_check_timeout`: the command's time; past it the command is killed and the
    /// check failed.
    Millis on_failure_check_timeout{60000};
    /// `metrics`: rank 0 serves the step's metrics there (metrics.hpp); nullopt: none.
    std::optional<MetricsEndpoint> metrics;
    /// `metrics_ranks`: whether a scrape has the per-rank series (per_rank_metrics()).
    MetricsRanks metrics_ranks = MetricsRanks::automatic;
};

/// The default `connect_timeout`'s two parts: a base, and as much more for each node of the
/// step (Slurm itself takes tens of seconds to start a step of thousands of nodes).
inline constexpr Millis k_connect_timeout_base{60000};
inline constexpr Millis k_connect_timeout_per_node{20};

/// Every rank's registration deadline in a step of `nodes` nodes: `connect_timeout` when it is
/// set, else 60 s and 20 ms more a node.
/// Input: unset, 10 nodes. Output: 60.2 s. Input: unset, 5,000 nodes. Output: 160 s.
/// Input: 7 s, 5,000 nodes. Output: 7 s.
[[nodiscard]] Millis connect_timeout_for(const RunSettings& settings, std::size_t nodes) noexcept;

/// Whether the nodes check their health before start: `preflight`, or a `preflight_command`.
[[nodiscard]] bool preflight_enabled(const RunSettings& settings) noexcept;

/// Whether a step aborted for `cause` has the failed rank's node checked (`on_failure_check`
/// set, and the rank's trainer failed by itself or was stuck: `trainer`, `stalled`; not a
/// trainer that could not start, nor any other cause).
/// Input: on_failure_check `true`, FailureCause::stalled. Output: true.
[[nodiscard]] bool failure_checked(const RunSettings& settings,
                                   protocol::FailureCause cause) noexcept;

/// Whether every trainer waits for the coordinator's `go` (one barrier for `probe` and
/// `preflight`): each launcher first reports `probed`.
[[nodiscard]] bool has_start_barrier(const RunSettings& settings) noexcept;

/// The rules between run settings, once every row is parsed: `heartbeat_timeout` must be longer
/// than `heartbeat` (a launcher would be lost between two of its heartbeats).
/// `heartbeat_timeout_text`: its value as given (quoted in the message).
/// Input: heartbeat 2 s, heartbeat_timeout 1 s, "1". Output: throws `heartbeat_timeout: must be
/// longer than heartbeat: "1"` (hint `e.g. heartbeat=1 heartbeat_timeout=10`).
/// \throws Error (Errc::invalid_argument) naming `heartbeat_timeout`.
void check_run_settings(const RunSettings& settings, std::string_view heartbeat_timeout_text);

/// A duration setting: a decimal number of seconds from 0.001 to 86400 (one day), as
/// milliseconds (less than a millisecond would be 0 ms: a heartbeat of 0 ms spins).
/// Input: `0.5`. Output: 500 ms.
/// \throws Error (Errc::invalid_argument) naming setting `key`, hint `e.g. 10 or 0.5`.
[[nodiscard]] Millis parse_seconds(std::string_view text, std::string_view key);

/// A signal setting: a name (with or without `SIG`, any case) or a number from 1 to 64.
/// Input: `usr1`. Output: 10 (SIGUSR1).
/// \throws Error (Errc::invalid_argument) naming setting `key`, hint `e.g. ABRT, USR1 or 10`.
[[nodiscard]] int parse_signal(std::string_view text, std::string_view key);

/// A duration as parse_seconds() reads it. Input: 1500 ms. Output: `1.5`.
[[nodiscard]] std::string seconds_text(Millis duration);

/// A signal as parse_signal() reads it: its name without `SIG`, else its number.
/// Input: SIGUSR1. Output: `USR1`. Input: 40. Output: `40`.
[[nodiscard]] std::string signal_text(int signo);

} // namespace tfslurm
