// SPDX-License-Identifier: MIT
// The event file, written as the step goes (tfslurm/events_file.hpp).
#include <tfslurm/error.hpp>
#include <tfslurm/events_file.hpp>
#include <tfslurm/log.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tfslurm {

EventWriter::EventWriter(std::string path, std::string_view subject, Mode mode)
    : m_path(std::move(path)), m_subject(subject) {
    const int truncate = mode == Mode::create ? O_TRUNC : 0;
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open() is variadic by definition
    m_fd = ::open(m_path.c_str(), O_WRONLY | O_CREAT | truncate | O_APPEND | O_CLOEXEC, 0644);
    if (m_fd < 0) {
        throw errors::make(
            Errc::io,
            m_subject,
            fmt::format("cannot create {}: {}", quote(m_path), std::strerror(errno)));
    }
}

EventWriter::~EventWriter() {
    if (m_fd >= 0) {
        ::close(m_fd);
    }
}

void EventWriter::write(const StepEvent& event) {
    if (m_fd < 0) {
        return;
    }
    const std::string line = to_json_line(event);
    std::string_view rest = line;
    while (!rest.empty()) {
        const auto put = ::write(m_fd, rest.data(), rest.size());
        if (put < 0 && errno == EINTR) {
            continue;
        }
        if (put <= 0) {
            logger().warn("{}: cannot write to {}: {}; no more events are recorded",
                          m_subject,
                          quote(m_path),
                          put < 0 ? std::strerror(errno) : "nothing written");
            ::close(m_fd);
            m_fd = -1;
            return;
        }
        rest.remove_prefix(static_cast<std::size_t>(put));
    }
}

} // namespace tfslurm
