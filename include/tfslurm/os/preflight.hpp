// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Health before start (`tfslurm run --preflight`): each launcher checks its node before any
/// trainer starts. The checks touch the OS (interfaces, the file system, NVML loaded at run
/// time, a site command); which ones run and what they found is plain data.

#include <tfslurm/resolve/interfaces.hpp>
#include <tfslurm/run/run.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfslurm {

/// What the checks look at, for one node.
struct PreflightSettings {
    /// The interface and address the launcher chose (`iface`, `network`); none: the check is
    /// skipped.
    std::optional<InterfaceAddress> address;
    /// The trainer's temporary directory (TMPDIR, else /tmp): writable, with this much free.
    std::string tmpdir = "/tmp";
    std::uint64_t tmp_free_bytes = std::uint64_t{1} << 30U;
    /// The node's visible GPUs as CUDA_VISIBLE_DEVICES lists them: NVML indices or UUIDs
    /// (`GPU-...`, `MIG-...`). Empty: no GPU check.
    std::vector<std::string> gpus;
    /// NVML's library, tried in order (tests name a stand-in).
    std::vector<std::string> nvml_names{"libnvidia-ml.so.1"};
    /// A site's own check, run with `/bin/sh -c` (`preflight_command`); empty: none.
    std::string command;
    Millis command_timeout{60000};
};

/// One check's outcome.
struct PreflightCheck {
    enum class Result { passed, failed, skipped };
    std::string name; ///< `interface`, `tmpdir`, `gpus`, `command`
    Result result = Result::passed;
    std::string detail; ///< why it failed or was skipped; what it saw when it passed
};

/// Every check, in the order above; a failed one does not stop the others (the report names
/// everything wrong with the node at once).
[[nodiscard]] std::vector<PreflightCheck> run_preflight(const PreflightSettings& settings);

/// The first failed check, if any.
[[nodiscard]] const PreflightCheck* first_failure(const std::vector<PreflightCheck>& checks);

/// How a failed check reads in the abort line. Input: the tmpdir check that found 12 MiB.
/// Output: `tmpdir: "/tmp" has 12 MiB free (at least 1024 MiB needed)`.
[[nodiscard]] std::string describe(const PreflightCheck& check);

} // namespace tfslurm
