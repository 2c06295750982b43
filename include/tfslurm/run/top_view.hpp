// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// What `tfslurm top` shows: a step's snapshot (snapshot.hpp) with what Slurm says of its job,
/// as plain text (`--once`), as one JSON document (`--json`, schema in tfslurm(1), TOP), or as
/// the lines of the live screen (sorted, filtered, scrolled, coloured). Pure: values in, text
/// out; the terminal and the connection are the face's and watch_client.hpp's. Also the rules
/// for finding the step: scontrol's `Key=Value` records read, the step chosen from a job's.

#include <tfslurm/run/run.hpp>
#include <tfslurm/run/snapshot.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// What Slurm says of the watched step's job (`scontrol show job`).
struct TopJob {
    std::uint64_t job = 0;
    std::string state; ///< `RUNNING`, `COMPLETING`, ...
    std::string user;  ///< `alice`
    std::optional<std::uint32_t> uid;
    /// The job's end (its time limit), seconds since the Unix epoch; nullopt without a limit.
    std::optional<std::int64_t> end;
    std::uint32_t requeues = 0; ///< `Restarts`: how often the job was requeued
    std::string nodes;          ///< its nodelist
};

/// scontrol's one-line record (`scontrol -o show job`): `Key=Value` words; a word without `=`
/// (or whose key is not a word of letters) continues the previous value, whose text may hold
/// spaces (`Comment=a b`). Input: `JobId=12 JobName=t x UserId=u(5)`. Output:
/// {JobId: 12, JobName: `t x`, UserId: `u(5)`}.
[[nodiscard]] std::map<std::string, std::string, std::less<>>
parse_scontrol_record(std::string_view line);

/// A job's record read: JobId, JobState, UserId (`name(uid)`), EndTime (`Unknown`, `None` or
/// an ISO time in the controller's local zone, which `to_utc` turns into seconds since the epoch
/// from the civil time read as if it were UTC), Restarts, NodeList. \throws Error
/// (Errc::invalid_argument) naming the field and quoting it when one is missing or malformed.
[[nodiscard]] TopJob job_from_record(const std::map<std::string, std::string, std::less<>>& fields,
                                     const std::function<std::int64_t(std::int64_t)>& to_utc);

/// What the user asked to watch: `12`, `12.3`; nullopt step: the newest.
struct WatchRequest {
    std::uint64_t job = 0;
    std::optional<std::uint64_t> step;
};

/// Parse `JOB[.STEP]`. \throws Error (Errc::invalid_argument) `top: expected JOB or JOB.STEP
/// (numbers, e.g. 12345 or 12345.0): "<text>"`.
[[nodiscard]] WatchRequest parse_watch_request(std::string_view text);

/// The step to watch among a job's running steps as squeue lists them (`12.0`, `12.batch`,
/// `12.extern`, `12.1`): the asked one when it runs, else the newest numbered one. \throws
/// Error (Errc::invalid_argument) `top: step 12.4 is not running (running: 12.0, 12.1)`, or
/// `top: job 12 runs no step to watch now (no srun is running in it)`.
[[nodiscard]] std::uint64_t choose_step(const WatchRequest& request,
                                        const std::vector<std::string>& running);

/// How the live screen orders the ranks: `s` goes to the next.
enum class TopSort { rank, state, cpu, memory, progress, host };
/// Which ranks it lists: `f` goes to the next. `attention`: every rank whose state is not
/// `running` or `exited` (stragglers, stuck, restarting, failed, lost, waiting).
enum class TopFilter { all, attention };

[[nodiscard]] std::string_view to_string(TopSort sort) noexcept;
[[nodiscard]] std::string_view to_string(TopFilter filter) noexcept;
[[nodiscard]] TopSort next(TopSort sort) noexcept;
[[nodiscard]] TopFilter next(TopFilter filter) noexcept;

struct TopScreen {
    TopSort sort = TopSort::rank;
    TopFilter filter = TopFilter::all;
    std::size_t first = 0; ///< the first listed row shown (scrolling)
    std::size_t width = 100;
    std::size_t height = 30;
    bool color = false; ///< ANSI colours; else markers only (`!` straggling, `*` stuck, ...)
};

/// The ranks in the order and with the filter of `screen` (indexes into snapshot.ranks).
[[nodiscard]] std::vector<std::size_t>
listed_ranks(const Snapshot& snapshot, TopSort sort, TopFilter filter);

/// `--once`: the header, the roles' counts and every rank, plain text. `now`: seconds since the
/// Unix epoch (the job's time left).
[[nodiscard]] std::string
render_top_text(const Snapshot& snapshot, const TopJob& job, std::int64_t now);

/// `--json`: one JSON document (tfslurm(1), TOP).
[[nodiscard]] std::string
render_top_json(const Snapshot& snapshot, const TopJob& job, std::int64_t now);

/// The live screen's lines (at most screen.height, each at most screen.width columns of text
/// besides colour codes); screen.first is clamped to the rows there are.
[[nodiscard]] std::vector<std::string>
render_top_screen(const Snapshot& snapshot, const TopJob& job, std::int64_t now, TopScreen& screen);

/// Rows of ranks the live screen has room for at `height`.
[[nodiscard]] std::size_t top_page_rows(const Snapshot& snapshot, std::size_t height);

} // namespace tfslurm
