// SPDX-License-Identifier: MIT
// Arbitrary distribution (srun -m arbitrary, SLURM_HOSTFILE): placement, and real steps of the
// test cluster (tests/data/slurm-env/srun-arbitrary.txt). The hostfile's grammar:
// test_hostfile.cpp.
#include "fixtures.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostfile.hpp>
#include <tfslurm/resolve/placement.hpp>
#include <tfslurm/resolve/step.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

using tfslurm::Distribution;
using tfslurm::Environment;
using tfslurm::Errc;
using tfslurm::test::reader_of;
using tfslurm::test::require_error;
using Hosts = std::vector<std::string>;

namespace {

using tfslurm::test::k_hostfile_subject;

/// The hostfile of each section of srun-arbitrary.txt ('# hostfile: ' lines, '|' = newline).
std::vector<std::string> section_hostfiles() {
    std::vector<std::string> files;
    for (const auto& line : tfslurm::test::read_lines("slurm-env/srun-arbitrary.txt")) {
        const std::string prefix = "# hostfile: ";
        if (line.rfind(prefix, 0) == 0) {
            auto text = line.substr(prefix.size());
            std::replace(text.begin(), text.end(), '|', '\n');
            files.push_back(text);
        }
    }
    return files;
}

} // namespace

TEST_CASE("arbitrary: place_arbitrary puts rank i on the i-th host", "[arbitrary]") {
    const auto allocation = tfslurm::place_arbitrary(
        {"n1", "n2", "n3"}, {2, 2, 1}, {"n2", "n1", "n2", "n3", "n1"}, k_hostfile_subject);
    CHECK(allocation.distribution == Distribution::arbitrary);
    CHECK(allocation.node_ranks == std::vector<std::vector<std::uint32_t>>{{1, 4}, {0, 2}, {3}});
    CHECK(allocation.places[2].node == 1);
    CHECK(allocation.places[2].local == 1);
    CHECK(allocation.places[4].node == 0);
    CHECK(allocation.places[4].local == 1);

    require_error(
        [] {
            (void)tfslurm::place_arbitrary({"n1", "n2"}, {1, 1}, {"n1", "n7"}, k_hostfile_subject);
        },
        Errc::inconsistent_allocation,
        "SLURM_HOSTFILE (hf): puts rank 1 on a host that is not one of the step's 2 nodes: "
        "\"n7\"");
    require_error(
        [] {
            (void)tfslurm::place_arbitrary(
                {"n1", "n2"}, {1, 2}, {"n1", "n1", "n2"}, k_hostfile_subject);
        },
        Errc::inconsistent_allocation,
        "SLURM_HOSTFILE (hf): puts 2 ranks on n1 where the step has 1 tasks (per node: 1,2): "
        "\"n1\"");
    require_error(
        [] {
            (void)tfslurm::place_arbitrary({"n1", "n2"}, {1, 1}, {"n1"}, k_hostfile_subject);
        },
        Errc::inconsistent_allocation,
        "SLURM_HOSTFILE (hf): names 1 hosts for the step's 2 tasks: \"1(x2)\"");
}

TEST_CASE("arbitrary: every task of real arbitrary steps resolves to where Slurm ran it",
          "[arbitrary]") {
    const auto sections = tfslurm::test::load_sections("slurm-env/srun-arbitrary.txt");
    const auto hostfiles = section_hostfiles();
    REQUIRE(sections.size() == 4);
    REQUIRE(hostfiles.size() == sections.size());
    for (std::size_t i = 0; i < sections.size(); ++i) {
        const auto& section = sections[i];
        INFO(section.title);
        const auto read = reader_of({{"/tmp/tfs-hostfile", hostfiles[i]}});
        for (const auto& [label, env] : section.tasks) {
            INFO("rank " << label);
            const auto step = tfslurm::read_step(env, read);
            CHECK(step.distribution.kind == Distribution::arbitrary);
            CHECK(step.hostfile == "/tmp/tfs-hostfile");
            const auto allocation = tfslurm::resolve_allocation(step); // cross-checks identity
            const auto& place = allocation.places.at(static_cast<std::size_t>(label));
            CHECK(allocation.hosts[place.node] == *env.get("SLURMD_NODENAME"));
            CHECK(std::to_string(place.node) == *env.get("SLURM_NODEID"));
            CHECK(std::to_string(place.local) == *env.get("SLURM_LOCALID"));
            std::string gtids;
            for (const auto rank : allocation.node_ranks[place.node]) {
                gtids += (gtids.empty() ? "" : ",") + std::to_string(rank);
            }
            CHECK(gtids == *env.get("SLURM_GTIDS"));
        }
    }
}

TEST_CASE("arbitrary: a missing or changed hostfile is an error, never a guess", "[arbitrary]") {
    const auto sections = tfslurm::test::load_sections("slurm-env/srun-arbitrary.txt");
    auto env = sections.at(0).tasks.at(0).second; // rank 0 of "n2 n1 n2 n3 n1", on n2
    SECTION("SLURM_HOSTFILE unset") {
        env.unset("SLURM_HOSTFILE");
        require_error([&] { (void)tfslurm::read_step(env, reader_of({})); },
                      Errc::missing_env,
                      "SLURM_HOSTFILE: not set");
    }
    SECTION("the file is gone") {
        env.set("SLURM_HOSTFILE", "/nonexistent/tfslurm-hostfile");
        require_error([&] { (void)tfslurm::read_step(env); },
                      Errc::io,
                      "SLURM_HOSTFILE (/nonexistent/tfslurm-hostfile): cannot open "
                      "\"/nonexistent/tfslurm-hostfile\": No such file or directory");
    }
    SECTION("the file was rewritten after the step started") {
        const auto step =
            tfslurm::read_step(env, reader_of({{"/tmp/tfs-hostfile", "n1\nn2\nn2\nn3\nn1\n"}}));
        require_error([&] { (void)tfslurm::resolve_allocation(step); },
                      Errc::inconsistent_allocation,
                      "SLURM_NODEID: disagrees with the computed placement: arbitrary (hostfile "
                      "/tmp/tfs-hostfile) distribution of SLURM_STEP_TASKS_PER_NODE=2(x2),1 over "
                      "SLURM_STEP_NODELIST=n[1-3] puts rank 0 on node 0 (n1) as local task 0: "
                      "\"1\"");
    }
    SECTION("the file does not match the step's counts") {
        const auto step =
            tfslurm::read_step(env, reader_of({{"/tmp/tfs-hostfile", "n2\nn2\nn2\nn3\nn1\n"}}));
        require_error([&] { (void)tfslurm::resolve_allocation(step); },
                      Errc::inconsistent_allocation,
                      "SLURM_HOSTFILE (/tmp/tfs-hostfile): puts 1 ranks on n1 where the step has "
                      "2 tasks (per node: 2(x2),1): \"n1\"");
    }
}

TEST_CASE("arbitrary: a preview takes --hostfile", "[arbitrary]") {
    const auto read = reader_of({{"hf", "n2\nn1*2\nn3\n"}});
    tfslurm::StepOverrides preview;
    preview.nodelist = "n[1-3]";
    preview.hostfile = "hf";
    SECTION("the counts come from the file") {
        const auto step = tfslurm::preview_step(preview, read);
        CHECK(step.distribution.kind == Distribution::arbitrary);
        CHECK(step.tasks_per_node == std::vector<std::uint32_t>{2, 1, 1});
        const auto allocation = tfslurm::resolve_allocation(step);
        CHECK(allocation.node_ranks == std::vector<std::vector<std::uint32_t>>{{1, 2}, {0}, {3}});
    }
    SECTION("--ntasks takes the first names") {
        preview.ntasks = 2;
        const auto step = tfslurm::preview_step(preview, read);
        CHECK(step.tasks_per_node == std::vector<std::uint32_t>{1, 1, 0});
        require_error([&] { (void)tfslurm::resolve_allocation(step); },
                      Errc::inconsistent_allocation,
                      "tasks per node: node 2 (n3) has no task: \"1(x2),0\"");
    }
    SECTION("--tasks-per-node must agree with the file") {
        preview.tasks_per_node = "1";
        const auto step = tfslurm::preview_step(preview, read);
        require_error([&] { (void)tfslurm::resolve_allocation(step); },
                      Errc::inconsistent_allocation,
                      "hostfile (hf): puts 2 ranks on n1 where the step has 1 tasks (per node: "
                      "1(x3)): \"n1\"");
    }
    SECTION("a host outside --nodelist") {
        preview.nodelist = "n[1-2]";
        require_error([&] { (void)tfslurm::preview_step(preview, read); },
                      Errc::invalid_argument,
                      "hostfile (hf): names a host that is not in nodelist: \"n3\"");
    }
    SECTION("another distribution") {
        preview.distribution = "cyclic";
        require_error([&] { (void)tfslurm::preview_step(preview, read); },
                      Errc::invalid_argument,
                      "hostfile: places every rank itself: it cannot be combined with "
                      "distribution=cyclic: \"hf\"");
    }
    SECTION("arbitrary without a hostfile") {
        preview.hostfile.clear();
        preview.distribution = "arbitrary";
        require_error([&] { (void)tfslurm::preview_step(preview, read); },
                      Errc::invalid_argument,
                      "distribution: arbitrary needs hostfile=FILE: \"arbitrary\"");
    }
}
