// SPDX-License-Identifier: MIT
// The launcher's signalfd (detail/signal_reader.hpp).
#include "os/detail/signal_reader.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/run/run.hpp>

#include <fmt/format.h>

#include <pthread.h>

#include <fstream>
#include <string>

namespace tfslurm::detail {

bool is_slurmstepd(pid_t pid) {
    std::ifstream comm(fmt::format("/proc/{}/comm", pid));
    std::string name;
    return pid > 0 && std::getline(comm, name) && name == "slurmstepd";
}

SignalReader::SignalReader(boost::asio::io_context& io, bool step_reaches_trainer)
    : m_stream(io), m_step_reaches_trainer(step_reaches_trainer) {
    ::sigemptyset(&m_set);
    for (const int signo : k_handled_signals) {
        ::sigaddset(&m_set, signo);
    }
    if (::pthread_sigmask(SIG_BLOCK, &m_set, &m_old) != 0) {
        throw errors::make(Errc::io, "launcher", "cannot block the handled signals");
    }
    const int fd = ::signalfd(-1, &m_set, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0) {
        ::pthread_sigmask(SIG_SETMASK, &m_old, nullptr);
        throw errors::make(Errc::io, "launcher", "cannot create a signalfd");
    }
    m_stream.assign(fd);
}

SignalReader::~SignalReader() {
    boost::system::error_code ignored;
    m_stream.close(ignored);
    const timespec now{};
    while (::sigtimedwait(&m_set, nullptr, &now) > 0) {
    }
    ::pthread_sigmask(SIG_SETMASK, &m_old, nullptr);
}

void SignalReader::cancel() {
    boost::system::error_code ignored;
    m_stream.cancel(ignored);
}

} // namespace tfslurm::detail
