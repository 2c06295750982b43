// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The health checks of one node (`preflight`, launcher_action::CheckNode) run off the
/// launcher's event loop: run_preflight() (preflight.hpp) may wait for a site command for up to
/// a minute, and the loop must keep heartbeating and relaying meanwhile. The checks run in a
/// child process of the launcher that writes its result to a pipe: the launcher's own reaper
/// (`waitpid(-1)` for orphans) cannot then steal the site command's exit status, and NVML's
/// threads never live in the launcher, which forks its trainer later.

#include <tfslurm/os/preflight.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace tfslurm::detail {

/// The checks' results as the child writes them to its pipe: one JSON array of
/// {"name", "result" (passed, failed, skipped), "detail"}.
[[nodiscard]] std::string encode_checks(const std::vector<PreflightCheck>& checks);

/// The checks from the child's pipe. Text that is not what encode_checks() writes (the child
/// was killed half-way) gives one failed check named `preflight` saying so.
/// Input: `[{"detail":"x","name":"tmpdir","result":"failed"}]`. Output: {tmpdir failed x}.
[[nodiscard]] std::vector<PreflightCheck> decode_checks(const std::string& text);

class NodeCheck {
  public:
    using Done = std::function<void(std::vector<PreflightCheck>)>;

    explicit NodeCheck(boost::asio::io_context& io) : m_pipe(io) {}
    NodeCheck(const NodeCheck&) = delete;
    NodeCheck& operator=(const NodeCheck&) = delete;
    NodeCheck(NodeCheck&&) = delete;
    NodeCheck& operator=(NodeCheck&&) = delete;
    ~NodeCheck() { close(); }

    /// Fork the child that runs run_preflight(settings); `done` is called on the io_context's
    /// thread with its checks once the child closed the pipe. \throws std::system_error when
    /// the pipe or the child cannot be made.
    void start(const PreflightSettings& settings, Done done);
    /// Kill the child (the launcher's end reaps it and kills what it left behind).
    void close() noexcept;

  private:
    void read();

    boost::asio::posix::stream_descriptor m_pipe;
    std::string m_text;
    std::vector<char> m_buffer = std::vector<char>(4096);
    pid_t m_child = 0;
    Done m_done;
};

} // namespace tfslurm::detail
