// SPDX-License-Identifier: MIT
// The tree of `tfslurm run`'s control plane: which rank leads each node.
#include <tfslurm/run.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
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
