// SPDX-License-Identifier: MIT
// Where the test programs find the files they use: paths in the checkout and in the build
// directory, defined in test_paths.cpp, which CMake writes (tests/support/CMakeLists.txt). Not
// compile definitions: every object that held a path would differ from one clone to the next,
// and the compiler cache of scripts/build.sh could serve no other clone.
#pragma once

namespace tfslurm::test::paths {

extern const char* const source_dir;        ///< the checkout's top
extern const char* const test_data_dir;     ///< tests/data
extern const char* const hostlist_table;    ///< tests/data/hostlists.tsv
extern const char* const fuzz_dir;          ///< tests/fuzz
extern const char* const examples_dir;      ///< examples
extern const char* const cli;               ///< the tfslurm binary under test
extern const char* const trainer;           ///< tests/trainer's fake trainer
extern const char* const fake_nvml;         ///< the NVML stand-in (fake_nvml.so)
extern const char* const fake_libslurm_dir; ///< where the libslurm stand-ins are

} // namespace tfslurm::test::paths
