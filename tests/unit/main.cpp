// SPDX-License-Identifier: MIT
// The one translation unit that provides Catch2's main().
#define CATCH_CONFIG_MAIN // NOLINT(readability-identifier-naming): Catch2 names it
#include <catch2/catch.hpp>
