// SPDX-License-Identifier: MIT
// Which peers each launcher's reachability probe tries (src/run/launcher/probe_targets.cpp).
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/run/launcher.hpp>
#include <tfslurm/run/protocol.hpp>
#include <tfslurm/run/run.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;
using namespace std::chrono_literals;

TEST_CASE("probe_targets: every other rank up to 64, else every ps and the chief and a sample",
          "[launcher][probe]") {
    const std::vector<Member> small{
        {Role::ps, 0, "n1"}, {Role::worker, 0, "n2"}, {Role::worker, 1, "n3"}};
    protocol::Cluster cluster{{{"n1", "10.0.0.1"}, {"n3", "fd78::3"}}, {0, 0, 23007}};
    const std::vector<std::uint16_t> ports{23000, 23001, 23002};
    CHECK(probe_targets(1, small, ports, cluster) ==
          std::vector<ProbeTarget>{{0, "10.0.0.1", 23000}, {2, "fd78::3", 23007}});
    CHECK(probe_targets(0, small, ports, {}) ==
          std::vector<ProbeTarget>{{1, "n2", 23001}, {2, "n3", 23002}});
    CHECK(endpoint({2, "fd78::3", 23007}) == "[fd78::3]:23007");
    CHECK(endpoint({2, "n3", 23002}) == "n3:23002");

    // 170 ranks: ps on rank 0, the chief on rank 1, workers after; stride 170 / 17 = 10.
    std::vector<Member> large{{Role::ps, 0, "n0"}, {Role::chief, 0, "n0"}};
    for (std::uint32_t i = 0; i < 168; ++i) {
        large.push_back({Role::worker, i, fmt::format("n{}", (i + 2) / 8)});
    }
    const std::vector<std::uint16_t> no_ports(large.size(), 23000);
    std::vector<std::uint32_t> ranks;
    for (const auto& target : probe_targets(5, large, no_ports, {})) {
        ranks.push_back(target.rank);
    }
    CHECK(ranks ==
          std::vector<std::uint32_t>{
              0, 1, 15, 25, 35, 45, 55, 65, 75, 85, 95, 105, 115, 125, 135, 145, 155, 165});
    // Rank 165: the strides wrap around; rank 5 + 160 = 165 is itself, never a target.
    ranks.clear();
    for (const auto& target : probe_targets(165, large, no_ports, {})) {
        ranks.push_back(target.rank);
    }
    CHECK(ranks == std::vector<std::uint32_t>{
                       0, 1, 5, 15, 25, 35, 45, 55, 65, 75, 85, 95, 105, 115, 125, 135, 145, 155});
}
