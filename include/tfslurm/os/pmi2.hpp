// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The one place tfslurm talks to Slurm's PMI2 (`srun --mpi=pmi2`), for the address exchange
/// of `tfslurm env`. Like slurm_api.hpp, the binary contains no Slurm code: the node's
/// libpmi2 (GPL-2.0-or-later, Debian's libpmi2-0) is loaded at run time with dlopen() and
/// called through our own declarations of PMI2_Init, PMI2_Job_GetId, PMI2_KVS_Put,
/// PMI2_KVS_Fence, PMI2_KVS_Get and PMI2_Finalize. What is put and got is decided in
/// exchange.hpp.

#include <tfslurm/resolve/plan.hpp>

#include <map>
#include <string>
#include <vector>

namespace tfslurm {

/// The names tried by default: `libpmi2.so.0`, then `libpmi2.so`.
[[nodiscard]] std::vector<std::string> default_libpmi2_names();

/// Exchange the nodes' chosen addresses through PMI2: PMI2_Init(), check_pmi2_world() (a
/// singleton is refused: the step was not started with `srun --mpi=pmi2`), the put of this
/// node's address when this task is the node's local task 0, one PMI2_KVS_Fence(), the gets of
/// pmi2_exchange(), PMI2_Finalize(). Every task of the step must call it (the fence waits for
/// all of them). `plan` is built with node names and has a self rank; `own_address` is this
/// node's choice; empty when this node could not choose one: the task then still puts the
/// marker of pmi2_exchange() and fences, so that no task waits for it, gets nothing and returns
/// an empty map (its caller reports its own error). Loads the first of `libraries` that
/// dlopen() accepts.
/// Input: task 3 of `srun --mpi=pmi2 -N3 -n6 tfslurm env --iface ib0`, own 10.78.0.2.
/// Output: {n1: 10.78.0.1, n2: 10.78.0.2, n3: 10.78.0.3}.
/// \throws Error (Errc::io) when libpmi2 cannot be loaded (`libpmi2: cannot load any of
///         libpmi2.so.0, libpmi2.so: ...`) or a PMI2 call fails (`PMI2: PMI2_KVS_Fence()
///         failed with error 14`), from check_pmi2_world(), read_pmi2_address() and
///         pmi2_exchange().
[[nodiscard]] std::map<std::string, std::string, std::less<>>
exchange_addresses_pmi2(const Plan& plan,
                        const std::string& own_address,
                        const std::vector<std::string>& libraries = default_libpmi2_names());

} // namespace tfslurm
