// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The event file of a step (`tfslurm run --events FILE`), written as the step goes: the one
/// place that writes it (the format is events.hpp's).

#include <tfslurm/run/events.hpp>

#include <string>
#include <string_view>

namespace tfslurm {

/// Writes each event as one line with one write() to a file opened with O_APPEND, as it
/// happens: a job killed mid-way leaves a valid file up to its last event (at worst the last
/// line cut short, which the reader leaves out). A write that fails is reported once, as a
/// warning naming the file, and the writer stops writing: the record never stops the step.
class EventWriter {
  public:
    enum class Mode {
        create, ///< a new record: `path` is created or truncated (mode 0644 less the umask)
        append  ///< more of an existing record (the requeue after the step's end)
    };

    /// Open `path`. `subject` names the setting in errors and warnings.
    /// \throws Error (Errc::io): `<subject>: cannot create "<path>": <reason>`.
    EventWriter(std::string path, std::string_view subject, Mode mode = Mode::create);
    ~EventWriter();
    EventWriter(const EventWriter&) = delete;
    EventWriter& operator=(const EventWriter&) = delete;
    EventWriter(EventWriter&&) = delete;
    EventWriter& operator=(EventWriter&&) = delete;

    void write(const StepEvent& event);

    [[nodiscard]] const std::string& path() const noexcept { return m_path; }
    /// False once a write failed.
    [[nodiscard]] bool writing() const noexcept { return m_fd >= 0; }

  private:
    std::string m_path;
    std::string m_subject;
    int m_fd = -1;
};

} // namespace tfslurm
