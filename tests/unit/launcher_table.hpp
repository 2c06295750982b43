// SPDX-License-Identifier: MIT
// The launcher machine's table tests (test_launcher*.cpp, test_launch_result.cpp): a scenario is
// a list of events, each written as a line with its time, and the actions each one must
// produce, the last one being the launcher's result (see feed() for the events' words).
#pragma once

#include "fixtures.hpp"

#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tfslurm::test {

/// rank 0 ps:0 on n1, rank 1 worker:0 on n1, rank 2 worker:1 on n2, rank 3 worker:2 on n2.
LauncherSettings settings(std::uint32_t rank);
/// settings(rank) with a 10 s stall timeout, the stall signal 6 and a 5 s stall grace.
LauncherSettings stall_settings(std::uint32_t rank);
/// settings(rank) of a launcher that waits for the coordinator's `cluster` (`iface`/`network`).
LauncherSettings exchange_settings(std::uint32_t rank);
/// settings(rank) of job 12 that ends 60 s after k_t0, with the checkpoint signal (SIGUSR1) 50 s
/// before it and `--requeue` (run `restart` of at most 2 requeues).
LauncherSettings checkpoint_settings(std::uint32_t rank, std::uint32_t restart = 0);

/// The failure of `rank` (as in settings()) that the coordinator names in an abort; its status
/// is `exited <step_status>` for the causes that have one (trainer, start).
protocol::Failure failure_of(std::uint32_t rank,
                             protocol::FailureCause cause,
                             int step_status,
                             const std::string& detail = {});
/// The abort the coordinator sends when rank 3 (worker:2 on n2) exited 3.
protocol::Abort abort_rank3();
/// The abort the coordinator sends when rank 2 (worker:1 on n2) made no progress for 10 s.
protocol::Abort abort_stall_rank2();

/// The wall-clock time of k_t0 in startup_settings().
inline const WallClock::time_point k_wall0{std::chrono::seconds{1796047358}};

/// settings(rank) of a launcher that takes its start-up phases: up at k_t0 (k_wall0 on the
/// wall clock), its task started 50 ms before.
LauncherSettings startup_settings(std::uint32_t rank, bool exchange = false);

/// Feed one event, written as in the tables: `welcome [<address>:<port>]`, `start due`, `started`,
/// `failed 7 <error>`, `exited N`, `killed N`, `heartbeat`, `stop done`, `stop signal R S [whole]`,
/// `abort` (rank 3 exited 3), `abort stall` (rank 2 stuck), `sample <cpu> <mtime> [<output>]` (a
/// progress sample; output bytes 0 unless given), `unexpected welcome`, `eof`, `lost <reason>`,
/// `written`, `signal N` (sent to the launcher alone), `step signal N` (from slurmstepd, to every
/// process of the step), `cluster` (n1 and n2's addresses), `restart N LIMIT`, `timer
/// heartbeat|watch|grace|close|settle|stall|restart|checkpoint|report`, `server finished
/// [started] [reported] [step N] [check-ok|check-fail]` (how far the trainers got; the failed
/// rank's node check), `checked ok|fail` (the node check after a failure), `go`,
/// `probe ok|fail` (the probe's end; fail: rank 0 at 10.1.0.1:23000 timed out), `node ok|fail`
/// (the node's checks; fail: its command exited 1), `progress file none|<ms> [<step>]` (the
/// progress file untouched, or last touched <ms> after k_wall0, with a step written in it).
void feed(LauncherMachine& m, const std::string& event, Clock::time_point now);

/// Actions in one line each; a Send is shortened to `send <type> [details]`.
std::vector<std::string> render(const std::vector<LauncherAction>& actions);

using Actions = std::vector<std::string>;
inline const Actions k_nothing;
inline const Actions k_registered{"arm heartbeat 1000", "arm watch 250", "schedule start"};
inline const std::string k_abort_line = "aborting: rank 3 (worker:2) on n2 exited with status 3";

struct Step {
    int at_ms = 0;
    std::string event;
    Actions actions;
};

/// The scenario's start: registered at 0 ms, the trainer started at once; then `rest`.
std::vector<Step> running(std::vector<Step> rest);

/// Run a scenario; every step's actions must match exactly.
LauncherMachine play(const LauncherSettings& launcher_settings, const std::vector<Step>& steps);
LauncherMachine play(std::uint32_t rank, const std::vector<Step>& steps);

/// A machine of `launcher_settings` whose trainer runs (registered and started at k_t0), its
/// actions so far taken.
LauncherMachine running_machine(const LauncherSettings& launcher_settings);

/// After `failure`'s abort, the trainer of `m` (rank `rank`) dies of SIGTERM and the launcher
/// leaves, rank 0 only once its coordinator is finished: the result, which must be there.
LaunchResult
result_after_abort(LauncherMachine& m, const protocol::Failure& failure, std::uint32_t rank);

} // namespace tfslurm::test
