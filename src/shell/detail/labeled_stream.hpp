// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `--label`: one of the trainer's output streams through a pipe that the launcher reads on its
/// event loop and writes to its own stdout or stderr with every line labelled (LineLabeler).
/// Without a prefix (`--stall-progress output` without `--label`), the bytes pass through as
/// they come, in the same chunks, nothing held back. Either way it counts the bytes read.

#include "run/detail/line_labeler.hpp"

#include <tfslurm/run/launcher.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tfslurm::detail {

class LabeledStream {
  public:
    /// `target`: where the labelled lines go (STDOUT_FILENO, STDERR_FILENO or a file);
    /// `prefix` empty: no label, a plain relay.
    LabeledStream(boost::asio::io_context& io, int target, std::string prefix)
        : m_pipe(io), m_target(target), m_prefix(std::move(prefix)), m_labeler(m_prefix) {}
    LabeledStream(const LabeledStream&) = delete;
    LabeledStream& operator=(const LabeledStream&) = delete;
    ~LabeledStream();

    /// A new pipe for a trainer's start (what an earlier one still held is written first);
    /// returns its write end, close-on-exec, for SpawnRequest. \throws std::system_error.
    [[nodiscard]] int open();
    /// After the spawn (or its failure): close our copy of the write end, read on the loop.
    void start();
    /// Read what comes within `wait` (0: what the pipe holds now), up to the pipe's end; at
    /// the end the incomplete last line is written too. Called when the trainer ended, so
    /// that its last lines come before the launcher's, and before the launcher exits.
    void drain(Millis wait);
    /// The bytes read from the trainer so far, over every pipe open() made.
    [[nodiscard]] std::uint64_t bytes() const noexcept { return m_bytes; }

  private:
    void read();
    void end();
    /// Count `bytes` and write them, labelled unless the prefix is empty.
    void relay(std::string_view bytes);
    void write(std::string_view text) const;

    boost::asio::posix::stream_descriptor m_pipe;
    int m_write_end = -1;
    int m_target;
    std::string m_prefix;
    LineLabeler m_labeler;
    std::uint64_t m_bytes = 0;
    std::array<char, 65536> m_buffer{};
};

} // namespace tfslurm::detail
