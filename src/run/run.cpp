// SPDX-License-Identifier: MIT
// The types shared by the components of `tfslurm run`.
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace tfslurm {

std::string_view to_string(Until until) noexcept {
    return until == Until::chief ? "chief" : "workers";
}

Until parse_until(std::string_view text, std::string_view subject) {
    if (text == "workers") {
        return Until::workers;
    }
    if (text == "chief") {
        return Until::chief;
    }
    throw errors::invalid_argument(subject,
                                   "expected workers or chief",
                                   text,
                                   "workers: stop ps/evaluator when every worker (and the chief) "
                                   "exited 0; chief: stop everyone when the chief exited 0");
}

void check_until(const std::vector<Member>& ranks, Until until) {
    const auto is_chief = [](const Member& member) { return member.role == Role::chief; };
    if (until == Until::chief && std::none_of(ranks.begin(), ranks.end(), is_chief)) {
        throw errors::invalid_setting("until",
                                      "the plan has no chief",
                                      "chief",
                                      "add " + setting_ref("chief") + ", or use " +
                                          setting_ref("until", "workers"));
    }
}

namespace {

/// A comma list of roles, each once; `refuse(role)` throws for a role that may not be listed.
template <typename Refuse>
std::vector<Role> parse_role_set(std::string_view text, std::string_view subject, Refuse refuse) {
    std::vector<Role> roles;
    std::string_view rest = text;
    while (true) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        if (item.empty()) {
            throw errors::invalid_argument(
                subject, "expected a comma list of roles", text, "e.g. worker or worker,chief");
        }
        const Role role = parse_role(item, subject);
        refuse(role);
        if (std::find(roles.begin(), roles.end(), role) == roles.end()) {
            roles.push_back(role);
        }
        if (comma == std::string_view::npos) {
            return roles;
        }
        rest.remove_prefix(comma + 1);
    }
}

} // namespace

std::vector<Role> parse_stall_roles(std::string_view text, std::string_view subject) {
    if (text == "all") {
        return {Role::chief, Role::evaluator, Role::ps, Role::worker};
    }
    return parse_role_set(text, subject, [](Role) {});
}

std::string_view to_string(ProgressSource source) noexcept {
    switch (source) {
    case ProgressSource::cpu:
        return "cpu";
    case ProgressSource::file:
        return "file";
    case ProgressSource::output:
        return "output";
    }
    return "cpu";
}

std::vector<ProgressSource> parse_stall_progress(std::string_view text, std::string_view subject) {
    constexpr std::array<ProgressSource, 3> k_all{
        ProgressSource::cpu, ProgressSource::file, ProgressSource::output};
    if (text == "all") {
        return {k_all.begin(), k_all.end()};
    }
    std::vector<ProgressSource> sources;
    std::string_view rest = text;
    while (true) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        const auto* found = std::find_if(
            k_all.begin(), k_all.end(), [item](ProgressSource s) { return to_string(s) == item; });
        if (item.empty() || found == k_all.end()) {
            throw errors::invalid_argument(subject,
                                           "expected a comma list of cpu, file and output, or all",
                                           text,
                                           "e.g. cpu,file,output");
        }
        if (std::find(sources.begin(), sources.end(), *found) == sources.end()) {
            sources.push_back(*found);
        }
        if (comma == std::string_view::npos) {
            return sources;
        }
        rest.remove_prefix(comma + 1);
    }
}

std::vector<Role> parse_restart_roles(std::string_view text, std::string_view subject) {
    return parse_role_set(text, subject, [&](Role role) {
        if (role == Role::ps) {
            throw errors::invalid_argument(
                subject,
                "a parameter server cannot be restarted",
                text,
                "its state (the model's variables) is gone when it fails: the step aborts");
        }
    });
}

std::string_view to_string(Outcome outcome) noexcept {
    switch (outcome) {
    case Outcome::done:
        return "done";
    case Outcome::interrupted:
        return "interrupted";
    case Outcome::aborted:
        return "aborted";
    case Outcome::coordinator_lost:
        return "coordinator_lost";
    case Outcome::checkpointed:
        return "checkpointed";
    }
    return "done";
}

std::string format_seconds(Millis duration) {
    const auto ms = duration.count();
    if (ms % 1000 == 0) {
        return fmt::format("{} s", ms / 1000);
    }
    return fmt::format("{:g} s", static_cast<double>(ms) / 1000.0);
}

namespace {

/// A character a run id keeps: safe in a file name, a URL and W&B's and TensorBoard's ids.
bool run_id_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

} // namespace

std::string run_identity(std::optional<std::string_view> given,
                         std::string_view cluster,
                         std::uint64_t job,
                         std::uint64_t step) {
    if (given) {
        if (given->empty() || given->size() > k_max_run_id ||
            !std::all_of(given->begin(), given->end(), run_id_char)) {
            throw errors::invalid_argument(
                "TFSLURM_RUN_ID",
                fmt::format("expected 1 to {} letters, digits, '.', '_' or '-'", k_max_run_id),
                *given);
        }
        return std::string(*given);
    }
    std::string name = cluster.empty() ? std::string("slurm") : std::string(cluster);
    std::replace_if(
        name.begin(), name.end(), [](char c) { return !run_id_char(c); }, '_');
    if (name.size() > k_max_run_id / 2) {
        name.resize(k_max_run_id / 2);
    }
    return fmt::format("{}-{}-{}", name, job, step);
}

std::size_t node_count(const std::vector<Member>& members) {
    std::unordered_set<std::string_view> hosts;
    for (const Member& member : members) {
        hosts.insert(member.host);
    }
    return hosts.size();
}

std::vector<Member> members_of(const Plan& plan) {
    std::vector<Member> members;
    members.reserve(plan.ranks.size());
    for (const auto& rank : plan.ranks) {
        members.push_back({rank.role, rank.index, rank.host});
    }
    return members;
}

std::vector<std::uint32_t> node_leaders(const std::vector<Member>& ranks) {
    std::unordered_map<std::string_view, std::uint32_t> lowest;
    lowest.reserve(ranks.size());
    std::vector<std::uint32_t> leaders;
    leaders.reserve(ranks.size());
    for (std::uint32_t rank = 0; rank < ranks.size(); ++rank) {
        // Ranks are visited in order: the first one seen on a host is its lowest.
        leaders.push_back(lowest.try_emplace(ranks[rank].host, rank).first->second);
    }
    return leaders;
}

std::vector<std::uint32_t> node_sizes(const std::vector<std::uint32_t>& leaders) {
    std::vector<std::uint32_t> sizes(leaders.size(), 0);
    for (const std::uint32_t leader : leaders) {
        if (leader < sizes.size()) {
            ++sizes[leader];
        }
    }
    return sizes;
}

std::string rank_label(std::uint32_t rank, const Member& member) {
    return fmt::format(
        "rank {} ({}:{}) on {}", rank, to_string(member.role), member.index, member.host);
}

Millis tick_interval(Millis heartbeat_timeout) {
    return std::clamp(heartbeat_timeout / 4, Millis{10}, Millis{250});
}

bool silent_too_long(Clock::time_point last_heard,
                     Clock::time_point now,
                     Millis heartbeat_timeout) {
    return now - last_heard > heartbeat_timeout;
}

std::string no_heartbeat(Millis heartbeat_timeout) {
    return fmt::format("no heartbeat for {}", format_seconds(heartbeat_timeout));
}

} // namespace tfslurm
