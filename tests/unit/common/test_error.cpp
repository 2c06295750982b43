// SPDX-License-Identifier: MIT
#include <tfslurm/common/error.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <tuple>

using namespace tfslurm;

TEST_CASE("error: quote escapes what could forge or garble a line", "[error]") {
    using Row = std::tuple<std::string, std::string>;
    const auto [input, quoted] = GENERATE(table<std::string, std::string>({
        Row{"n1", R"("n1")"},
        Row{"n1\tn2", R"("n1\tn2")"},
        Row{"a\"b\\c", R"("a\"b\\c")"},
        Row{"x\ntfslurm: error: aborting: forged", R"("x\ntfslurm: error: aborting: forged")"},
        Row{"\x1b[31mred\x1b[m", R"("\x1b[31mred\x1b[m")"},
        Row{std::string("nul\0byte", 8), R"("nul\x00byte")"},
        Row{"caf\xc3\xa9", "\"caf\xc3\xa9\""},                                     // UTF-8 is kept
        Row{"\xe2\x82\xac \xf0\x9f\x98\x80", "\"\xe2\x82\xac \xf0\x9f\x98\x80\""}, // 3 and 4 bytes
        Row{"bad\xff", R"("bad\xff")"},                   // never valid in UTF-8
        Row{"cut\xc3", R"("cut\xc3")"},                   // sequence cut short
        Row{"\xc3\x28", R"("\xc3(")"},                    // bad continuation
        Row{"\xc0\xaf", R"("\xc0\xaf")"},                 // overlong '/'
        Row{"\xe0\x80\xaf", R"("\xe0\x80\xaf")"},         // overlong, 3 bytes
        Row{"\xed\xa0\x80", R"("\xed\xa0\x80")"},         // a UTF-16 surrogate
        Row{"\xf4\x90\x80\x80", R"("\xf4\x90\x80\x80")"}, // past U+10FFFF
        Row{"\xc2\x9b"
            "31m",
            R"("\xc2\x9b31m")"},  // C1 control CSI
        Row{"\x80", R"("\x80")"}, // stray continuation
        Row{"\x7f", R"("\x7f")"},
    }));
    CAPTURE(input);
    CHECK(quote(input) == quoted);
}

TEST_CASE("error: quote cuts long values and says how long they were", "[error]") {
    const std::string quoted = quote(std::string(300, 'a'));
    CHECK(quoted == "\"" + std::string(200, 'a') + "\"... (300 bytes)");
}
