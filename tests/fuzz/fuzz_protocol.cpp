// SPDX-License-Identifier: MIT
// libFuzzer target for the protocol's JSON reader and decoders; see fuzz_json.hpp for what is
// checked.
#include "fuzz_checks.hpp"
#include "fuzz_json.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    tfslurm::fuzz::require(tfslurm::fuzz::check_json(input), input);
    return 0;
}
