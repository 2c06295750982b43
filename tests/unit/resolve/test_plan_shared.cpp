// SPDX-License-Identifier: MIT
// What both layouts share (src/resolve/plan/plan_shared.cpp): addresses from a host pattern and a
// resolver, and the system resolver.
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

using tfslurm::Errc;
using tfslurm::Error;
using tfslurm::test::preview;
using tfslurm::test::require_error;
using tfslurm::test::with;

TEST_CASE("plan: addresses from a host pattern and a resolver", "[plan]") {
    auto options = with({{"host_pattern", "{host}-ib0"}});
    auto built = preview("n[1-2]", "1", options);
    CHECK(built.plan.endpoint(1).rfind("n2-ib0:", 0) == 0);
    CHECK(built.plan.ranks[1].host == "n2");

    options.address = tfslurm::AddressMode::ip;
    tfslurm::StepOverrides overrides;
    overrides.nodelist = "n[1-2]";
    overrides.job_id = 1;
    const auto step = tfslurm::preview_step(overrides);
    const auto allocation = tfslurm::resolve_allocation(step);
    std::vector<std::string> asked;
    const auto plan = tfslurm::make_plan(step, allocation, options, [&](const std::string& name) {
        asked.push_back(name);
        return name == "n1-ib0" ? std::string{"10.1.0.1"} : std::string{"10.1.0.2"};
    });
    CHECK(asked == std::vector<std::string>{"n1-ib0", "n2-ib0"});
    CHECK(plan.ranks[0].address == "10.1.0.1");
    CHECK(plan.ranks[1].address == "10.1.0.2");
    CHECK(plan.control_address == "10.1.0.1");

    require_error(
        [] {
            (void)with({{"host_pattern", "{node}-ib0"}});
        },
        Errc::invalid_argument,
        "host_pattern: unknown placeholder at offset 0 (only {host} is known): "
        "\"{node}-ib0\"");
}

TEST_CASE("plan: the system resolver resolves localhost and reports failures", "[plan]") {
    const auto resolve = tfslurm::system_address_resolver();
    CHECK(resolve("localhost") == "127.0.0.1");
    try {
        (void)resolve("no-such-host.invalid");
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::io);
        CHECK(std::string{e.what()}.rfind(
                  "address=ip: cannot resolve \"no-such-host.invalid\" to an IPv4 address (", 0) ==
              0);
    }
}
