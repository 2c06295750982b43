// SPDX-License-Identifier: MIT
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

using tfslurm::AddressSelection;
using tfslurm::Errc;
using tfslurm::InterfaceAddress;
using tfslurm::IpFamily;
using tfslurm::SelectedAddress;
using tfslurm::test::require_error;

namespace {

/// A node with management Ethernet, InfiniBand (IPv4 and IPv6), docker and loopback.
const std::vector<InterfaceAddress> k_node{
    {"lo", "127.0.0.1", IpFamily::v4},
    {"eth0", "192.168.1.5", IpFamily::v4},
    {"docker0", "172.17.0.1", IpFamily::v4},
    {"ib0", "10.1.0.5", IpFamily::v4},
    {"lo", "::1", IpFamily::v6},
    {"eth0", "fe80::5054:ff:fe12:3456", IpFamily::v6},
    {"ib0", "fd00:1::5", IpFamily::v6},
    {"ib6", "fe80::1", IpFamily::v6},
    {"ib6", "fd00:6::5", IpFamily::v6},
};

AddressSelection selection(const std::string& iface, const std::string& network = {}) {
    tfslurm::PlanOptions options;
    if (!iface.empty()) {
        tfslurm::apply_plan_setting(options, "iface", iface);
    }
    if (!network.empty()) {
        tfslurm::apply_plan_setting(options, "network", network);
    }
    return options.address_selection;
}

tfslurm::Plan single_node_plan(const std::string& iface,
                               const std::vector<InterfaceAddress>& interfaces,
                               const std::string& nodelist = "n1",
                               const std::string& tasks = "2") {
    const auto step =
        tfslurm::preview_step(tfslurm::test::preview_overrides(nodelist, tasks, 1234, 0, 0));
    const auto allocation = tfslurm::resolve_allocation(step);
    tfslurm::PlanOptions options;
    tfslurm::apply_plan_setting(options, "iface", iface);
    return tfslurm::plan_with_own_address(step, allocation, options, interfaces);
}

} // namespace

TEST_CASE("select_address: interfaces, lists and networks", "[interfaces]") {
    struct Case {
        std::string iface;
        std::string network;
        SelectedAddress expected;
    };
    const std::vector<Case> cases{
        {"ib0", "", {"ib0", "10.1.0.5"}},                // IPv4 first on an interface
        {"ib1,ib0", "", {"ib0", "10.1.0.5"}},            // a list: the first one present
        {"ib0,eth0", "", {"ib0", "10.1.0.5"}},           // the list's order, not the node's
        {"eth0,ib0", "", {"eth0", "192.168.1.5"}},       //
        {"ib6", "", {"ib6", "fd00:6::5"}},               // link-local fe80:: is never chosen
        {"lo", "", {"lo", "127.0.0.1"}},                 // asked for explicitly: fine
        {"", "10.1.0.0/16", {"ib0", "10.1.0.5"}},        // a network alone: any interface
        {"", "10.1.2.3/16", {"ib0", "10.1.0.5"}},        // host bits are ignored
        {"", "192.168.0.0/23", {"eth0", "192.168.1.5"}}, // a prefix that cuts a byte
        {"", "fd00:1::/64", {"ib0", "fd00:1::5"}},       // IPv6
        {"", "fd00::/8", {"ib0", "fd00:1::5"}},          // the first match in getifaddrs order
        {"ib6", "fd00::/8", {"ib6", "fd00:6::5"}},       // both: that interface, in the network
        {"ib0", "fd00::/8", {"ib0", "fd00:1::5"}},       // IPv6 when only IPv6 fits
        {"", "0.0.0.0/0", {"lo", "127.0.0.1"}},          // everything
    };
    for (const auto& c : cases) {
        INFO(c.iface << " " << c.network);
        CHECK(tfslurm::select_address(k_node, selection(c.iface, c.network), "n1") == c.expected);
    }
}

TEST_CASE("select_address: a node without the interface says what it has", "[interfaces]") {
    const std::string has = "(its interfaces: lo 127.0.0.1 ::1, eth0 192.168.1.5 "
                            "fe80::5054:ff:fe12:3456, docker0 172.17.0.1, ib0 10.1.0.5 fd00:1::5, "
                            "ib6 fe80::1 fd00:6::5)";
    require_error([&] { (void)tfslurm::select_address(k_node, selection("nosuch0"), "n2"); },
                  Errc::invalid_argument,
                  "iface: node n2 has no address on nosuch0 " + has + ": \"nosuch0\"");
    require_error([&] { (void)tfslurm::select_address(k_node, selection("ib1,ib2"), "n2"); },
                  Errc::invalid_argument,
                  "iface: node n2 has no address on ib1 or ib2 " + has + ": \"ib1,ib2\"");
    require_error(
        [&] { (void)tfslurm::select_address(k_node, selection("", "10.2.0.0/16"), "n3"); },
        Errc::invalid_argument,
        "network: node n3 has no address in 10.2.0.0/16 " + has + ": \"10.2.0.0/16\"");
    require_error(
        [&] { (void)tfslurm::select_address(k_node, selection("eth0", "10.1.0.0/16"), "n3"); },
        Errc::invalid_argument,
        "iface: node n3 has no address in 10.1.0.0/16 on eth0 " + has + ": \"eth0\"");
    require_error(
        [&] {
            (void)tfslurm::select_address(
                {{"eth0", "fe80::1", IpFamily::v6}}, selection("eth0"), "n1");
        },
        Errc::invalid_argument,
        "iface: node n1 has no address on eth0 (its interfaces: eth0 fe80::1): \"eth0\"");
    require_error([&] { (void)tfslurm::select_address({}, selection("ib0"), "n1"); },
                  Errc::invalid_argument,
                  "iface: node n1 has no address on ib0 (its interfaces: none with an address): "
                  "\"ib0\"");
}

TEST_CASE("parse_network and the iface setting refuse malformed values", "[interfaces]") {
    const std::string expected =
        "expected an IPv4 or IPv6 network such as 10.1.0.0/16 or fd00::/64";
    for (const std::string bad : {"10.1.0.0",
                                  "10.1.0.0/33",
                                  "fd00::/129",
                                  "10.1/16",
                                  "ib0/8",
                                  "10.1.0.0/",
                                  "10.1.0.0/+8",
                                  "/8",
                                  "x"}) {
        INFO(bad);
        require_error([&] { (void)selection("", bad); },
                      Errc::invalid_argument,
                      "network: " + expected + ": \"" + bad + "\"");
    }
    for (const std::string bad : {"ib0,", ",ib0", "ib 0", "a/b", "averyveryverylongname0"}) {
        INFO(bad);
        require_error([&] { (void)selection(bad); },
                      Errc::invalid_argument,
                      "iface: expected interface names such as ib0 (a comma list): \"" + bad +
                          "\"");
    }
    CHECK(selection("ib0,ib1").interfaces == std::vector<std::string>{"ib0", "ib1"});
    CHECK_FALSE(AddressSelection{}.active());
    const auto net = tfslurm::parse_network("fd00:1::/64", "network");
    CHECK(net.family == IpFamily::v6);
    CHECK(net.prefix == 64);
    CHECK(net.contains("fd00:1::ffff"));
    CHECK_FALSE(net.contains("fd00:2::1"));
    CHECK_FALSE(net.contains("10.1.0.1"));
    CHECK_FALSE(net.contains("not-an-address"));
}

TEST_CASE("host_port brackets IPv6 addresses", "[interfaces]") {
    CHECK(tfslurm::host_port("fd00:1::5", 2222) == "[fd00:1::5]:2222");
    CHECK(tfslurm::host_port("10.1.0.5", 2222) == "10.1.0.5:2222");
    CHECK(tfslurm::host_port("n1", 2222) == "n1:2222");
}

TEST_CASE("plan_with_own_address: a single-node step uses this node's interface", "[interfaces]") {
    const auto plan = single_node_plan("ib0", k_node);
    CHECK(plan.ranks.at(0).address == "10.1.0.5");
    CHECK(plan.ranks.at(1).address == "10.1.0.5");
    CHECK(plan.socket_interface == "ib0");
    CHECK(plan.control_address == "n1"); // reaching the coordinator still uses the name
    const auto port = std::to_string(plan.ranks.at(1).port);
    CHECK(tfslurm::tf_config_json(plan, 0) ==
          R"({"cluster":{"worker":["10.1.0.5:)" + std::to_string(plan.ranks.at(0).port) +
              R"(","10.1.0.5:)" + port + R"("]},"task":{"type":"worker","index":0}})");

    SECTION("IPv6: [addr]:port in TF_CONFIG and the server dictionary, bare in MASTER_ADDR") {
        const auto v6 = single_node_plan("ib6", k_node);
        CHECK(v6.endpoint(1) == "[fd00:6::5]:" + port);
        CHECK(tfslurm::tf_config_json(v6, 1).find("\"[fd00:6::5]:" + port + "\"") !=
              std::string::npos);
        CHECK(tfslurm::server_dictionary_json(v6).find("\"[fd00:6::5]:" + port + "\"") !=
              std::string::npos);
        const auto vars = tfslurm::task_environment(v6, 1, {});
        CHECK(std::find(vars.begin(),
                        vars.end(),
                        std::pair<std::string, std::string>{"MASTER_ADDR", "fd00:6::5"}) !=
              vars.end());
    }
    SECTION("the frameworks' sockets follow the interface, unless the user set them") {
        using Vars = tfslurm::EnvVars;
        CHECK(tfslurm::socket_interface_variables(plan, {}) == Vars{{"GLOO_SOCKET_IFNAME", "ib0"},
                                                                    {"NCCL_SOCKET_IFNAME", "ib0"},
                                                                    {"TP_SOCKET_IFNAME", "ib0"}});
        CHECK(tfslurm::socket_interface_variables(plan, {{"NCCL_SOCKET_IFNAME", "ib1"}}) ==
              Vars{{"GLOO_SOCKET_IFNAME", "ib0"}, {"TP_SOCKET_IFNAME", "ib0"}});
        CHECK(tfslurm::socket_interface_variables(tfslurm::Plan{}, {}).empty()); // by name
    }
}

TEST_CASE("plan_with_own_address: other nodes' addresses need an exchange", "[interfaces]") {
    try {
        (void)single_node_plan("ib0", k_node, "n[1-3]", "1(x3)");
        FAIL("no exception");
    } catch (const tfslurm::Error& e) {
        CHECK(e.code() == Errc::invalid_argument);
        CHECK(std::string{e.what()} ==
              "iface: the chosen addresses of n2, n3 are unknown here (each node reads only its "
              "own interfaces): \"ib0\"");
        CHECK(e.hint() == "use tfslurm run (its coordinator exchanges every node's address "
                          "before the trainers start) or tfslurm env under srun --mpi=pmi2 (it "
                          "exchanges them through PMI2); a single-node step works anywhere");
    }
    require_error([] { (void)single_node_plan("nosuch0", k_node, "n[1-3]", "1(x3)"); },
                  Errc::invalid_argument,
                  "iface: node n1 has no address on nosuch0 (its interfaces: lo 127.0.0.1 ::1, "
                  "eth0 192.168.1.5 fe80::5054:ff:fe12:3456, docker0 172.17.0.1, ib0 10.1.0.5 "
                  "fd00:1::5, ib6 fe80::1 fd00:6::5): \"nosuch0\"");
}

TEST_CASE("read_interfaces lists the loopback", "[interfaces]") {
    const auto found = tfslurm::read_interfaces();
    CHECK(std::find(found.begin(),
                    found.end(),
                    InterfaceAddress{"lo", "127.0.0.1", IpFamily::v4}) != found.end());
}
