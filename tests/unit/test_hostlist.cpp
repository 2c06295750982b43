// SPDX-License-Identifier: MIT
// Tests of the hostlist, counts and port-list grammars (src/hostlist.cpp). The vectors come
// from /work/shared/reference: hostlists.md (S01-S90 and sections 4, 6, 7, 8),
// tensorflow-resolver.md (V2, V3) and other-launchers.md (submitit).
#include "../fuzz/fuzz_checks.hpp"

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>

#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using tfslurm::Errc;
using Hosts = std::vector<std::string>;

constexpr const char* k_subject = "SLURM_JOB_NODELIST";

/// Split on single spaces: "n1 n2" -> {"n1", "n2"}; "" -> {}.
Hosts words(const std::string& text) {
    Hosts out;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find(' ', start);
        if (end == std::string::npos) {
            end = text.size();
        }
        out.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

Hosts expand(const std::string& list) {
    return tfslurm::expand_hostlist(list, k_subject);
}

struct Failure {
    std::string code;
    std::string message;
    std::string hint;
};

/// Run `action`, which must throw a tfslurm::Error, and return what it threw.
Failure failure_of(const std::function<void()>& action) {
    try {
        action();
    } catch (const tfslurm::Error& error) {
        return {std::string(tfslurm::to_string(error.code())), error.what(), error.hint()};
    }
    FAIL("no tfslurm::Error was thrown");
    return {};
}

Failure hostlist_failure(const std::string& list) {
    return failure_of([&] { static_cast<void>(expand(list)); });
}

std::string quoted(const std::string& text) {
    return tfslurm::quote(text);
}

} // namespace

// ---------------------------------------------------------------------------------------------
// Reference vectors

TEST_CASE("hostlist: reference rows S01-S90 that expand give scontrol's hosts", "[hostlist]") {
    // The >= 23.02.5 column of hostlists.md section 4 for S14, S22, S23 and S88.
    const auto row = GENERATE(table<std::string, std::string, std::string>({
        {"S01", "n[01-03],x[1-2]-y[1-2]", "n01 n02 n03 x1-y1 x1-y2 x2-y1 x2-y2"},
        {"S02", "n[01-03]", "n01 n02 n03"},
        {"S03", "n[9-11]", "n9 n10 n11"},
        {"S04", "n[009-011]", "n009 n010 n011"},
        {"S05", "n[09-11]", "n09 n10 n11"},
        {"S06", "n[1-3,5,7-8]", "n1 n2 n3 n5 n7 n8"},
        {"S07", "n[1,1,2]", "n1 n1 n2"},
        {"S08", "n1,n1,n2", "n1 n1 n2"},
        {"S09", "n[1-2],n[2-3]", "n1 n2 n2 n3"},
        {"S12", "n1-]", "n1-]"},
        {"S13", "a[1-2]b[3-4]", "a1b3 a1b4 a2b3 a2b4"},
        {"S14", "a[1-2]-b[01-02]c", "a1-b01c a1-b02c a2-b01c a2-b02c"},
        {"S15", "n[01-3]", "n01 n02 n03"},
        {"S16", "n[1-03]", "n1 n2 n3"},
        {"S17", "n[0-0]", "n0"},
        {"S19", "n", "n"},
        {"S20", "n[1-2],m[3-4]", "n1 n2 m3 m4"},
        {"S21", "n[1-2] m[3-4]", "n1 n2 m3 m4"},
        {"S22", "n[8-12]x", "n8x n9x n10x n11x n12x"},
        {"S23", "host-[1-2].dom", "host-1.dom host-2.dom"},
        {"S30", "n[01-02,3]", "n01 n02 n3"},
        {"S31", "n[1-2][3-4]", "n13 n14 n23 n24"},
        {"S32", "rack[1-2]-node[01-02]", "rack1-node01 rack1-node02 rack2-node01 rack2-node02"},
        {"S33", "n01,n[02-03]", "n01 n02 n03"},
        {"S34", "[1-3]", "1 2 3"},
        {"S35", "n[0001-0003]", "n0001 n0002 n0003"},
        {"S36", "n[98-101]", "n98 n99 n100 n101"},
        {"S37", "n[099-101]", "n099 n100 n101"},
        {"S38", "n1,,n2", "n1 n2"},
        {"S39", ",n1", "n1"},
        {"S40", "n1,", "n1"},
        {"S41", "n[1-2],,", "n1 n2"},
        {"S42", "n[ 1-2]", "n01 n02"},
        {"S43", "n[1 -2]", "n01 n02"},
        {"S44", "n[1-2] ", "n1 n2"},
        {"S45", "n10[1-2]", "n101 n102"},
        {"S46", "n[2,1]", "n2 n1"},
        {"S47", "n[3-5,1-2]", "n3 n4 n5 n1 n2"},
        {"S50",
         "nid[0001-0004,0010],gpu-a[1-2]-b[01-03]",
         "nid0001 nid0002 nid0003 nid0004 nid0010 gpu-a1-b01 gpu-a1-b02 gpu-a1-b03 gpu-a2-b01 "
         "gpu-a2-b02 gpu-a2-b03"},
        {"S51", "n[9-10]", "n9 n10"},
        {"S52", "n[09-10]", "n09 n10"},
        {"S53", "n[1-010]", "n1 n2 n3 n4 n5 n6 n7 n8 n9 n10"},
        {"S54", "n[010-12]", "n010 n011 n012"},
        {"S55", "n[007-7]", "n007"},
        {"S56", "n[1,01,001]", "n1 n01 n001"},
        {"S57", "n[00-02]", "n00 n01 n02"},
        {"S58", "n[0-02]", "n0 n1 n2"},
        {"S59", "n[+1-2]", "n01 n02"},
        {"S60", "n[3,1-2],n1", "n3 n1 n2 n1"},
        {"S61", "n[1-3,2-4]", "n1 n2 n3 n2 n3 n4"},
        {"S62", "n[1-2],n[1-2]", "n1 n2 n1 n2"},
        {"S63", "x[1-2]y[3-4]", "x1y3 x1y4 x2y3 x2y4"},
        {"S64", "a[1-2]b[3-4]c[5-6]", "a1b3c5 a1b3c6 a2b3c5 a2b3c6 a1b4c5 a1b4c6 a2b4c5 a2b4c6"},
        {"S65",
         "a[1-2]b[3-4]c[5-6]d[7-8]",
         "a1b3c5d7 a1b3c5d8 a2b3c5d7 a2b3c5d8 a1b4c5d7 a1b4c5d8 a2b4c5d7 a2b4c5d8 a1b3c6d7 "
         "a1b3c6d8 a2b3c6d7 a2b3c6d8 a1b4c6d7 a1b4c6d8 a2b4c6d7 a2b4c6d8"},
        {"S66", "n[1-2][3-4][5-6]", "n135 n136 n235 n236 n145 n146 n245 n246"},
        {"S67", "n[1-2]-[3-4]", "n1-3 n1-4 n2-3 n2-4"},
        {"S68", "n[1]x[2]", "n1x2"},
        {"S69", "n-[1-2]", "n-1 n-2"},
        {"S70", "n.[1-2]", "n.1 n.2"},
        {"S71", "n1 n2\tn3", "n1 n2 n3"},
        {"S72", "n[1-2],m5,o[3-4,6,7-9]", "n1 n2 m5 o3 o4 o6 o7 o8 o9"},
        {"S73", "n[0001-0003],m5,o[009-011]", "n0001 n0002 n0003 m5 o009 o010 o011"},
        {"S74", "t02n13,t02n41,t02n43", "t02n13 t02n41 t02n43"},
        {"S75",
         "compute-b24-[1-3,5-9],compute-b25-[1,4,8]",
         "compute-b24-1 compute-b24-2 compute-b24-3 compute-b24-5 compute-b24-6 compute-b24-7 "
         "compute-b24-8 compute-b24-9 compute-b25-1 compute-b25-4 compute-b25-8"},
        {"S87", "n[18446744073709551615]", "n18446744073709551615"},
        {"S88", "n[2-3]m", "n2m n3m"},
        {"S89", "n1-2", "n1-2"},
    }));
    CAPTURE(std::get<0>(row), std::get<1>(row));
    CHECK(expand(std::get<1>(row)) == words(std::get<2>(row)));
}

TEST_CASE("hostlist: reference rows S01-S90 that Slurm rejects give exact errors", "[hostlist]") {
    // The >= 23.02.5 column for S11, S25 and S27: a missing ']' is an error.
    const auto row = GENERATE(table<std::string, std::string, std::string>({
        {"S10", "n[3-1]", "invalid range '3-1' at offset 2 (low bound above high bound)"},
        {"S11", "n[1-", "unterminated '[' at offset 1"},
        {"S18", "n[]", "invalid range '' at offset 2 (empty)"},
        {"S24", "n[a-c]", "invalid range 'a-c' at offset 2 (not a number)"},
        {"S25", "n[1-2", "unterminated '[' at offset 1"},
        {"S26", "n[1-2]]", "unexpected ']' at offset 6"},
        {"S27", "n[1,2", "unterminated '[' at offset 1"},
        {"S28", "n[-1]", "invalid range '-1' at offset 2 (negative bound)"},
        {"S29", "n[1-3:2]", "invalid range '1-3:2' at offset 2 (trailing characters)"},
        {"S48", "n[1-1000000]", "range '1-1000000' at offset 2 has more than 65536 hosts"},
        {"S78", "n[1-65537]", "range '1-65537' at offset 2 has more than 65536 hosts"},
        {"S79", "n[1-2,]", "invalid range '' at offset 6 (empty)"},
        {"S80", "n[,1]", "invalid range '' at offset 2 (empty)"},
        {"S81", "n[[1]]", "unexpected ']' at offset 5"},
        {"S82", "n[]x", "invalid range '' at offset 2 (empty)"},
        {"S83", "n[1-3/2]", "invalid range '1-3/2' at offset 2 (trailing characters)"},
        {"S84", "n[1-2-3]", "invalid range '1-2-3' at offset 2 (trailing characters)"},
        {"S85", "n[1--2]", "invalid range '1--2' at offset 2 (negative bound)"},
        {"S86", "n[0x1-2]", "invalid range '0x1-2' at offset 2 ('x' boxes are not supported)"},
        {"S90", "n[1-2]]x", "unexpected ']' at offset 6"},
    }));
    const std::string& input = std::get<1>(row);
    CAPTURE(std::get<0>(row), input);
    const Failure failure = hostlist_failure(input);
    CHECK(failure.code == "invalid_hostlist");
    CHECK(failure.message ==
          std::string(k_subject) + ": " + std::get<2>(row) + ": " + quoted(input));
}

TEST_CASE("hostlist: S49, S76 and S77 expand to whole ranges", "[hostlist]") {
    const auto row =
        GENERATE(table<std::string, std::string, std::size_t, std::string, std::string>({
            {"S49", "n[1-64]", 64, "n1", "n64"},
            {"S76", "n[1-65536]", 65536, "n1", "n65536"},
            {"S77", "n[0-65535]", 65536, "n0", "n65535"},
        }));
    CAPTURE(std::get<0>(row));
    const Hosts hosts = expand(std::get<1>(row));
    REQUIRE(hosts.size() == std::get<2>(row));
    CHECK(hosts.front() == std::get<3>(row));
    CHECK(hosts.back() == std::get<4>(row));
    CHECK(hosts[1] == "n" + std::to_string(std::get<3>(row) == "n1" ? 2 : 1));
}

TEST_CASE("hostlist: suffixes and multi-group names of Slurm >= 23.02.5 (V1b)", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"nid[001-002]-ib0", "nid001-ib0 nid002-ib0"},
        {"x1000c[0-1]s0b0n[0-1]", "x1000c0s0b0n0 x1000c0s0b0n1 x1000c1s0b0n0 x1000c1s0b0n1"},
        {"n[1-2]-ib", "n1-ib n2-ib"},
        {"host[5-9,1]", "host5 host6 host7 host8 host9 host1"},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(expand(std::get<0>(row)) == words(std::get<1>(row)));
}

TEST_CASE("hostlist: TensorFlow resolver vectors TFH1-TFH5", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"n1", "n1"},
        {"n[1,3]", "n1 n3"},
        {"n[1-3]", "n1 n2 n3"},
        {"n[1-2],m5,o[3-4,6,7-9]", "n1 n2 m5 o3 o4 o6 o7 o8 o9"},
        {"n[0001-0003],m5,o[009-011]", "n0001 n0002 n0003 m5 o009 o010 o011"},
        // TensorFlow's extra behaviours that agree with Slurm
        {"n[9-10]", "n9 n10"},
        {"n[009-11]", "n009 n010 n011"},
        {"n[ 1-2]", "n01 n02"},
        {"n[1- 2]", "n1 n2"},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(expand(std::get<0>(row)) == words(std::get<1>(row)));
}

TEST_CASE("hostlist: submitit vectors", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"compute-b24", "compute-b24"},
        {"compute-a1,compute-b2", "compute-a1 compute-b2"},
        {"compute-b2[1,2]", "compute-b21 compute-b22"},
        {"compute-b2[011,022]", "compute-b2011 compute-b2022"},
        {"compute-b2[1-3]", "compute-b21 compute-b22 compute-b23"},
        {"compute-b2[1-3,5,6,8]",
         "compute-b21 compute-b22 compute-b23 compute-b25 compute-b26 compute-b28"},
        {"compute-b2[1-3,5-6,8]",
         "compute-b21 compute-b22 compute-b23 compute-b25 compute-b26 compute-b28"},
        {"compute-b2[1-3,5-6,8],compute-a1",
         "compute-b21 compute-b22 compute-b23 compute-b25 compute-b26 compute-b28 compute-a1"},
        {"compute[042,044]", "compute042 compute044"},
        {"compute[042-043,045,048-049]", "compute042 compute043 compute045 compute048 compute049"},
        {"compute-b24-[1-3,5-9],compute-b25-[1,4,8]",
         "compute-b24-1 compute-b24-2 compute-b24-3 compute-b24-5 compute-b24-6 compute-b24-7 "
         "compute-b24-8 compute-b24-9 compute-b25-1 compute-b25-4 compute-b25-8"},
        // other-launchers.md says Slurm rejects this one; scontrol 22.05.8 prints
        // compute-b21 compute-b24 (an empty high bound means "= low"), and so do we.
        {"compute-b2[1-,4]", "compute-b21 compute-b24"},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(expand(std::get<0>(row)) == words(std::get<1>(row)));
}

TEST_CASE("hostlist: submitit's rejected vector is rejected", "[hostlist]") {
    const std::string input = "compute-b2[1,2,compute-b3]";
    CHECK(hostlist_failure(input).message ==
          std::string(k_subject) +
              ": invalid range 'compute-b3' at offset 15 (not a number): " + quoted(input));
}

TEST_CASE("hostlist: n[1-1000][1-1000] gives 1,000,000 hosts in Slurm's order", "[hostlist]") {
    const Hosts hosts = expand("n[1-1000][1-1000]");
    REQUIRE(hosts.size() == 1000000);
    CHECK(hosts[0] == "n11");
    CHECK(hosts[1] == "n12");
    CHECK(hosts[1000] == "n21");
    CHECK(hosts.back() == "n10001000");
}

// ---------------------------------------------------------------------------------------------
// Grammar details

TEST_CASE("hostlist: empty input and separators only give no host", "[hostlist]") {
    const auto input = GENERATE(as<std::string>{}, "", ",", " ", "\t", "\n", ",, \t\n,");
    CHECK(expand(input).empty());
}

TEST_CASE("hostlist: separators inside brackets do not split", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"a[1,2]b[3,4]", "a1b3 a1b4 a2b3 a2b4"},
        {"a[1, 2]", "a1 a02"},
        {"n[1,\t2]", "n1 n02"},
        {"x[1,2] [3,4]", "x1 x2 3 4"},
        {"n[1-2]\nm[3-4]", "n1 n2 m3 m4"},
        {"a],[1,2]", "a] 1 2"},
        // the last '[' opens the range list; a '[' without a ']' after it is literal text
        {"a[1,[2,3],4]", "a[1,2 a[1,3 4]"},
        {"n[1[2-3]", "n[12 n[13"},
        {"a[1,b[2,3]", "a[1,b2 a[1,b3"},
        // a prefix group runs to the last ']' before the next group; garbage after its low
        // bound is tolerated as in Slurm (`1]-2` is 1..2 with width 2)
        {"a[1]-2]b[5]", "a01b5 a02b5"},
        {"n[1]x[2,3]", "n1x2 n1x3"},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(expand(std::get<0>(row)) == words(std::get<1>(row)));
}

TEST_CASE("hostlist: numbers follow strtoul", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"n[0- -0]", "n0"},
        {"n[1-+2]", "n1 n2"},
        {"n[ +1]", "n001"},
        {"n[1-]", "n1"},
        {"n[\v1]", "n01"},
        {"n[00000000000000000000000000001-2]",
         "n00000000000000000000000000001 n00000000000000000000000000002"},
        // overflow saturates at ULONG_MAX, padded to the text's width as Slurm prints it
        {"n[99999999999999999999999]", "n00018446744073709551615"},
        {"n[18446744073709551614-18446744073709551615]",
         "n18446744073709551614 n18446744073709551615"},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(expand(std::get<0>(row)) == words(std::get<1>(row)));
}

TEST_CASE("hostlist: every hostlist error has its exact message", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"n[1-2],m[3", "unterminated '[' at offset 8"},
        {"[", "unterminated '[' at offset 0"},
        {"a[1]b[", "unterminated '[' at offset 5"},
        {"n[1]x]", "unexpected ']' at offset 5"},
        {"n[]]", "unexpected ']' at offset 3"},
        {"n[1,,2]", "invalid range '' at offset 4 (empty)"},
        {"n[1x]", "invalid range '1x' at offset 2 ('x' boxes are not supported)"},
        {"n[1-2x3]", "invalid range '1-2x3' at offset 2 ('x' boxes are not supported)"},
        {"n[-]", "invalid range '-' at offset 2 (not a number)"},
        {"n[- 1]", "invalid range '- 1' at offset 2 (negative bound)"},
        {"n[+-1]", "invalid range '+-1' at offset 2 (not a number)"},
        {"n[1- ]", "invalid range '1- ' at offset 2 (not a number)"},
        {"n[1-2 ]", "invalid range '1-2 ' at offset 2 (trailing characters)"},
        {"n[1 -]", "invalid range '1 -' at offset 2 (trailing characters)"},
        {"n[1a]", "invalid range '1a' at offset 2 (trailing characters)"},
        {"n[5,3-2]", "invalid range '3-2' at offset 4 (low bound above high bound)"},
        {"n[1- -2]", "range '1- -2' at offset 2 has more than 65536 hosts"},
        {"n[1-99999999999999999999999]",
         "range '1-99999999999999999999999' at offset 2 has more than 65536 hosts"},
        {"n[0-18446744073709551615]",
         "range '0-18446744073709551615' at offset 2 has more than 65536 hosts"},
        {"ok,n[3-1]", "invalid range '3-1' at offset 5 (low bound above high bound)"},
        // prefix groups: same item rules, at most 65536 values per group
        {"a[1-0]b[1]", "invalid range '1-0' at offset 2 (low bound above high bound)"},
        {"x[1-65536,1]y[1]", "bracket group at offset 1 expands to more than 65536 values"},
        {"x[1-65536,1]y[1]z[1]", "bracket group at offset 1 expands to more than 65536 values"},
        // long and unprintable items are shortened and escaped inside the quotes
        {"n[0123456789012345678901234567890123456789x]",
         "invalid range '0123456789012345678901234567890123456789...' at offset 2 ('x' boxes "
         "are not supported)"},
        {"n[1\x01]", "invalid range '1\\x01' at offset 2 (trailing characters)"},
    }));
    const std::string& input = std::get<0>(row);
    CAPTURE(input);
    const Failure failure = hostlist_failure(input);
    CHECK(failure.code == "invalid_hostlist");
    CHECK(failure.message ==
          std::string(k_subject) + ": " + std::get<1>(row) + ": " + quoted(input));
}

TEST_CASE("hostlist: a bracket with more than 65536 ranges is an error", "[hostlist]") {
    // Slurm's MAX_RANGES: with more items scontrol aborts.
    std::string items;
    for (int i = 0; i < 65535; ++i) {
        items += "1,";
    }
    CHECK(expand("n[" + items + "1]").size() == 65536);
    const std::string too_many = "n[" + items + "1,1]";
    CHECK(hostlist_failure(too_many).message ==
          std::string(k_subject) +
              ": bracket group at offset 1 has more than 65536 ranges: " + quoted(too_many));
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
    const Failure failure = hostlist_failure(std::get<0>(row));
    CHECK(failure.code == "too_large");
    CHECK(failure.message == std::string(k_subject) + ": " + std::get<1>(row));
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

// ---------------------------------------------------------------------------------------------
// Compression

TEST_CASE("hostlist: compression matches scontrol show hostlist", "[hostlist]") {
    // hostlists.md section 6, and scontrol 22.05.8 outputs checked by hand.
    const auto row = GENERATE(table<std::string, std::string>({
        {"n1 n2 n3 n5", "n[1-3,5]"},
        {"n09 n10 n11", "n[09-11]"},
        {"n9 n10 n11", "n[9-11]"},
        {"n3 n1 n2 n1", "n[3,1-2,1]"},
        {"x1-y1 x1-y2 x2-y1 x2-y2", "x1-y[1-2],x2-y[1-2]"},
        {"n1 n01", "n[1,01]"},
        {"n5", "n5"},
        {"n5 m", "n5,m"},
        {"n5 n5", "n[5,5]"},
        {"n5 n5 n6", "n[5,5-6]"},
        {"5 6", "[5-6]"},
        {"n1 n2 m1 n3", "n[1-2],m1,n3"},
        {"n08 n9", "n[08,9]"},
        {"n1 n02", "n[1,02]"},
        {"n98 n99 n100 n0101", "n[98-100,0101]"},
        {"n00 n0 n1", "n[00,0-1]"},
        {"n9 n010 n011", "n[9,010-011]"},
        {"a]1 a]2", "a][1-2]"},
        {"n5]", "n5]"},
        {"x x", "x,x"},
        {"n1-2 n1-3", "n1-[2-3]"},
        {"n1 n2 n3 x n4 n5", "n[1-3],x,n[4-5]"},
        {"n1 x n01 y1 y01 a1-b1 a1-b2", "n1,x,n01,y[1,01],a1-b[1-2]"},
        // (scontrol 22.05 crashes on this one: a range ending at ULONG_MAX)
        {"n18446744073709551614 n18446744073709551615",
         "n[18446744073709551614-18446744073709551615]"},
    }));
    CAPTURE(std::get<0>(row));
    const Hosts hosts = words(std::get<0>(row));
    CHECK(tfslurm::compress_hostlist(hosts) == std::get<1>(row));
    CHECK(expand(std::get<1>(row)) == hosts);
}

TEST_CASE("hostlist: compression keeps odd but writable hosts literal", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        // a number above ULONG_MAX cannot go into a bracket
        {"n99999999999999999999999 n1", "n99999999999999999999999,n1"},
        {"n1 n99999999999999999999999", "n1,n99999999999999999999999"},
        {"] ]1 1]", "],]1,1]"}, // as scontrol
        {"n1\r n2\r", "n1\r,n2\r"},
        {"n00000000000000000000000000001 n00000000000000000000000000002", // as scontrol
         "n[00000000000000000000000000001-00000000000000000000000000002]"},
    }));
    CAPTURE(std::get<0>(row));
    const Hosts hosts = words(std::get<0>(row));
    CHECK(tfslurm::compress_hostlist(hosts) == std::get<1>(row));
    CHECK(expand(std::get<1>(row)) == hosts);
}

TEST_CASE("hostlist: compression of nothing is empty", "[hostlist]") {
    CHECK(tfslurm::compress_hostlist({}).empty());
}

TEST_CASE("hostlist: compression rejects hosts that cannot be written", "[hostlist]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"", "empty"},
        {"n[1", "contains '['"},
        {"a,b", "contains ','"},
        {"a b", "contains a space"},
        {"a\tb", "contains a tab"},
        {"a\nb", "contains a newline"},
    }));
    const Hosts hosts{"n1", std::get<0>(row)};
    const Failure failure =
        failure_of([&] { static_cast<void>(tfslurm::compress_hostlist(hosts, "--nodes")); });
    CHECK(failure.code == "invalid_argument");
    CHECK(failure.message == "--nodes: host 1 cannot be written in a hostlist (" +
                                 std::get<1>(row) + "): " + quoted(std::get<0>(row)));
}

// ---------------------------------------------------------------------------------------------
// Properties (seeded, so reproducible)

namespace {

/// A generated hostlist together with the hosts Slurm expands it to, computed independently
/// of src/hostlist.cpp (plain recursion in Slurm's order).
struct Generated {
    std::string list;
    Hosts hosts;
    std::size_t range_sizes = 0; ///< sum over tokens of the product of their range-list sizes
};

class ListGenerator {
  public:
    explicit ListGenerator(std::uint32_t seed) : m_rng(seed) {}

    std::size_t below(std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(m_rng);
    }

    static std::string padded(std::uint64_t value, std::size_t width) {
        std::string digits = std::to_string(value);
        return digits.size() < width ? std::string(width - digits.size(), '0') + digits : digits;
    }

    /// One bracket group: its text and the texts of its values, in order.
    std::pair<std::string, Hosts> group() {
        std::string text = "[";
        Hosts values;
        const std::size_t items = 1 + below(3);
        for (std::size_t i = 0; i < items; ++i) {
            const std::uint64_t low = below(4) == 0 ? below(1000) : below(20);
            const std::uint64_t high = low + below(5);
            const std::size_t width = std::to_string(low).size() + (below(3) == 0 ? below(3) : 0);
            text += (i > 0 ? "," : "") + padded(low, width);
            if (high != low || below(2) == 0) {
                text += "-" + std::to_string(high);
            }
            for (std::uint64_t v = low; v <= high; ++v) {
                values.push_back(padded(v, width));
            }
        }
        return {text + "]", values};
    }

    std::string name() {
        static const std::vector<std::string> names = {"n", "node-", "gpu", "r1n", "x.", "", "a-b"};
        return names[below(names.size())];
    }

    Generated list() {
        Generated out;
        const std::size_t tokens = 1 + below(4);
        for (std::size_t t = 0; t < tokens; ++t) {
            if (t > 0) {
                out.list += below(4) == 0 ? " " : ",";
            }
            if (below(5) == 0) {
                const std::string literal =
                    name() + (below(2) == 0 ? std::to_string(below(100)) : "z");
                out.list += literal;
                out.hosts.push_back(literal);
                out.range_sizes += 1;
                continue;
            }
            // texts[0] G1 texts[1] ... Gk texts[k]
            const std::size_t groups = 1 + (below(3) == 0 ? below(3) : 0);
            std::vector<std::string> texts{name()};
            std::vector<Hosts> values;
            std::size_t product = 1;
            std::string token = texts[0];
            for (std::size_t g = 0; g < groups; ++g) {
                auto [text, group_values] = group();
                product *= group_values.size();
                values.push_back(group_values);
                texts.push_back(g + 1 == groups ? (below(4) == 0 ? "-ib" : "") : name() + "z");
                token += text + texts.back();
            }
            out.list += token;
            out.range_sizes += product;
            // Slurm's order: G(k-1) outermost, then G(k-2) ... G1, Gk innermost.
            std::vector<std::string> chosen(groups);
            const std::function<void(std::size_t)> walk = [&](std::size_t level) {
                if (level == 0) {
                    for (const auto& last : values[groups - 1]) {
                        std::string host = texts[0];
                        for (std::size_t g = 0; g + 1 < groups; ++g) {
                            host += chosen[g] + texts[g + 1];
                        }
                        out.hosts.push_back(host + last + texts[groups]);
                    }
                    return;
                }
                const std::size_t g = level - 1; // level L walks group G_L (0-based G_{L-1})
                for (const auto& value : values[g]) {
                    chosen[g] = value;
                    walk(level - 1);
                }
            };
            walk(groups - 1);
        }
        return out;
    }

    /// Hosts as a compressor sees them: runs, padding, duplicates, shuffles and literals.
    Hosts hosts() {
        static const std::vector<std::string> prefixes = {
            "n", "node-", "", "x]", "a1-", "c.", "n01-"};
        Hosts out;
        const std::size_t pieces = 1 + below(5);
        for (std::size_t p = 0; p < pieces; ++p) {
            if (below(6) == 0) {
                out.push_back(below(2) == 0 ? "login" : "n" + std::string(21, '9'));
                continue;
            }
            const std::string& prefix = prefixes[below(prefixes.size())];
            std::uint64_t value = below(4) == 0 ? 95 + below(10) : below(15);
            const std::size_t width = below(3) == 0 ? 1 + below(4) : 0;
            const std::size_t length = 1 + below(10);
            for (std::size_t i = 0; i < length; ++i) {
                out.push_back(prefix + padded(value, width));
                const std::size_t step = below(8);
                value = step < 5   ? value + 1
                        : step < 7 ? value + below(4)
                                   : value - (value > 0 ? 1 : 0);
            }
            if (below(4) == 0) {
                out.push_back(out[below(out.size())]);
            }
        }
        return out;
    }

  private:
    std::mt19937 m_rng;
};

} // namespace

TEST_CASE("hostlist: order, duplicates and zero padding are kept (property)", "[hostlist]") {
    ListGenerator generator(20240905);
    for (int i = 0; i < 1500; ++i) {
        const Generated generated = generator.list();
        CAPTURE(generated.list);
        REQUIRE(expand(generated.list) == generated.hosts);
    }
}

TEST_CASE("hostlist: the count is the sum of range sizes (property)", "[hostlist]") {
    ListGenerator generator(7);
    for (int i = 0; i < 1500; ++i) {
        const Generated generated = generator.list();
        CAPTURE(generated.list);
        REQUIRE(expand(generated.list).size() == generated.range_sizes);
    }
}

TEST_CASE("hostlist: expand(compress(hosts)) == hosts (property)", "[hostlist]") {
    ListGenerator generator(11);
    for (int i = 0; i < 3000; ++i) {
        const Hosts hosts = i % 2 == 0 ? generator.hosts() : generator.list().hosts;
        const std::string compressed = tfslurm::compress_hostlist(hosts);
        CAPTURE(compressed);
        REQUIRE(expand(compressed) == hosts);
    }
}

TEST_CASE("hostlist: random input only ever throws tfslurm::Error (property)", "[hostlist]") {
    std::mt19937 rng(42);
    const std::string alphabet = "[[]],,--0123456789 \t\nnx+a.";
    for (int i = 0; i < 20000; ++i) {
        std::string input(std::uniform_int_distribution<std::size_t>(0, 40)(rng), '\0');
        for (char& c : input) {
            c = std::uniform_int_distribution<int>(0, 7)(rng) == 0
                    ? static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng))
                    : alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(
                          rng)];
        }
        CAPTURE(input);
        REQUIRE(tfslurm::fuzz::check_hostlist(input).empty());
        REQUIRE(tfslurm::fuzz::check_counts(input).empty());
        REQUIRE(tfslurm::fuzz::check_ports(input).empty());
    }
}

TEST_CASE("hostlist: pathological inputs finish", "[hostlist]") {
    // Each of these once could be quadratic; they must stay linear.
    const auto input = GENERATE(
        as<std::string>{},
        std::string(200000, '['),
        std::string(200000, ']'),
        [] {
            std::string s;
            for (int i = 0; i < 50000; ++i) {
                s += "a[,";
            }
            return s;
        }(),
        [] {
            std::string s;
            for (int i = 0; i < 50000; ++i) {
                s += "[1]";
            }
            return s;
        }(),
        [] {
            std::string s = "n";
            for (int i = 0; i < 50000; ++i) {
                s += "]x[";
            }
            return s + "1]";
        }());
    CHECK(tfslurm::fuzz::check_hostlist(input).empty());
}

TEST_CASE("hostlist: fuzz regressions replay without violations", "[hostlist][counts][ports]") {
    namespace fs = std::filesystem;
    const std::vector<std::pair<std::string, std::function<std::string(std::string_view)>>>
        targets = {
            {"hostlist", tfslurm::fuzz::check_hostlist},
            {"counts", tfslurm::fuzz::check_counts},
            {"ports", tfslurm::fuzz::check_ports},
        };
    for (const auto& [target, check] : targets) {
        const fs::path dir = fs::path(TFSLURM_FUZZ_DIR) / "regressions" / target;
        REQUIRE(fs::is_directory(dir));
        for (const auto& entry : fs::directory_iterator(dir)) {
            if (entry.path().filename().string().rfind("README", 0) == 0) {
                continue;
            }
            std::ifstream file(entry.path(), std::ios::binary);
            const std::string input{std::istreambuf_iterator<char>(file),
                                    std::istreambuf_iterator<char>()};
            CAPTURE(entry.path().string());
            CHECK(check(input).empty());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Counts per node

namespace {

using Counts = std::vector<std::uint32_t>;

Failure counts_failure(const std::string& text) {
    return failure_of(
        [&] { static_cast<void>(tfslurm::expand_counts(text, "SLURM_TASKS_PER_NODE")); });
}

} // namespace

TEST_CASE("counts: TensorFlow vectors TFT1-TFT5", "[counts]") {
    const auto row = GENERATE(table<std::string, Counts>({
        {"2", {2}},
        {"2,1,3", {2, 1, 3}},
        {"3(x2),2,1", {3, 3, 2, 1}},
        {"3(x2),2,11(x4)", {3, 3, 2, 11, 11, 11, 11}},
        {"13(x10)", {13, 13, 13, 13, 13, 13, 13, 13, 13, 13}},
        {"0", {0}},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(tfslurm::expand_counts(std::get<0>(row), "SLURM_STEP_TASKS_PER_NODE") ==
          std::get<1>(row));
}

TEST_CASE("counts: Slurm's encoding examples work both ways", "[counts]") {
    const auto row = GENERATE(table<Counts, std::string>({
        {{2, 2, 2, 1}, "2(x3),1"},
        {{1}, "1"},
        {{3, 3, 2, 1}, "3(x2),2,1"},
        {{1, 2, 1}, "1,2,1"},
        {{4, 4, 4, 4}, "4(x4)"},
        {{1, 1, 2, 2}, "1(x2),2(x2)"},
        {Counts(10, 13), "13(x10)"},
        {{2, 1, 1, 3}, "2,1(x2),3"},
        // observed on the test cluster
        {{2, 2, 2}, "2(x3)"},
        {{2, 1, 1}, "2,1(x2)"},
        {{3, 2, 2}, "3,2(x2)"},
        {{4, 2, 2, 2}, "4,2(x3)"},
        {{4294967295U, 4294967295U}, "4294967295(x2)"},
    }));
    CAPTURE(std::get<1>(row));
    CHECK(tfslurm::compress_counts(std::get<0>(row)) == std::get<1>(row));
    CHECK(tfslurm::expand_counts(std::get<1>(row), "SLURM_TASKS_PER_NODE") == std::get<0>(row));
}

TEST_CASE("counts: compress of nothing is empty, (x1) is accepted but never written", "[counts]") {
    CHECK(tfslurm::compress_counts({}).empty());
    CHECK(tfslurm::expand_counts("5(x1),5", "C") == Counts{5, 5});
    CHECK(tfslurm::compress_counts({5, 5}) == "5(x2)");
}

TEST_CASE("counts: every error has its exact message", "[counts]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"", "empty list"},
        {"2(x)", "expected a number at offset 3"},
        {"(x2)", "expected a number at offset 0"},
        {"2x3", "expected '(x' or ',' at offset 1"},
        {" 2", "expected a number at offset 0"},
        {"2 ,1", "expected '(x' or ',' at offset 1"},
        {"2(x3),", "expected a number at offset 6"},
        {",1", "expected a number at offset 0"},
        {"1,,2", "expected a number at offset 2"},
        {"-1", "expected a number at offset 0"},
        {"+1", "expected a number at offset 0"},
        {"2(3)", "expected '(x' or ',' at offset 1"},
        {"2(", "expected '(x' or ',' at offset 1"},
        {"2(x0)", "repetition must be at least 1 at offset 3"},
        {"2(x3", "expected ')' at offset 4"},
        {"2(x3]", "expected ')' at offset 4"},
        {"2(x3)1", "expected ',' at offset 5"},
        {"2(x3)(x2)", "expected ',' at offset 5"},
        {"4294967296", "number too large at offset 0"},
        {"1,99999999999999999999999", "number too large at offset 2"},
        {"1(x4294967296)", "number too large at offset 3"},
    }));
    const std::string& input = std::get<0>(row);
    CAPTURE(input);
    const Failure failure = counts_failure(input);
    CHECK(failure.code == "invalid_tasks_per_node");
    CHECK(failure.message == "SLURM_TASKS_PER_NODE: " + std::get<1>(row) + ": " + quoted(input));
}

TEST_CASE("counts: the total cap fails fast with too_large", "[counts]") {
    CHECK(tfslurm::expand_counts("1(x4194303),2", "C").size() == 4194304);
    const auto input = GENERATE(
        as<std::string>{}, "1(x4194305)", "1(x4194304),1", "1(x4294967295),1(x4294967295)");
    const Failure failure = counts_failure(input);
    CHECK(failure.code == "too_large");
    CHECK(failure.message == "SLURM_TASKS_PER_NODE: expands to more than 4194304 entries");
}

TEST_CASE("counts: compress(expand(text)) normalizes and round-trips (property)", "[counts]") {
    std::mt19937 rng(3);
    for (int i = 0; i < 2000; ++i) {
        Counts counts(std::uniform_int_distribution<std::size_t>(1, 12)(rng));
        for (auto& count : counts) {
            count = std::uniform_int_distribution<std::uint32_t>(0, 3)(rng);
        }
        const std::string text = tfslurm::compress_counts(counts);
        CAPTURE(text);
        REQUIRE(tfslurm::expand_counts(text, "C") == counts);
    }
}

// ---------------------------------------------------------------------------------------------
// Port lists

namespace {

using Ports = std::vector<std::uint16_t>;

Failure ports_failure(const std::string& text) {
    return failure_of(
        [&] { static_cast<void>(tfslurm::expand_ports(text, "SLURM_STEP_RESV_PORTS")); });
}

} // namespace

TEST_CASE("ports: SLURM_STEP_RESV_PORTS values expand", "[ports]") {
    const auto row = GENERATE(table<std::string, Ports>({
        {"12000-12003", {12000, 12001, 12002, 12003}},
        {"12000,12005-12006", {12000, 12005, 12006}},
        {"12000", {12000}},
        {"1,65535", {1, 65535}},
        {"7,7,5-6", {7, 7, 5, 6}},
        {"65535-65535", {65535}},
        {"00080", {80}},
    }));
    CAPTURE(std::get<0>(row));
    CHECK(tfslurm::expand_ports(std::get<0>(row), "SLURM_STEP_RESV_PORTS") == std::get<1>(row));
}

TEST_CASE("ports: a list of 65536 ports is accepted", "[ports]") {
    const Ports ports = tfslurm::expand_ports("1-65535,1", "P");
    REQUIRE(ports.size() == 65536);
    CHECK(ports.front() == 1);
    CHECK(ports[65534] == 65535);
    CHECK(ports.back() == 1);
}

TEST_CASE("ports: every error has its exact message", "[ports]") {
    const auto row = GENERATE(table<std::string, std::string>({
        {"", "empty list"},
        {"0", "port out of range 1-65535 at offset 0"},
        {"65536", "port out of range 1-65535 at offset 0"},
        {"1-70000", "port out of range 1-65535 at offset 2"},
        {"99999999999999999999999", "port out of range 1-65535 at offset 0"},
        {"12001-12000", "reversed range at offset 0"},
        {"1,12001-12000", "reversed range at offset 2"},
        {"12000,", "expected a number at offset 6"},
        {",12000", "expected a number at offset 0"},
        {"12000,,1", "expected a number at offset 6"},
        {"12000 ,1", "expected '-' or ',' at offset 5"},
        {" 12000", "expected a number at offset 0"},
        {"1-2-3", "expected ',' at offset 3"},
        {"1-", "expected a number at offset 2"},
        {"a", "expected a number at offset 0"},
        {"-1", "expected a number at offset 0"},
        {"[12000-12001]", "expected a number at offset 0"},
        {"12000x", "expected '-' or ',' at offset 5"},
    }));
    const std::string& input = std::get<0>(row);
    CAPTURE(input);
    const Failure failure = ports_failure(input);
    CHECK(failure.code == "invalid_ports");
    CHECK(failure.message == "SLURM_STEP_RESV_PORTS: " + std::get<1>(row) + ": " + quoted(input));
}

TEST_CASE("ports: more than 65536 entries fail with too_large", "[ports]") {
    const Failure failure = ports_failure("1-65535,1-2");
    CHECK(failure.code == "too_large");
    CHECK(failure.message == "SLURM_STEP_RESV_PORTS: expands to more than 65536 ports");
}
