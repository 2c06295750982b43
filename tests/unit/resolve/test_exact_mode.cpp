// SPDX-License-Identifier: MIT
// Exact mode: the plan built from what the launchers report (each node's chosen address, each
// launcher's bound port), exchanged through the coordinator's `cluster`, is the plan computed
// from the environment wherever that one is right.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/run/coordinator.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/settings/plan_settings.hpp>
#include <tfslurm/shell/held_port.hpp>
#include <tfslurm/shell/launcher_shell.hpp>

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>
#include <variant>
#include <vector>

using tfslurm::Clock;
using tfslurm::Coordinator;
using tfslurm::CoordinatorSettings;
using tfslurm::Plan;
using tfslurm::PlanOptions;
using tfslurm::PortRange;
using tfslurm::StepInfo;

namespace {

/// What the nodes' `ib0` carries (no DNS name: the environment can only learn it by resolving
/// a pattern such as `{host}-ib0`, here a table).
const std::map<std::string, std::string, std::less<>> k_ib0{
    {"n1", "10.78.0.11"}, {"n2", "10.78.0.12"}, {"n3", "10.78.0.13"}};

/// The environment-computed plan where it is right: each name resolves to the address peers
/// must use.
Plan computed_plan(const StepInfo& step, const PlanOptions& options) {
    auto by_ip = options;
    by_ip.address = tfslurm::AddressMode::ip;
    return tfslurm::make_plan(step,
                              tfslurm::resolve_allocation(step),
                              by_ip,
                              [](const std::string& name) { return k_ib0.at(name); });
}

/// Every launcher registers with its node's address and the port it bound; the coordinator's
/// `cluster` goes over the wire; the plan is rebuilt from it, as `tfslurm run` does.
Plan exchanged_plan(const StepInfo& step,
                    const PlanOptions& options,
                    const std::map<std::uint32_t, std::uint16_t>& bound = {}) {
    const auto allocation = tfslurm::resolve_allocation(step);
    const Plan by_name = tfslurm::make_plan(step, allocation, options);
    CoordinatorSettings settings;
    settings.ranks = tfslurm::members_of(by_name);
    for (const auto& rank : by_name.ranks) {
        settings.ports.push_back(rank.port);
    }
    Coordinator coordinator(settings, Clock::time_point{});
    for (const auto& rank : by_name.ranks) {
        const auto moved = bound.find(rank.rank);
        const auto port =
            moved != bound.end()
                ? moved->second
                : tfslurm::trainer_port_candidates(by_name, rank.rank, step.resv_ports, {}).front();
        coordinator.registered(rank.rank, Clock::time_point{}, k_ib0.at(rank.host), port);
    }
    const auto out = coordinator.take_outgoing();
    REQUIRE(out.size() == 1); // one `cluster` for every rank
    REQUIRE(out.front().ranks.size() == by_name.ranks.size());
    const auto wire = tfslurm::protocol::encode_payload(out.front().message);
    const auto cluster =
        std::get<tfslurm::protocol::Cluster>(tfslurm::protocol::decode_payload(wire));
    auto exact = options;
    tfslurm::apply_plan_setting(exact, "iface", "ib0");
    REQUIRE(tfslurm::exact_mode(exact));
    exact.node_addresses = cluster.addresses;
    exact.rank_ports = cluster.ports;
    return tfslurm::make_plan(step, allocation, exact);
}

void check_same(const Plan& exact, const Plan& computed) {
    REQUIRE(exact.ranks.size() == computed.ranks.size());
    for (std::size_t r = 0; r < exact.ranks.size(); ++r) {
        INFO("rank " << r);
        const auto& a = exact.ranks[r];
        const auto& b = computed.ranks[r];
        CHECK(a.role == b.role);
        CHECK(a.index == b.index);
        CHECK(a.host == b.host);
        CHECK(a.node == b.node);
        CHECK(a.local == b.local);
        CHECK(a.gpus == b.gpus);
        CHECK(exact.endpoint(a.rank) == computed.endpoint(b.rank));
    }
    CHECK(exact.hosts == computed.hosts);
    CHECK(exact.control_port == computed.control_port);
}

StepInfo preview(const std::string& nodelist,
                 const std::string& tasks_per_node,
                 const std::string& distribution) {
    auto overrides = tfslurm::test::preview_overrides(nodelist, tasks_per_node, 4242, 0, 0);
    overrides.distribution = distribution;
    return tfslurm::preview_step(overrides);
}

} // namespace

TEST_CASE("exact mode: the exchanged plan equals the computed plan where that one is right",
          "[exact]") {
    PlanOptions options;
    options.counts.ps = 1;
    SECTION("block: a real srun -N3 -n6 task, ports derived") {
        const auto env = tfslurm::test::load_env_dump("slurm-env/srun-N3-n6-SLURM-env-task3.txt");
        const auto step = tfslurm::read_step(env);
        check_same(exchanged_plan(step, options), computed_plan(step, options));
    }
    SECTION("cyclic: a real srun -N3 -n6 -m cyclic task") {
        const auto sections = tfslurm::test::load_sections("slurm-env/srun-layout-variants.txt");
        const auto found = std::find_if(sections.begin(), sections.end(), [](const auto& s) {
            return s.title == "srun -N3 -n6 -m cyclic";
        });
        REQUIRE(found != sections.end());
        const auto step = tfslurm::read_step(found->tasks.at(4).second);
        REQUIRE(step.distribution.kind == tfslurm::Distribution::cyclic);
        check_same(exchanged_plan(step, options), computed_plan(step, options));
    }
    SECTION("plane=2 with node names, reserved ports") {
        auto overrides_step = preview("n[1-3]", "3,2,1", "plane=2");
        overrides_step.resv_ports = {23000, 23001, 23002, 23003};
        check_same(exchanged_plan(overrides_step, options), computed_plan(overrides_step, options));
    }
    SECTION("an explicit port base, roles by list") {
        auto listed = options;
        tfslurm::apply_plan_setting(listed, "roles", "chief,ps,worker*2");
        tfslurm::apply_plan_setting(listed, "port_base", "24000");
        const auto step = preview("n[1-2]", "2", "cyclic");
        check_same(exchanged_plan(step, listed), computed_plan(step, listed));
    }
}

TEST_CASE("exact mode: a port held on one node moves only that rank", "[exact]") {
    PlanOptions options;
    const auto step = preview("n[1-3]", "2", "block");
    const Plan computed = computed_plan(step, options);
    const std::uint16_t moved = computed.ranks[3].port + 7;
    const Plan exact = exchanged_plan(step, options, {{3, moved}});
    for (std::size_t r = 0; r < exact.ranks.size(); ++r) {
        INFO("rank " << r);
        CHECK(exact.ranks[r].address == computed.ranks[r].address);
        CHECK(exact.ranks[r].port == (r == 3 ? moved : computed.ranks[r].port));
    }
}

TEST_CASE("trainer_port_candidates: the planned port, then the pool from there up", "[exact]") {
    auto step = preview("n[1-2]", "2", "block");
    auto options = PlanOptions{};
    options.port_base = 23000; // ranks 23000, 23001 on each node; control 23002
    const Plan plan = tfslurm::make_plan(step, tfslurm::resolve_allocation(step), options);
    using Ports = std::vector<std::uint16_t>;
    CHECK(tfslurm::trainer_port_candidates(plan, 1, {}, PortRange{23000, 23004}) ==
          Ports{23001, 23003, 23004, 23000});
    CHECK(tfslurm::trainer_port_candidates(plan, 2, {}, PortRange{23000, 23004}) ==
          Ports{23000, 23001, 23003, 23004});
    // Reserved ports replace the range; the control port is never a candidate.
    CHECK(tfslurm::trainer_port_candidates(plan, 0, {23002, 23001, 23000}, PortRange{}) ==
          Ports{23000, 23001});
    // The default range is the derived one.
    const auto all = tfslurm::trainer_port_candidates(plan, 0, {}, PortRange{});
    CHECK(all.front() == 23000);
    CHECK(all.size() == 11999); // 20000-31999 without the control port 23002
}

TEST_CASE("parse_port_range: LOW-HIGH within 1-65535", "[exact]") {
    CHECK(tfslurm::parse_port_range("40000-40999", "port_range").first == 40000);
    CHECK(tfslurm::parse_port_range("40000-40999", "port_range").last == 40999);
    CHECK(tfslurm::parse_port_range("7-7", "port_range").last == 7);
    for (const std::string bad : {"", "40000", "0-10", "10-9", "1-65536", "a-b", "-5", "1-"}) {
        INFO(bad);
        CHECK_THROWS_WITH(tfslurm::parse_port_range(bad, "port_range"),
                          "port_range: expected a port range LOW-HIGH within 1-65535: \"" + bad +
                              "\"");
    }
}

TEST_CASE("HeldPort: a held port cannot be bound until released", "[exact]") {
    CHECK(tfslurm::HeldPort::first_free({}).port() == 0);
    std::uint16_t port = 0;
    for (std::uint16_t candidate = 41000; candidate < 41100 && port == 0; ++candidate) {
        if (tfslurm::port_is_free(candidate)) {
            port = candidate;
        }
    }
    REQUIRE(port != 0);
    auto held = tfslurm::HeldPort::first_free({port});
    REQUIRE(held.port() == port);
    CHECK_FALSE(tfslurm::port_is_free(port));
    // A second holder skips it.
    auto second = tfslurm::HeldPort::first_free({port, static_cast<std::uint16_t>(port + 1)});
    CHECK(second.port() != port);
    held.release();
    CHECK(held.port() == port);
    CHECK(tfslurm::port_is_free(port));
}

TEST_CASE("HeldPort: connections in TIME_WAIT do not make a port taken", "[exact]") {
    // A server on `port` that closes its connection first leaves it in TIME_WAIT on `port`,
    // as an earlier job's trainer does: the trainer could bind it (SO_REUSEADDR), so it is
    // free for the launcher too.
    std::uint16_t port = 0;
    for (std::uint16_t candidate = 41200; candidate < 41300 && port == 0; ++candidate) {
        if (tfslurm::port_is_free(candidate)) {
            port = candidate;
        }
    }
    REQUIRE(port != 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const auto* raw = reinterpret_cast<const sockaddr*>(&address);
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    REQUIRE(::bind(listener, raw, sizeof address) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    const int client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(::connect(client, raw, sizeof address) == 0);
    const int server = ::accept(listener, nullptr, nullptr);
    REQUIRE(server >= 0);
    ::close(listener);
    ::close(server); // the server's side closes first: its end goes to TIME_WAIT
    char byte = 0;
    CHECK(::read(client, &byte, 1) == 0);
    ::close(client);
    auto held = tfslurm::HeldPort::first_free({port});
    CHECK(held.port() == port);
}
