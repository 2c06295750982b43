// SPDX-License-Identifier: MIT
// A node's health checks in a child process (preflight/node_check.hpp): the launcher's event loop
// goes on while a site command runs, and the launcher's reaper never meets the command.
#include "os/preflight/node_check.hpp"

#include <boost/asio/read.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <string_view>
#include <system_error>
#include <utility>

namespace tfslurm::detail {

namespace {

/// More than four checks' details ever take: a child that writes more is not ours.
constexpr std::size_t k_max_checks_text = std::size_t{64} * 1024;

constexpr std::array<std::pair<PreflightCheck::Result, std::string_view>, 3> k_check_results{{
    {PreflightCheck::Result::passed, "passed"},
    {PreflightCheck::Result::failed, "failed"},
    {PreflightCheck::Result::skipped, "skipped"},
}};

[[nodiscard]] std::vector<PreflightCheck> checks_lost(const std::string& why) {
    return {PreflightCheck{"preflight", PreflightCheck::Result::failed, why}};
}

/// The child's life: its own signals back (the launcher blocks the ones it reads from a
/// signalfd), death with the launcher, the checks, one write, _exit (nothing of the launcher's
/// state, its io_context above all, is touched).
[[noreturn]] void run_checks_child(const PreflightSettings& settings, int out) noexcept {
    sigset_t none;
    ::sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    int status = 0;
    try {
        const std::string text = encode_checks(run_preflight(settings));
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::write(out, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                status = 1;
                break;
            }
            done += static_cast<std::size_t>(n);
        }
    } catch (...) {
        status = 1; // the parent reads a cut text: a failed `preflight` check
    }
    ::_exit(status);
}

} // namespace

std::string encode_checks(const std::vector<PreflightCheck>& checks) {
    nlohmann::json out = nlohmann::json::array();
    for (const PreflightCheck& check : checks) {
        std::string_view result = "failed";
        for (const auto& [value, name] : k_check_results) {
            if (value == check.result) {
                result = name;
            }
        }
        out.push_back({{"name", check.name}, {"result", result}, {"detail", check.detail}});
    }
    return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::vector<PreflightCheck> decode_checks(const std::string& text) {
    const nlohmann::json in = nlohmann::json::parse(text, nullptr, false);
    const std::string lost = "the checks ended without a result (their process was killed?)";
    if (in.is_discarded() || !in.is_array() || in.empty()) {
        return checks_lost(lost);
    }
    std::vector<PreflightCheck> checks;
    for (const auto& entry : in) {
        if (!entry.is_object() || !entry.contains("name") || !entry["name"].is_string() ||
            !entry.contains("result") || !entry["result"].is_string() ||
            !entry.contains("detail") || !entry["detail"].is_string()) {
            return checks_lost(lost);
        }
        PreflightCheck check{
            entry["name"].get<std::string>(), {}, entry["detail"].get<std::string>()};
        bool known = false;
        for (const auto& [value, name] : k_check_results) {
            if (name == entry["result"].get<std::string>()) {
                check.result = value;
                known = true;
            }
        }
        if (!known || check.name.empty()) {
            return checks_lost(lost);
        }
        checks.push_back(std::move(check));
    }
    return checks;
}

void NodeCheck::start(const PreflightSettings& settings, Done done) {
    std::array<int, 2> fds{-1, -1};
    // Close-on-exec: the site command (and whatever it leaves running) never holds the pipe.
    if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "preflight: pipe");
    }
    const pid_t child = ::fork();
    if (child < 0) {
        const int error = errno;
        ::close(fds[0]);
        ::close(fds[1]);
        throw std::system_error(error, std::generic_category(), "preflight: fork");
    }
    if (child == 0) {
        ::close(fds[0]);
        run_checks_child(settings, fds[1]);
    }
    ::close(fds[1]);
    m_text.clear(); // a second check (after a failure) starts afresh
    m_child = child;
    m_done = std::move(done);
    m_pipe.assign(fds[0]);
    read();
}

void NodeCheck::read() {
    m_pipe.async_read_some(
        boost::asio::buffer(m_buffer), [this](const boost::system::error_code& ec, std::size_t n) {
            m_text.append(m_buffer.data(), n);
            if (!ec && m_text.size() <= k_max_checks_text) {
                read();
                return;
            }
            if (ec == boost::asio::error::operation_aborted) {
                return; // close()
            }
            m_child = 0; // it closed the pipe: it is ending (the launcher's reaper reaps it)
            boost::system::error_code ignored;
            m_pipe.close(ignored);
            auto checks = decode_checks(m_text);
            if (m_done) {
                auto done = std::move(m_done);
                m_done = nullptr;
                done(std::move(checks));
            }
        });
}

void NodeCheck::close() noexcept {
    // Only while it still runs: once the launcher's reaper took it, its pid may be another's.
    // (Between this test and the kill it can only become a zombie: the reaper runs on this
    // thread.)
    siginfo_t info{};
    if (m_child > 0 &&
        ::waitid(P_PID, static_cast<id_t>(m_child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == 0) {
        ::kill(m_child, SIGKILL);
    }
    m_child = 0;
    m_done = nullptr;
    boost::system::error_code ignored;
    m_pipe.close(ignored);
}

} // namespace tfslurm::detail
