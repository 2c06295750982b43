// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/exchange.hpp>

#include <fmt/format.h>

#include <array>
#include <utility>

namespace tfslurm {
namespace {

constexpr std::string_view k_key_prefix = "tfslurm.addr.";
constexpr std::string_view k_no_address = "-";

std::string need_selection_hint() {
    return "set " + setting_ref("iface") + " or " + setting_ref("network") +
           ", or leave the exchange at auto";
}

/// The impossible choices, one message each: why this user cannot perform `requested`.
Error refused(Exchange requested, ExchangeUser user) {
    const auto value = to_string(requested);
    if (user == ExchangeUser::plugin && requested == Exchange::pmi2) {
        // The plugin runs in the task's process before exec (task_init): PMI2_Init there would
        // use up the task's PMI2 connection that the program itself (an MPI library) needs, and
        // a fence waits for every task of the step, so a task whose plugin is off, or fails
        // before the fence, would hang all the others.
        return errors::invalid_setting(
            "exchange",
            "the plugin cannot use PMI2 safely: it would take the task's PMI2 connection "
            "before the program starts, and a fence hangs the step when one task does not "
            "take part",
            value,
            "run tfslurm env inside each task under srun --mpi=pmi2 instead (tfslurm(1))");
    }
    if (requested == Exchange::pmi2) {
        return errors::invalid_setting(
            "exchange",
            user == ExchangeUser::run
                ? "tfslurm run exchanges the addresses through its coordinator, not PMI2"
                : "tfslurm plan describes the step in one process and exchanges nothing",
            value,
            user == ExchangeUser::run ? "use coordinator (or auto)" : "");
    }
    return errors::invalid_setting(
        "exchange",
        user == ExchangeUser::plan ? "tfslurm plan describes the step in one process and "
                                     "exchanges nothing"
                                   : "only tfslurm run has a coordinator",
        value,
        user == ExchangeUser::env ? "use pmi2 under srun --mpi=pmi2 (or auto)" : "");
}

} // namespace

Exchange parse_exchange(std::string_view text) {
    constexpr std::array<std::pair<std::string_view, Exchange>, 4> k_choices{{
        {"auto", Exchange::automatic},
        {"env", Exchange::env},
        {"pmi2", Exchange::pmi2},
        {"coordinator", Exchange::coordinator},
    }};
    for (const auto& [name, choice] : k_choices) {
        if (text == name) {
            return choice;
        }
    }
    throw errors::invalid_setting("exchange", "expected auto, env, pmi2 or coordinator", text);
}

bool has_pmi2_server(const Environment& env) {
    const auto fd = env.get("PMI_FD");
    return fd && !fd->empty();
}

Exchange choose_exchange(Exchange requested,
                         ExchangeUser user,
                         const AddressSelection& selection,
                         const Environment& env) {
    switch (requested) {
    case Exchange::automatic:
        if (!selection.active()) {
            return Exchange::env;
        }
        if (user == ExchangeUser::run) {
            return Exchange::coordinator;
        }
        return user == ExchangeUser::env && has_pmi2_server(env) ? Exchange::pmi2 : Exchange::env;
    case Exchange::env:
        return Exchange::env;
    case Exchange::pmi2:
    case Exchange::coordinator: {
        const bool offered =
            requested == Exchange::pmi2 ? user == ExchangeUser::env : user == ExchangeUser::run;
        if (!offered) {
            throw refused(requested, user);
        }
        if (!selection.active()) {
            throw errors::invalid_setting(
                "exchange",
                "exchanges the addresses chosen with iface or network, and neither is set",
                to_string(requested),
                need_selection_hint());
        }
        return requested;
    }
    }
    return Exchange::env;
}

Pmi2Exchange pmi2_exchange(const Plan& plan, std::string_view own_address) {
    if (!plan.self_rank) {
        throw errors::missing_env("SLURM_PROCID", "the PMI2 exchange needs this task's rank");
    }
    const auto& self = plan.ranks.at(*plan.self_rank);
    // The first rank of each node: whoever has local id 0 there puts the node's address.
    std::vector<std::optional<std::uint32_t>> putter(plan.hosts.size());
    for (const auto& rank : plan.ranks) {
        if (rank.local == 0 && !putter.at(rank.node)) {
            putter[rank.node] = rank.rank;
        }
    }
    Pmi2Exchange out;
    for (std::uint32_t node = 0; node < plan.hosts.size(); ++node) {
        auto key = fmt::format("{}{}", k_key_prefix, node);
        if (key.size() >= k_pmi2_max_key) {
            throw errors::too_large("PMI2", fmt::format("key {} is too long", key), "");
        }
        if (node == self.node) {
            if (self.local == 0) {
                // A node without an address still takes part (the fence waits for every task):
                // its marker tells the others to fail rather than wait.
                auto value = fmt::format(
                    "{} {}", plan.hosts[node], own_address.empty() ? k_no_address : own_address);
                if (value.size() >= k_pmi2_max_value) {
                    throw errors::too_large(
                        "PMI2",
                        fmt::format("the value of {} has {} bytes, PMI2 takes at most {}: {}",
                                    key,
                                    value.size(),
                                    k_pmi2_max_value - 1,
                                    quote(value)),
                        "shorter node names");
                }
                out.put = Pmi2Put{std::move(key), std::move(value)};
            }
            continue;
        }
        if (!putter[node]) {
            continue; // a node without tasks is not in Plan::hosts; kept safe all the same
        }
        out.gets.push_back({plan.hosts[node], std::move(key), *putter[node]});
    }
    return out;
}

std::string read_pmi2_address(const Pmi2Get& get, std::string_view value) {
    const auto space = value.find(' ');
    const auto node = value.substr(0, space);
    const auto address =
        space == std::string_view::npos ? std::string_view{} : value.substr(space + 1);
    if (node != get.node) {
        throw errors::inconsistent_allocation(
            "PMI2",
            fmt::format("{} holds the address of {}, not of {} (the tasks placed the ranks "
                        "differently)",
                        get.key,
                        node,
                        get.node),
            value);
    }
    if (address == k_no_address) {
        throw errors::invalid_argument(
            "PMI2",
            fmt::format("{} chose no address (its task says why)", get.node),
            value,
            "the node needs the interface or network asked for, like every node of the step");
    }
    if (!is_ip_address(address)) {
        throw errors::inconsistent_allocation(
            "PMI2", fmt::format("{} holds no IP address for {}", get.key, get.node), value);
    }
    return std::string{address};
}

void check_pmi2_world(int size, int rank, const Plan& plan) {
    const auto tasks = plan.ranks.size();
    const auto subject = setting_ref("exchange", "pmi2");
    if (size == 1 && tasks > 1) {
        throw errors::make(Errc::inconsistent_allocation,
                           subject,
                           fmt::format("PMI2 sees 1 task (a singleton), the step has {}: this "
                                       "step was not started with srun --mpi=pmi2",
                                       tasks),
                           "run the step with srun --mpi=pmi2 (or set MpiDefault=pmi2 in "
                           "slurm.conf)");
    }
    if (size < 0 || static_cast<std::size_t>(size) != tasks ||
        (plan.self_rank && static_cast<std::uint32_t>(rank) != *plan.self_rank) || rank < 0) {
        throw errors::make(Errc::inconsistent_allocation,
                           subject,
                           fmt::format("PMI2 sees rank {} of {} tasks, the step's variables say "
                                       "rank {} of {}",
                                       rank,
                                       size,
                                       plan.self_rank ? std::to_string(*plan.self_rank) : "?",
                                       tasks),
                           "is this a heterogeneous or nested step?");
    }
}

} // namespace tfslurm
