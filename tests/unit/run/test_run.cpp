// SPDX-License-Identifier: MIT
// The types shared by the components of `tfslurm run` (src/run/run.cpp): the tree of the control
// plane (which rank leads each node) and the role lists of the run settings.
#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
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

TEST_CASE("run: the run's identity is the job's across its requeues", "[run][run_id]") {
    struct Case {
        std::optional<std::string_view> given;
        std::string_view cluster;
        std::uint64_t job;
        std::uint64_t step;
        std::string expected;
    };
    const std::string longest(k_max_run_id, 'r');
    const std::vector<Case> cases{
        {std::nullopt, "hpc", 12345, 0, "hpc-12345-0"},
        {std::nullopt, "", 12345, 2, "slurm-12345-2"},
        // A cluster name with characters an id leaves out (Slurm lower-cases its own).
        {std::nullopt, "big iron/2", 7, 0, "big_iron_2-7-0"},
        {std::string_view("exp-7.b_2"), "hpc", 12345, 0, "exp-7.b_2"},
        {std::string_view(longest), "hpc", 1, 0, longest},
    };
    for (const auto& c : cases) {
        CAPTURE(c.cluster, c.job, c.step);
        CHECK(run_identity(c.given, c.cluster, c.job, c.step) == c.expected);
    }
    // A long cluster name is cut: the id stays within its limit.
    CHECK(run_identity(std::nullopt, std::string(200, 'c'), 1, 0) ==
          std::string(k_max_run_id / 2, 'c') + "-1-0");
}

TEST_CASE("run: a TFSLURM_RUN_ID that no logger could take is refused", "[run][run_id]") {
    const std::vector<std::pair<std::string, std::string>> cases{
        {"a b", R"(TFSLURM_RUN_ID: expected 1 to 128 letters, digits, '.', '_' or '-': "a b")"},
        {"", R"(TFSLURM_RUN_ID: expected 1 to 128 letters, digits, '.', '_' or '-': "")"},
        {"run/1", R"(TFSLURM_RUN_ID: expected 1 to 128 letters, digits, '.', '_' or '-': "run/1")"},
        {std::string(k_max_run_id + 1, 'r'),
         fmt::format(R"(TFSLURM_RUN_ID: expected 1 to 128 letters, digits, '.', '_' or '-': "{}")",
                     std::string(k_max_run_id + 1, 'r'))},
    };
    for (const auto& [given, message] : cases) {
        CAPTURE(given);
        try {
            static_cast<void>(run_identity(std::string_view(given), "hpc", 1, 0));
            FAIL("accepted");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::invalid_argument);
            CHECK(std::string(e.what()) == message);
        }
    }
}
