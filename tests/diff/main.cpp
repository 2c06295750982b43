// SPDX-License-Identifier: MIT
// Differential test: tfslurm's hostlist code against Slurm itself.
//
//   tfslurm_diff_hostlist [--scontrol PATH] [--seed N] [--verbose]
//
// Writes a two-line slurm.conf into a temporary directory, generates a seeded corpus of valid
// and invalid hostlists (the examples of tests/data/hostlists.tsv, random grammar-aware lists
// and mutations of them), runs `scontrol show hostnames LIST` for each (posix_spawn, no shell,
// SLURM_CONF set) and compares the result with expand_hostlist(). Then compares compress_hostlist()
// with `scontrol show hostlist` on valid host lists.
//
// tfslurm's grammar is Slurm's since 23.02.5, the same in 24.11 and 26.05 (man page, HOSTLISTS),
// so a difference counts as expected only when it is fully explained by one of the places
// where tfslurm refuses on purpose, or by 22.05's older rules (when the scontrol is 22.05's:
// `scontrol --version`). For most of them the list is re-expanded with Slurm's rules (its own
// tokenizer, then token by token) and the result must then equal Slurm's output exactly; the
// rules that made a difference name it:
//   - missing ']'   : 22.05 "repairs" a token whose last '[' has no ']' (`n[1-` -> `n]`),
//                     >= 23.02 rejects it;
//   - suffix        : 22.05 rejects text after ']' (`n[1-2]x`), >= 23.02.5 appends it;
//   - newline       : not a separator for 22.05 (hosts then contain a newline);
//   - earlier group : Slurm (every release) ignores an error in the third-from-last or an
//                     earlier bracket group (`rc = MAX(rc, rc1)` drops the -1): those hosts
//                     silently vanish, where tfslurm refuses the list;
//   - number > ULONG: Slurm re-prints the trailing number of a literal host through an
//                     unsigned long (`n99999999999999999999999` -> `n00018446744073709551615`);
// and, without re-expansion:
//   - total cap     : tfslurm refuses lists of more than k_max_expanded_hosts hosts;
//   - bytes         : tfslurm refuses control and non-ASCII bytes that Slurm keeps;
//   - Slurm bug near ULONG_MAX: scontrol crashes, hangs or wraps around on ranges that end
//                     at 18446744073709551615 (only for lists holding a 20-digit number);
//   - not compared  : scontrol timed out printing over 10000 hosts (quadratic in ranges);
//   - compression behind a ']': Slurm writes `x][5,7]`, which no Slurm reads back (the comma
//                     cuts it); tfslurm writes `x]5,x]7`.
// Anything else fails the test and is printed with Slurm's output and ours.
// Exit status: 0 when every difference is explained, 1 otherwise or when scontrol is missing.
//
// Files: scontrol.{hpp,cpp} runs the oracle, cases.{hpp,cpp} makes the inputs,
// emulate_slurm.{hpp,cpp} re-applies Slurm's rules, classify.{hpp,cpp} sorts the differences.

#include "cases.hpp"
#include "classify.hpp"
#include "emulate_slurm.hpp"
#include "process.hpp"
#include "scontrol.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::diff {
namespace {

constexpr std::uint64_t k_default_seed = 20240905;
constexpr std::size_t k_max_argument = 100000; // stay well below Linux' MAX_ARG_STRLEN

struct Options {
    std::string scontrol;
    std::uint64_t seed = k_default_seed;
    bool verbose = false;
};

/// Whether `scontrol --version` (`slurm 22.05.8`) names a release before 23.02. An answer
/// that names no release counts as a new one: only the rules every release shares apply.
bool release_before_2302(const std::string& version) {
    const std::size_t space = version.find(' ');
    if (space == std::string::npos) {
        return false;
    }
    unsigned year = 0;
    unsigned month = 0;
    if (std::sscanf(version.c_str() + space + 1, "%u.%u", &year, &month) != 2) {
        return false;
    }
    return year < 23 || (year == 23 && month < 2);
}

Options parse_options(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--scontrol" && i + 1 < argc) {
            options.scontrol = argv[++i];
        } else if (arg == "--seed" && i + 1 < argc) {
            options.seed = std::stoull(argv[++i]);
        } else if (arg == "--verbose") {
            options.verbose = true;
        } else {
            throw std::invalid_argument("usage: tfslurm_diff_hostlist [--scontrol PATH] "
                                        "[--seed N] [--verbose]");
        }
    }
    return options;
}

int run(const Options& options) {
    std::string scontrol_path =
        options.scontrol.empty() ? find_in_path("scontrol") : options.scontrol;
    if (scontrol_path.empty() || access(scontrol_path.c_str(), X_OK) != 0) {
        std::cout << "FAIL: scontrol not found (install slurm-client or pass --scontrol PATH)\n";
        return 1;
    }
    const SlurmConf conf;
    const Scontrol scontrol(scontrol_path, conf.file());
    const auto started = std::chrono::steady_clock::now();
    const std::string version = scontrol.version();
    const bool before_2302 = release_before_2302(version);
    std::cout << "oracle: " << scontrol_path << " (" << (version.empty() ? "no version" : version)
              << ")\n";

    // Sanity check: the oracle itself must work.
    const SlurmResult probe = interpret(scontrol.show("hostnames", "n[1-2]"));
    if (probe.kind != SlurmResult::Kind::hosts ||
        probe.hosts != std::vector<std::string>{"n1", "n2"}) {
        std::cout << "FAIL: " << scontrol_path << " does not work: " << describe(probe) << "\n";
        return 1;
    }

    Generator generator(options.seed);
    std::vector<std::string> lists = reference_lists();
    lists.insert(lists.end(), edge_lists().begin(), edge_lists().end());
    const std::size_t references = lists.size();
    for (std::size_t i = 0; i < 260; ++i) {
        lists.push_back(generator.list());
    }
    for (std::size_t i = 0; i < 4; ++i) {
        lists.push_back(generator.long_list());
    }
    // Mutating lists of thousands of hosts would only slow the test down.
    std::vector<std::string> sources;
    for (const auto& list : reference_lists()) {
        const OurResult ours = expand_ours(list);
        if (ours.kind != OurResult::Kind::hosts || ours.hosts.size() <= 1000) {
            sources.push_back(list);
        }
    }
    for (std::size_t i = 0; i < 220; ++i) {
        lists.push_back(generator.mutate(i % 3 == 0 ? generator.pick(sources) : generator.list()));
    }

    Report report;
    Report compress_report;
    std::size_t identical_hosts = 0;
    std::size_t identical_rejections = 0;
    std::vector<std::vector<std::string>> host_lists;
    for (const auto& list : lists) {
        if (list.size() > k_max_argument || list.find('\0') != std::string::npos) {
            continue;
        }
        const SlurmResult slurm = interpret(scontrol.show("hostnames", list));
        if (options.verbose) {
            std::cout << printable(list) << "  ->  " << describe(slurm) << "\n";
        }
        if (compare_expansion(list, slurm, before_2302, report)) {
            if (slurm.kind == SlurmResult::Kind::hosts) {
                ++identical_hosts;
                // Folding the list as it is visited must equal compressing its expansion,
                // both in what they write and in what they refuse (a host with a '[').
                const auto attempt = [](const auto& compress) -> std::string {
                    try {
                        return compress();
                    } catch (const tfslurm::Error& error) {
                        return std::string("error: ") + error.what();
                    }
                };
                const std::string visited = attempt([&] {
                    tfslurm::HostlistCompressor compressor;
                    tfslurm::visit_hostlist(list, compressor);
                    return compressor.finish();
                });
                const std::string expected =
                    attempt([&] { return tfslurm::compress_hostlist(slurm.hosts); });
                if (visited != expected) {
                    compress_report.unexpected("HostlistCompressor folds \"" + printable(list) +
                                               "\" into \"" + printable(visited) +
                                               "\", compress_hostlist into \"" +
                                               printable(expected) + "\"");
                }
                if (!slurm.hosts.empty() && slurm.hosts.size() <= 5000) {
                    host_lists.push_back(slurm.hosts);
                }
            } else {
                ++identical_rejections;
            }
        }
    }
    std::cout << "expand: " << lists.size() << " lists (" << references
              << " reference, the rest generated with seed " << options.seed
              << "): " << identical_hosts + identical_rejections << " identical to scontrol ("
              << identical_hosts << " expanded, " << identical_rejections << " rejected by both)\n";
    report.print();

    // Compression: ours must round-trip; compare with `scontrol show hostlist`.
    for (std::size_t i = 0; i < 200; ++i) {
        host_lists.push_back(generator.hosts());
    }
    std::size_t compared = 0;
    std::size_t same = 0;
    std::size_t round_trips = 0;
    std::size_t unwritable = 0;
    for (const auto& hosts : host_lists) {
        std::string ours;
        try {
            ours = tfslurm::compress_hostlist(hosts);
        } catch (const tfslurm::Error&) {
            ++unwritable; // hosts such as `n[12` cannot be written in a hostlist at all
            continue;
        }
        std::vector<std::string> back;
        try {
            back = tfslurm::expand_hostlist(ours);
        } catch (const tfslurm::Error& error) {
            compress_report.unexpected("compress_hostlist output \"" + printable(ours) +
                                       "\" does not expand: " + error.what());
            continue;
        }
        if (back != hosts) {
            compress_report.unexpected("compress_hostlist output \"" + printable(ours) +
                                       "\" does not round-trip: " + describe_hosts(back));
            continue;
        }
        ++round_trips;
        std::string joined;
        for (const auto& host : hosts) {
            joined += (joined.empty() ? "" : ",") + host;
        }
        if (joined.size() > k_max_argument) {
            continue;
        }
        const test::Result output = scontrol.show("hostlist", joined);
        ++compared;
        std::string theirs = output.out;
        if (!theirs.empty() && theirs.back() == '\n') {
            theirs.pop_back();
        }
        if (theirs == ours) {
            ++same;
        } else if (std::any_of(hosts.begin(), hosts.end(), [](const std::string& host) {
                       Emulation unused;
                       return literal_slurm(host, unused) != host;
                   })) {
            compress_report.expected("host number above ULONG_MAX (Slurm re-prints it)",
                                     joined,
                                     "slurm: " + printable(theirs) +
                                         "; tfslurm: " + printable(ours));
        } else if (const SlurmResult back_in_slurm = interpret(scontrol.show("hostnames", theirs));
                   back_in_slurm.kind != SlurmResult::Kind::hosts || back_in_slurm.hosts != hosts) {
            compress_report.expected("Slurm's hostlist does not read back (a ',' in a group "
                                     "behind a ']'), tfslurm's does",
                                     joined,
                                     "slurm: " + printable(theirs) +
                                         "; tfslurm: " + printable(ours));
        } else {
            compress_report.unexpected("compression of \"" + printable(joined, 300) +
                                       "\"\n    slurm: " + printable(theirs, 300) +
                                       "\n    tfslurm: " + printable(ours, 300));
        }
    }
    std::cout << "compress: " << host_lists.size() << " host lists (" << unwritable
              << " with a host that no hostlist can hold, such as `n[12`): " << round_trips
              << " round-trip through expand_hostlist; " << compared
              << " compared with `scontrol show hostlist`: " << same << " identical\n";
    compress_report.print();

    const auto seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cout << "scontrol: " << seconds << " s\n";
    const std::size_t unexpected = report.unexpected_count() + compress_report.unexpected_count();
    if (unexpected > 0) {
        std::cout << "FAIL: " << unexpected << " unexplained differences\n";
        return 1;
    }
    std::cout << "PASS\n";
    return 0;
}

} // namespace
} // namespace tfslurm::diff

int main(int argc, char** argv) {
    try {
        return tfslurm::diff::run(tfslurm::diff::parse_options(argc, argv));
    } catch (const std::exception& error) {
        std::cout << "FAIL: " << error.what() << "\n";
        return 1;
    }
}
