// SPDX-License-Identifier: MIT
// The event file, written as the step goes (tfslurm/os/events_file.hpp).
#include "os/detail/user_file.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/events_file.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace tfslurm {

EventWriter::EventWriter(std::string path, std::string_view subject, Mode mode)
    : m_path(std::move(path)), m_subject(subject) {
    m_fd = detail::open_user_file(m_path,
                                  m_subject,
                                  mode == Mode::create ? detail::UserFileMode::truncate
                                                       : detail::UserFileMode::append);
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
