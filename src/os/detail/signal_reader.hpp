// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The launcher's signals, read from a signalfd so that each one's sender is known: a signal
/// that slurmstepd sent to the whole step is not forwarded to the trainer a second time.

#include <tfslurm/run/launcher.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read.hpp>

#include <sys/signalfd.h>
#include <sys/types.h>

#include <csignal>
#include <utility>

namespace tfslurm::detail {

/// Whether `pid` is a slurmstepd (its signals are meant for the whole step).
/// Input: the pid of `slurmstepd: [42.0]`. Output: true.
[[nodiscard]] bool is_slurmstepd(pid_t pid);

/// The handled signals (k_handled_signals), blocked and read from a signalfd, which tells each
/// one's sender (Asio's signal_set does not). Restores the signal mask when destroyed, after
/// consuming what is still pending (a pending SIGTERM must not kill the process once it has
/// its result). `step_reaches_trainer`: slurmstepd's signals reach every process of the step,
/// the trainer and its PID namespace included (step_signals_reach_every_process()): then they
/// are SignalOrigin::step, not to be forwarded.
class SignalReader {
  public:
    /// \throws Error (Errc::io) when the signals cannot be blocked or the signalfd made.
    SignalReader(boost::asio::io_context& io, bool step_reaches_trainer);
    SignalReader(const SignalReader&) = delete;
    SignalReader& operator=(const SignalReader&) = delete;
    SignalReader(SignalReader&&) = delete;
    SignalReader& operator=(SignalReader&&) = delete;
    ~SignalReader();

    /// Call `handler(signo, origin)` for the next signal; nothing once cancelled.
    template <typename Handler> void async_wait(Handler handler) {
        boost::asio::async_read(
            m_stream,
            boost::asio::buffer(&m_info, sizeof m_info),
            [this, handler = std::move(handler)](const boost::system::error_code& ec, std::size_t) {
                if (ec) {
                    return;
                }
                const auto signo = static_cast<int>(m_info.ssi_signo);
                const bool from_step = m_step_reaches_trainer && m_info.ssi_code == SI_USER &&
                                       is_slurmstepd(static_cast<pid_t>(m_info.ssi_pid));
                handler(signo, from_step ? SignalOrigin::step : SignalOrigin::launcher);
            });
    }
    void cancel();

  private:
    boost::asio::posix::stream_descriptor m_stream;
    bool m_step_reaches_trainer;
    sigset_t m_set{};
    sigset_t m_old{};
    signalfd_siginfo m_info{};
};

} // namespace tfslurm::detail
