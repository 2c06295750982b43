// SPDX-License-Identifier: MIT
// Catch2 v3 under the name of Catch2 v2's single header, so that every test includes
// <catch2/catch.hpp> and builds with the Catch2 its Debian release packages: v2 on Debian 12,
// v3 on Debian 13 and sid (which have no v2). tests/CMakeLists.txt puts this directory on the
// include path only when the Catch2 it found is v3; with v2 the real header is used.
// What v3 changed that the tests use: the string matchers left namespace Catch for
// Catch::Matchers, and Contains became ContainsSubstring; main() comes from
// Catch2::Catch2WithMain (CATCH_CONFIG_MAIN does nothing in v3).
#pragma once

#include <catch2/catch_all.hpp>

#include <string>

namespace Catch {

using Matchers::EndsWith;
using Matchers::Matches;
using Matchers::Predicate;
using Matchers::StartsWith;

// v2's Catch::Contains(string): v3's Contains is the range matcher "has an element equal to".
inline Matchers::StringContainsMatcher Contains(const std::string& str,
                                                CaseSensitive cs = CaseSensitive::Yes) {
    return Matchers::ContainsSubstring(str, cs);
}

} // namespace Catch
