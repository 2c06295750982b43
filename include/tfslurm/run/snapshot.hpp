// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// What a watcher (`tfslurm top`) is sent about a running step: the coordinator's view of every
/// rank, once a second, as one sealed `snapshot` frame (docs/protocol.md, "Watchers"). Pure:
/// the coordinator in, a value out; the value to its JSON payload and back, every field checked
/// (a watcher believes a snapshot only after the coordinator proved itself, and still reads it
/// bounded).
///
/// Example payload (keys sorted; a rank is `[rank, role, index, host, state, restarts,
/// progress age in ms, cpu_ms, rss, CPU percent, output bytes per second]`, null where unknown):
/// `{"elapsed_ms":8000,"failure":"","job":94,"nodes":2,"ranks":[[0,"ps",0,"n1","running",0,
/// null,120,31457280,2,null],[1,"worker",0,"n2","restarting",1,null,null,null,null,null]],
/// "restarts":1,"run_id":"c-94-0","stall_timeout_ms":null,"step":0,"type":"snapshot","v":7,
/// "verdict":"none"}`. While ranks report start-up phases it also carries `startup`, the
/// coordinator's start-up summary (summarize_startup()): `{"end":"started","more_nodes":0,
/// "nodes":[["n2",412]],"phases":[["task",2,0,5,5,1],["up",2,31,40,40,1]],"reported":2,
/// "slowest":[1,412,"up",40,31]}`: a phase is `[name, ranks, median, p90, max, slowest rank]`, a
/// node `[host, ms]`, the slowest `[rank, total, the phase it lost most in (or null), that phase's
/// time, the other ranks' median of it (or null)]`, milliseconds.

#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// One rank as a watcher sees it.
struct SnapshotRank {
    std::uint32_t rank = 0;
    Role role = Role::worker;
    std::uint32_t index = 0;
    std::string host;
    RankActivity activity = RankActivity::waiting;
    std::uint32_t restarts = 0;
    std::optional<Millis> progress_age;       ///< RankView::progress_age
    std::optional<protocol::Usage> usage;     ///< its trainer's CPU time and memory
    std::optional<std::uint64_t> cpu_percent; ///< RankView::cpu_percent
    std::optional<std::uint64_t> output_rate; ///< bytes per second (RankView::output_rate)
};

/// The step as its coordinator sees it at one moment.
struct Snapshot {
    std::uint64_t job = 0;
    std::uint64_t step = 0;
    std::string run_id;
    Millis elapsed{0}; ///< since the coordinator started
    std::size_t nodes = 0;
    Verdict verdict = Verdict::none;
    std::string failure;        ///< protocol::describe() of the step's failure, once it aborted
    std::uint32_t restarts = 0; ///< restarts granted in the step
    std::optional<Millis> stall_timeout; ///< the progress ages are judged against it
    std::vector<SnapshotRank> ranks;
    /// Where the start-up time went so far (Coordinator::startup_summary()); `reported` 0 (and
    /// no `startup` on the wire) before any rank's phases came.
    StartupSummary startup;
};

/// The coordinator's state at `now`, for step `id`.
[[nodiscard]] Snapshot
take_snapshot(const Coordinator& coordinator, Clock::time_point now, protocol::StepId id);

/// The `snapshot` payload (compact JSON, keys sorted; the example above).
[[nodiscard]] std::string encode_snapshot(const Snapshot& snapshot);

/// Whether `payload` is a `snapshot` (its `"type"`, without parsing the rest): a watcher tells
/// it from the protocol's messages before decoding it.
[[nodiscard]] bool is_snapshot_payload(std::string_view payload) noexcept;

/// Parse one `snapshot` payload, every field checked (ranks in order from 0, states, roles and
/// phases by name, strings of at most 4096 bytes, the start-up's ranks among the ranks). \throws
/// Error (Errc::protocol): `protocol: <problem>:
/// "<payload, shortened>"`.
[[nodiscard]] Snapshot decode_snapshot(std::string_view payload);

/// Parse a state's name (`stuck`); nullopt for another word.
[[nodiscard]] std::optional<RankActivity> parse_rank_activity(std::string_view name) noexcept;

/// Parse a verdict's name (`aborted`); nullopt for another word.
[[nodiscard]] std::optional<Verdict> parse_verdict(std::string_view name) noexcept;

} // namespace tfslurm
