// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// An explicit, injectable process environment. Everything in libtfslurm reads variables from
/// an Environment passed in; only Environment::from_process() looks at the real environment.

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfslurm {

/// The per-job key of `tfslurm run`'s proofs (auth.hpp). Only tfslurm's own launchers read it:
/// no program tfslurm starts gets it (the trainer, the preflight command, Slurm's commands,
/// sattach), so that nothing a site or a user runs can log it.
inline constexpr std::string_view k_secret_variable = "TFSLURM_SECRET";

/// A set of `NAME=value` variables.
///
/// Example: `Environment env{{"SLURM_PROCID", "3"}}; env.get("SLURM_PROCID") == "3"`.
class Environment {
  public:
    using Map = std::map<std::string, std::string, std::less<>>;

    Environment() = default;
    Environment(std::initializer_list<std::pair<const std::string, std::string>> vars);
    explicit Environment(Map vars);

    /// A copy of this process's environment (`environ`).
    [[nodiscard]] static Environment from_process();

    /// Parse `NAME=value` strings; entries without `=` are ignored. `envp` may be null.
    [[nodiscard]] static Environment from_envp(const char* const* envp);

    /// The value of `name`, or nullopt when unset. An empty value is returned as "".
    [[nodiscard]] std::optional<std::string_view> get(std::string_view name) const;

    [[nodiscard]] bool contains(std::string_view name) const;

    /// Set (or replace) a variable.
    void set(std::string name, std::string value);

    /// Remove a variable if present.
    void unset(std::string_view name);

    [[nodiscard]] const Map& vars() const noexcept { return m_vars; }

    /// `NAME=value` strings in name order, for execve().
    [[nodiscard]] std::vector<std::string> to_strings() const;

  private:
    Map m_vars;
};

} // namespace tfslurm
