// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/controller_layout.hpp>
#include <tfslurm/os/spawn.hpp>
#include <tfslurm/resolve/step_layout.hpp>

#include <fmt/format.h>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <string>
#include <vector>

namespace tfslurm {

namespace {

constexpr std::chrono::seconds k_layout_timeout{30};
/// sattach prints about 20 bytes per task: 64 MiB is far more than any step's layout.
constexpr std::size_t k_max_layout_bytes = std::size_t{64} << 20U;

/// What a bounded command printed, or why it gave nothing usable (empty when it exited 0).
struct LayoutAnswer {
    std::string out;
    std::string failure;
};

/// Both ends close-on-exec: the child gets the write end only through its dup2 to 1 or 2.
struct LayoutPipe {
    std::array<int, 2> fds{-1, -1};
    LayoutPipe() {
        if (::pipe2(fds.data(), O_CLOEXEC) != 0) {
            throw std::system_error(errno, std::generic_category(), "pipe2");
        }
    }
    LayoutPipe(const LayoutPipe&) = delete;
    LayoutPipe& operator=(const LayoutPipe&) = delete;
    LayoutPipe(LayoutPipe&&) = delete;
    LayoutPipe& operator=(LayoutPipe&&) = delete;
    ~LayoutPipe() {
        for (const int fd : fds) {
            if (fd >= 0) {
                ::close(fd);
            }
        }
    }
    void close_write() {
        ::close(fds[1]);
        fds[1] = -1;
    }
};

/// The first line of `text`, without trailing blanks.
std::string first_line(const std::string& text) {
    auto line = text.substr(0, text.find('\n'));
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) {
        line.pop_back();
    }
    return line;
}

/// Read both pipes until both end or the deadline passes (false), or a stream grows past
/// k_max_layout_bytes (`too_long`, false).
bool drain(
    LayoutPipe& out, LayoutPipe& err, LayoutAnswer& answer, std::string& errors, bool& too_long) {
    const auto deadline = std::chrono::steady_clock::now() + k_layout_timeout;
    std::array<pollfd, 2> polled{pollfd{out.fds[0], POLLIN, 0}, pollfd{err.fds[0], POLLIN, 0}};
    std::array<std::string*, 2> into{&answer.out, &errors};
    std::array<char, 4096> buffer{};
    while (polled[0].fd >= 0 || polled[1].fd >= 0) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            return false;
        }
        const int ready = ::poll(polled.data(), polled.size(), static_cast<int>(left.count()));
        if (ready < 0 && errno != EINTR) {
            throw std::system_error(errno, std::generic_category(), "poll");
        }
        for (std::size_t i = 0; i < polled.size() && ready > 0; ++i) {
            if (polled[i].fd < 0 || polled[i].revents == 0) {
                continue;
            }
            const auto got = ::read(polled[i].fd, buffer.data(), buffer.size());
            if (got > 0) {
                into[i]->append(buffer.data(), static_cast<std::size_t>(got));
                if (into[i]->size() > k_max_layout_bytes) {
                    too_long = true;
                    return false;
                }
            } else if (got == 0 || errno != EINTR) {
                polled[i].fd = -1; // poll() skips negative descriptors
            }
        }
    }
    return true;
}

/// Run `argv`, found in `env`'s PATH, with `env` as its environment (stdin /dev/null), capture
/// its output, bounded by k_layout_timeout.
LayoutAnswer run_layout_command(const std::vector<std::string>& argv, const Environment& env) {
    LayoutAnswer answer;
    std::string path;
    try {
        path = find_executable(argv.front(), env.get("PATH").value_or(""));
    } catch (const Error&) {
        answer.failure = fmt::format("{} not found in PATH", argv.front());
        return answer;
    }
    LayoutPipe out;
    LayoutPipe err;
    posix_spawn_file_actions_t actions;
    ::posix_spawn_file_actions_init(&actions);
    ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    ::posix_spawn_file_actions_adddup2(&actions, out.fds[1], 1);
    ::posix_spawn_file_actions_adddup2(&actions, err.fds[1], 2);
    const auto pointers_of = [](std::vector<std::string>& words) {
        std::vector<char*> pointers;
        pointers.reserve(words.size() + 1);
        for (auto& word : words) {
            pointers.push_back(word.data());
        }
        pointers.push_back(nullptr);
        return pointers;
    };
    std::vector<std::string> words = argv;
    Environment child = env;
    child.unset(k_secret_variable); // sattach needs no key of ours
    std::vector<std::string> variables = child.to_strings();
    const auto args = pointers_of(words);
    const auto envp = pointers_of(variables);
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, args.data(), envp.data());
    ::posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
        answer.failure = fmt::format("cannot start {}: {}", path, std::strerror(rc));
        return answer;
    }
    out.close_write();
    err.close_write();
    std::string errors;
    bool too_long = false;
    const bool ended = drain(out, err, answer, errors, too_long);
    if (!ended) {
        ::kill(pid, SIGKILL);
    }
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (too_long) {
        answer.failure =
            fmt::format("{} printed more than {} MiB", argv[0], k_max_layout_bytes >> 20U);
    } else if (!ended) {
        answer.failure =
            fmt::format("{} did not answer within {} s", argv[0], k_layout_timeout.count());
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        answer.failure = WIFEXITED(status)
                             ? fmt::format("{} exited with status {}", argv[0], WEXITSTATUS(status))
                             : fmt::format("{} was killed by signal {}", argv[0], WTERMSIG(status));
        if (const auto said = first_line(errors); !said.empty()) {
            answer.failure += ": " + quote(said);
        }
    }
    return answer;
}

} // namespace

void add_controller_layout(StepInfo& step, const Environment& env) {
    if (!needs_step_layout(step)) {
        return;
    }
    const auto argv = step_layout_command(step);
    const auto command = fmt::format("{} {} {}", argv[0], argv[1], argv[2]);
    const auto answer = run_layout_command(argv, env);
    if (!answer.failure.empty()) {
        step.layout_error = fmt::format("{}: {}", command, answer.failure);
        logger().debug("placement: {}", step.layout_error);
        return;
    }
    step.layout_rank_hosts = parse_step_layout(answer.out, step);
    logger().debug(
        "placement: {} laid the step out in topology order ({})", command, step.topology_order);
}

} // namespace tfslurm
