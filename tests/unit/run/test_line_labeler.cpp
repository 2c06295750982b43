// SPDX-License-Identifier: MIT
// --label: every line of a stream gets its rank, in order; an incomplete last line too.
#include "run/detail/line_labeler.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using tfslurm::detail::k_max_labeled_line;
using tfslurm::detail::LineLabeler;

namespace {

/// What the labeler makes of `chunks` (each one read), then of the stream's end.
std::string label(const std::vector<std::string>& chunks) {
    LineLabeler labeler("3: ");
    std::string out;
    for (const auto& chunk : chunks) {
        out += labeler.feed(chunk);
    }
    return out + labeler.finish();
}

} // namespace

TEST_CASE("line_labeler: every line gets the prefix, in order", "[label]") {
    struct Case {
        std::vector<std::string> chunks; ///< as read, one after the other
        std::string expected;
    };
    const std::vector<Case> cases{
        {{}, ""},
        {{""}, ""},
        {{"a\n"}, "3: a\n"},
        {{"a\nb\n"}, "3: a\n3: b\n"},
        {{"a", "b", "c\n"}, "3: abc\n"},
        {{"a\nb", "c\nd\n"}, "3: a\n3: bc\n3: d\n"},
        {{"\n\n"}, "3: \n3: \n"},
        {{"no newline"}, "3: no newline\n"},
        {{"a\n", "tail"}, "3: a\n3: tail\n"},
        {{"x\r50%\r100%\n"}, "3: x\r50%\r100%\n"},
        {{std::string("nul\0byte\n", 9)}, std::string("3: nul\0byte\n", 12)},
    };
    for (const auto& c : cases) {
        INFO("chunks: " << c.chunks.size());
        CHECK(label(c.chunks) == c.expected);
    }
}

TEST_CASE("line_labeler: complete lines come out at once, an incomplete one waits", "[label]") {
    LineLabeler labeler("0: ");
    CHECK(labeler.feed("first\nsec") == "0: first\n");
    CHECK(labeler.feed("ond") == "");
    CHECK(labeler.feed("\n") == "0: second\n");
    CHECK(labeler.finish() == "");
    CHECK(labeler.feed("partial") == "");
    CHECK(labeler.finish() == "0: partial\n");
    CHECK(labeler.finish() == "");
}

TEST_CASE("line_labeler: a line longer than the limit is cut into labelled pieces", "[label]") {
    LineLabeler labeler("1: ");
    const std::string piece(k_max_labeled_line, 'x');
    CHECK(labeler.feed(piece.substr(0, 10)) == "");
    CHECK(labeler.feed(piece.substr(10) + "yz\n") == "1: " + piece + "\n1: yz\n");
    CHECK(labeler.feed(piece + piece + "!") == "1: " + piece + "\n1: " + piece + "\n");
    CHECK(labeler.finish() == "1: !\n");
}
