// SPDX-License-Identifier: MIT
#pragma once

// Running Slurm's scontrol, the oracle of the differential test, and reading its answer.

#include <string>
#include <vector>

namespace tfslurm::test {
struct Result;
} // namespace tfslurm::test

namespace tfslurm::diff {

/// `name` resolved through PATH with the launcher's own lookup; "" when it is not found.
[[nodiscard]] std::string find_in_path(const std::string& name);

/// A scratch directory with a minimal slurm.conf; removed on destruction. Throws
/// std::system_error or std::runtime_error when it cannot be written.
class SlurmConf {
  public:
    SlurmConf();
    SlurmConf(const SlurmConf&) = delete;
    SlurmConf& operator=(const SlurmConf&) = delete;
    SlurmConf(SlurmConf&&) = delete;
    SlurmConf& operator=(SlurmConf&&) = delete;
    ~SlurmConf();

    [[nodiscard]] const std::string& file() const noexcept { return m_file; }

  private:
    std::string m_dir;
    std::string m_file;
};

/// `scontrol show WHAT LIST` with SLURM_CONF set and no other SLURM_* variable.
class Scontrol {
  public:
    Scontrol(std::string path, const std::string& conf_file);

    /// Runs scontrol (timeout: 3 s, then SIGKILL); throws std::system_error when it cannot be
    /// started.
    [[nodiscard]] test::Result show(const std::string& what, const std::string& list) const;
    /// `scontrol --version`'s answer, e.g. `slurm 26.05.5`; "" when it gives none.
    [[nodiscard]] std::string version() const;

  private:
    std::string m_path;
    std::vector<std::string> m_env;
};

/// The lines of `text`: "a\nb\n" -> {"a", "b"}.
[[nodiscard]] std::vector<std::string> split_lines(const std::string& text);

/// What `scontrol show hostnames` made of a list.
struct SlurmResult {
    enum class Kind { hosts, rejected, failed };
    Kind kind = Kind::failed;
    std::vector<std::string> hosts;
    std::string detail;
};

[[nodiscard]] SlurmResult interpret(const test::Result& output);

} // namespace tfslurm::diff
