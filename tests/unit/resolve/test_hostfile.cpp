// SPDX-License-Identifier: MIT
// The hostfile of an arbitrary distribution (src/resolve/hostfile.cpp): Slurm's grammar, and the
// errors that quote the line.
#include "fixtures.hpp"
#include "temp_dir.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/resolve/hostfile.hpp>

#include <catch2/catch.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

using tfslurm::Errc;
using tfslurm::parse_hostfile;
using tfslurm::test::require_error;
using Hosts = std::vector<std::string>;

namespace {

using tfslurm::test::k_hostfile_subject;

} // namespace

TEST_CASE("hostfile: the grammar is Slurm's", "[hostfile]") {
    CHECK(parse_hostfile("n2\nn1\nn2\n", 3, k_hostfile_subject) == Hosts{"n2", "n1", "n2"});
    CHECK(parse_hostfile("n3*2\n# a comment\nn1,n2\n\nn2,n3\n", 6, k_hostfile_subject) ==
          Hosts{"n3", "n3", "n1", "n2", "n2", "n3"});
    // Names after the first ntasks are ignored, even in the middle of a line or a repeat.
    CHECK(parse_hostfile("n1,n2,n3\nn4\n", 2, k_hostfile_subject) == Hosts{"n1", "n2"});
    CHECK(parse_hostfile("n1*1000000000\n", 3, k_hostfile_subject) == Hosts{"n1", "n1", "n1"});
    // Without ntasks: every name.
    CHECK(parse_hostfile("n1,n2\nn3*2", std::nullopt, k_hostfile_subject) ==
          Hosts{"n1", "n2", "n3", "n3"});
    // Comments after names, an escaped '#', blanks and CRLF line ends.
    CHECK(parse_hostfile("n1 # first\r\n  n2\t,n3 \r\nrack\\#4\n", 4, k_hostfile_subject) ==
          Hosts{"n1", "n2", "n3", "rack#4"});
    // Empty fields are skipped, as strtok does in Slurm.
    CHECK(parse_hostfile("n1,,n2,\n", 2, k_hostfile_subject) == Hosts{"n1", "n2"});
    // A name is one host, not a hostlist expression.
    CHECK(parse_hostfile("n[1-2]\n", 1, k_hostfile_subject) == Hosts{"n[1-2]"});
}

TEST_CASE("hostfile: malformed hostfiles are errors that quote the line", "[hostfile]") {
    require_error([] { (void)parse_hostfile("n1\n-n2\n", 2, k_hostfile_subject); },
                  Errc::invalid_hostlist,
                  "SLURM_HOSTFILE (hf): line 2: a host name must start with a letter or a "
                  "digit: \"-n2\"");
    require_error([] { (void)parse_hostfile("n1*0\n", 1, k_hostfile_subject); },
                  Errc::invalid_hostlist,
                  "SLURM_HOSTFILE (hf): line 1: expected NAME or NAME*COUNT with a count of at "
                  "least 1: \"n1*0\"");
    require_error([] { (void)parse_hostfile("# only\n*3\n", 1, k_hostfile_subject); },
                  Errc::invalid_hostlist,
                  "SLURM_HOSTFILE (hf): line 2: a host name must start with a letter or a "
                  "digit: \"*3\"");
    require_error([] { (void)parse_hostfile("n1,x*y\n", 2, k_hostfile_subject); },
                  Errc::invalid_hostlist,
                  "SLURM_HOSTFILE (hf): line 1: expected NAME or NAME*COUNT with a count of at "
                  "least 1: \"x*y\"");
    require_error([] { (void)parse_hostfile("n1\nn2\n", 3, k_hostfile_subject); },
                  Errc::invalid_hostlist,
                  R"(SLURM_HOSTFILE (hf): names 2 hosts for 3 tasks: "n1\nn2\n")");
    require_error([] { (void)parse_hostfile("# nothing\n\n", std::nullopt, k_hostfile_subject); },
                  Errc::invalid_hostlist,
                  R"(SLURM_HOSTFILE (hf): names no host: "# nothing\n\n")");
}

TEST_CASE("hostfile: a text file is read whole up to 16 MiB, a byte more is refused",
          "[hostfile]") {
    // read_text_file() reads into its string, which grows from 4 KiB: each size around a step.
    const tfslurm::test::TempDir dir("read-text");
    for (const std::size_t size : {std::size_t{0},
                                   std::size_t{1},
                                   std::size_t{4095},
                                   std::size_t{4096},
                                   std::size_t{4097},
                                   std::size_t{65537},
                                   tfslurm::k_max_text_file}) {
        INFO("size " << size);
        std::string text(size, 'x');
        for (std::size_t i = 0; i < size; i += 97) {
            text[i] = static_cast<char>('a' + i % 26); // not one repeated byte: order matters
        }
        const std::string file = dir.write("f" + std::to_string(size), text);
        CHECK(tfslurm::read_text_file(file, "HF") == text);
    }
    const std::string over = dir.write("over", std::string(tfslurm::k_max_text_file + 1, 'x'));
    require_error([&] { (void)tfslurm::read_text_file(over, "HF"); },
                  Errc::too_large,
                  "HF: \"" + over + "\" has more than 16777216 bytes");
}
