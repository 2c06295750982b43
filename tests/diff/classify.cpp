// SPDX-License-Identifier: MIT
#include "classify.hpp"

#include "emulate_slurm.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostlist.hpp>

#include <iostream>
#include <utility>

namespace tfslurm::diff {

namespace {

constexpr std::size_t k_examples_per_category = 3;

bool equal_to_slurm(const Emulation& emulation, const SlurmResult& slurm) {
    if (!emulation.complete) {
        return false;
    }
    if (!emulation.valid) {
        return slurm.kind == SlurmResult::Kind::rejected;
    }
    return slurm.kind == SlurmResult::Kind::hosts && slurm.hosts == emulation.lines;
}

} // namespace

OurResult expand_ours(const std::string& list) {
    OurResult result;
    try {
        result.hosts = tfslurm::expand_hostlist(list, "list");
    } catch (const tfslurm::Error& error) {
        result.kind = error.code() == tfslurm::Errc::too_large ? OurResult::Kind::too_large
                                                               : OurResult::Kind::rejected;
        result.message = error.what();
    }
    return result;
}

std::string printable(std::string_view text, std::size_t limit) {
    std::string out;
    for (const char c : text.substr(0, limit)) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += "\\x" + std::to_string(static_cast<unsigned char>(c));
        } else {
            out.push_back(c);
        }
    }
    if (text.size() > limit) {
        out += "... (" + std::to_string(text.size()) + " bytes)";
    }
    return out;
}

std::string describe_hosts(const std::vector<std::string>& hosts) {
    std::string out = std::to_string(hosts.size()) + " hosts:";
    for (std::size_t i = 0; i < hosts.size() && i < 12; ++i) {
        out += " " + printable(hosts[i], 40);
    }
    if (hosts.size() > 12) {
        out += " ... " + printable(hosts.back(), 40);
    }
    return out;
}

std::string describe(const SlurmResult& result) {
    switch (result.kind) {
    case SlurmResult::Kind::hosts:
        return describe_hosts(result.hosts);
    case SlurmResult::Kind::rejected:
        return "rejected (" + printable(result.detail) + ")";
    case SlurmResult::Kind::failed:
        break;
    }
    return "FAILED (" + printable(result.detail) + ")";
}

std::string describe(const OurResult& result) {
    return result.kind == OurResult::Kind::hosts ? describe_hosts(result.hosts)
                                                 : "error: " + printable(result.message, 300);
}

void Report::expected(const std::string& category,
                      const std::string& list,
                      const std::string& why) {
    auto& entry = m_expected[category];
    ++entry.count;
    if (entry.examples.size() < k_examples_per_category) {
        entry.examples.push_back(printable(list, 80) + "  ->  " + why);
    }
}

void Report::unexpected(const std::string& text) {
    ++m_unexpected;
    std::cout << "UNEXPECTED " << text << "\n";
}

void Report::print() const {
    for (const auto& [category, entry] : m_expected) {
        std::cout << "  expected difference: " << category << ": " << entry.count << "\n";
        for (const auto& example : entry.examples) {
            std::cout << "      e.g. " << example << "\n";
        }
    }
}

bool compare_expansion(const std::string& list,
                       const SlurmResult& slurm,
                       bool before_2302,
                       Report& report) {
    const OurResult ours = expand_ours(list);
    if (ours.kind == OurResult::Kind::hosts && slurm.kind == SlurmResult::Kind::hosts &&
        ours.hosts == slurm.hosts) {
        return true;
    }
    if (ours.kind == OurResult::Kind::rejected && slurm.kind == SlurmResult::Kind::rejected) {
        return true;
    }
    const std::string why = "slurm: " + describe(slurm) + "; tfslurm: " + describe(ours);
    if (has_ulong_sized_number(list) &&
        (slurm.kind == SlurmResult::Kind::failed ||
         (slurm.kind == SlurmResult::Kind::hosts && slurm.hosts.empty() &&
          ours.message.find("has more than 65536 hosts") != std::string::npos))) {
        report.expected("Slurm bug near ULONG_MAX (crash, hang or wrap-around)", list, why);
        return false;
    }
    if (ours.kind == OurResult::Kind::rejected &&
        ours.message.find("host names are printable ASCII") != std::string::npos) {
        report.expected(
            "control or non-ASCII byte (tfslurm rejects it, Slurm keeps it)", list, why);
        return false;
    }
    if (slurm.detail == "timed out" && ours.kind == OurResult::Kind::hosts &&
        ours.hosts.size() > 10000) {
        // Printing a list of many ranges is quadratic in scontrol (hostlist_shift() moves the
        // whole range array each time a range empties): nothing to compare.
        report.expected(
            "not compared: scontrol timed out on a list of over 10000 hosts", list, why);
        return false;
    }
    if (ours.kind == OurResult::Kind::too_large &&
        ((slurm.kind == SlurmResult::Kind::hosts &&
          slurm.hosts.size() > tfslurm::k_max_expanded_hosts) ||
         slurm.detail == "timed out")) {
        report.expected("total cap (tfslurm refuses more than 4194304 hosts)", list, why);
        return false;
    }
    const Emulation emulation = emulate_slurm(list, before_2302);
    if (equal_to_slurm(emulation, slurm)) {
        const std::vector<std::pair<bool, const char*>> causes = {
            {emulation.repaired, "missing ']' (22.05 repairs the token, >= 23.02 rejects it)"},
            {emulation.suffix, "suffix after ']' (22.05 rejects it, >= 23.02.5 appends it)"},
            {emulation.overflow, "literal host number above ULONG_MAX (Slurm re-prints it)"},
            {emulation.newline, "newline (not a separator in 22.05)"},
            {emulation.swallowed,
             "error in an earlier bracket group (Slurm drops those hosts silently, tfslurm "
             "refuses the list)"},
        };
        bool explained = false;
        for (const auto& [applies, category] : causes) {
            if (applies) {
                report.expected(category, list, why);
                explained = true;
            }
        }
        if (explained) {
            return false;
        }
    }
    report.unexpected("expansion of \"" + printable(list, 400) + "\"\n    " + why);
    return false;
}

} // namespace tfslurm::diff
