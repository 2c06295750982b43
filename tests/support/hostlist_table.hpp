// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// The hostlist examples of tests/data/hostlists.tsv (the format is described at its top),
/// shared by the unit tests, the differential test and the fuzz corpus replay.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::test {

/// One line of the table.
struct HostlistExample {
    enum class Expect { none, hosts, error, count };

    std::string id;   ///< "S01" ... or "" (the table's "-")
    std::string set;  ///< the unit test that checks it, "" for none
    std::string diff; ///< "ref", "edge" or ""
    std::string list;
    Expect expect = Expect::none;
    std::vector<std::string> hosts; ///< Expect::hosts
    std::string error;              ///< Expect::error: the message between subject and input
    std::size_t count = 0;          ///< Expect::count: the number of hosts ...
    std::string first;              ///< ... the first one
    std::string last;               ///< ... and the last one
    std::size_t line = 0;           ///< line number in the file
};

/// The table of the checkout (tests/data/hostlists.tsv: test_paths.hpp).
[[nodiscard]] std::string hostlist_table_path();

/// Every example of the table at `path`, in file order. Throws std::runtime_error naming the
/// file and line when it cannot be read or a line is malformed.
[[nodiscard]] std::vector<HostlistExample> read_hostlist_table(const std::string& path);

/// The examples of one unit-test set of the compiled-in table, in file order.
[[nodiscard]] std::vector<HostlistExample> hostlist_examples(std::string_view set);

/// The examples of one unit-test set that expect `expect`, in file order; throws
/// std::runtime_error when there is none.
[[nodiscard]] std::vector<HostlistExample> hostlist_examples(std::string_view set,
                                                             HostlistExample::Expect expect);

/// Where an example stands, for the report of a failing one: "hostlists.tsv:<line> <id>".
[[nodiscard]] std::string table_place(const HostlistExample& example);

/// The table's escapes undone: "n\\t1" -> "n<TAB>1" (\t \n \v \r \\ \xHH). Throws
/// std::runtime_error on an unknown or truncated escape.
[[nodiscard]] std::string unescape(std::string_view text);

} // namespace tfslurm::test
