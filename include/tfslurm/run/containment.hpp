// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// How a trainer is kept from leaving processes behind: a setting of `tfslurm run`
/// (run_settings.hpp) that spawn_process() carries out (spawn.hpp). A header of its own so that
/// the settings, which are pure, need not see spawn's system headers.

namespace tfslurm {

/// How a command is kept from leaving processes behind (see spawn_process()).
enum class Containment {
    none,          ///< the command alone: what leaves its process group may outlive the caller
    keeper,        ///< under a keeper process, a child subreaper: the command keeps real pids
    pid_namespace, ///< under a supervisor, in a PID namespace of its own (its pid is 2 there)
};

} // namespace tfslurm
