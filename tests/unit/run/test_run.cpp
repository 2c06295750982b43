// SPDX-License-Identifier: MIT
// The types shared by the components of `tfslurm run` (src/run/run.cpp): the tree of the control
// plane (which rank leads each node) and the role lists of the run settings.
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;

namespace {

std::vector<Member> on_hosts(const std::vector<std::string>& hosts) {
    std::vector<Member> members;
    members.reserve(hosts.size());
    for (const auto& host : hosts) {
        members.push_back(Member{Role::worker, static_cast<std::uint32_t>(members.size()), host});
    }
    return members;
}

} // namespace

TEST_CASE("tree: each node's leader is its lowest rank", "[tree]") {
    struct Case {
        const char* layout;
        std::vector<std::string> hosts;
        std::vector<std::uint32_t> leaders;
        std::vector<std::uint32_t> sizes;
    };
    const std::vector<Case> cases{
        {"block", {"n1", "n1", "n1", "n2", "n2", "n2"}, {0, 0, 0, 3, 3, 3}, {3, 0, 0, 3, 0, 0}},
        {"cyclic", {"n1", "n2", "n3", "n1", "n2", "n3"}, {0, 1, 2, 0, 1, 2}, {2, 2, 2, 0, 0, 0}},
        {"one task per node (flat)", {"n1", "n2", "n3"}, {0, 1, 2}, {1, 1, 1}},
        {"arbitrary", {"n2", "n1", "n2", "n1"}, {0, 1, 0, 1}, {2, 2, 0, 0}},
        {"one task", {"n1"}, {0}, {1}},
        {"no task", {}, {}, {}},
    };
    for (const auto& c : cases) {
        INFO(c.layout);
        const auto leaders = node_leaders(on_hosts(c.hosts));
        CHECK(leaders == c.leaders);
        CHECK(node_sizes(leaders) == c.sizes);
    }
}

TEST_CASE("run: restart roles", "[run][restart]") {
    CHECK(parse_restart_roles("worker", "restart_roles") == std::vector<Role>{Role::worker});
    CHECK(parse_restart_roles("worker,chief,worker", "restart_roles") ==
          std::vector<Role>{Role::worker, Role::chief});
    CHECK(parse_restart_roles("evaluator", "restart_roles") == std::vector<Role>{Role::evaluator});
    using Row = std::tuple<std::string, std::string>;
    const auto [input, message] = GENERATE(table<std::string, std::string>({
        Row{"ps", R"(restart_roles: a parameter server cannot be restarted: "ps")"},
        Row{"worker,ps", R"(restart_roles: a parameter server cannot be restarted: "worker,ps")"},
        Row{"", R"(restart_roles: expected a comma list of roles: "")"},
        Row{"worker,", R"(restart_roles: expected a comma list of roles: "worker,")"},
    }));
    try {
        (void)parse_restart_roles(input, "restart_roles");
        FAIL("no error for " << input);
    } catch (const Error& e) {
        CHECK(e.code() == Errc::invalid_argument);
        CHECK(std::string(e.what()) == message);
    }
}
