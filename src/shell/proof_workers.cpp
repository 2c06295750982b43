// SPDX-License-Identifier: MIT
// Threads for MUNGE proofs, started as they are needed (shell/detail/proof_workers.hpp).
#include "shell/detail/proof_workers.hpp"

#include <pthread.h>

#include <algorithm>
#include <csignal>
#include <system_error>

namespace tfslurm::detail {

ProofWorkers::ProofWorkers(std::size_t limit)
    : m_context(static_cast<int>(std::clamp<std::size_t>(limit, 2, 64))),
      m_keep_running(boost::asio::make_work_guard(m_context)),
      m_limit(std::max<std::size_t>(limit, 1)) {
    m_threads.reserve(m_limit);
}

ProofWorkers::~ProofWorkers() {
    stop();
}

void ProofWorkers::grow_for_one_more() {
    const std::size_t unfinished = m_unfinished.fetch_add(1, std::memory_order_acq_rel) + 1;
    if (unfinished <= m_threads.size() || m_threads.size() >= m_limit) {
        return;
    }
    // The new thread inherits this mask: every signal blocked, as Asio's own pools do.
    sigset_t all;
    sigset_t before;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &before);
    try {
        m_threads.emplace_back([this] { m_context.run(); });
    } catch (...) {
        ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
        m_unfinished.fetch_sub(1, std::memory_order_acq_rel);
        throw;
    }
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
}

void ProofWorkers::stop() {
    if (m_stopped) {
        return;
    }
    m_stopped = true;
    m_keep_running.reset();
    m_context.stop();
    for (auto& thread : m_threads) {
        if (thread.joinable()) {
            thread.join();
        }
    }
}

} // namespace tfslurm::detail
