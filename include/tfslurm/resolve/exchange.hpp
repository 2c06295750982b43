// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The exchange of the nodes' chosen addresses (`iface`/`network`), as decisions: which
/// exchange a command uses (choose_exchange()), and what the PMI2 exchange of `tfslurm env`
/// puts, fences and gets (pmi2_exchange(), read_pmi2_address()). Pure: pmi2.hpp talks to
/// Slurm's PMI2, the coordinator of `tfslurm run` is coordinator.hpp.

#include <tfslurm/common/env.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/resolve/plan.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// `auto`, `env`, `pmi2` or `coordinator`.
/// Input: `pmi2`. Output: Exchange::pmi2.
/// \throws Error (Errc::invalid_argument) about setting `exchange`, e.g.
///         `exchange: expected auto, env, pmi2 or coordinator: "mpi"`.
[[nodiscard]] Exchange parse_exchange(std::string_view text);

/// Who asks: each face and command offers different exchanges.
enum class ExchangeUser {
    plan,   ///< `tfslurm plan`: one process, nothing to exchange with
    env,    ///< `tfslurm env`: one process per task, PMI2 when srun provides it
    run,    ///< `tfslurm run`: its coordinator
    plugin, ///< the SPANK plugin: inside slurmstepd's task before exec, no exchange is safe
};

/// Whether this task was started with a PMI2 server: Slurm's mpi/pmi2 plugin (`srun
/// --mpi=pmi2`) hands every task the socket PMI_FD.
/// Input: env {PMI_FD=12}. Output: true. Input: {}. Output: false.
[[nodiscard]] bool has_pmi2_server(const Environment& env);

/// The exchange `user` performs for `requested`, with the address `selection` of the settings:
/// - auto: under run, coordinator when `iface` or `network` is set, else env; under env, pmi2
///   when one of them is set and has_pmi2_server(), else env; plan and the plugin: env.
/// - env: env for everyone (a task then knows only its own node's chosen address).
/// - pmi2 (env only) and coordinator (run only) need `iface` or `network`.
/// Input: auto, env, iface ib0, {PMI_FD=12}. Output: Exchange::pmi2.
/// Input: pmi2, run. Output: throws `exchange: tfslurm run exchanges the addresses through its
/// coordinator, not PMI2: "pmi2"`.
/// \throws Error (Errc::invalid_argument) about setting `exchange` for an impossible choice.
[[nodiscard]] Exchange choose_exchange(Exchange requested,
                                       ExchangeUser user,
                                       const AddressSelection& selection,
                                       const Environment& env);

/// PMI2's limits (Slurm's pmi2.h: PMI2_MAX_KEYLEN, PMI2_MAX_VALLEN), each including the
/// terminating NUL of the C string.
inline constexpr std::size_t k_pmi2_max_key = 64;
inline constexpr std::size_t k_pmi2_max_value = 1024;

/// One PMI2_KVS_Put().
struct Pmi2Put {
    std::string key;
    std::string value;
};

/// One PMI2_KVS_Get(): the address of `node`, put by rank `source_rank`.
struct Pmi2Get {
    std::string node;
    std::string key;
    std::uint32_t source_rank = 0;
};

/// Everything one task does in the PMI2 exchange, between PMI2_Init() and PMI2_Finalize().
struct Pmi2Exchange {
    std::optional<Pmi2Put> put; ///< only the node's first task (local id 0) puts
    std::vector<Pmi2Get> gets;  ///< one per other node, in node order
};

/// The PMI2 exchange of the calling task (`plan.self_rank`) of a plan built with node names,
/// whose node chose `own_address`. One put per node: the node's local task 0 puts key
/// `tfslurm.addr.<node index>` with value `<node> <address>` (the node name lets a reader check
/// that every task placed the ranks alike); then one fence; then every task gets the key of
/// each other node. Values are not packed: each node's value comes from that node, so packing
/// several into one value would need a second put and fence; after the fence Slurm's slurmstepd
/// answers every get from its own copy of the key-value space.
/// An empty `own_address` (this node could not choose one) puts the value `<node> -`, so that
/// the other tasks fail at once instead of waiting for a node that never comes.
/// Input: plan by name of `srun -N3 -n6` (block), self rank 2 (n2, local 0), own 10.78.0.2.
/// Output: put {tfslurm.addr.1, `n2 10.78.0.2`}, gets {n1 tfslurm.addr.0 from rank 0,
/// n3 tfslurm.addr.2 from rank 4}.
/// \throws Error (Errc::missing_env) without a self rank, (Errc::too_large) for a key or value
///         beyond PMI2's limits (a node name of about 1000 bytes).
[[nodiscard]] Pmi2Exchange pmi2_exchange(const Plan& plan, std::string_view own_address);

/// The address in the value that `get` returned, checked: `<node> <address>` with the node
/// `get` asked for and an IP literal.
/// Input: get {n2, tfslurm.addr.1}, `n2 10.78.0.2`. Output: `10.78.0.2`.
/// \throws Error (Errc::inconsistent_allocation), e.g. `PMI2: tfslurm.addr.1 holds the address
///         of n3, not of n2 (the tasks placed the ranks differently): "n3 10.78.0.3"`, or
///         (Errc::invalid_argument) for the marker of a node without an address: `PMI2: n2
///         chose no address (its task says why): "n2 -"`.
[[nodiscard]] std::string read_pmi2_address(const Pmi2Get& get, std::string_view value);

/// Check what PMI2_Init() reported against the plan: the same number of tasks and this task's
/// rank. Slurm hands a task that srun started without a PMI2 server (`--mpi=none`) a
/// singleton: success, size 1, rank 0.
/// Input: size 1, rank 0, a plan of 6 ranks. Output: throws `exchange: PMI2 sees 1 task (a
/// singleton), the step has 6: this step was not started with srun --mpi=pmi2: "pmi2"`, hint
/// `run the step with srun --mpi=pmi2 (or set MpiDefault=pmi2 in slurm.conf)`.
/// \throws Error (Errc::inconsistent_allocation) about setting `exchange`.
void check_pmi2_world(int size, int rank, const Plan& plan);

} // namespace tfslurm
