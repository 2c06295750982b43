// SPDX-License-Identifier: MIT
// `--label` (detail/labeled_stream.hpp): the trainer's stdout or stderr through a pipe, each
// line labelled with the rank. Lines of one stream keep their order: one reader, one writer.
#include "shell/detail/labeled_stream.hpp"

#include <tfslurm/common/log.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>

namespace tfslurm::detail {

namespace asio = boost::asio;
using boost::system::error_code;

LabeledStream::~LabeledStream() {
    if (m_write_end >= 0) {
        ::close(m_write_end);
    }
}

int LabeledStream::open() {
    if (m_pipe.is_open()) {
        drain(Millis{0}); // what an earlier trainer left (its tree is gone: a restart)
        end();
    }
    int fds[2] = {-1, -1};
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    m_pipe.assign(fds[0]);
    m_write_end = fds[1];
    m_labeler = LineLabeler(m_prefix);
    return m_write_end;
}

void LabeledStream::start() {
    if (m_write_end >= 0) {
        ::close(m_write_end);
        m_write_end = -1;
    }
    if (m_pipe.is_open()) {
        read();
    }
}

void LabeledStream::read() {
    m_pipe.async_read_some(asio::buffer(m_buffer), [this](const error_code& ec, std::size_t n) {
        if (ec == asio::error::operation_aborted || !m_pipe.is_open()) {
            return;
        }
        if (ec) {
            end(); // EOF: every writer is gone
            return;
        }
        relay(std::string_view(m_buffer.data(), n));
        read();
    });
}

void LabeledStream::drain(Millis wait) {
    if (!m_pipe.is_open()) {
        return;
    }
    const int fd = m_pipe.native_handle();
    const auto deadline = Clock::now() + wait;
    for (;;) {
        const auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
        pollfd ready{fd, POLLIN, 0};
        const int polled = ::poll(&ready, 1, static_cast<int>(left > 0 ? left : 0));
        if (polled < 0 && errno == EINTR) {
            continue;
        }
        if (polled <= 0) {
            return; // nothing more now: the loop's reader goes on
        }
        const ssize_t got = ::read(fd, m_buffer.data(), m_buffer.size());
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) {
            continue;
        }
        if (got <= 0) {
            end();
            return;
        }
        relay(std::string_view(m_buffer.data(), static_cast<std::size_t>(got)));
    }
}

void LabeledStream::end() {
    write(m_labeler.finish());
    error_code ignored;
    m_pipe.close(ignored);
}

void LabeledStream::relay(std::string_view bytes) {
    m_bytes += bytes.size();
    if (m_prefix.empty()) {
        write(bytes); // a plain relay: nothing held back, no change to the trainer's chunks
    } else {
        write(m_labeler.feed(bytes));
    }
}

void LabeledStream::write(std::string_view text) const {
    // Blocking, like the trainer's own writes without --label: a reader that does not keep up
    // slows the writer down, nothing is dropped.
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(m_target, text.data() + done, text.size() - done);
        if (n > 0) {
            done += static_cast<std::size_t>(n);
        } else if (n < 0 && errno == EAGAIN) {
            pollfd writable{m_target, POLLOUT, 0};
            ::poll(&writable, 1, -1);
        } else if (n < 0 && errno != EINTR) {
            logger().debug("label: cannot write the trainer's output: {}", std::strerror(errno));
            return;
        }
    }
}

} // namespace tfslurm::detail
