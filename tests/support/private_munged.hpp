// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// A private munged for tests (root only): its own key, socket and directory under /tmp, run as
/// a daemon (not a child of the test process, whose tests check that it has none) and stopped
/// by the pid in its pid file. Tests that need MUNGE skip themselves when it is not running.
/// A watcher, a daemon too, stops it and removes its directory once the test process closed
/// its end of a pipe: in the destructor, or as the process ends in any other way (an abort, a
/// sanitizer's report, a signal), where no destructor runs.

#include "process.hpp"

#include <tfslurm/run/auth.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <thread>

namespace tfslurm::test {

/// A private munged (root only): a key, a socket and a pid file in a temporary directory.
class PrivateMunged {
  public:
    PrivateMunged() {
        if (::geteuid() != 0 || ::access("/usr/sbin/munged", X_OK) != 0 ||
            ::access("/usr/sbin/mungekey", X_OK) != 0) {
            return;
        }
        char pattern[] = "/tmp/tfslurm-munge-XXXXXX";
        if (::mkdtemp(pattern) == nullptr) {
            return;
        }
        m_dir = pattern;
        ::chmod(m_dir.c_str(), 0700);
        m_socket = m_dir + "/munge.socket";
        const std::string key = "/usr/sbin/mungekey -c -k " + m_dir + "/munge.key >/dev/null 2>&1";
        if (std::system(key.c_str()) != 0) {
            return;
        }
        // A daemon, not a child of the test process (whose tests check that it has none).
        const std::string start = "/usr/sbin/munged --force --key-file=" + m_dir +
                                  "/munge.key --socket=" + m_socket + " --pid-file=" + pid_file() +
                                  " --log-file=" + m_dir + "/munged.log --seed-file=" + m_dir +
                                  "/munged.seed >/dev/null 2>&1";
        if (std::system(start.c_str()) != 0) {
            return;
        }
        // munged may answer before it writes its pid file: wait for both, then stop it by that
        // pid alone (the file is in this test's private directory).
        for (int i = 0; i < 250 && (m_pid <= 0 || !protocol::munge_available(m_socket)); ++i) {
            std::ifstream(pid_file()) >> m_pid;
            if (m_pid <= 0 || !protocol::munge_available(m_socket)) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        m_running = m_pid > 0 && protocol::munge_available(m_socket);
        if (m_pid > 0) {
            start_watcher();
        }
    }
    ~PrivateMunged() {
        if (m_lifeline >= 0) {
            ::close(m_lifeline); // the watcher stops munged (start_watcher())
        } else if (m_pid > 0) {
            ::kill(m_pid, SIGTERM);
        }
        if (m_pid > 0) {
            // Not our child: gone once /proc has no live process of that pid (at most 5 s).
            for (int i = 0; i < 500 && !ended(m_pid); ++i) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
            }
        }
        if (!m_dir.empty()) {
            std::error_code ignored;
            std::filesystem::remove_all(m_dir, ignored);
        }
    }
    PrivateMunged(const PrivateMunged&) = delete;
    PrivateMunged& operator=(const PrivateMunged&) = delete;

    [[nodiscard]] bool running() const noexcept { return m_running; }
    [[nodiscard]] std::string pid_file() const { return m_dir + "/munged.pid"; }
    [[nodiscard]] const std::string& socket() const noexcept { return m_socket; }
    /// Its pid (-1 when it is not running): a test may stop (SIGSTOP) and continue it.
    [[nodiscard]] pid_t pid() const noexcept { return m_pid; }

  private:
    /// The watcher: a shell that reads the pipe whose write end only this process holds
    /// (close-on-exec: no command a test starts holds it), and at its end (EOF) sends munged
    /// SIGTERM (and SIGCONT: a test may have stopped it), if that pid is still our munged
    /// (its command line names our directory), waits for it, and removes the directory.
    void start_watcher() {
        int lifeline[2] = {-1, -1};
        if (::pipe2(lifeline, O_CLOEXEC) != 0) {
            return;
        }
        ::fcntl(lifeline[0], F_SETFD, 0); // the read end, for the watcher only
        const std::string pid = std::to_string(m_pid);
        const std::string watch =
            "setsid sh -c 'cat >/dev/null; p=" + pid + "; d=" + m_dir +
            "; if grep -qF \"$d\" /proc/$p/cmdline 2>/dev/null; then kill -TERM $p; kill -CONT "
            "$p; fi; i=0; while [ -d /proc/$p ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); "
            "done; rm -rf \"$d\"' </dev/fd/" +
            std::to_string(lifeline[0]) + " >/dev/null 2>&1 &";
        const int rc = std::system(watch.c_str());
        ::close(lifeline[0]);
        if (rc != 0) {
            ::close(lifeline[1]);
            return;
        }
        m_lifeline = lifeline[1];
    }

    std::string m_dir;
    std::string m_socket;
    pid_t m_pid = -1;
    int m_lifeline = -1; ///< the write end of the watcher's pipe
    bool m_running = false;
};

/// One daemon for the whole test run (Catch2 re-enters a test case once per SECTION).
inline const PrivateMunged& private_munged() {
    static const PrivateMunged instance;
    return instance;
}

} // namespace tfslurm::test
