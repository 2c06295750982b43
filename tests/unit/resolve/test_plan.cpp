// SPDX-License-Identifier: MIT
// The plan's own rules (src/resolve/plan/plan.cpp): derived ports and the control port's
// candidates. The layouts: test_native_plan.cpp, test_tf_compat.cpp; what they share:
// test_plan_shared.cpp.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/resolve/tf_config.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

using tfslurm::test::preview;
using tfslurm::test::with;

TEST_CASE("plan: derived ports keep concurrent jobs apart", "[plan]") {
    using tfslurm::derive_port_base;
    CHECK(derive_port_base(1234, 0, 3) == 21863);
    CHECK(derive_port_base(0, 0, 3) == 29165);
    // The old window (job * 16 + step modulo the window count) gave these pairs one window:
    // jobs 250 apart with two tasks per node, job 21 step 0 and job 128 step 2 with six, steps 16
    // apart.
    CHECK(derive_port_base(21, 0, 3) == 27512);
    CHECK(derive_port_base(271, 0, 3) == 24320);
    CHECK(derive_port_base(21, 16, 3) == 31592);
    CHECK(derive_port_base(21, 0, 7) != derive_port_base(128, 2, 7));
    CHECK(derive_port_base(21, 0, 7) != derive_port_base(21, 16, 7));
    // Hashed, no id pattern collides systematically: among 1000 consecutive jobs (two tasks per
    // node: 4000 windows) 127 pairs share a window, as chance predicts (1000 * 999 / 2 / 4000 =
    // 124.9); the old scheme gave 750 pairs (every job and the one 250 later). Steps of one job
    // alike (133 pairs among 1000 steps).
    const auto sharing_pairs = [](auto&& base_of) {
        std::map<std::uint16_t, std::size_t> count;
        std::size_t pairs = 0;
        for (std::uint64_t i = 0; i < 1000; ++i) {
            const auto base = base_of(i);
            CHECK(base >= 20000);
            CHECK(base + 3 <= 32000);
            pairs += count[base]++;
        }
        return pairs;
    };
    CHECK(sharing_pairs([](std::uint64_t i) { return derive_port_base(1 + i, 0, 3); }) == 127);
    CHECK(sharing_pairs([](std::uint64_t i) { return derive_port_base(1, i, 3); }) == 133);
    // Every window lies inside the range, up to the last one.
    for (std::uint64_t job = 0; job < 2000; ++job) {
        const auto base = derive_port_base(job, job % 5, 9);
        CHECK((base - 20000) % 9 == 0);
        CHECK(base + 9 <= 32000);
    }
    const auto built = preview("n[1-3]", "2", {}, 1234);
    CHECK(built.plan.port_source == tfslurm::PortSource::derived);
    CHECK(built.plan.endpoint(0) == "n1:21863");
    CHECK(built.plan.endpoint(1) == "n1:21864");
    CHECK(built.plan.endpoint(2) == "n2:21863");
    CHECK(built.plan.control_address == "n1");
    CHECK(built.plan.control_port == 21865);
}

TEST_CASE("control_port_candidates: the control port, then 7 fallbacks every launcher agrees on",
          "[plan]") {
    const auto built = preview("n[1-3]", "2", {}, 1234);
    CHECK(tfslurm::control_port_candidates(built.plan) ==
          std::vector<std::uint16_t>{21865, 32448, 32088, 32643, 32036, 32069, 32557, 32255});
    // Another step: other fallbacks. None is ever a trainer port of the plan, even when an
    // explicit base puts the trainers in the fallback range.
    auto plan = built.plan;
    plan.step_id = 1;
    const auto other = tfslurm::control_port_candidates(plan);
    CHECK(other.front() == 21865);
    CHECK(other != tfslurm::control_port_candidates(built.plan));
    for (std::uint16_t first = 32000; first < 32768; first += 2) {
        for (auto& rank : plan.ranks) {
            rank.port = static_cast<std::uint16_t>(first + rank.local);
        }
        plan.control_port = static_cast<std::uint16_t>(first + 2);
        const auto candidates = tfslurm::control_port_candidates(plan);
        REQUIRE(candidates.size() == 8);
        CHECK(candidates.front() == plan.control_port);
        CHECK(std::set<std::uint16_t>(candidates.begin(), candidates.end()).size() == 8);
        for (const auto port : candidates) {
            CHECK(port != first);
            CHECK(port != first + 1);
        }
    }
}
