// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The plan: for every rank of a step, its role (ps, worker, chief, evaluator), the address and
/// port it serves on, and the GPUs it uses; plus the launcher's control endpoint.

#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/step.hpp>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm {

/// TensorFlow job names. Declared in alphabetical order, which is TensorFlow's job order.
enum class Role { chief, evaluator, ps, worker };

[[nodiscard]] std::string_view to_string(Role role) noexcept;

/// Parse `chief`, `evaluator`, `ps` or `worker`. \throws Error (Errc::invalid_argument).
[[nodiscard]] Role parse_role(std::string_view text, std::string_view subject);

/// Parse an explicit per-rank role list: comma-separated roles, each optionally repeated with
/// `*N`. Input: `ps*2,worker*3,chief`. Output: {ps, ps, worker, worker, worker, chief}.
/// \throws Error (Errc::invalid_argument) naming `subject`.
[[nodiscard]] std::vector<Role> parse_role_list(std::string_view text, std::string_view subject);

/// Where parameter servers go when roles are given as counts.
enum class PsPlacement {
    first, ///< ranks 0..N-1 (tf4slurm's layout)
    spread ///< the first task of each of the first N nodes (one ps per node)
};

/// Which cluster-spec semantics to follow.
enum class Layout {
    native,   ///< tfslurm: ranks where Slurm runs them, collision-free ports
    tf_compat ///< exactly TensorFlow's SlurmClusterResolver (sorted hosts, port 8888 + local)
};

/// What peers use to reach a task.
enum class AddressMode {
    name, ///< the node name (after the host pattern)
    ip    ///< the name resolved to an IPv4 address
};

/// Where the other nodes' chosen addresses (`iface`/`network`) come from (choose_exchange()
/// in exchange.hpp decides what `automatic` means for each command).
enum class Exchange {
    automatic, ///< the best available: coordinator under `run`, pmi2 under `env` with a PMI2 server
    env,       ///< none: each task knows only its own node's choice (node names by default)
    pmi2,      ///< Slurm's PMI2 key-value space (`srun --mpi=pmi2`), for `tfslurm env`
    coordinator ///< the coordinator of `tfslurm run`
};

/// Where the ports came from.
enum class PortSource { reserved, derived, explicit_base };

/// Which GPUs a task's CUDA_VISIBLE_DEVICES lists. Inside a process CUDA numbers the visible
/// devices from 0, so the choice decides which device index a framework must pick.
enum class GpuBind {
    automatic, ///< `node` when the torch variables are output, else `task` (resolve_settings())
    task,      ///< the task's own share: its devices are cuda:0..N-1 (TensorFlow takes them all)
    node       ///< every GPU visible on the node: the task picks cuda:LOCAL_RANK (torch's habit)
};

[[nodiscard]] std::string_view to_string(PsPlacement value) noexcept;
[[nodiscard]] std::string_view to_string(Layout value) noexcept;
[[nodiscard]] std::string_view to_string(AddressMode value) noexcept;
[[nodiscard]] std::string_view to_string(PortSource value) noexcept;
[[nodiscard]] std::string_view to_string(GpuBind value) noexcept;
[[nodiscard]] std::string_view to_string(Exchange value) noexcept;

/// Role counts; every rank not given another role is a worker.
struct RoleCounts {
    std::uint32_t ps = 0;
    bool chief = false;
    bool evaluator = false;
};

/// Everything a user can choose about the plan.
struct PlanOptions {
    RoleCounts counts;
    std::vector<Role> role_list; ///< non-empty: one role per rank, overrides `counts`
    /// `roles_by_component`, non-empty: one role per component of a heterogeneous step, given
    /// to every rank of that component (e.g. {ps, worker}). Excludes `counts` and `role_list`.
    std::vector<Role> component_roles;
    PsPlacement ps_placement = PsPlacement::first;
    Layout layout = Layout::native;
    std::optional<std::uint16_t> port_base; ///< overrides reserved/derived ports
    AddressMode address = AddressMode::name;
    std::string host_pattern;                      ///< e.g. `{host}-ib0`; empty = the node name
    std::optional<std::uint32_t> gpus_per_task;    ///< empty = split the visible GPUs
    GpuBind gpu_bind = GpuBind::automatic;         ///< make_plan() takes automatic as task
    std::optional<std::uint32_t> tf_gpus_per_node; ///< tf-compat only: TensorFlow's gpus_per_node
    std::string rpc_layer;                         ///< e.g. `grpc`; empty = not written
    /// `iface`/`network`: each node's address is read on the node; replaces the node name,
    /// `host_pattern` and `address`.
    AddressSelection address_selection;
    /// `exchange`: how the other nodes' chosen addresses are learnt (see choose_exchange()).
    Exchange exchange = Exchange::automatic;
    /// Not a user setting: the chosen address of each node known so far (node name -> address),
    /// filled from this node's interfaces (plan_with_own_address()) or by the exchange of
    /// `tfslurm run`. With an active address_selection every node of the plan must be here.
    std::map<std::string, std::string, std::less<>> node_addresses;
    /// Not a user setting: in exact mode, the trainer port each rank's launcher bound, by rank
    /// (0, or past the end: the plan's own port), from the exchange of `tfslurm run`
    /// (protocol::Cluster::ports).
    std::vector<std::uint16_t> rank_ports;
};

/// Whether the plan is built from facts the nodes report (exact mode: each node's chosen
/// address and each launcher's bound port, exchanged by `tfslurm run`'s coordinator) rather
/// than computed from the environment alone. Today: when an address selection (`iface` or
/// `network`) is active. The one place that decides it.
/// Input: options with iface ib0. Output: true.
[[nodiscard]] bool exact_mode(const PlanOptions& options) noexcept;

/// Resolves a (patterned) host name to the address peers should use. Throws Error (Errc::io)
/// when a name does not resolve.
using AddressResolver = std::function<std::string(const std::string& name)>;

/// The system resolver (getaddrinfo, first IPv4 address). Touches the OS.
[[nodiscard]] AddressResolver system_address_resolver();

/// One rank's part of the plan.
struct RankPlan {
    std::uint32_t rank = 0;
    Role role = Role::worker;
    std::uint32_t index = 0; ///< task index within its role
    std::uint32_t node = 0;  ///< index into Plan::hosts
    std::uint32_t local = 0; ///< local id on the node
    std::string host;        ///< the Slurm node name
    std::string address;     ///< what peers connect to
    std::uint16_t port = 0;
    std::vector<std::string> gpus; ///< CUDA_VISIBLE_DEVICES entries; empty = no GPU
};

/// The whole cluster.
struct Plan {
    std::vector<RankPlan> ranks; ///< indexed by rank
    std::vector<std::string> hosts;
    std::optional<std::uint64_t> job_id;
    std::optional<std::uint64_t> step_id;
    Layout layout = Layout::native;
    PortSource port_source = PortSource::derived;
    std::string control_address; ///< the launcher coordinator: rank 0's address
    std::uint16_t control_port = 0;
    /// Where the control port came from; unlike the trainers' ports when SLURM_STEP_RESV_PORTS
    /// reserves one per task on a node and none to spare (the control port is then derived).
    PortSource control_port_source = PortSource::derived;
    /// Why the control port is not where the trainers' ports are, and how to change that; empty
    /// when it is (plan_table() prints it, rank 0's resolve_plan() warns with it).
    std::string control_port_note;
    std::string rpc_layer;
    std::optional<std::uint32_t> self_rank; ///< the calling task's rank, when known
    bool gpus_exact = true; ///< false when other nodes' GPUs are assumed equal to this one's
    /// The interface that carries this node's chosen address (`iface`/`network`), empty when
    /// peers use node names: the frameworks' own sockets follow it (socket_interface_variables()).
    std::string socket_interface;

    /// Ranks of `role`, ordered by task index.
    [[nodiscard]] std::vector<std::uint32_t> members(Role role) const;
    /// `address:port` of a rank (`[address]:port` for IPv6).
    [[nodiscard]] std::string endpoint(std::uint32_t rank) const;
};

/// srun --resv-ports fails without a port range for slurmctld to reserve from: every hint that
/// recommends it says so (derive_port_base()'s, the native layout's).
inline constexpr std::string_view k_resv_ports_need =
    "it needs MpiParams=ports=LOW-HIGH in slurm.conf; Slurm then sets SLURM_STEP_RESV_PORTS in "
    "every task";

/// First port of a job's derived window and the window's stride: the range 20000..31999 is
/// cut into windows of `stride` ports (max tasks per node + 1 control port) and a hash of job
/// and step (SplitMix64) picks the window. No pair of ids collides systematically, but any two
/// steps sharing a node land in the same window with probability 1 / windows (1/4000 with two
/// tasks per node, 1/1714 with six): the control port then falls back
/// (control_port_candidates()), a trainer port does not (the step fails naming it). Slurm's
/// `srun --resv-ports` guarantees disjoint ports.
/// Input: job 1234, step 0, stride 3. Output: 20000 + (mix(1234, 0) mod 4000) * 3 = 21863.
/// \throws Error (Errc::invalid_argument) when `stride` is 0 or does not fit in the range.
[[nodiscard]] std::uint16_t
derive_port_base(std::uint64_t job_id, std::uint64_t step_id, std::uint32_t stride);

/// Where rank 0's coordinator may listen, in the order it tries them: the plan's control port,
/// then 7 fallbacks in 32000..32767 (between the derived range and Linux's ephemeral range)
/// drawn from a sequence seeded by job and step, none of them a trainer port of the plan. Every
/// launcher of the step computes the same list and tries it in order until a coordinator proves
/// that it is this job's.
/// Input: job 1234, step 0, stride 3 (control port 21865). Output: {21865, 32448, 32088, 32643,
/// 32036, 32069, 32557, 32255}.
[[nodiscard]] std::vector<std::uint16_t> control_port_candidates(const Plan& plan);

/// A range of TCP ports, both ends included.
struct PortRange {
    std::uint16_t first = 20000;
    std::uint16_t last = 31999;
};

/// Parse `LOW-HIGH` (1 <= LOW <= HIGH <= 65535). Input: `40000-40999`. Output: {40000, 40999}.
/// \throws Error (Errc::invalid_argument) naming setting `key`.
[[nodiscard]] PortRange parse_port_range(std::string_view text, std::string_view key);

/// The trainer ports the launcher of `rank` tries to bind in exact mode, in order: the rank's
/// port in the plan, then the other ports of its pool from the next one up, wrapping around.
/// The pool is `reserved` (this node's SLURM_STEP_RESV_PORTS) when it is not empty, else
/// `range`; the coordinator's control port candidates (control_port_candidates()) are never
/// in it.
/// Input: rank 1 at port 23001 (control 23002), reserved {}, range 23000-23004.
/// Output: {23001, 23003, 23004, 23000}.
[[nodiscard]] std::vector<std::uint16_t>
trainer_port_candidates(const Plan& plan,
                        std::uint32_t rank,
                        const std::vector<std::uint16_t>& reserved,
                        PortRange range);

/// Which ranks get their GPU lists (RankPlan::gpus) from make_plan().
enum class GpuDetail {
    every_rank, ///< every rank: the plan table and JSON, the launchers
    self_only   ///< Plan::self_rank only (the others stay empty): `tfslurm env` prints one task,
                ///< and 80,000 copies of a GPU list cost more than the rest of its plan
};

/// Build the plan. `resolve` is used only with AddressMode::ip (default: the system resolver).
/// GpuDetail::self_only applies to the native layout (tf-compat plans list every rank's GPUs);
/// GPU requests are validated for every node either way.
/// Input: the step of task 3 of `srun -N3 -n6`, GpuDetail::self_only.
/// Output: ranks[3].gpus as with every_rank, every other rank's gpus empty.
/// \throws Error (Errc::invalid_argument) for impossible role/port/GPU requests,
///         (Errc::io) when a name does not resolve.
[[nodiscard]] Plan make_plan(const StepInfo& step,
                             const Allocation& allocation,
                             const PlanOptions& options,
                             const AddressResolver& resolve = {},
                             GpuDetail detail = GpuDetail::every_rank);

/// The address the calling task's node chooses among `interfaces` (select_address(), named
/// after the node of `plan.self_rank`, or the only node of a single-node plan).
/// Input: a plan of rank 1 on n2, iface ib0, interfaces {ib0 10.1.0.2}. Output: {ib0, 10.1.0.2}.
/// \throws Error from select_address(), or (Errc::missing_env) when the task's node is unknown.
[[nodiscard]] SelectedAddress select_own_address(const Plan& plan,
                                                 const AddressSelection& selection,
                                                 const std::vector<InterfaceAddress>& interfaces);

/// make_plan() with an active `options.address_selection`, for a task that knows only its own
/// node's interfaces: it picks this node's address among `interfaces` (select_address(), named
/// after the calling task's node) and builds the plan with it; Plan::socket_interface is set.
/// The other nodes' addresses must already be in `options.node_addresses` (the exchange of
/// `tfslurm run`): without them only a single-node step can be planned. `detail` as make_plan().
/// Input: step n1 x2, iface ib0, interfaces {ib0 10.1.0.1}. Output: both ranks at 10.1.0.1,
/// socket_interface ib0.
/// \throws Error from select_address() (no such interface on this node), or
///         (Errc::invalid_argument) naming the nodes whose address is unknown, and as make_plan().
[[nodiscard]] Plan plan_with_own_address(const StepInfo& step,
                                         const Allocation& allocation,
                                         PlanOptions options,
                                         const std::vector<InterfaceAddress>& interfaces,
                                         GpuDetail detail = GpuDetail::every_rank);

} // namespace tfslurm
