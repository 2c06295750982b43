// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// Loading a library of the node at run time (dlopen), shared by slurm_api.cpp (libslurm) and
/// pmi2.cpp (libpmi2): both are GPL-2.0-or-later, loaded rather than linked so that the tfslurm
/// binary stays MIT (LICENSE).

#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::detail {

/// A library loaded with dlopen(); never unloaded (Slurm's libraries keep state for the whole
/// process).
struct SharedLibrary {
    void* handle = nullptr;
    std::string name;    ///< the name (or path) that dlopen() accepted
    std::string subject; ///< how errors name the library, e.g. `libslurm`

    /// The address of `function`. \throws Error (Errc::io) `<subject>: <name> has no
    /// <function>()`.
    [[nodiscard]] void* symbol(const char* function) const;
};

/// Load the first of `names` (file names searched like dlopen() does, or paths) that dlopen()
/// accepts with `flags`.
/// Input: {"libnone.so", "libpmi2.so.0"}, RTLD_NOW | RTLD_LOCAL, "libpmi2", hint. Output: the
/// library loaded from `libpmi2.so.0`.
/// \throws Error (Errc::io) `<subject>: no library name to load` for no names, else
///         `<subject>: cannot load any of <names, comma-separated>: <the last dlerror()>` with
///         `hint`.
[[nodiscard]] SharedLibrary load_first_library(const std::vector<std::string>& names,
                                               int flags,
                                               std::string_view subject,
                                               std::string_view hint);

} // namespace tfslurm::detail
