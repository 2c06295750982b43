// SPDX-License-Identifier: MIT
// A step's failure told in one line (tfslurm/run/protocol.hpp, describe()): what the abort line,
// the events file and every launcher print.
#include <tfslurm/common/exit_status.hpp>
#include <tfslurm/resolve/plan.hpp>
#include <tfslurm/run/protocol.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <string>

namespace tfslurm::protocol {

std::string describe(const Failure& failure) {
    if (failure.cause == FailureCause::unregistered && !failure.ranks.empty()) {
        return fmt::format("ranks {} on {} did not register within {}",
                           failure.ranks,
                           failure.host.empty() ? "?" : failure.host,
                           failure.detail);
    }
    if (failure.cause == FailureCause::preflight) {
        // The node first: a node's health is what failed, whichever rank checked it.
        return fmt::format("preflight failed on {} (rank {}, {}:{}): {}",
                           failure.host.empty() ? "?" : failure.host,
                           failure.rank,
                           tfslurm::to_string(failure.role),
                           failure.index,
                           failure.detail);
    }
    std::string out = fmt::format("rank {} ({}:{}) on {}",
                                  failure.rank,
                                  tfslurm::to_string(failure.role),
                                  failure.index,
                                  failure.host.empty() ? "?" : failure.host);
    switch (failure.cause) {
    case FailureCause::trainer:
        out += " " + tfslurm::describe(failure.status);
        if (!failure.detail.empty()) {
            out += fmt::format(" ({})", failure.detail);
        }
        break;
    case FailureCause::start:
        out += " could not start its trainer: " + failure.detail;
        break;
    case FailureCause::lost:
        out += fmt::format(" launcher lost ({})", failure.detail);
        break;
    case FailureCause::unregistered:
        out += fmt::format(" did not register within {}", failure.detail);
        if (failure.missing > 1) {
            out += fmt::format(" ({} ranks missing)", failure.missing);
        }
        break;
    case FailureCause::stalled:
        out += fmt::format(" is stuck: no progress for {}", failure.detail);
        break;
    case FailureCause::unreachable:
        out += " cannot reach " + failure.detail;
        break;
    case FailureCause::preflight:
        break; // above
    }
    return out;
}

} // namespace tfslurm::protocol
