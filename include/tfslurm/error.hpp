// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The one exception type of libtfslurm and its named factories.
///
/// Every message follows `<subject>: <problem>: "<input>"` (lower case, no final period), e.g.
/// `SLURM_STEP_NODELIST: unterminated '[' at offset 4: "node[1-"`, optionally with an
/// actionable hint (`not inside an srun step?`) that front-ends print on a second line.

#include <stdexcept>
#include <string>
#include <string_view>

namespace tfslurm {

/// What went wrong, coarse enough for a front-end to pick an exit status.
enum class Errc {
    invalid_hostlist,        ///< a nodelist does not follow Slurm's hostlist grammar
    invalid_tasks_per_node,  ///< a `2(x3),1` counts string is malformed
    invalid_ports,           ///< a port list such as `12000,12005-12006` is malformed
    missing_env,             ///< a required variable is absent (not inside Slurm?)
    inconsistent_allocation, ///< the variables contradict each other
    invalid_argument,        ///< a command-line option or setting is invalid
    too_large,               ///< a result exceeds a hard limit (host count, env size, ...)
    spawn_failed,            ///< a child process could not be started
    child_failed,            ///< a trainer exited non-zero or died by a signal
    aborted,                 ///< the step was stopped because of another rank
    timeout,                 ///< a deadline passed
    protocol,                ///< a malformed or unexpected coordinator message
    auth,                    ///< a peer failed authentication
    io,                      ///< an I/O or network operation failed
};

/// Stable lower-case name of a code, e.g. `"invalid_hostlist"`.
[[nodiscard]] std::string_view to_string(Errc code) noexcept;

/// Exit status of the `tfslurm` command for an error of this code (documented in tfslurm(1)).
/// Input: Errc::missing_env. Output: 3.
[[nodiscard]] int exit_status(Errc code) noexcept;

/// The exception thrown by libtfslurm for every expected failure.
class Error : public std::runtime_error {
  public:
    /// \param code coarse category
    /// \param message the full `<subject>: <problem>: "<input>"` text
    /// \param hint optional advice, empty when there is none
    Error(Errc code, const std::string& message, std::string hint = {});

    [[nodiscard]] Errc code() const noexcept { return m_code; }
    [[nodiscard]] const std::string& hint() const noexcept { return m_hint; }

  private:
    Errc m_code;
    std::string m_hint;
};

/// Quote a user value (or a peer's text) for a message or a log line: double quotes, C
/// escapes for `"`, `\` and control characters, `\xNN` for every byte that is not part of
/// well-formed UTF-8 (and for the C1 controls U+0080..U+009F), so the result is always valid
/// UTF-8 without terminal controls; long values are cut after 200 bytes with the total length
/// appended. Input: `n1<TAB>n2`. Output: `"n1\tn2"`. Input: "caf\xc3\xa9\xff". Output:
/// `"café\xff"`.
[[nodiscard]] std::string quote(std::string_view value);

/// Named factories, one per case. All return (never throw) the Error to throw.
namespace errors {

/// `<subject>: <problem>: "<input>"` as Errc::invalid_hostlist.
[[nodiscard]] Error
invalid_hostlist(std::string_view subject, std::string_view problem, std::string_view input);

/// `<subject>: <problem>: "<input>"` as Errc::invalid_tasks_per_node.
[[nodiscard]] Error
invalid_counts(std::string_view subject, std::string_view problem, std::string_view input);

/// `<subject>: <problem>: "<input>"` as Errc::invalid_ports.
[[nodiscard]] Error
invalid_ports(std::string_view subject, std::string_view problem, std::string_view input);

/// `<variable>: not set` as Errc::missing_env, with a hint such as `not inside an srun step?`.
[[nodiscard]] Error missing_env(std::string_view variable, std::string hint);

/// `<subject>: <problem>: "<input>"` as Errc::inconsistent_allocation.
[[nodiscard]] Error inconsistent_allocation(std::string_view subject,
                                            std::string_view problem,
                                            std::string_view input,
                                            std::string hint = {});

/// `<subject>: <problem>: "<input>"` as Errc::invalid_argument.
[[nodiscard]] Error invalid_argument(std::string_view subject,
                                     std::string_view problem,
                                     std::string_view input,
                                     std::string hint = {});

/// `<subject>: <problem>` as Errc::too_large (the input is usually too big to quote).
[[nodiscard]] Error too_large(std::string_view subject, std::string_view problem, std::string hint);

/// Free-form error of any code: `<subject>: <problem>`.
[[nodiscard]] Error
make(Errc code, std::string_view subject, std::string_view problem, std::string hint = {});

} // namespace errors
} // namespace tfslurm
