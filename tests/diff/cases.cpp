// SPDX-License-Identifier: MIT
#include "cases.hpp"

#include "hostlist_table.hpp"

namespace tfslurm::diff {

namespace {

std::vector<std::string> table_lists(const std::string& role) {
    std::vector<std::string> lists;
    for (const auto& example : test::read_hostlist_table(test::hostlist_table_path())) {
        if (example.diff == role) {
            lists.push_back(example.list);
        }
    }
    return lists;
}

} // namespace

const std::vector<std::string>& reference_lists() {
    static const std::vector<std::string> lists = table_lists("ref");
    return lists;
}

const std::vector<std::string>& edge_lists() {
    static const std::vector<std::string> lists = table_lists("edge");
    return lists;
}

} // namespace tfslurm::diff
