// SPDX-License-Identifier: MIT
// A main() for builds without libFuzzer: runs every file of the given directories (and every
// given file) through LLVMFuzzerTestOneInput once, so that GCC builds replay the seed corpus
// and the saved crashers. Files named README* are documentation and skipped. `--table FILE`
// replays the list of every example of a hostlist table (tests/data/hostlists.tsv), which
// scripts/fuzz.sh also adds to the seed corpus.
//
//   replay_<target> [--table FILE] DIR_OR_FILE...
//
// Exit status: 0 when every input passed (an abort() inside the target ends the process),
// 1 when an argument does not exist or cannot be read.
#include "hostlist_table.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

bool replay_file(const std::filesystem::path& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) {
        std::cerr << "replay: cannot read " << path << "\n";
        return false;
    }
    const std::vector<char> bytes{std::istreambuf_iterator<char>(file),
                                  std::istreambuf_iterator<char>()};
    // A distinct allocation of exactly the input's size lets ASan see overreads.
    std::vector<std::uint8_t> input(bytes.begin(), bytes.end());
    LLVMFuzzerTestOneInput(input.data(), input.size());
    return true;
}

/// Replays the list of every example of the table; false when the table cannot be read.
bool replay_table(const std::string& path, std::size_t& replayed) {
    try {
        for (const auto& example : tfslurm::test::read_hostlist_table(path)) {
            std::vector<std::uint8_t> input(example.list.begin(), example.list.end());
            LLVMFuzzerTestOneInput(input.data(), input.size());
            ++replayed;
        }
    } catch (const std::runtime_error& error) {
        std::cerr << "replay: " << error.what() << "\n";
        return false;
    }
    return true;
}

} // namespace

int main(int argc, char** argv) {
    std::size_t replayed = 0;
    bool ok = true;
    for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == "--table" && i + 1 < argc) {
            ok = replay_table(argv[++i], replayed) && ok;
            continue;
        }
        const std::filesystem::path argument(argv[i]);
        std::error_code error;
        if (std::filesystem::is_directory(argument, error)) {
            std::vector<std::filesystem::path> files;
            for (const auto& entry : std::filesystem::directory_iterator(argument, error)) {
                if (entry.is_regular_file() &&
                    entry.path().filename().string().rfind("README", 0) != 0) {
                    files.push_back(entry.path());
                }
            }
            std::sort(files.begin(), files.end());
            for (const auto& file : files) {
                ok = replay_file(file) && ok;
                ++replayed;
            }
        } else if (std::filesystem::is_regular_file(argument, error)) {
            ok = replay_file(argument) && ok;
            ++replayed;
        } else {
            std::cerr << "replay: no such file or directory: " << argument << "\n";
            ok = false;
        }
    }
    std::cout << "replayed " << replayed << " inputs\n";
    return ok ? 0 : 1;
}
