// SPDX-License-Identifier: MIT
#pragma once
// What auth.cpp and channel.cpp share of libsodium: its start, and the views of bytes it takes.

#include <tfslurm/run/auth.hpp>

#include <sodium.h>

#include <stdexcept>
#include <string_view>

namespace tfslurm::protocol::detail {

/// sodium_init() once per process, before the first call into libsodium (it picks the CPU's
/// implementations and opens the random source). Thread-safe: a function-local static.
inline void ensure_sodium() {
    static const bool ready = sodium_init() >= 0;
    if (!ready) {
        throw std::runtime_error("libsodium: sodium_init failed (no random source?)");
    }
}

inline const unsigned char* as_bytes(std::string_view text) noexcept {
    return reinterpret_cast<const unsigned char*>(text.data());
}

inline std::string_view as_chars(const Digest& digest) noexcept {
    return {reinterpret_cast<const char*>(digest.data()), digest.size()};
}

} // namespace tfslurm::protocol::detail
