// SPDX-License-Identifier: MIT
// The hostlist parser (src/resolve/hostlist/hostlist_parser.cpp): expansion as Slurm does it, and
// its exact errors. The vectors are the examples of tests/data/hostlists.tsv: 90 real `scontrol
// show hostnames` outputs (S01 to S90), Slurm's documented edge cases, and the examples of
// TensorFlow's resolver tests and of submitit.
#include "fixtures.hpp"
#include "hostlist_table.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace {

using Hosts = std::vector<std::string>;
using Example = tfslurm::test::HostlistExample;
using Expect = Example::Expect;
using tfslurm::test::expand_nodelist;
using tfslurm::test::hostlist_examples;
using tfslurm::test::table_place;

using tfslurm::test::k_nodelist_subject;

tfslurm::test::Thrown hostlist_failure(const std::string& list) {
    return tfslurm::test::thrown_by([&] { static_cast<void>(expand_nodelist(list)); });
}

void check_error(const Example& example) {
    CAPTURE(table_place(example), example.list);
    const auto failure = hostlist_failure(example.list);
    CHECK(failure.code == "invalid_hostlist");
    CHECK(failure.message == std::string(k_nodelist_subject) + ": " + example.error + ": " +
                                 tfslurm::quote(example.list));
}

void check_hosts(const Example& example) {
    CAPTURE(table_place(example), example.list);
    CHECK(expand_nodelist(example.list) == example.hosts);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// The examples of tests/data/hostlists.tsv, one test case per set

TEST_CASE("hostlist: reference rows S01-S90 that expand give scontrol's hosts", "[hostlist]") {
    // The >= 23.02.5 column of Slurm >= 23.02.5's behaviour for S14, S22, S23 and S88.
    check_hosts(GENERATE(from_range(hostlist_examples("reference", Expect::hosts))));
}

TEST_CASE("hostlist: reference rows S01-S90 that Slurm rejects give exact errors", "[hostlist]") {
    // The >= 23.02.5 column for S11, S25 and S27: a missing ']' is an error.
    check_error(GENERATE(from_range(hostlist_examples("reference", Expect::error))));
}

TEST_CASE("hostlist: S49, S76 and S77 expand to whole ranges", "[hostlist]") {
    const Example row = GENERATE(from_range(hostlist_examples("reference", Expect::count)));
    CAPTURE(table_place(row));
    const Hosts hosts = expand_nodelist(row.list);
    REQUIRE(hosts.size() == row.count);
    CHECK(hosts.front() == row.first);
    CHECK(hosts.back() == row.last);
    CHECK(hosts[1] == "n" + std::to_string(row.first == "n1" ? 2 : 1));
}

TEST_CASE("hostlist: suffixes and multi-group names of Slurm >= 23.02.5 (V1b)", "[hostlist]") {
    check_hosts(GENERATE(from_range(hostlist_examples("v1b", Expect::hosts))));
}

TEST_CASE("hostlist: TensorFlow resolver vectors TFH1-TFH5", "[hostlist]") {
    // Also TensorFlow's extra behaviours that agree with Slurm.
    check_hosts(GENERATE(from_range(hostlist_examples("tensorflow", Expect::hosts))));
}

TEST_CASE("hostlist: submitit vectors", "[hostlist]") {
    // submitit's documentation says Slurm rejects compute-b2[1-,4]; scontrol 22.05.8 prints
    // compute-b21 compute-b24 (an empty high bound means "= low"), and so do we.
    check_hosts(GENERATE(from_range(hostlist_examples("submitit", Expect::hosts))));
}

TEST_CASE("hostlist: submitit's rejected vector is rejected", "[hostlist]") {
    const Example row = GENERATE(from_range(hostlist_examples("submitit", Expect::error)));
    CHECK(hostlist_failure(row.list).message ==
          std::string(k_nodelist_subject) + ": " + row.error + ": " + tfslurm::quote(row.list));
}

TEST_CASE("hostlist: n[1-1000][1-1000] gives 1,000,000 hosts in Slurm's order", "[hostlist]") {
    const Hosts hosts = expand_nodelist("n[1-1000][1-1000]");
    REQUIRE(hosts.size() == 1000000);
    CHECK(hosts[0] == "n11");
    CHECK(hosts[1] == "n12");
    CHECK(hosts[1000] == "n21");
    CHECK(hosts.back() == "n10001000");
}

// ---------------------------------------------------------------------------------------------
// Grammar details

TEST_CASE("hostlist: empty input and separators only give no host", "[hostlist]") {
    const Example row = GENERATE(from_range(hostlist_examples("empty", Expect::hosts)));
    CAPTURE(table_place(row));
    CHECK(row.hosts.empty());
    CHECK(expand_nodelist(row.list).empty());
}

TEST_CASE("hostlist: separators inside brackets do not split", "[hostlist]") {
    // The last '[' opens the range list; a '[' without a ']' after it is literal text. A prefix
    // group runs to the last ']' before the next group; garbage after its low bound is
    // tolerated as in Slurm (`1]-2` is 1..2 with width 2).
    check_hosts(GENERATE(from_range(hostlist_examples("brackets", Expect::hosts))));
}

TEST_CASE("hostlist: numbers follow strtoul", "[hostlist]") {
    // Overflow saturates at ULONG_MAX, padded to the text's width as Slurm prints it.
    check_hosts(GENERATE(from_range(hostlist_examples("strtoul", Expect::hosts))));
}

TEST_CASE("hostlist: every hostlist error has its exact message", "[hostlist]") {
    // Prefix groups: same item rules, at most 65536 values per group. Long and unprintable
    // items are shortened and escaped inside the quotes.
    check_error(GENERATE(from_range(hostlist_examples("error", Expect::error))));
}

TEST_CASE("hostlist: a bracket with more than 65536 ranges is an error", "[hostlist]") {
    // Slurm's MAX_RANGES: with more items scontrol aborts.
    std::string items;
    for (int i = 0; i < 65535; ++i) {
        items += "1,";
    }
    CHECK(expand_nodelist("n[" + items + "1]").size() == 65536);
    const std::string too_many = "n[" + items + "1,1]";
    CHECK(
        hostlist_failure(too_many).message ==
        std::string(k_nodelist_subject) +
            ": bracket group at offset 1 has more than 65536 ranges: " + tfslurm::quote(too_many));
}

TEST_CASE("hostlist: the total caps fail fast with too_large", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"a[1-65536]b[1-65536]", "expands to more than 4194304 hosts"},
        {"a[1-2048][1-2049]", "expands to more than 4194304 hosts"},
        // 65 tokens of 65536 hosts: the cap is on the whole list
        {[] {
             std::string list;
             for (int i = 0; i < 65; ++i) {
                 list += "n[1-65536],";
             }
             return list;
         }(),
         "expands to more than 4194304 hosts"},
        // 4194304 hosts (exactly the cap) of more than 64 bytes each
        {"n[1-65536][1-64]" + std::string(60, 'x'), "expands to more than 268435456 bytes"},
    }));
    const tfslurm::test::Thrown failure = hostlist_failure(std::get<0>(row));
    CHECK(failure.code == "too_large");
    CHECK(failure.message == std::string(k_nodelist_subject) + ": " + std::get<1>(row));
    CHECK(failure.hint == "split the list");
}

TEST_CASE("hostlist: a syntax error wins over the total cap", "[hostlist]") {
    CHECK(hostlist_failure("a[1-65536]b[1-65536],n[3-1]").code == "invalid_hostlist");
}

TEST_CASE("hostlist: the default subject is hostlist", "[hostlist]") {
    try {
        static_cast<void>(tfslurm::expand_hostlist("n[3-1]"));
        FAIL("no error");
    } catch (const tfslurm::Error& error) {
        CHECK(std::string(error.what()).rfind("hostlist: ", 0) == 0);
    }
}
