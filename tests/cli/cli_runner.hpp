// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Run the tfslurm binary under test (paths::cli) with an exact argv and environment.

#include "process.hpp"
#include "test_paths.hpp"

#include <stdexcept>
#include <string>
#include <vector>

namespace tfslurm::test {

/// `tfslurm ARGS...` with exactly `env` as its environment and `input` on stdin.
/// Throws std::runtime_error when it does not end within the runner's timeout.
inline Result tfslurm_cli(std::vector<std::string> args,
                          const std::vector<std::string>& env = {},
                          const std::string& input = {}) {
    args.insert(args.begin(), tfslurm::test::paths::cli);
    Result result = run({args, env, input});
    if (result.timed_out) {
        throw std::runtime_error("timeout waiting for " + args.front());
    }
    return result;
}

} // namespace tfslurm::test
