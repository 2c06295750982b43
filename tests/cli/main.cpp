// SPDX-License-Identifier: MIT
#define CATCH_CONFIG_MAIN // NOLINT(readability-identifier-naming): Catch2 names it
#include <catch2/catch.hpp>
