// SPDX-License-Identifier: MIT
// The threads of MUNGE proofs (src/shell/proof_workers.cpp): started as the work needs them, up
// to the limit, with every signal blocked.
#include "shell/detail/proof_workers.hpp"

#include <catch2/catch.hpp>

#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <mutex>
#include <thread>

using tfslurm::detail::ProofWorkers;

namespace {

/// A gate the work waits at, and a count of the work that passed it.
class Gate {
  public:
    void open() {
        const std::lock_guard<std::mutex> lock(m_mutex);
        m_open = true;
        m_changed.notify_all();
    }
    /// Wait for the gate, then count one more through.
    void pass() {
        std::unique_lock<std::mutex> lock(m_mutex);
        ++m_waiting;
        m_changed.notify_all();
        m_changed.wait(lock, [this] { return m_open; });
        --m_waiting;
        ++m_passed;
        m_changed.notify_all();
    }
    /// Wait (at most 30 s, so that a defect fails instead of hanging) until `count` wait at the
    /// gate; true if they do.
    bool await_waiting(std::size_t count) {
        std::unique_lock<std::mutex> lock(m_mutex);
        return m_changed.wait_for(
            lock, std::chrono::seconds(30), [&] { return m_waiting == count; });
    }
    /// Wait (at most 30 s) until `count` passed; true if they did.
    bool await_passed(std::size_t count) {
        std::unique_lock<std::mutex> lock(m_mutex);
        return m_changed.wait_for(
            lock, std::chrono::seconds(30), [&] { return m_passed == count; });
    }

  private:
    std::mutex m_mutex;
    std::condition_variable m_changed;
    bool m_open = false;
    std::size_t m_waiting = 0;
    std::size_t m_passed = 0;
};

} // namespace

TEST_CASE("proof workers: none before work, one per busy proof, never above the limit",
          "[proof_workers]") {
    ProofWorkers workers(4);
    CHECK(workers.threads() == 0);
    Gate gate;
    for (std::size_t posted = 1; posted <= 4; ++posted) {
        workers.post([&gate] { gate.pass(); });
        REQUIRE(gate.await_waiting(posted));
        CHECK(workers.threads() == posted);
    }
    // Every thread is taken: more work waits for one, no fifth thread starts.
    workers.post([&gate] { gate.pass(); });
    workers.post([&gate] { gate.pass(); });
    CHECK(workers.threads() == 4);
    gate.open();
    REQUIRE(gate.await_passed(6));
    workers.stop();
    CHECK(workers.threads() == 4);
}

TEST_CASE("proof workers: work that comes after the last finished reuses its thread",
          "[proof_workers]") {
    ProofWorkers workers(4);
    Gate gate;
    gate.open();
    for (std::size_t posted = 1; posted <= 5; ++posted) {
        workers.post([&gate] { gate.pass(); });
        REQUIRE(gate.await_passed(posted));
        // The work counts as finished just after it returns: wait for that (bounded).
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (workers.unfinished() != 0 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::yield();
        }
        REQUIRE(workers.unfinished() == 0);
    }
    CHECK(workers.threads() == 1);
}

TEST_CASE("proof workers: threads run with every signal blocked", "[proof_workers]") {
    ProofWorkers workers(2);
    sigset_t seen;
    ::sigemptyset(&seen);
    Gate gate;
    gate.open();
    workers.post([&] {
        ::pthread_sigmask(SIG_BLOCK, nullptr, &seen);
        gate.pass();
    });
    REQUIRE(gate.await_passed(1));
    workers.stop();
    CHECK(::sigismember(&seen, SIGTERM) == 1);
    CHECK(::sigismember(&seen, SIGINT) == 1);
    CHECK(::sigismember(&seen, SIGCHLD) == 1);
    // The caller's own mask is as it was.
    sigset_t mine;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &mine);
    CHECK(::sigismember(&mine, SIGUSR2) == 0);
}

TEST_CASE("proof workers: stop is idempotent, with or without threads", "[proof_workers]") {
    ProofWorkers idle(4);
    idle.stop();
    idle.stop();
    CHECK(idle.threads() == 0);
    ProofWorkers used(4);
    Gate gate;
    gate.open();
    used.post([&gate] { gate.pass(); });
    REQUIRE(gate.await_passed(1));
    used.stop();
    used.stop();
    CHECK(used.threads() == 1);
}
