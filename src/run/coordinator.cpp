// SPDX-License-Identifier: MIT
// The coordinator state machine: pure (no I/O, no clock of its own), so that every rule is
// unit-tested with explicit times (tests/unit/run/test_coordinator.cpp).
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/run/coordinator.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace tfslurm {

namespace {

/// Ascending ranks as ranges. Input: {3, 4, 5, 9}. Output: `3-5,9`.
std::string rank_ranges(const std::vector<std::uint32_t>& ranks) {
    std::string out;
    for (std::size_t i = 0; i < ranks.size();) {
        std::size_t j = i;
        while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) {
            ++j;
        }
        out += out.empty() ? "" : ",";
        out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
        i = j + 1;
    }
    return out;
}

/// The distinct hosts (first appearance first) as a hostlist; a comma list should a name not
/// fit in a hostlist. Input: {n2, n2, n3}. Output: `n[2-3]`.
std::string host_list(const std::vector<std::string>& hosts) {
    std::vector<std::string> distinct;
    std::set<std::string_view> seen;
    for (const auto& host : hosts) {
        if (seen.insert(host).second) {
            distinct.push_back(host);
        }
    }
    try {
        return compress_hostlist(distinct);
    } catch (const Error&) {
        return fmt::format("{}", fmt::join(distinct, ","));
    }
}

} // namespace

Millis straggler_window(Millis stall_timeout) {
    return stall_timeout / 2;
}

std::string_view to_string(Verdict verdict) noexcept {
    switch (verdict) {
    case Verdict::none:
        return "none";
    case Verdict::done:
        return "done";
    case Verdict::interrupted:
        return "interrupted";
    case Verdict::aborted:
        return "aborted";
    }
    return "none";
}

std::string_view to_string(RankActivity activity) noexcept {
    switch (activity) {
    case RankActivity::waiting:
        return "waiting";
    case RankActivity::running:
        return "running";
    case RankActivity::straggling:
        return "straggling";
    case RankActivity::stuck:
        return "stuck";
    case RankActivity::restarting:
        return "restarting";
    case RankActivity::exited:
        return "exited";
    case RankActivity::failed:
        return "failed";
    case RankActivity::lost:
        return "lost";
    }
    return "waiting";
}

// --- Coordinator (pure) ------------------------------------------------------------------------

Coordinator::Coordinator(CoordinatorSettings settings, Clock::time_point start)
    : m_settings(std::move(settings)), m_start(start), m_ranks(m_settings.ranks.size()) {
    if (m_ranks.empty()) {
        throw errors::invalid_argument("coordinator", "the step has no rank", "0");
    }
    for (const auto& member : m_settings.ranks) {
        m_has_chief = m_has_chief || member.role == Role::chief;
        if (is_training(member.role)) {
            ++m_training_total;
        }
    }
    const RestartPolicy& policy = m_settings.run.restarts;
    const auto restartable = static_cast<std::uint32_t>(
        std::count_if(m_settings.ranks.begin(), m_settings.ranks.end(), [&](const Member& m) {
            return std::find(policy.roles.begin(), policy.roles.end(), m.role) !=
                   policy.roles.end();
        }));
    m_restart_budget = policy.total.value_or(policy.per_rank * restartable);
    check_until(m_settings.ranks, m_settings.run.until);
    m_recording = !m_settings.run.events.empty();
    m_connect_timeout = connect_timeout_for(m_settings.run, node_count(m_settings.ranks));
}

StepEvent* Coordinator::record(EventKind kind, std::uint32_t rank) {
    if (!m_recording) {
        return nullptr;
    }
    StepEvent event;
    event.kind = kind;
    if (rank < m_settings.ranks.size() && kind != EventKind::verdict) {
        event.rank = rank;
        event.member = m_settings.ranks[rank];
    }
    m_events.push_back(std::move(event));
    return &m_events.back();
}

void Coordinator::record_started() {
    for (std::uint32_t rank = 0; m_recording && rank < m_ranks.size(); ++rank) {
        if (m_ranks[rank].connected) {
            record(EventKind::started, rank)->restart = 0;
        }
    }
}

void Coordinator::note_startup(std::uint32_t rank, const protocol::Exit& exit) {
    if (exit.startup[StartupPhase::started]) {
        m_progress.started = true;
    }
    if (exit.startup[StartupPhase::progress]) {
        m_progress.reported = true;
    }
    if (exit.progress_step) {
        m_progress.step = std::max(m_progress.step.value_or(0), *exit.progress_step);
    }
    startup_reported(rank, exit.startup);
    RankState& state = m_ranks[rank];
    if (state.startup_recorded || exit.startup.empty()) {
        return;
    }
    state.startup_recorded = true;
    if (StepEvent* event = record(EventKind::startup, rank)) {
        event->startup = exit.startup;
        event->progress_step = exit.progress_step;
    }
}

RankView Coordinator::rank_view(std::uint32_t rank, Clock::time_point now) const {
    const RankState& state = m_ranks.at(rank);
    RankView view;
    view.restarts = state.restarts;
    view.usage = state.usage;
    bool live = false; // the rates of a trainer that runs; an ended one's are history
    if (!state.registered) {
        view.activity = RankActivity::waiting;
    } else if (state.stuck) {
        // Stuck whatever came after: the stack-trace signal may have ended its trainer.
        view.activity = RankActivity::stuck;
    } else if (state.reported) {
        view.activity = state.status.success() ? RankActivity::exited : RankActivity::failed;
    } else if (state.lost) {
        view.activity = RankActivity::lost;
    } else if (state.restarted_at && now - *state.restarted_at < m_settings.run.restarts.delay) {
        view.activity = RankActivity::restarting;
    } else {
        view.activity = state.straggling ? RankActivity::straggling : RankActivity::running;
        live = true;
        if (state.progress_at) {
            view.progress_age =
                std::max(Millis{0}, std::chrono::duration_cast<Millis>(now - *state.progress_at));
        }
    }
    if (live || view.activity == RankActivity::stuck) {
        view.output_rate = state.output_rate;
        view.cpu_percent = state.cpu_percent;
    }
    return view;
}

std::vector<StepEvent> Coordinator::take_events() {
    std::vector<StepEvent> out;
    out.swap(m_events);
    return out;
}

bool Coordinator::is_training(Role role) const noexcept {
    if (m_settings.run.until == Until::chief) {
        return role == Role::chief;
    }
    return role == Role::worker || role == Role::chief;
}

std::optional<std::string> Coordinator::admit(std::uint32_t rank, Role role) const {
    if (rank >= m_ranks.size()) {
        return fmt::format("rank {} is out of range (the step has {} ranks)", rank, m_ranks.size());
    }
    const Member& member = m_settings.ranks[rank];
    if (member.role != role) {
        return fmt::format(
            "rank {} is {} in the plan, not {}", rank, to_string(member.role), to_string(role));
    }
    if (m_ranks[rank].registered) {
        return fmt::format("rank {} is already registered", rank);
    }
    return std::nullopt;
}

void Coordinator::registered(std::uint32_t rank,
                             Clock::time_point now,
                             const std::string& address,
                             std::uint16_t port) {
    RankState& state = m_ranks.at(rank);
    if (state.registered) {
        return;
    }
    state.registered = true;
    state.address = address;
    state.port = port;
    m_exchange = m_exchange || !address.empty() || port != 0;
    state.connected = true;
    state.last_seen = now;
    ++m_registered;
    ++m_connected;
    record(EventKind::registered, rank);
    if (logger().should_log(LogLevel::debug)) { // rank_label() costs at 100,000 ranks
        logger().debug("coordinator: {} registered ({} of {})",
                       rank_label(rank, m_settings.ranks[rank]),
                       m_registered,
                       m_ranks.size());
    }
    if (auto message = verdict_message()) {
        // A latecomer learns the verdict at once.
        m_outgoing.push_back({{rank}, std::move(*message)});
    } else if (m_exchange && m_registered == m_ranks.size()) {
        send_cluster();
    } else if (!m_exchange && !has_start_barrier(m_settings.run) && m_recording) {
        record(EventKind::started, rank)->restart = 0; // its launcher starts it now
    }
}

void Coordinator::send_cluster() {
    protocol::Cluster cluster;
    for (std::size_t rank = 0; rank < m_ranks.size(); ++rank) {
        if (!m_ranks[rank].address.empty()) {
            cluster.addresses.emplace(m_settings.ranks[rank].host, m_ranks[rank].address);
        }
        // Only the ports that moved: at 10,000 ranks a full list alone would take 60 KB.
        const std::uint16_t planned = rank < m_settings.ports.size() ? m_settings.ports[rank] : 0;
        if (m_ranks[rank].port != 0 && m_ranks[rank].port != planned) {
            cluster.ports.resize(rank + 1, 0);
            cluster.ports[rank] = m_ranks[rank].port;
        }
    }
    logger().debug("coordinator: every rank registered: sending the addresses of {} nodes and "
                   "{} moved ports",
                   cluster.addresses.size(),
                   std::count_if(cluster.ports.begin(), cluster.ports.end(), [](auto port) {
                       return port != 0;
                   }));
    broadcast(std::move(cluster));
    if (!has_start_barrier(m_settings.run)) {
        record_started(); // the trainers start once they have every address
    }
}

void Coordinator::broadcast(protocol::Message message) {
    std::vector<std::uint32_t> ranks;
    ranks.reserve(m_connected);
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        if (m_ranks[rank].connected) {
            ranks.push_back(rank);
        }
    }
    if (!ranks.empty()) {
        m_outgoing.push_back({std::move(ranks), std::move(message)});
    }
}

void Coordinator::heartbeat(std::uint32_t rank, Clock::time_point now) {
    if (rank < m_ranks.size() && m_ranks[rank].registered) {
        m_ranks[rank].last_seen = now;
    }
}

void Coordinator::usage_reported(std::uint32_t rank,
                                 const protocol::Usage& usage,
                                 Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered) {
        return;
    }
    RankState& state = m_ranks[rank];
    // Heartbeats repeat a launcher's last sample between two (every few seconds): the rates are
    // taken when the sample changes, over the time since the last change, and fall to 0 once it
    // has not changed for k_usage_idle.
    const bool changed = !state.usage || state.usage->cpu_ms != usage.cpu_ms ||
                         state.usage->output_bytes != usage.output_bytes;
    if (state.usage && changed) {
        const auto elapsed = std::chrono::duration_cast<Millis>(now - state.usage_at).count();
        if (elapsed > 0) {
            const auto per_second =
                [elapsed](std::uint64_t before, std::uint64_t after, std::uint64_t scale) {
                    return after > before
                               ? (after - before) * scale / static_cast<std::uint64_t>(elapsed)
                               : 0;
                };
            state.cpu_percent = per_second(state.usage->cpu_ms, usage.cpu_ms, 100);
            if (state.usage->output_bytes && usage.output_bytes) {
                state.output_rate =
                    per_second(*state.usage->output_bytes, *usage.output_bytes, 1000);
            }
        }
    } else if (state.usage && now - state.usage_at >= k_usage_idle) {
        state.cpu_percent = 0;
        if (usage.output_bytes) {
            state.output_rate = 0;
        }
    }
    if (changed) {
        state.usage_at = now;
    }
    state.usage = usage;
}

void Coordinator::startup_reported(std::uint32_t rank, const StartupTimes& startup) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered) {
        return;
    }
    StartupTimes& kept = m_ranks[rank].startup;
    for (std::size_t i = 0; i < k_startup_phases; ++i) {
        if (const auto& time = startup.at.at(i); time && kept.at.at(i) != time) {
            kept.at.at(i) = time;
            m_startup_summary.reset();
        }
    }
}

const StartupSummary& Coordinator::startup_summary() const {
    if (!m_startup_summary) {
        std::vector<RankPhases> ranks;
        ranks.reserve(m_ranks.size());
        for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
            ranks.push_back({rank, m_settings.ranks[rank].host, &m_ranks[rank].startup});
        }
        m_startup_summary = summarize_startup(ranks);
    }
    return *m_startup_summary;
}

void Coordinator::exited(std::uint32_t rank, const protocol::Exit& exit, Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered) {
        return;
    }
    RankState& state = m_ranks[rank];
    const Member& member = m_settings.ranks[rank];
    if (state.reported) {
        logger().warn("coordinator: {} reported its exit twice; ignoring the second report ({})",
                      rank_label(rank, member),
                      describe(exit.status));
        return;
    }
    state.reported = true;
    state.progress_at.reset(); // an ended trainer makes no progress and is no straggler
    state.straggling = false;
    state.status = exit.status;
    state.last_seen = now;
    if (StepEvent* event = record(EventKind::exited, rank)) {
        event->status = exit.status;
        event->why = exit.error;
    }
    note_startup(rank, exit);
    if (m_verdict != Verdict::none) {
        logger().debug("coordinator: {} {} after the verdict",
                       rank_label(rank, member),
                       describe(exit.status));
        update_finished(now);
        return;
    }
    std::string budget_spent;
    if (exit.error.empty() && !exit.status.success() &&
        try_restart(rank, exit, budget_spent, now)) {
        state.reported = false; // training again: its next exit counts
        return;
    }
    if (!exit.error.empty() || !exit.status.success()) {
        protocol::Failure failure = failure_of(rank);
        failure.cause =
            exit.error.empty() ? protocol::FailureCause::trainer : protocol::FailureCause::start;
        failure.status = exit.status;
        failure.detail = exit.error.empty() ? budget_spent : exit.error;
        failure.step_status = exit.status.shell_status() != 0 ? exit.status.shell_status() : 1;
        fail(std::move(failure), now);
        return;
    }
    ++m_succeeded;
    if (is_training(member.role)) {
        ++m_training_done;
    }
    if (logger().should_log(LogLevel::debug)) {
        logger().debug("coordinator: {} exited 0 ({} of {} training ranks done)",
                       rank_label(rank, member),
                       m_training_done,
                       m_training_total);
    }
    const bool work_done =
        m_training_total > 0 ? m_training_done == m_training_total : m_succeeded == m_ranks.size();
    if (work_done) {
        m_step_status = 0;
        decide(Verdict::done, now);
    }
}

bool Coordinator::try_restart(std::uint32_t rank,
                              const protocol::Exit& exit,
                              std::string& detail,
                              Clock::time_point now) {
    const RestartPolicy& policy = m_settings.run.restarts;
    const Member& member = m_settings.ranks[rank];
    RankState& state = m_ranks[rank];
    if (policy.per_rank == 0 ||
        std::find(policy.roles.begin(), policy.roles.end(), member.role) == policy.roles.end()) {
        return false; // not restartable: a failure as before restarts existed
    }
    if (state.restarts >= policy.per_rank) {
        detail = fmt::format(
            "its restart budget is spent: {} of {} restarts used", state.restarts, policy.per_rank);
        return false;
    }
    if (m_restarts >= m_restart_budget) {
        detail = fmt::format("the step's restart budget is spent: {} of {} restarts used",
                             m_restarts,
                             m_restart_budget);
        return false;
    }
    ++state.restarts;
    ++m_restarts;
    state.restarted_at = now;
    logger().warn("restarting {} (restart {} of {}): {}",
                  rank_label(rank, member),
                  state.restarts,
                  policy.per_rank,
                  describe(exit.status));
    m_outgoing.push_back({{rank}, protocol::Restart{state.restarts, policy.per_rank}});
    if (StepEvent* event = record(EventKind::restarted, rank)) {
        event->restart = state.restarts;
    }
    return true;
}

void Coordinator::interrupted(std::uint32_t rank,
                              int signo,
                              Clock::time_point now,
                              bool whole_step) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered || m_verdict != Verdict::none) {
        return;
    }
    logger().info("coordinator: {} received signal {} ({}): stopping the step",
                  rank_label(rank, m_settings.ranks[rank]),
                  signo,
                  signal_description(signo));
    m_stop = protocol::Stop{protocol::StopReason::signal, rank, signo, whole_step};
    m_step_status = 128 + signo;
    decide(Verdict::interrupted, now);
}

void Coordinator::stalled(std::uint32_t rank, Millis silent, Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered || m_verdict != Verdict::none) {
        return; // a stall found after the verdict: that trainer is being stopped anyway
    }
    m_ranks[rank].last_seen = now;
    m_ranks[rank].stuck = true;
    if (StepEvent* event = record(EventKind::stalled, rank)) {
        event->millis = silent;
    }
    protocol::Failure failure = failure_of(rank);
    failure.cause = protocol::FailureCause::stalled;
    failure.detail = format_seconds(silent);
    failure.step_status = k_status_stalled;
    fail(std::move(failure), now);
}

void Coordinator::progressed(std::uint32_t rank, Millis idle, Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered || m_ranks[rank].reported ||
        !m_settings.run.stall_timeout) {
        return;
    }
    RankState& state = m_ranks[rank];
    state.last_seen = now;
    // A peer's number: at most a year (no time point arithmetic overflows), never negative.
    idle = std::clamp(idle, Millis{0}, Millis{std::chrono::hours{24 * 365}});
    state.progress_at = now - idle;
    if (state.straggling && idle < straggler_window(*m_settings.run.stall_timeout)) {
        state.straggling = false; // the episode is over: a later one is told again
        logger().info("{} makes progress again", rank_label(rank, m_settings.ranks[rank]));
    }
}

// O(ranks) a tick, as the heartbeat check: at 10,000 ranks and 4 ticks a second, a few tens of
// thousands of comparisons a second.
void Coordinator::find_stragglers(Clock::time_point now) {
    if (!m_settings.run.stall_timeout) {
        return;
    }
    const Millis window = straggler_window(*m_settings.run.stall_timeout);
    const auto& roles = m_settings.run.stall_roles;
    std::size_t reporting = 0;
    std::size_t progressing = 0;
    std::optional<Role> only_role;
    bool one_role = true;
    const auto judged = [&](std::uint32_t rank) {
        const RankState& state = m_ranks[rank];
        return state.progress_at && !state.reported &&
               std::find(roles.begin(), roles.end(), m_settings.ranks[rank].role) != roles.end();
    };
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        if (!judged(rank)) {
            continue;
        }
        ++reporting;
        if (now - *m_ranks[rank].progress_at < window) {
            ++progressing;
        }
        const Role role = m_settings.ranks[rank].role;
        one_role = one_role && (!only_role || *only_role == role);
        only_role = role;
    }
    if (progressing * 2 <= reporting) {
        return; // most did not progress either: a phase of the step, not one straggler
    }
    const std::string_view whom = one_role && only_role == Role::worker ? "workers" : "ranks";
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        RankState& state = m_ranks[rank];
        if (!judged(rank) || state.straggling || now - *state.progress_at < window) {
            continue;
        }
        state.straggling = true;
        const auto idle =
            std::chrono::duration_cast<std::chrono::seconds>(now - *state.progress_at);
        logger().warn("{} is straggling: no progress for {} while {} of {} {} progressed in the "
                      "last {}",
                      rank_label(rank, m_settings.ranks[rank]),
                      format_seconds(Millis{idle}),
                      progressing,
                      reporting,
                      whom,
                      format_seconds(window));
        if (StepEvent* event = record(EventKind::straggling, rank)) {
            event->millis = Millis{idle};
        }
    }
}

void Coordinator::probed(std::uint32_t rank,
                         const protocol::Probed& probed,
                         Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered || m_ranks[rank].probed) {
        return;
    }
    RankState& state = m_ranks[rank];
    state.probed = true;
    state.last_seen = now;
    state.unreached = probed.failures;
    state.preflight = probed.preflight;
    ++m_probed;
    logger().debug("coordinator: {} is ready: {}{} ({} of {})",
                   rank_label(rank, m_settings.ranks[rank]),
                   probed.failures.empty() ? "all peers reached"
                                           : fmt::format("{} unreached", probed.failures.size()),
                   probed.preflight ? ", preflight failed" : "",
                   m_probed,
                   m_ranks.size());
    if (m_probed == m_ranks.size() && m_verdict == Verdict::none) {
        end_probe(now);
    }
}

void Coordinator::end_probe(Clock::time_point now) {
    // A node that failed its checks comes first: it explains the peers that could not reach it.
    // The lowest rank that reported one is named, whichever report came first.
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        if (const auto& preflight = m_ranks[rank].preflight) {
            protocol::Failure failure = failure_of(rank);
            failure.cause = protocol::FailureCause::preflight;
            failure.detail = fmt::format("{}: {}", preflight->check, preflight->detail);
            failure.step_status = k_status_preflight;
            fail(std::move(failure), now);
            return;
        }
    }
    // Votes: how many ranks could not reach each peer.
    std::map<std::uint32_t, std::size_t> votes;
    for (const RankState& state : m_ranks) {
        for (const auto& failure : state.unreached) {
            ++votes[failure.rank];
        }
    }
    if (votes.empty()) {
        logger().debug("coordinator: every rank is ready (peers reached, checks passed): go");
        broadcast(protocol::Go{});
        record_started();
        return;
    }
    // std::max_element keeps the first (lowest) peer among equals.
    const std::uint32_t peer =
        std::max_element(votes.begin(), votes.end(), [](const auto& a, const auto& b) {
            return a.second < b.second;
        })->first;
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        const auto& unreached = m_ranks[rank].unreached;
        const auto found = std::find_if(
            unreached.begin(), unreached.end(), [peer](const auto& f) { return f.rank == peer; });
        if (found == unreached.end()) {
            continue;
        }
        protocol::Failure failure = failure_of(rank);
        failure.cause = protocol::FailureCause::unreachable;
        const Member& target = peer < m_settings.ranks.size() ? m_settings.ranks[peer] : Member{};
        failure.detail = fmt::format("rank {} ({}:{}) at {}: {}",
                                     peer,
                                     to_string(target.role),
                                     target.index,
                                     found->address,
                                     found->error);
        failure.step_status = k_status_unreachable;
        fail(std::move(failure), now);
        return;
    }
}

void Coordinator::node_checked(std::uint32_t rank,
                               const protocol::Checked& checked,
                               Clock::time_point now) {
    if (rank >= m_ranks.size() || !m_ranks[rank].registered) {
        return;
    }
    m_ranks[rank].last_seen = now;
    if (m_node_check || !m_failure || m_failure->rank != rank ||
        !failure_checked(m_settings.run, m_failure->cause)) {
        logger().warn("coordinator: {} sent a node check that nobody asked for; ignoring it",
                      rank_label(rank, m_settings.ranks[rank]));
        return;
    }
    m_node_check = checked;
    logger().debug("coordinator: {}: node check {}",
                   rank_label(rank, m_settings.ranks[rank]),
                   checked.failure ? "failed: " + checked.failure->check : std::string("passed"));
    if (StepEvent* event = record(EventKind::checked, rank)) {
        event->result = checked.failure ? "failed" : "passed";
        if (checked.failure) {
            event->check = checked.failure->check;
            event->why = checked.failure->detail;
        }
    }
}

void Coordinator::connection_lost(std::uint32_t rank, Clock::time_point now, std::string_view why) {
    if (rank >= m_ranks.size() || !m_ranks[rank].connected) {
        return;
    }
    RankState& state = m_ranks[rank];
    state.connected = false;
    --m_connected;
    state.lost = state.lost || !state.reported;
    if (m_verdict == Verdict::none && !state.reported) {
        if (StepEvent* event = record(EventKind::lost, rank)) {
            event->why = std::string(why);
        }
        protocol::Failure failure = failure_of(rank);
        failure.cause = protocol::FailureCause::lost;
        failure.detail = std::string(why);
        failure.step_status = k_status_lost;
        fail(std::move(failure), now);
        return;
    }
    update_finished(now);
}

void Coordinator::tick(Clock::time_point now) {
    if (m_verdict == Verdict::none) {
        if (m_registered < m_ranks.size() && now - m_start >= m_connect_timeout) {
            const auto first = static_cast<std::uint32_t>(
                std::find_if(m_ranks.begin(),
                             m_ranks.end(),
                             [](const RankState& state) { return !state.registered; }) -
                m_ranks.begin());
            protocol::Failure failure = failure_of(first);
            failure.cause = protocol::FailureCause::unregistered;
            failure.detail = format_seconds(m_connect_timeout);
            failure.missing = static_cast<std::uint32_t>(m_ranks.size() - m_registered);
            failure.step_status = k_status_unregistered;
            if (failure.missing > 1) {
                std::vector<std::uint32_t> missing;
                std::vector<std::string> hosts;
                for (std::uint32_t rank = first; rank < m_ranks.size(); ++rank) {
                    if (!m_ranks[rank].registered) {
                        missing.push_back(rank);
                        hosts.push_back(m_settings.ranks.at(rank).host);
                    }
                }
                failure.ranks = rank_ranges(missing);
                failure.host = host_list(hosts);
            }
            fail(std::move(failure), now);
            return;
        }
        for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
            const RankState& state = m_ranks[rank];
            if (state.connected && !state.reported &&
                silent_too_long(state.last_seen, now, m_settings.run.heartbeat_timeout)) {
                m_ranks[rank].lost = true;
                protocol::Failure failure = failure_of(rank);
                failure.cause = protocol::FailureCause::lost;
                failure.detail = no_heartbeat(m_settings.run.heartbeat_timeout);
                failure.answering = answering_nodes(now);
                if (StepEvent* event = record(EventKind::lost, rank)) {
                    event->why = failure.detail;
                }
                failure.step_status = k_status_lost;
                fail(std::move(failure), now);
                break;
            }
        }
    }
    if (m_verdict == Verdict::none) {
        find_stragglers(now);
    }
    if (m_verdict != Verdict::none) {
        forget_silent(now);
    }
    update_finished(now);
}

std::uint32_t Coordinator::answering_nodes(Clock::time_point now) const {
    std::set<std::string_view> hosts;
    if (!m_settings.ranks.empty()) {
        hosts.insert(m_settings.ranks[0].host);
    }
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        const RankState& state = m_ranks[rank];
        if (state.connected && !state.lost &&
            !silent_too_long(state.last_seen, now, m_settings.run.heartbeat_timeout / 2)) {
            hosts.insert(m_settings.ranks[rank].host);
        }
    }
    return static_cast<std::uint32_t>(hosts.size());
}

void Coordinator::forget_silent(Clock::time_point now) {
    // A launcher silent for the heartbeat timeout after the verdict (the lost one above, stopped
    // or on a hung node) is gone even though its connection is open: waiting for its EOF would
    // hold rank 0's launcher, hence the step, for the whole linger time. Its verdict is queued.
    for (std::uint32_t rank = 0; rank < m_ranks.size(); ++rank) {
        RankState& state = m_ranks[rank];
        if (state.connected &&
            silent_too_long(state.last_seen, now, m_settings.run.heartbeat_timeout)) {
            logger().debug("coordinator: {} silent for {}: not waiting for it",
                           rank_label(rank, m_settings.ranks[rank]),
                           format_seconds(m_settings.run.heartbeat_timeout));
            state.connected = false;
            --m_connected;
        }
    }
}

std::vector<Outgoing> Coordinator::take_outgoing() {
    std::vector<Outgoing> out;
    out.swap(m_outgoing);
    return out;
}

protocol::Failure Coordinator::failure_of(std::uint32_t rank) const {
    const Member& member = m_settings.ranks.at(rank);
    protocol::Failure failure;
    failure.rank = rank;
    failure.role = member.role;
    failure.index = member.index;
    failure.host = member.host;
    return failure;
}

std::optional<protocol::Message> Coordinator::verdict_message() const {
    switch (m_verdict) {
    case Verdict::none:
        return std::nullopt;
    case Verdict::done:
        return protocol::Stop{protocol::StopReason::done, 0, 0};
    case Verdict::interrupted:
        return *m_stop;
    case Verdict::aborted:
        return protocol::Abort{*m_failure};
    }
    return std::nullopt;
}

void Coordinator::fail(protocol::Failure failure, Clock::time_point now) {
    logger().debug("coordinator: aborting: {}", protocol::describe(failure));
    m_step_status = failure.step_status;
    m_failure = std::move(failure);
    decide(Verdict::aborted, now);
}

void Coordinator::decide(Verdict verdict, Clock::time_point now) {
    m_verdict = verdict;
    m_verdict_time = now;
    if (verdict == Verdict::done) {
        const std::size_t remaining = m_ranks.size() - m_succeeded;
        // A normal end where every rank ended by itself says nothing: only stopping ranks that
        // still run (a ps, workers under --until chief) is news.
        logger().log(remaining == 0 ? LogLevel::debug : LogLevel::info,
                     "coordinator: the work is done ({} exited 0): stopping {} remaining rank{}",
                     m_settings.run.until == Until::chief ? "the chief"
                     : m_training_total == 0              ? "every rank"
                     : m_has_chief                        ? "every worker and the chief"
                                                          : "every worker",
                     remaining,
                     remaining == 1 ? "" : "s");
    }
    broadcast(*verdict_message());
    if (StepEvent* event = record(EventKind::verdict, 0)) {
        event->verdict = std::string(to_string(verdict));
        event->status = ExitStatus::exited(m_step_status); // the step's status, as srun's
        if (m_failure) {
            event->cause = std::string(protocol::to_string(m_failure->cause));
            event->why = protocol::describe(*m_failure);
        } else if (m_stop && verdict == Verdict::interrupted) {
            event->why = fmt::format("{} received signal {} ({})",
                                     rank_label(m_stop->rank, m_settings.ranks.at(m_stop->rank)),
                                     m_stop->signal,
                                     signal_description(m_stop->signal));
        }
    }
    update_finished(now);
}

void Coordinator::update_finished(Clock::time_point now) {
    // Ranks that have not registered yet may still come (rank 0 often fails before the others
    // connected): they must learn the verdict, so wait for them too, within the linger time.
    // After a registration timeout they are not expected any more.
    const bool everyone_came =
        m_registered == m_ranks.size() ||
        (m_failure && m_failure->cause == protocol::FailureCause::unregistered);
    if (m_verdict != Verdict::none && !m_finished &&
        ((everyone_came && m_connected == 0) || now - m_verdict_time >= m_settings.linger)) {
        m_finished = true;
        logger().debug("coordinator: finished ({} launchers still connected)", m_connected);
    }
}

} // namespace tfslurm
