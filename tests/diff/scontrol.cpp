// SPDX-License-Identifier: MIT
#include "scontrol.hpp"

#include "process.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/spawn.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <utility>

namespace tfslurm::diff {

namespace {

constexpr std::chrono::milliseconds k_scontrol_timeout{3000};

} // namespace

std::string find_in_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    try {
        return tfslurm::find_executable(name, path != nullptr ? path : "/usr/bin:/bin");
    } catch (const tfslurm::Error&) {
        return {};
    }
}

SlurmConf::SlurmConf() {
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

SlurmConf::~SlurmConf() {
    unlink(m_file.c_str());
    rmdir(m_dir.c_str());
}

Scontrol::Scontrol(std::string path, const std::string& conf_file) : m_path(std::move(path)) {
    m_env = test::environment_without({"SLURM_"});
    m_env.push_back("SLURM_CONF=" + conf_file);
}

test::Result Scontrol::show(const std::string& what, const std::string& list) const {
    // getopt would take a list starting with '-' for an option; a leading separator is
    // ignored by every hostlist parser.
    const std::string argument = !list.empty() && list.front() == '-' ? "," + list : list;
    return test::run({{m_path, "show", what, argument}, m_env, {}, k_scontrol_timeout});
}

std::string Scontrol::version() const {
    const test::Result output = test::run({{m_path, "--version"}, m_env, {}, k_scontrol_timeout});
    std::string text = output.out;
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
        text.pop_back();
    }
    return text;
}

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

SlurmResult interpret(const test::Result& output) {
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

} // namespace tfslurm::diff
