// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// A temporary directory for one test, removed with everything in it at the end, and the two
/// file questions tests ask: what a file holds, and whether anything is at a path.

#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

namespace tfslurm::test {

/// The whole text of the file at `path` ("" when it cannot be read).
inline std::string file_text(const std::string& path) {
    std::ifstream in{path};
    return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// Whether anything is at `path` (a dangling link too).
inline bool path_exists(const std::string& path) {
    struct stat info {};
    return ::lstat(path.c_str(), &info) == 0;
}

class TempDir {
  public:
    /// A new directory `/tmp/tfslurm-<name>-XXXXXX`. \throws std::system_error.
    explicit TempDir(const std::string& name = "test") {
        std::string pattern = "/tmp/tfslurm-" + name + "-XXXXXX";
        std::vector<char> buffer(pattern.begin(), pattern.end());
        buffer.push_back('\0');
        if (::mkdtemp(buffer.data()) == nullptr) {
            throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
        }
        path = buffer.data();
    }
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    TempDir(TempDir&&) = delete;
    TempDir& operator=(TempDir&&) = delete;

    /// Write `text` to the file `name` in the directory, with `mode`; returns its path.
    [[nodiscard]] std::string
    write(const std::string& name, const std::string& text, mode_t mode = 0644) const {
        std::string file = path + "/" + name;
        std::ofstream(file) << text;
        ::chmod(file.c_str(), mode);
        return file;
    }

    std::string path;
};

} // namespace tfslurm::test
