// SPDX-License-Identifier: MIT
// Differential test: tfslurm's hostlist code against Slurm itself.
//
//   tfslurm_diff_hostlist [--scontrol PATH] [--seed N] [--verbose]
//
// Writes a two-line slurm.conf into a temporary directory, generates a seeded corpus of valid
// and invalid hostlists (the reference vectors, random grammar-aware lists and mutations of
// them), runs `scontrol show hostnames LIST` for each (posix_spawn, no shell, SLURM_CONF set)
// and compares the result with expand_hostlist(). Then compares compress_hostlist() with
// `scontrol show hostlist` on valid host lists.
//
// tfslurm follows Slurm >= 23.02.5 while Debian 12 ships 22.05, so some differences are
// expected. A difference counts as expected only when it is fully explained. For most of them
// the list is re-expanded with 22.05's rules (its own tokenizer, then token by token) and the
// result must then equal Slurm's output exactly; the rules that made a difference name it:
//   - missing ']'   : 22.05 "repairs" a token whose last '[' has no ']' (`n[1-` -> `n]`),
//                     >= 23.02 rejects it;
//   - suffix        : 22.05 rejects text after ']' (`n[1-2]x`), >= 23.02.5 appends it;
//   - newline       : not a separator for 22.05 (hosts then contain a newline);
//   - tokenizer     : 22.05 ends the token scan at a ']' that precedes the '[' (`c][1,2]`
//                     splits at the comma);
//   - earlier group : 22.05 ignores an error in the third-from-last or an earlier bracket
//                     group (`rc = MAX(rc, rc1)` drops the -1): those hosts silently vanish;
//   - number > ULONG: 22.05 re-prints the trailing number of a literal host through an
//                     unsigned long (`n99999999999999999999999` -> `n00018446744073709551615`);
// and, without re-expansion:
//   - total cap     : tfslurm refuses lists of more than k_max_expanded_hosts hosts;
//   - Slurm bug near ULONG_MAX: scontrol crashes, hangs or wraps around on ranges that end
//                     at 18446744073709551615 (only for lists holding a 20-digit number);
//   - not compared  : scontrol timed out printing over 10000 hosts (quadratic in ranges).
// Anything else fails the test and is printed with Slurm's output and ours.
// Exit status: 0 when every difference is explained, 1 otherwise or when scontrol is missing.

#include <tfslurm/error.hpp>
#include <tfslurm/hostlist.hpp>
#include <tfslurm/spawn.hpp>

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

constexpr std::uint64_t k_default_seed = 20240905;
constexpr std::chrono::milliseconds k_scontrol_timeout{3000};
constexpr std::size_t k_max_argument = 100000; // stay well below Linux' MAX_ARG_STRLEN
constexpr std::size_t k_examples_per_category = 3;

// ---------------------------------------------------------------------------------------------
// Running scontrol

struct ProcessOutput {
    std::string out;
    std::string err;
    int wait_status = 0;
    bool timed_out = false;
};

ProcessOutput run_process(const std::string& path,
                          const std::vector<std::string>& args,
                          const std::vector<std::string>& env,
                          std::chrono::milliseconds timeout) {
    std::array<int, 2> out_pipe{};
    std::array<int, 2> err_pipe{};
    if (pipe2(out_pipe.data(), O_CLOEXEC) != 0) {
        throw std::system_error(errno, std::generic_category(), "pipe2");
    }
    if (pipe2(err_pipe.data(), O_CLOEXEC) != 0) {
        const int saved = errno;
        close(out_pipe[0]);
        close(out_pipe[1]);
        throw std::system_error(saved, std::generic_category(), "pipe2");
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);

    std::vector<char*> argv;
    argv.reserve(args.size() + 2);
    argv.push_back(const_cast<char*>(path.c_str()));
    for (const auto& arg : args) {
        argv.push_back(const_cast<char*>(arg.c_str()));
    }
    argv.push_back(nullptr);
    std::vector<char*> envp;
    envp.reserve(env.size() + 1);
    for (const auto& entry : env) {
        envp.push_back(const_cast<char*>(entry.c_str()));
    }
    envp.push_back(nullptr);

    pid_t pid = 0;
    const int rc = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(out_pipe[1]);
    close(err_pipe[1]);
    if (rc != 0) {
        close(out_pipe[0]);
        close(err_pipe[0]);
        throw std::system_error(rc, std::generic_category(), "posix_spawn " + path);
    }

    ProcessOutput result;
    std::array<pollfd, 2> fds{{{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}}};
    std::array<std::string*, 2> sinks{&result.out, &result.err};
    int open_fds = 2;
    bool killed = false;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<char> buffer(1 << 16);
    while (open_fds > 0) {
        int wait_ms = -1;
        if (!killed) {
            const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) {
                kill(pid, SIGKILL);
                killed = true;
                result.timed_out = true;
            } else {
                wait_ms = static_cast<int>(left.count());
            }
        }
        const int ready = poll(fds.data(), fds.size(), wait_ms);
        if (ready < 0) {
            if (errno == EINTR) {
                continue;
            }
            throw std::system_error(errno, std::generic_category(), "poll");
        }
        for (std::size_t i = 0; i < fds.size(); ++i) {
            if (fds[i].fd < 0 || fds[i].revents == 0) {
                continue;
            }
            const ssize_t n = read(fds[i].fd, buffer.data(), buffer.size());
            if (n > 0) {
                sinks[i]->append(buffer.data(), static_cast<std::size_t>(n));
            } else if (n == 0 || errno != EINTR) {
                close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    while (waitpid(pid, &result.wait_status, 0) < 0) {
        if (errno != EINTR) {
            throw std::system_error(errno, std::generic_category(), "waitpid");
        }
    }
    return result;
}

/// `name` resolved through PATH with the launcher's own lookup; "" when it is not found.
std::string find_in_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    try {
        return tfslurm::find_executable(name, path != nullptr ? path : "/usr/bin:/bin");
    } catch (const tfslurm::Error&) {
        return {};
    }
}

/// A scratch directory with a minimal slurm.conf; removed on destruction.
class SlurmConf {
  public:
    SlurmConf() {
        std::string dir_template = "/tmp/tfslurm-diff-XXXXXX";
        if (mkdtemp(dir_template.data()) == nullptr) {
            throw std::system_error(errno, std::generic_category(), "mkdtemp");
        }
        m_dir = dir_template;
        m_file = m_dir + "/slurm.conf";
        std::ofstream conf(m_file);
        conf << "ClusterName=x\nSlurmctldHost=localhost\n";
        if (!conf.flush()) {
            throw std::runtime_error("cannot write " + m_file);
        }
    }
    SlurmConf(const SlurmConf&) = delete;
    SlurmConf& operator=(const SlurmConf&) = delete;
    ~SlurmConf() {
        unlink(m_file.c_str());
        rmdir(m_dir.c_str());
    }

    [[nodiscard]] const std::string& file() const noexcept { return m_file; }

  private:
    std::string m_dir;
    std::string m_file;
};

class Scontrol {
  public:
    Scontrol(std::string path, const std::string& conf_file) : m_path(std::move(path)) {
        for (char** entry = environ; *entry != nullptr; ++entry) {
            if (std::string_view(*entry).rfind("SLURM_", 0) != 0) {
                m_env.emplace_back(*entry);
            }
        }
        m_env.push_back("SLURM_CONF=" + conf_file);
    }

    [[nodiscard]] ProcessOutput show(const std::string& what, const std::string& list) const {
        // getopt would take a list starting with '-' for an option; a leading separator is
        // ignored by every hostlist parser.
        const std::string argument = !list.empty() && list.front() == '-' ? "," + list : list;
        return run_process(m_path, {"show", what, argument}, m_env, k_scontrol_timeout);
    }

  private:
    std::string m_path;
    std::vector<std::string> m_env;
};

// ---------------------------------------------------------------------------------------------
// Results

std::vector<std::string> split_lines(const std::string& text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    while (start < text.size()) {
        std::size_t end = text.find('\n', start);
        if (end == std::string::npos) {
            end = text.size();
        }
        lines.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return lines;
}

struct SlurmResult {
    enum class Kind { hosts, rejected, failed };
    Kind kind = Kind::failed;
    std::vector<std::string> hosts;
    std::string detail;
};

SlurmResult interpret(const ProcessOutput& output) {
    SlurmResult result;
    if (output.timed_out) {
        result.detail = "timed out";
        return result;
    }
    if (WIFSIGNALED(output.wait_status)) {
        result.detail = "killed by signal " + std::to_string(WTERMSIG(output.wait_status));
        return result;
    }
    if (!WIFEXITED(output.wait_status) || WEXITSTATUS(output.wait_status) != 0) {
        result.detail =
            "exit status " + std::to_string(WEXITSTATUS(output.wait_status)) + ": " + output.err;
        return result;
    }
    if (output.err.find("Invalid hostlist") != std::string::npos && output.out.empty()) {
        result.kind = SlurmResult::Kind::rejected;
        result.detail = output.err;
        return result;
    }
    // 22.05 logs the ranges it drops (see "error in an earlier bracket group"); the quoted
    // range may itself hold newlines.
    if (!output.err.empty() &&
        (output.err.rfind("scontrol: error: _parse_single_range: ", 0) != 0 ||
         output.err.find("fatal") != std::string::npos)) {
        result.detail = "unexpected stderr: " + output.err;
        return result;
    }
    result.detail = output.err;
    result.kind = SlurmResult::Kind::hosts;
    result.hosts = split_lines(output.out);
    return result;
}

struct OurResult {
    enum class Kind { hosts, rejected, too_large };
    Kind kind = Kind::hosts;
    std::vector<std::string> hosts;
    std::string message;
};

OurResult expand_ours(const std::string& list) {
    OurResult result;
    try {
        result.hosts = tfslurm::expand_hostlist(list, "list");
    } catch (const tfslurm::Error& error) {
        result.kind = error.code() == tfslurm::Errc::too_large ? OurResult::Kind::too_large
                                                               : OurResult::Kind::rejected;
        result.message = error.what();
    }
    return result;
}

std::string printable(std::string_view text, std::size_t limit = 160) {
    std::string out;
    for (const char c : text.substr(0, limit)) {
        if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (static_cast<unsigned char>(c) < 0x20) {
            out += "\\x" + std::to_string(static_cast<unsigned char>(c));
        } else {
            out.push_back(c);
        }
    }
    if (text.size() > limit) {
        out += "... (" + std::to_string(text.size()) + " bytes)";
    }
    return out;
}

std::string describe_hosts(const std::vector<std::string>& hosts) {
    std::string out = std::to_string(hosts.size()) + " hosts:";
    for (std::size_t i = 0; i < hosts.size() && i < 12; ++i) {
        out += " " + printable(hosts[i], 40);
    }
    if (hosts.size() > 12) {
        out += " ... " + printable(hosts.back(), 40);
    }
    return out;
}

std::string describe(const SlurmResult& result) {
    switch (result.kind) {
    case SlurmResult::Kind::hosts:
        return describe_hosts(result.hosts);
    case SlurmResult::Kind::rejected:
        return "rejected (" + printable(result.detail) + ")";
    case SlurmResult::Kind::failed:
        break;
    }
    return "FAILED (" + printable(result.detail) + ")";
}

std::string describe(const OurResult& result) {
    return result.kind == OurResult::Kind::hosts ? describe_hosts(result.hosts)
                                                 : "error: " + printable(result.message, 300);
}

// ---------------------------------------------------------------------------------------------
// Slurm 22.05's rules, re-applied token by token. The tokenizers are re-implemented here on
// purpose (independently of src/hostlist.cpp); the expansion of one well-formed token is the
// same in 22.05 and in tfslurm, so it is delegated to expand_hostlist().

/// The tokenizer tfslurm follows (Slurm >= 23.02): separators tab, comma, space, newline; a
/// '[' before the separator whose first ']' lies beyond it extends the token to that ']'.
std::vector<std::string> tokenize(const std::string& list) {
    constexpr std::string_view k_separators = "\t, \n";
    std::vector<std::string> tokens;
    std::size_t pos = 0;
    while (true) {
        pos = list.find_first_not_of(k_separators, pos);
        if (pos == std::string::npos) {
            return tokens;
        }
        const std::size_t start = pos;
        std::size_t scan = pos;
        std::size_t end = pos;
        while (true) {
            end = std::min(list.find_first_of(k_separators, scan), list.size());
            const std::size_t open = list.find('[', scan);
            if (open == std::string::npos || open >= end) {
                break;
            }
            const std::size_t close = list.find(']', open + 1);
            if (close == std::string::npos) {
                break;
            }
            scan = close + 1;
        }
        tokens.push_back(list.substr(start, end - start));
        pos = end;
    }
}

/// The 22.05 tokenizer: the first ']' after the token start is used, and one that lies before
/// the '[' ends the scan (`c][1,2]` splits at the comma).
std::vector<std::string> tokenize_2205(const std::string& list, std::string_view separators) {
    std::vector<std::string> tokens;
    std::size_t pos = 0;
    while (true) {
        pos = list.find_first_not_of(separators, pos);
        if (pos == std::string::npos) {
            return tokens;
        }
        const std::size_t start = pos;
        std::size_t parse = pos;
        std::size_t end = pos;
        bool scanning = true;
        while (scanning) {
            end = std::min(list.find_first_of(separators, end), list.size());
            while (true) {
                const std::size_t open = list.find('[', parse);
                const std::size_t close = list.find(']', parse);
                if (open == std::string::npos || open > end || close == std::string::npos ||
                    close < open) {
                    scanning = false;
                    break;
                }
                if (close < end) {
                    parse = close + 1;
                    continue;
                }
                end = close;
                break;
            }
        }
        tokens.push_back(list.substr(start, end - start));
        pos = end;
    }
}

struct Emulation {
    bool valid = true;
    bool complete = true; ///< false when a token could not be emulated
    std::vector<std::string> lines;
    bool newline = false;
    bool tokenizer = false;
    bool repaired = false;
    bool suffix = false;
    bool overflow = false;
    bool swallowed = false;
};

/// How 22.05 prints a literal host: its trailing number goes through strtoul() and "%0*lu".
std::string literal_2205(const std::string& host, Emulation& emulation) {
    std::size_t start = host.size();
    while (start > 0 && host[start - 1] >= '0' && host[start - 1] <= '9') {
        --start;
    }
    std::uint64_t value = 0;
    for (std::size_t i = start; i < host.size(); ++i) {
        const auto digit = static_cast<std::uint64_t>(host[i] - '0');
        if (value > (UINT64_MAX - digit) / 10) {
            emulation.overflow = true;
            const std::string max = std::to_string(UINT64_MAX);
            const std::size_t width = host.size() - start;
            return host.substr(0, start) + std::string(width - max.size(), '0') + max;
        }
        value = value * 10 + digit;
    }
    return host;
}

/// Where the bracket group of a given depth sits in `token` (depth 0: the final range list,
/// 1: the group before it, ...), following Slurm's right-to-left search.
struct Span {
    std::size_t open = std::string::npos;
    std::size_t close = std::string::npos;
};

std::vector<Span> group_spans(const std::string& token) {
    std::vector<Span> spans;
    std::size_t open = token.rfind('[');
    spans.push_back({open, token.find(']', open + 1)});
    while (open > 0) {
        const std::size_t group_open = token.rfind('[', open - 1);
        const std::size_t group_close = token.rfind(']', open - 1);
        if (group_open == std::string::npos || group_close == std::string::npos ||
            group_close < group_open) {
            break;
        }
        spans.push_back({group_open, group_close});
        open = group_open;
    }
    return spans;
}

int group_depth(const std::string& token, std::size_t offset) {
    const auto spans = group_spans(token);
    for (std::size_t depth = 0; depth < spans.size(); ++depth) {
        if (offset >= spans[depth].open && offset <= spans[depth].close) {
            return static_cast<int>(depth);
        }
    }
    return -1;
}

/// The items of a group that 22.05 still emits before its MAX_PREFIX_CNT check fails.
std::string items_within_prefix_limit(const std::string& group_text) {
    std::string kept;
    std::size_t total = 0;
    std::size_t start = 0;
    while (start <= group_text.size()) {
        std::size_t end = group_text.find(',', start);
        if (end == std::string::npos) {
            end = group_text.size();
        }
        const std::string item = group_text.substr(start, end - start);
        total += tfslurm::expand_hostlist("n[" + item + "]").size();
        if (total > 65536) {
            break;
        }
        kept += (kept.empty() ? "" : ",") + item;
        start = end + 1;
    }
    return kept;
}

std::size_t error_offset(const std::string& message) {
    const std::size_t at = message.find("at offset ");
    return at == std::string::npos ? std::string::npos
                                   : std::stoul(message.substr(at + std::strlen("at offset ")));
}

/// Hosts of a token without a suffix, the 22.05 way (one host may span lines: 22.05 does not
/// split at newlines). Returns false when the token makes the whole list invalid.
bool expand_token_2205(std::string token, Emulation& emulation) {
    const bool has_newline = token.find('\n') != std::string::npos;
    if (has_newline) {
        // '\v' is C whitespace like '\n' but no separator: the token stays one token.
        if (token.find('\v') != std::string::npos) {
            emulation.complete = false;
            return false;
        }
        std::replace(token.begin(), token.end(), '\n', '\v');
    }
    try {
        for (auto host : tfslurm::expand_hostlist(token)) {
            if (has_newline) {
                std::replace(host.begin(), host.end(), '\v', '\n');
            }
            for (auto& line : split_lines(host + "\n")) {
                emulation.lines.push_back(std::move(line));
            }
        }
        return true;
    } catch (const tfslurm::Error& error) {
        if (error.code() == tfslurm::Errc::too_large) {
            emulation.complete = false;
            return false;
        }
        // 22.05 keeps only the first prefix level's errors (`rc = MAX(rc, rc1)` drops the -1
        // of deeper levels): an invalid range list there silently yields no host at all, and
        // a group over MAX_PREFIX_CNT silently stops after its last range that fits.
        const std::size_t offset = error_offset(error.what());
        const int depth = offset == std::string::npos ? -1 : group_depth(token, offset);
        if (depth < 2) {
            return false;
        }
        emulation.swallowed = true;
        if (std::string_view(error.what()).find("expands to more than") == std::string::npos) {
            return true;
        }
        const Span span = group_spans(token)[static_cast<std::size_t>(depth)];
        std::string truncated =
            token.substr(0, span.open + 1) +
            items_within_prefix_limit(token.substr(span.open + 1, span.close - span.open - 1)) +
            token.substr(span.close);
        if (has_newline) {
            std::replace(truncated.begin(), truncated.end(), '\v', '\n');
        }
        return expand_token_2205(truncated, emulation);
    }
}

Emulation emulate_2205(const std::string& list) {
    Emulation emulation;
    const auto tokens = tokenize_2205(list, "\t, ");
    emulation.tokenizer = tokenize_2205(list, "\t, \n") != tokenize(list);
    for (const auto& token : tokens) {
        emulation.newline = emulation.newline || token.find('\n') != std::string::npos;
        const std::size_t open = token.rfind('[');
        std::string literal;
        if (open == std::string::npos) {
            literal = literal_2205(token, emulation);
        } else if (const std::size_t close = token.find(']', open + 1);
                   close == std::string::npos) {
            emulation.repaired = true;
            literal = literal_2205(open > 0 ? token.substr(0, open) + "]" : token.substr(open + 1),
                                   emulation);
        } else if (close + 1 != token.size()) {
            emulation.suffix = true;
            emulation.valid = false;
            return emulation;
        } else {
            if (!expand_token_2205(token, emulation)) {
                emulation.valid = false;
                return emulation;
            }
            continue;
        }
        for (auto& line : split_lines(literal + "\n")) {
            emulation.lines.push_back(std::move(line));
        }
    }
    return emulation;
}

bool has_ulong_sized_number(const std::string& list) {
    std::size_t run = 0;
    for (const char c : list) {
        run = c >= '0' && c <= '9' ? run + 1 : 0;
        if (run >= 20) {
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// Corpus

/// Reference inputs: hostlists.md S01-S90 and §4, TensorFlow V2, submitit, and edge cases.
const std::vector<std::string>& reference_lists() {
    static const std::vector<std::string> lists = {
        "n[01-03],x[1-2]-y[1-2]",
        "n[01-03]",
        "n[9-11]",
        "n[009-011]",
        "n[09-11]",
        "n[1-3,5,7-8]",
        "n[1,1,2]",
        "n1,n1,n2",
        "n[1-2],n[2-3]",
        "n[3-1]",
        "n[1-",
        "n1-]",
        "a[1-2]b[3-4]",
        "a[1-2]-b[01-02]c",
        "n[01-3]",
        "n[1-03]",
        "n[0-0]",
        "n[]",
        "n",
        "n[1-2],m[3-4]",
        "n[1-2] m[3-4]",
        "n[8-12]x",
        "host-[1-2].dom",
        "n[a-c]",
        "n[1-2",
        "n[1-2]]",
        "n[1,2",
        "n[-1]",
        "n[1-3:2]",
        "n[01-02,3]",
        "n[1-2][3-4]",
        "rack[1-2]-node[01-02]",
        "n01,n[02-03]",
        "[1-3]",
        "n[0001-0003]",
        "n[98-101]",
        "n[099-101]",
        "n1,,n2",
        ",n1",
        "n1,",
        "n[1-2],,",
        "n[ 1-2]",
        "n[1 -2]",
        "n[1-2] ",
        "n10[1-2]",
        "n[2,1]",
        "n[3-5,1-2]",
        "n[1-1000000]",
        "n[1-64]",
        "nid[0001-0004,0010],gpu-a[1-2]-b[01-03]",
        "n[9-10]",
        "n[09-10]",
        "n[1-010]",
        "n[010-12]",
        "n[007-7]",
        "n[1,01,001]",
        "n[00-02]",
        "n[0-02]",
        "n[+1-2]",
        "n[3,1-2],n1",
        "n[1-3,2-4]",
        "n[1-2],n[1-2]",
        "x[1-2]y[3-4]",
        "a[1-2]b[3-4]c[5-6]",
        "a[1-2]b[3-4]c[5-6]d[7-8]",
        "n[1-2][3-4][5-6]",
        "n[1-2]-[3-4]",
        "n[1]x[2]",
        "n-[1-2]",
        "n.[1-2]",
        "n1 n2\tn3",
        "n[1-2],m5,o[3-4,6,7-9]",
        "n[0001-0003],m5,o[009-011]",
        "t02n13,t02n41,t02n43",
        "compute-b24-[1-3,5-9],compute-b25-[1,4,8]",
        "n[1-65536]",
        "n[0-65535]",
        "n[1-65537]",
        "n[1-2,]",
        "n[,1]",
        "n[[1]]",
        "n[]x",
        "n[1-3/2]",
        "n[1-2-3]",
        "n[1--2]",
        "n[0x1-2]",
        "n[18446744073709551615]",
        "n[2-3]m",
        "n1-2",
        "n[1-2]]x",
        "nid[001-002]-ib0",
        "x1000c[0-1]s0b0n[0-1]",
        "n1",
        "n[1,3]",
        "n[1-3]",
        "compute-b24",
        "compute-a1,compute-b2",
        "compute-b2[1,2]",
        "compute-b2[011,022]",
        "compute-b2[1-3]",
        "compute-b2[1-3,5,6,8]",
        "compute-b2[1-3,5-6,8],compute-a1",
        "compute[042,044]",
        "compute[042-043,045,048-049]",
        "compute-b2[1-,4]",
        "compute-b2[1,2,compute-b3]",
        "n[1-2]-ib",
        "host[5-9,1]",
        "n[1-1000][1-1000]",
        // tokenizer and prefix-group corner cases
        "a[1,2]b[3,4]",
        "n[1,2],m[3",
        "a[1,3,b]2,c]",
        "a[1, 2]",
        "x[1,2] [3,4]",
        "a[1,[2,3],4]",
        "a[1,2 ]",
        "a],[1,2]",
        "[1,2]],a",
        "a[1,b[2,3]",
        "a[1,b[2,3]]",
        "a[1],b[2,c]",
        "n[1]x[2,3]y",
        "p[1-2]q[3,4",
        "n[1[2-3]",
        "a[1]-2]b[5]",
        "[",
        "]",
        "n[",
        "n[]]",
        "x[1-65536]y[1]",
        "x[1-65536,1]y[1]",
        "x[1-2]y[1-65536,1]",
        // strtoul corner cases
        "n[1- -2]",
        "n[0- -0]",
        "n[1-+2]",
        "n[+-1]",
        "n[ +1]",
        "n[1-]",
        "n[1 -]",
        "n[-]",
        "n[1- ]",
        "n[- 1]",
        "n[1-2 ]",
        "n[1,\t2]",
        "n[\t1-2]",
        "n[1-\t2]",
        "n[\v1]",
        "n1\rn2",
        "n[1-99999999999999999999999]",
        "n[99999999999999999999999]",
        "n[00000000000000000000000000001-3]",
        "n[1-00000000000000000000000000003]",
    };
    return lists;
}

/// Inputs that make 22.05 crash, hang or print millions of hosts: compared, never mutated.
const std::vector<std::string>& edge_lists() {
    static const std::vector<std::string> lists = {
        // numbers around ULONG_MAX (Slurm misbehaves on several of them)
        "n[0-18446744073709551615]",
        "n[18446744073709551614-18446744073709551615]",
        "n18446744073709551614,n18446744073709551615",
        "n99999999999999999999999",
        "n18446744073709551616",
        "n[18446744073709551615],m",
        "n[18446744073709551614-18446744073709551615]x[1]",
        // the total cap
        "a[1-2100][1-2000]",
    };
    return lists;
}

class Generator {
  public:
    explicit Generator(std::uint64_t seed) : m_rng(seed) {}

    std::size_t below(std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(m_rng);
    }
    bool chance(double p) { return std::bernoulli_distribution(p)(m_rng); }
    template <class T> const T& pick(const std::vector<T>& values) {
        return values[below(values.size())];
    }

    static std::string padded(std::uint64_t value, std::size_t width) {
        std::string digits = std::to_string(value);
        return digits.size() < width ? std::string(width - digits.size(), '0') + digits : digits;
    }

    std::uint64_t small_number() {
        static const std::vector<std::uint64_t> edges = {0, 1, 7, 8, 9, 10, 99, 100, 999, 65535};
        return chance(0.2) ? pick(edges) : below(120);
    }

    std::string number_text(std::uint64_t value) {
        std::string text =
            padded(value, chance(0.25) ? std::to_string(value).size() + below(3) : 0);
        if (chance(0.03)) {
            text.insert(0, " ");
        } else if (chance(0.02)) {
            text.insert(0, "+");
        }
        return text;
    }

    std::string item(std::size_t max_span) {
        const std::uint64_t low = small_number();
        std::string text = number_text(low);
        if (chance(0.6)) {
            text += "-" + number_text(low + below(max_span + 1));
        }
        return text;
    }

    std::string group(std::size_t max_items, std::size_t max_span) {
        std::string text = "[";
        const std::size_t items = 1 + below(max_items);
        for (std::size_t i = 0; i < items; ++i) {
            text += (i > 0 ? "," : "") + item(max_span);
        }
        return text + "]";
    }

    std::string literal_host() {
        static const std::vector<std::string> names = {
            "login", "n", "a-b", "x]", "n1-]", "node-07", "gpu12", "c.1", "h_3", "5", "n]5"};
        std::string host = pick(names);
        if (chance(0.5)) {
            host += padded(small_number(), below(4));
        }
        return host;
    }

    std::string token() {
        static const std::vector<std::string> heads = {
            "n", "node", "gpu-", "r", "", "x.", "nid", "a1-", "t02n"};
        static const std::vector<std::string> mids = {"b", "-", "-node", ".", "s0b0n", ""};
        static const std::vector<std::string> suffixes = {"x", "-ib0", ".dom", "m", "-", "1"};
        if (chance(0.25)) {
            return literal_host();
        }
        // A ']' before the '[' is rare: 22.05 tokenizes it differently.
        std::string text = chance(0.03) ? "c]" : pick(heads);
        const std::size_t prefix_groups = chance(0.3) ? 1 + below(2) : 0;
        for (std::size_t i = 0; i < prefix_groups; ++i) {
            text += group(2, 3) + pick(mids);
        }
        text += prefix_groups > 0 ? group(2, 3) : group(4, 6);
        if (chance(0.15)) {
            text += pick(suffixes);
        }
        return text;
    }

    std::string list() {
        static const std::vector<std::string> separators = {
            ",", ",", ",", ",", " ", "\t", ",,", ", "};
        const auto separator = [&] { return chance(0.03) ? std::string("\n") : pick(separators); };
        std::string text;
        if (chance(0.05)) {
            text += separator();
        }
        const std::size_t tokens = 1 + below(4);
        for (std::size_t i = 0; i < tokens; ++i) {
            text += (i > 0 ? separator() : "") + token();
        }
        if (chance(0.05)) {
            text += separator();
        }
        return text;
    }

    std::string long_list() {
        std::string text = "n[";
        const std::size_t items = 200 + below(800);
        for (std::size_t i = 0; i < items; ++i) {
            text += (i > 0 ? "," : "") + std::to_string(i * 3) + "-" + std::to_string(i * 3 + 1);
        }
        text += "]";
        for (std::size_t i = 0; i < 300; ++i) {
            text += ",m" + std::to_string(below(1000));
        }
        return text;
    }

    std::string mutate(std::string text) {
        static const std::string alphabet = "[],- x+0123456789a\t";
        const std::size_t edits = 1 + below(2);
        for (std::size_t e = 0; e < edits; ++e) {
            const std::size_t at = text.empty() ? 0 : below(text.size() + 1);
            switch (below(9)) {
            case 0:
                if (!text.empty()) {
                    text.erase(std::min(at, text.size() - 1), 1);
                }
                break;
            case 1:
                text.insert(at, 1, alphabet[below(alphabet.size())]);
                break;
            case 2:
                text.insert(at, text.substr(below(text.size() + 1), below(6)));
                break;
            case 3:
                text.resize(at);
                break;
            case 4: {
                const std::size_t digit = text.find_first_of("0123456789", at);
                if (digit != std::string::npos) {
                    text.insert(digit,
                                pick(std::vector<std::string>{"99999", "6553", "1234567890123"}));
                }
                break;
            }
            case 5:
                text.insert(at, group(2, 3));
                break;
            case 6:
                text.insert(at,
                            pick(std::vector<std::string>{",]", "[,", "[]", "]", "[", "-", ",,"}));
                break;
            case 7:
                if (at + 1 < text.size()) {
                    std::swap(text[at], text[at + 1]);
                }
                break;
            default:
                text.insert(at, "-" + std::to_string(65530 + below(10)));
                break;
            }
        }
        return text;
    }

    /// A list of hosts as a compressor sees them: runs, padding, duplicates, literals.
    std::vector<std::string> hosts() {
        static const std::vector<std::string> prefixes = {
            "n", "node-", "gpu-a1-b", "", "x]", "r1n", "a-", "c.", "n01-", "t02n"};
        std::vector<std::string> hosts;
        const std::size_t pieces = 1 + below(6);
        for (std::size_t p = 0; p < pieces; ++p) {
            if (chance(0.15)) {
                hosts.push_back(literal_host());
                continue;
            }
            const std::string& prefix = pick(prefixes);
            std::uint64_t value = small_number();
            const std::size_t width = chance(0.3) ? 1 + below(4) : 0;
            const std::size_t length = 1 + below(chance(0.1) ? 300 : 8);
            for (std::size_t i = 0; i < length; ++i) {
                hosts.push_back(prefix + padded(value, width));
                const std::size_t step = below(10);
                value = step < 6   ? value + 1
                        : step < 8 ? value + below(5)
                                   : value - std::min<std::uint64_t>(value, below(3));
            }
            if (chance(0.2)) {
                hosts.push_back(hosts[below(hosts.size())]);
            }
        }
        return hosts;
    }

  private:
    std::mt19937_64 m_rng;
};

// ---------------------------------------------------------------------------------------------

struct Options {
    std::string scontrol;
    std::uint64_t seed = k_default_seed;
    bool verbose = false;
};

Options parse_options(int argc, char** argv) {
    Options options;
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--scontrol" && i + 1 < argc) {
            options.scontrol = argv[++i];
        } else if (arg == "--seed" && i + 1 < argc) {
            options.seed = std::stoull(argv[++i]);
        } else if (arg == "--verbose") {
            options.verbose = true;
        } else {
            throw std::invalid_argument("usage: tfslurm_diff_hostlist [--scontrol PATH] "
                                        "[--seed N] [--verbose]");
        }
    }
    return options;
}

class Report {
  public:
    void expected(const std::string& category, const std::string& list, const std::string& why) {
        auto& entry = m_expected[category];
        ++entry.count;
        if (entry.examples.size() < k_examples_per_category) {
            entry.examples.push_back(printable(list, 80) + "  ->  " + why);
        }
    }

    void unexpected(const std::string& text) {
        ++m_unexpected;
        std::cout << "UNEXPECTED " << text << "\n";
    }

    [[nodiscard]] std::size_t unexpected_count() const noexcept { return m_unexpected; }

    void print() const {
        for (const auto& [category, entry] : m_expected) {
            std::cout << "  expected difference: " << category << ": " << entry.count << "\n";
            for (const auto& example : entry.examples) {
                std::cout << "      e.g. " << example << "\n";
            }
        }
    }

  private:
    struct Entry {
        std::size_t count = 0;
        std::vector<std::string> examples;
    };
    std::map<std::string, Entry> m_expected;
    std::size_t m_unexpected = 0;
};

bool equal_to_slurm(const Emulation& emulation, const SlurmResult& slurm) {
    if (!emulation.complete) {
        return false;
    }
    if (!emulation.valid) {
        return slurm.kind == SlurmResult::Kind::rejected;
    }
    return slurm.kind == SlurmResult::Kind::hosts && slurm.hosts == emulation.lines;
}

/// Compare one list; returns true when ours and Slurm's are identical.
bool compare_expansion(const std::string& list, const SlurmResult& slurm, Report& report) {
    const OurResult ours = expand_ours(list);
    if (ours.kind == OurResult::Kind::hosts && slurm.kind == SlurmResult::Kind::hosts &&
        ours.hosts == slurm.hosts) {
        return true;
    }
    if (ours.kind == OurResult::Kind::rejected && slurm.kind == SlurmResult::Kind::rejected) {
        return true;
    }
    const std::string why = "slurm: " + describe(slurm) + "; tfslurm: " + describe(ours);
    if (has_ulong_sized_number(list) &&
        (slurm.kind == SlurmResult::Kind::failed ||
         (slurm.kind == SlurmResult::Kind::hosts && slurm.hosts.empty() &&
          ours.message.find("has more than 65536 hosts") != std::string::npos))) {
        report.expected("Slurm bug near ULONG_MAX (crash, hang or wrap-around)", list, why);
        return false;
    }
    if (slurm.detail == "timed out" && ours.kind == OurResult::Kind::hosts &&
        ours.hosts.size() > 10000) {
        // Printing a list of many ranges is quadratic in scontrol (hostlist_shift() moves the
        // whole range array each time a range empties): nothing to compare.
        report.expected(
            "not compared: scontrol timed out on a list of over 10000 hosts", list, why);
        return false;
    }
    if (ours.kind == OurResult::Kind::too_large &&
        ((slurm.kind == SlurmResult::Kind::hosts &&
          slurm.hosts.size() > tfslurm::k_max_expanded_hosts) ||
         slurm.detail == "timed out")) {
        report.expected("total cap (tfslurm refuses more than 4194304 hosts)", list, why);
        return false;
    }
    const Emulation emulation = emulate_2205(list);
    if (equal_to_slurm(emulation, slurm)) {
        const std::vector<std::pair<bool, const char*>> causes = {
            {emulation.repaired, "missing ']' (22.05 repairs the token, >= 23.02 rejects it)"},
            {emulation.suffix, "suffix after ']' (22.05 rejects it, >= 23.02.5 appends it)"},
            {emulation.overflow, "literal host number above ULONG_MAX (22.05 re-prints it)"},
            {emulation.newline, "newline (not a separator in 22.05)"},
            {emulation.tokenizer, "22.05 tokenizer (a ']' before the '[' stops the token)"},
            {emulation.swallowed,
             "error in an earlier bracket group (22.05 drops those hosts silently)"},
        };
        bool explained = false;
        for (const auto& [applies, category] : causes) {
            if (applies) {
                report.expected(category, list, why);
                explained = true;
            }
        }
        if (explained) {
            return false;
        }
    }
    report.unexpected("expansion of \"" + printable(list, 400) + "\"\n    " + why);
    return false;
}

int run(const Options& options) {
    std::string scontrol_path =
        options.scontrol.empty() ? find_in_path("scontrol") : options.scontrol;
    if (scontrol_path.empty() || access(scontrol_path.c_str(), X_OK) != 0) {
        std::cout << "FAIL: scontrol not found (install slurm-client or pass --scontrol PATH)\n";
        return 1;
    }
    const SlurmConf conf;
    const Scontrol scontrol(scontrol_path, conf.file());
    const auto started = std::chrono::steady_clock::now();

    // Sanity check: the oracle itself must work.
    const SlurmResult probe = interpret(scontrol.show("hostnames", "n[1-2]"));
    if (probe.kind != SlurmResult::Kind::hosts ||
        probe.hosts != std::vector<std::string>{"n1", "n2"}) {
        std::cout << "FAIL: " << scontrol_path << " does not work: " << describe(probe) << "\n";
        return 1;
    }

    Generator generator(options.seed);
    std::vector<std::string> lists = reference_lists();
    lists.insert(lists.end(), edge_lists().begin(), edge_lists().end());
    const std::size_t references = lists.size();
    for (std::size_t i = 0; i < 260; ++i) {
        lists.push_back(generator.list());
    }
    for (std::size_t i = 0; i < 4; ++i) {
        lists.push_back(generator.long_list());
    }
    // Mutating lists of thousands of hosts would only slow the test down.
    std::vector<std::string> sources;
    for (const auto& list : reference_lists()) {
        const OurResult ours = expand_ours(list);
        if (ours.kind != OurResult::Kind::hosts || ours.hosts.size() <= 1000) {
            sources.push_back(list);
        }
    }
    for (std::size_t i = 0; i < 220; ++i) {
        lists.push_back(generator.mutate(i % 3 == 0 ? generator.pick(sources) : generator.list()));
    }

    Report report;
    Report compress_report;
    std::size_t identical_hosts = 0;
    std::size_t identical_rejections = 0;
    std::vector<std::vector<std::string>> host_lists;
    for (const auto& list : lists) {
        if (list.size() > k_max_argument || list.find('\0') != std::string::npos) {
            continue;
        }
        const SlurmResult slurm = interpret(scontrol.show("hostnames", list));
        if (options.verbose) {
            std::cout << printable(list) << "  ->  " << describe(slurm) << "\n";
        }
        if (compare_expansion(list, slurm, report)) {
            if (slurm.kind == SlurmResult::Kind::hosts) {
                ++identical_hosts;
                if (!slurm.hosts.empty() && slurm.hosts.size() <= 5000) {
                    host_lists.push_back(slurm.hosts);
                }
            } else {
                ++identical_rejections;
            }
        }
    }
    std::cout << "expand: " << lists.size() << " lists (" << references
              << " reference, the rest generated with seed " << options.seed
              << "): " << identical_hosts + identical_rejections << " identical to scontrol ("
              << identical_hosts << " expanded, " << identical_rejections << " rejected by both)\n";
    report.print();

    // Compression: ours must round-trip; compare with `scontrol show hostlist`.
    for (std::size_t i = 0; i < 200; ++i) {
        host_lists.push_back(generator.hosts());
    }
    std::size_t compared = 0;
    std::size_t same = 0;
    std::size_t round_trips = 0;
    std::size_t unwritable = 0;
    for (const auto& hosts : host_lists) {
        std::string ours;
        try {
            ours = tfslurm::compress_hostlist(hosts);
        } catch (const tfslurm::Error&) {
            ++unwritable; // hosts such as `n[12` cannot be written in a hostlist at all
            continue;
        }
        std::vector<std::string> back;
        try {
            back = tfslurm::expand_hostlist(ours);
        } catch (const tfslurm::Error& error) {
            compress_report.unexpected("compress_hostlist output \"" + printable(ours) +
                                       "\" does not expand: " + error.what());
            continue;
        }
        if (back != hosts) {
            compress_report.unexpected("compress_hostlist output \"" + printable(ours) +
                                       "\" does not round-trip: " + describe_hosts(back));
            continue;
        }
        ++round_trips;
        std::string joined;
        for (const auto& host : hosts) {
            joined += (joined.empty() ? "" : ",") + host;
        }
        if (joined.size() > k_max_argument) {
            continue;
        }
        const ProcessOutput output = scontrol.show("hostlist", joined);
        ++compared;
        std::string theirs = output.out;
        if (!theirs.empty() && theirs.back() == '\n') {
            theirs.pop_back();
        }
        if (theirs == ours) {
            ++same;
        } else if (std::any_of(hosts.begin(), hosts.end(), [](const std::string& host) {
                       Emulation unused;
                       return literal_2205(host, unused) != host;
                   })) {
            compress_report.expected("host number above ULONG_MAX (22.05 re-prints it)",
                                     joined,
                                     "slurm: " + printable(theirs) +
                                         "; tfslurm: " + printable(ours));
        } else {
            compress_report.unexpected("compression of \"" + printable(joined, 300) +
                                       "\"\n    slurm: " + printable(theirs, 300) +
                                       "\n    tfslurm: " + printable(ours, 300));
        }
    }
    std::cout << "compress: " << host_lists.size() << " host lists (" << unwritable
              << " with a host that no hostlist can hold, such as `n[12`): " << round_trips
              << " round-trip through expand_hostlist; " << compared
              << " compared with `scontrol show hostlist`: " << same << " identical\n";
    compress_report.print();

    const auto seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cout << "scontrol: " << scontrol_path << ", " << seconds << " s\n";
    const std::size_t unexpected = report.unexpected_count() + compress_report.unexpected_count();
    if (unexpected > 0) {
        std::cout << "FAIL: " << unexpected << " unexplained differences\n";
        return 1;
    }
    std::cout << "PASS\n";
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(parse_options(argc, argv));
    } catch (const std::exception& error) {
        std::cout << "FAIL: " << error.what() << "\n";
        return 1;
    }
}
