// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The record of a step (`tfslurm run --events FILE`): what happened, one JSON object per line,
/// and how `tfslurm events FILE` reads it back and tells it as a timeline. Pure: the file itself
/// is written by EventWriter (events_file.hpp), the only part that touches the OS.
///
/// Format, version 1 (documented in tfslurm(1), EVENT FILE): every line is one object with
/// `v` (1), `time` (UTC, `2026-11-26T13:02:38.123Z`) and `event`; events about one rank add
/// `rank`, `role`, `index` and `host`; each kind adds its own fields:
///
/// | event        | fields                                                          |
/// |--------------|-----------------------------------------------------------------|
/// | `step`       | `job`, `step`, `ranks`, `nodes` (the first line), `run_id`      |
/// | `registered` | the rank's launcher connected and was admitted                  |
/// | `started`    | the rank's trainer started (`restart`: 0 first, n after a restart) |
/// | `exited`     | `status` (exit code) or `signal`                                |
/// | `restarted`  | `restart` (its n-th restart)                                    |
/// | `lost`       | `why` (`connection closed`, `no heartbeat for 10 s`)            |
/// | `stalled`    | `silent_ms`                                                     |
/// | `straggling` | `behind_ms` (no progress for this long while most ranks progressed) |
/// | `checkpoint` | `signal` (sent to the trainers ahead of the time limit)         |
/// | `requeue`    | `job`, `excluded` (hosts left out), `why`                       |
/// | `verdict`    | `verdict` (done, interrupted, aborted), `status`, `cause`, `why` |
/// | `startup`    | the rank's phases (startup.hpp) as times: `task`, `up`, `registered`, |
/// |              | `cluster`, `started`, `progress` (those known); `progress_step` |
/// | `checked`    | the failed rank's node check (`on_failure_check`): `result` (passed, |
/// |              | failed); failed: `check` (its name) and `why`                   |
///
/// A reader ignores fields it does not know (later versions may add some) and refuses a
/// version it does not know.

#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/run/run.hpp>
#include <tfslurm/run/startup.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// The event file's format version, `"v"` in every line.
inline constexpr int k_events_version = 1;

enum class EventKind {
    step,
    registered,
    started,
    exited,
    restarted,
    lost,
    stalled,
    straggling,
    checkpoint,
    requeue,
    verdict,
    startup,
    checked
};

/// `registered`, `exited`, ... (the `event` field).
[[nodiscard]] std::string_view to_string(EventKind kind) noexcept;

/// One event of a step. Only the fields of its kind are meaningful (see the table above).
struct StepEvent {
    EventKind kind = EventKind::step;
    WallClock::time_point time;
    std::optional<std::uint32_t> rank; ///< with `member`, for events about one rank
    Member member;
    std::optional<ExitStatus> status;     ///< exited; verdict (the step's status, as exited)
    std::optional<std::uint32_t> restart; ///< started, restarted
    std::optional<Millis> millis;         ///< stalled (silent), straggling (behind)
    std::optional<int> signal;            ///< checkpoint
    std::string why;                      ///< lost, requeue, verdict (the failure, if any)
    std::string verdict;                  ///< verdict: done, interrupted or aborted
    std::string job;                      ///< step, requeue
    std::string step;                     ///< step
    std::string run_id;                   ///< step: TFSLURM_RUN_ID (empty: not written)
    std::string nodes;                    ///< step (a hostlist)
    std::optional<std::uint32_t> ranks;   ///< step
    std::vector<std::string> excluded;    ///< requeue
    /// verdict `aborted`: why, as the wire names it (protocol::FailureCause: `trainer`, `start`,
    /// `lost`, `unregistered`, `stalled`, `unreachable`, `preflight`); empty otherwise.
    std::string cause;
    /// startup: when the rank reached each phase of its start, its launcher's clock.
    StartupTimes startup;
    /// startup: the step its trainer last wrote into its progress file, if any.
    std::optional<std::uint64_t> progress_step;
    std::string result; ///< checked: `passed` or `failed`
    std::string check;  ///< checked, failed: the check's name (`command`, `tmpdir`, ...)
};

/// An event about one rank, with its member (role, index, host) from the plan.
[[nodiscard]] StepEvent
rank_event(EventKind kind, WallClock::time_point time, std::uint32_t rank, const Member& member);

/// `2026-11-26T13:02:38.123Z`: UTC, milliseconds.
[[nodiscard]] std::string format_event_time(WallClock::time_point time);

/// One line of the file (with its `\n`). Text from peers (why) is JSON-escaped, never raw;
/// its setting references read as their keys (`port_base`: the file has no face).
[[nodiscard]] std::string to_json_line(const StepEvent& event);

/// The events of a file's text. `subject` names the file in errors. A last line without its
/// newline (the writer was killed in the middle of it) is left out and counted in
/// `incomplete`; anything else that is not a version-1 event is an error.
/// \throws Error (Errc::invalid_argument) naming `subject`, the line number and, quoted, the
///         start of the line: `run.events: line 3: not a JSON object: "{\"v\":1,..."`.
[[nodiscard]] std::vector<StepEvent>
parse_events(std::string_view text, std::string_view subject, std::size_t* incomplete = nullptr);

/// The events told as a timeline, one line each, times relative to the first event:
///
///     step 94.0: 3 ranks on n[1-3], from 2026-11-26 13:02:31.004 UTC
///        +0.012 s  rank 0 (ps:0) on n1: registered
///        +6.513 s  rank 2 (worker:1) on n3: lost (connection closed)
///        +6.800 s  verdict: aborted, status 8: rank 2 (worker:1) on n3 launcher lost ...
[[nodiscard]] std::string render_timeline(const std::vector<StepEvent>& events);

/// Where the start-up time went (`tfslurm events --startup`), from the `startup` events: per
/// phase, the time each rank spent reaching it from the phase before (its node's clock; the
/// tasks' start from the step's first task, across the nodes' clocks), as the median, the 90th
/// percentile and the maximum with the slowest rank; then the slowest rank to first progress
/// (to its trainer's start when no trainer reported progress) and the phase where it lost most
/// against the other ranks' median of that phase. Without `startup` events: a line saying so.
///
///     start-up of step 94.0: 3 of 3 ranks on n[1-3]
///     phase                   median       p90       max  slowest
///     task started           0.000 s   0.010 s   0.012 s  rank 2 (worker:1) on n3
///     ...
///     first progress         0.041 s   2.950 s   3.012 s  rank 2 (worker:1) on n3
///     slowest: rank 2 (worker:1) on n3, 3.081 s from the step's first task to first
///     progress; its first progress took 3.012 s (the other ranks' median: 0.041 s)
[[nodiscard]] std::string render_startup(const std::vector<StepEvent>& events);

/// The figures of a start-up summary as render_startup() tells them (its lines after the first):
/// the phase table, the slowest nodes and the slowest rank; `who` names a rank, e.g.
/// `rank 2 (worker:1) on n3`; `ended`: the step is over, so a phase nobody reached (first
/// progress) is said to be missing. `tfslurm top` shows the same while a step starts.
[[nodiscard]] std::string
render_startup_figures(const StartupSummary& summary,
                       const std::function<std::string(std::uint32_t)>& who,
                       bool ended);

} // namespace tfslurm
