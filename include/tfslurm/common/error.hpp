// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The one exception type of libtfslurm and its named factories.
///
/// Every message follows `<subject>: <problem>: "<input>"` (lower case, no final period), e.g.
/// `SLURM_STEP_NODELIST: unterminated '[' at offset 4: "node[1-"`, optionally with an
/// actionable hint (`not inside an srun step?`) that front-ends print on a second line.

#include <functional>
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
    protocol,                ///< a malformed or unexpected coordinator message
    auth,                    ///< a peer failed authentication
    io,                      ///< an I/O or network operation failed
};

/// Stable lower-case name of a code, e.g. `"invalid_hostlist"`.
[[nodiscard]] std::string_view to_string(Errc code) noexcept;

/// Exit status of the `tfslurm` command for an error of this code (documented in tfslurm(1)).
/// Input: Errc::missing_env. Output: 3.
[[nodiscard]] int exit_status(Errc code) noexcept;

/// How a face spells a setting it mentions: `key` is a setting key (`gpus_per_task`), `value`
/// the value the message suggests or names (`tf-compat`), empty when there is none.
/// The CLI answers `--gpus-per-task` (or `TFSLURM_GPUS_PER_TASK` when that is where the value
/// came from), the SPANK plugin `--tfslurm gpus_per_task`, `plugstack.conf gpus_per_task`, ...
using SettingNamer = std::function<std::string(std::string_view key, std::string_view value)>;

/// A reference to a setting inside a message or hint: the library never spells a CLI option or
/// a plugin key itself; it writes setting_ref() and each face renders it (Error::rendered()).
/// Without a face the reference reads `key` or `key=value` (Error::what(), Error::hint()).
/// The markers are control characters, which quote() escapes: user input cannot forge one.
/// Input: `layout`, `tf-compat`. Output (rendered by the CLI): `--layout tf-compat`.
[[nodiscard]] std::string setting_ref(std::string_view key, std::string_view value = {});

/// Replace every setting_ref() in `text` by `name(key, value)`.
/// Input: "use " + setting_ref("port_base"), a namer giving `--port-base`.
/// Output: `use --port-base`.
[[nodiscard]] std::string render_settings(std::string_view text, const SettingNamer& name);

/// The neutral rendering: `key`, or `key=value` when the reference names a value.
[[nodiscard]] std::string neutral_setting_name(std::string_view key, std::string_view value);

/// The exception thrown by libtfslurm for every expected failure.
class Error : public std::runtime_error {
  public:
    /// \param code coarse category
    /// \param message the full `<subject>: <problem>: "<input>"` text, which may contain
    ///        setting_ref()s (a leading one is the setting the error is about)
    /// \param hint optional advice, empty when there is none; may contain setting_ref()s
    Error(Errc code, const std::string& message, std::string hint = {});

    [[nodiscard]] Errc code() const noexcept { return m_code; }
    /// The hint with setting references in their neutral form (`port_base`).
    [[nodiscard]] const std::string& hint() const noexcept { return m_hint; }
    /// The key of the setting this error is about (its subject is setting_ref(key)), or empty.
    /// Input: the error of gpus_per_task=x. Output: `gpus_per_task`.
    [[nodiscard]] const std::string& setting() const noexcept { return m_setting; }
    /// This error as a face words it: every setting reference in the message and the hint
    /// rendered by `name`; same code and setting().
    [[nodiscard]] Error rendered(const SettingNamer& name) const;
    /// The message with its setting references as written (what() renders them neutrally): for
    /// a message that travels as text to a face that renders it, such as a remote rank's error
    /// in its `exit` report. Input: the error of setting_ref("output") + ": cannot open ...".
    /// Output: that text, reference and all (the CLI prints `--output: cannot open ...`).
    [[nodiscard]] const std::string& unrendered() const noexcept { return m_message_template; }

  private:
    Errc m_code;
    std::string m_message_template; ///< with setting references
    std::string m_hint_template;    ///< with setting references
    std::string m_hint;             ///< neutral rendering of m_hint_template
    std::string m_setting;
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

/// `<key>: <problem>: "<input>"` as Errc::invalid_argument, about the setting `key` (a
/// setting_ref() subject: each face names it as its user typed it).
/// Input: `gpus_per_task`, `expected an integer from 0 to 65536`, `x`.
/// Output: what() `gpus_per_task: expected an integer from 0 to 65536: "x"`.
[[nodiscard]] Error invalid_setting(std::string_view key,
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
