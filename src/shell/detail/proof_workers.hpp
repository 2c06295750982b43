// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The threads on which a coordinator or a node leader's relay makes its MUNGE proofs (each a
/// blocking round trip to munged), started as the proofs need them rather than all at once: a
/// step of a few tasks a node proves one follower at a time and starts one thread, not
/// k_munge_threads (issue #33: a thread's start and end cost more than a small step's proof).

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <cstddef>
#include <thread>
#include <utility>
#include <vector>

namespace tfslurm::detail {

/// Up to `limit` threads running posted work in the order it came. A thread is started when
/// work is posted and every thread started so far has work (posted, not finished); none ends
/// before stop(). Threads start with every signal blocked (the launcher's signals are read on
/// its io thread). post() and stop() are called from one thread (the io thread).
class ProofWorkers {
  public:
    explicit ProofWorkers(std::size_t limit);
    ~ProofWorkers();
    ProofWorkers(const ProofWorkers&) = delete;
    ProofWorkers& operator=(const ProofWorkers&) = delete;
    ProofWorkers(ProofWorkers&&) = delete;
    ProofWorkers& operator=(ProofWorkers&&) = delete;

    /// Run `work` (a callable with no arguments that does not throw) on one of the threads;
    /// starts one more first if they are all taken and fewer than the limit run.
    /// \throws std::system_error when a needed thread cannot be started.
    template <typename Work> void post(Work work) {
        grow_for_one_more();
        boost::asio::post(m_context, [this, work = std::move(work)]() mutable {
            const Done done{m_unfinished};
            work();
        });
    }

    /// Work not begun is dropped; the work under way finishes, then every thread is joined.
    /// Nothing may be posted after it. Idempotent.
    void stop();

    /// How many threads were started: at most the limit.
    [[nodiscard]] std::size_t threads() const noexcept { return m_threads.size(); }

    /// How much work was posted and has not finished yet.
    [[nodiscard]] std::size_t unfinished() const noexcept {
        return m_unfinished.load(std::memory_order_acquire);
    }

  private:
    /// Counts one piece of work as finished when it goes out of scope, however it ends.
    struct Done {
        std::atomic<std::size_t>& unfinished;
        ~Done() { unfinished.fetch_sub(1, std::memory_order_acq_rel); }
        Done(const Done&) = delete;
        Done& operator=(const Done&) = delete;
        Done(Done&&) = delete;
        Done& operator=(Done&&) = delete;
    };

    /// Counts the work about to be posted and starts a thread if every one has work.
    void grow_for_one_more();

    boost::asio::io_context m_context; ///< threads at once: the limit (not 1, which means one)
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> m_keep_running;
    std::vector<std::thread> m_threads;
    std::atomic<std::size_t> m_unfinished{0}; ///< posted and not finished
    std::size_t m_limit;
    bool m_stopped = false;
};

} // namespace tfslurm::detail
