// SPDX-License-Identifier: MIT
// exchange: which exchange each command chooses, and what the PMI2 exchange puts and gets
// (no Slurm needed: the PMI2 calls themselves are in src/os/pmi2.cpp, tested end to end).
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/pmi2.hpp>
#include <tfslurm/resolve/exchange.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/resolve/step.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using namespace tfslurm;
using tfslurm::test::require_error;

namespace {

AddressSelection ib0() {
    PlanOptions options;
    apply_plan_setting(options, "iface", "ib0");
    return options.address_selection;
}

/// The plan by node name of task `rank` of a preview step.
Plan named_plan(std::uint32_t rank,
                const std::string& nodelist = "n[1-3]",
                const std::string& tasks = "2",
                const std::string& distribution = "block") {
    auto overrides = tfslurm::test::preview_overrides(nodelist, tasks, 1234, 0, rank);
    overrides.distribution = distribution;
    return tfslurm::test::plan_of_preview(overrides);
}

} // namespace

TEST_CASE("choose_exchange: auto picks the best available", "[exchange]") {
    const Environment none;
    const Environment pmi{{"PMI_FD", "12"}};
    using U = ExchangeUser;
    // Without iface/network there is nothing to exchange.
    CHECK(choose_exchange(Exchange::automatic, U::run, {}, pmi) == Exchange::env);
    CHECK(choose_exchange(Exchange::automatic, U::env, {}, pmi) == Exchange::env);
    CHECK(choose_exchange(Exchange::automatic, U::run, ib0(), none) == Exchange::coordinator);
    CHECK(choose_exchange(Exchange::automatic, U::env, ib0(), pmi) == Exchange::pmi2);
    CHECK(choose_exchange(Exchange::automatic, U::env, ib0(), none) == Exchange::env);
    CHECK(choose_exchange(Exchange::automatic, U::env, ib0(), {{"PMI_FD", ""}}) == Exchange::env);
    CHECK(choose_exchange(Exchange::automatic, U::plan, ib0(), pmi) == Exchange::env);
    CHECK(choose_exchange(Exchange::automatic, U::plugin, ib0(), pmi) == Exchange::env);
    CHECK(choose_exchange(Exchange::env, U::run, ib0(), none) == Exchange::env);
    CHECK(choose_exchange(Exchange::pmi2, U::env, ib0(), none) == Exchange::pmi2);
    CHECK(choose_exchange(Exchange::coordinator, U::run, ib0(), none) == Exchange::coordinator);
}

TEST_CASE("choose_exchange: impossible choices name the setting", "[exchange]") {
    using U = ExchangeUser;
    const auto sel = ib0();
    require_error([&] { (void)choose_exchange(Exchange::pmi2, U::run, sel, {}); },
                  Errc::invalid_argument,
                  "exchange: tfslurm run exchanges the addresses through its coordinator, not "
                  "PMI2: \"pmi2\"");
    require_error([&] { (void)choose_exchange(Exchange::coordinator, U::env, sel, {}); },
                  Errc::invalid_argument,
                  "exchange: only tfslurm run has a coordinator: \"coordinator\"");
    require_error([&] { (void)choose_exchange(Exchange::pmi2, U::plan, sel, {}); },
                  Errc::invalid_argument,
                  "exchange: tfslurm plan describes the step in one process and exchanges "
                  "nothing: \"pmi2\"");
    require_error([&] { (void)choose_exchange(Exchange::pmi2, U::plugin, sel, {}); },
                  Errc::invalid_argument,
                  "exchange: the plugin cannot use PMI2 safely: it would take the task's PMI2 "
                  "connection before the program starts, and a fence hangs the step when one "
                  "task does not take part: \"pmi2\"");
    require_error([&] { (void)choose_exchange(Exchange::coordinator, U::plugin, sel, {}); },
                  Errc::invalid_argument,
                  "exchange: only tfslurm run has a coordinator: \"coordinator\"");
    require_error([] { (void)choose_exchange(Exchange::pmi2, U::env, {}, {}); },
                  Errc::invalid_argument,
                  "exchange: exchanges the addresses chosen with iface or network, and neither "
                  "is set: \"pmi2\"");
    require_error([] { (void)parse_exchange("mpi"); },
                  Errc::invalid_argument,
                  "exchange: expected auto, env, pmi2 or coordinator: \"mpi\"");
    CHECK(parse_exchange("coordinator") == Exchange::coordinator);
    CHECK(to_string(parse_exchange("auto")) == "auto");
}

TEST_CASE("pmi2_exchange: one put per node, one get per other node", "[exchange]") {
    // srun -N3 -n6 (block): ranks 0,1 on n1, 2,3 on n2, 4,5 on n3.
    const auto first = pmi2_exchange(named_plan(2), "10.78.0.2");
    REQUIRE(first.put);
    CHECK(first.put->key == "tfslurm.addr.1");
    CHECK(first.put->value == "n2 10.78.0.2");
    REQUIRE(first.gets.size() == 2);
    CHECK(first.gets[0].node == "n1");
    CHECK(first.gets[0].key == "tfslurm.addr.0");
    CHECK(first.gets[0].source_rank == 0);
    CHECK(first.gets[1].node == "n3");
    CHECK(first.gets[1].key == "tfslurm.addr.2");
    CHECK(first.gets[1].source_rank == 4);
    // Local task 1 does not put.
    const auto second = pmi2_exchange(named_plan(3), "10.78.0.2");
    CHECK_FALSE(second.put);
    CHECK(second.gets.size() == 2);
    // Cyclic: local task 0 of n3 is rank 2.
    const auto cyclic = pmi2_exchange(named_plan(0, "n[1-3]", "2", "cyclic"), "fd78::1");
    REQUIRE(cyclic.put);
    CHECK(cyclic.put->value == "n1 fd78::1");
    REQUIRE(cyclic.gets.size() == 2);
    CHECK(cyclic.gets[1].source_rank == 2);
    // A node that could not choose an address still puts, a marker, so nobody waits for it.
    const auto failed = pmi2_exchange(named_plan(2), "");
    REQUIRE(failed.put);
    CHECK(failed.put->value == "n2 -");
    // 1000 nodes: still one put per node, and every key and value within PMI2's limits.
    const auto big = pmi2_exchange(named_plan(1998, "n[1-1000]", "2"), "10.78.3.232");
    REQUIRE(big.put);
    CHECK(big.put->key == "tfslurm.addr.999");
    CHECK(big.gets.size() == 999);
}

TEST_CASE("pmi2_exchange: a value beyond PMI2's 1024 bytes is refused", "[exchange]") {
    const std::string long_name(1020, 'n');
    require_error([&] { (void)pmi2_exchange(named_plan(0, long_name, "1"), "10.78.0.1"); },
                  Errc::too_large,
                  "PMI2: the value of tfslurm.addr.0 has 1030 bytes, PMI2 takes at most 1023: " +
                      quote(long_name + " 10.78.0.1"));
}

TEST_CASE("read_pmi2_address: checks the node and the address", "[exchange]") {
    const Pmi2Get get{"n2", "tfslurm.addr.1", 2};
    CHECK(read_pmi2_address(get, "n2 10.78.0.2") == "10.78.0.2");
    CHECK(read_pmi2_address(get, "n2 fd78::2") == "fd78::2");
    require_error([&] { (void)read_pmi2_address(get, "n3 10.78.0.3"); },
                  Errc::inconsistent_allocation,
                  "PMI2: tfslurm.addr.1 holds the address of n3, not of n2 (the tasks placed the "
                  "ranks differently): \"n3 10.78.0.3\"");
    require_error([&] { (void)read_pmi2_address(get, "n2 -"); },
                  Errc::invalid_argument,
                  "PMI2: n2 chose no address (its task says why): \"n2 -\"");
    require_error([&] { (void)read_pmi2_address(get, "n2 n2-ib0"); },
                  Errc::inconsistent_allocation,
                  "PMI2: tfslurm.addr.1 holds no IP address for n2: \"n2 n2-ib0\"");
    require_error([&] { (void)read_pmi2_address(get, ""); },
                  Errc::inconsistent_allocation,
                  "PMI2: tfslurm.addr.1 holds the address of , not of n2 (the tasks placed the "
                  "ranks differently): \"\"");
}

TEST_CASE("check_pmi2_world: the singleton of a step without --mpi=pmi2", "[exchange]") {
    const auto plan = named_plan(3);
    check_pmi2_world(6, 3, plan);
    try {
        check_pmi2_world(1, 0, plan);
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::inconsistent_allocation);
        CHECK(std::string{e.what()} ==
              "exchange=pmi2: PMI2 sees 1 task (a singleton), the step has 6: this step was not "
              "started with srun --mpi=pmi2");
        CHECK(e.hint() == "run the step with srun --mpi=pmi2 (or set MpiDefault=pmi2 in "
                          "slurm.conf)");
    }
    require_error([&] { check_pmi2_world(6, 2, plan); },
                  Errc::inconsistent_allocation,
                  "exchange=pmi2: PMI2 sees rank 2 of 6 tasks, the step's variables say rank 3 "
                  "of 6");
    // A single-task step is a singleton too, and a correct one.
    check_pmi2_world(1, 0, named_plan(0, "n1", "1"));
}

TEST_CASE("exchange_addresses_pmi2: a missing libpmi2 is named", "[exchange]") {
    try {
        (void)exchange_addresses_pmi2(named_plan(0), "10.78.0.1", {"libtfslurm-no-such-pmi2.so"});
        FAIL("no exception");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::io);
        CHECK(std::string{e.what()} ==
              "libpmi2: cannot load any of libtfslurm-no-such-pmi2.so: "
              "libtfslurm-no-such-pmi2.so: cannot open shared object file: No such file or "
              "directory");
        CHECK(e.hint() == "install Slurm's PMI2 library on every node (Debian: libpmi2-0)");
    }
    CHECK(default_libpmi2_names() == std::vector<std::string>{"libpmi2.so.0", "libpmi2.so"});
}

TEST_CASE("exchange_addresses_pmi2: Slurm's libpmi2 outside a PMI2 step is a singleton",
          "[exchange]") {
    if (Environment::from_process().contains("PMI_FD")) {
        SUCCEED("inside a PMI2 step: the singleton cannot be seen here");
        return;
    }
    // The real library, as a task of `srun --mpi=none -n6` sees it: PMI2_Init() succeeds with
    // size 1, and the exchange refuses to go on.
    require_error([] { (void)exchange_addresses_pmi2(named_plan(3), "10.78.0.2"); },
                  Errc::inconsistent_allocation,
                  "exchange=pmi2: PMI2 sees 1 task (a singleton), the step has 6: this step was "
                  "not started with srun --mpi=pmi2");
}
