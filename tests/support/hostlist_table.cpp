// SPDX-License-Identifier: MIT
#include "hostlist_table.hpp"

#include "test_paths.hpp"

#include <fstream>
#include <stdexcept>

namespace tfslurm::test {

namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> fields;
    while (true) {
        const std::size_t end = text.find(separator);
        fields.push_back(text.substr(0, end));
        if (end == std::string_view::npos) {
            return fields;
        }
        text.remove_prefix(end + 1);
    }
}

std::string optional_field(std::string_view field) {
    return field == "-" ? std::string() : std::string(field);
}

int hex_digit(char c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/// Fill the expectation of `example` from the expect column.
void parse_expect(std::string_view text, HostlistExample& example) {
    const auto starts_with = [&](std::string_view prefix) {
        return text.substr(0, prefix.size()) == prefix;
    };
    if (text == "-") {
        example.expect = HostlistExample::Expect::none;
    } else if (text == "hosts:") {
        example.expect = HostlistExample::Expect::hosts;
    } else if (starts_with("hosts: ")) {
        example.expect = HostlistExample::Expect::hosts;
        for (const auto host : split(text.substr(7), ' ')) {
            example.hosts.push_back(unescape(host));
        }
    } else if (starts_with("error: ")) {
        example.expect = HostlistExample::Expect::error;
        example.error = unescape(text.substr(7));
    } else if (starts_with("count: ")) {
        const auto words = split(text.substr(7), ' ');
        if (words.size() != 3) {
            throw std::runtime_error("expected \"count: N FIRST LAST\"");
        }
        example.expect = HostlistExample::Expect::count;
        example.count = std::stoul(std::string(words[0]));
        example.first = unescape(words[1]);
        example.last = unescape(words[2]);
    } else {
        throw std::runtime_error("expect must be \"hosts: ...\", \"error: ...\", \"count: ...\" "
                                 "or \"-\"");
    }
}

} // namespace

std::string hostlist_table_path() {
    return tfslurm::test::paths::hostlist_table;
}

std::string unescape(std::string_view text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] != '\\') {
            out.push_back(text[i]);
            continue;
        }
        if (i + 1 >= text.size()) {
            throw std::runtime_error("'\\' at the end of a field");
        }
        switch (text[++i]) {
        case 't':
            out.push_back('\t');
            break;
        case 'n':
            out.push_back('\n');
            break;
        case 'v':
            out.push_back('\v');
            break;
        case 'r':
            out.push_back('\r');
            break;
        case '\\':
            out.push_back('\\');
            break;
        case 'x': {
            const int high = i + 1 < text.size() ? hex_digit(text[i + 1]) : -1;
            const int low = i + 2 < text.size() ? hex_digit(text[i + 2]) : -1;
            if (high < 0 || low < 0) {
                throw std::runtime_error("'\\x' needs two hex digits");
            }
            out.push_back(static_cast<char>(high * 16 + low));
            i += 2;
            break;
        }
        default:
            throw std::runtime_error(std::string("unknown escape '\\") + text[i] + "'");
        }
    }
    return out;
}

std::vector<HostlistExample> read_hostlist_table(const std::string& path) {
    std::ifstream file(path);
    if (!file) {
        throw std::runtime_error(path + ": cannot be read");
    }
    std::vector<HostlistExample> examples;
    std::size_t number = 0;
    for (std::string line; std::getline(file, line);) {
        ++number;
        if (line.empty() || line.front() == '#') {
            continue;
        }
        try {
            const auto fields = split(line, '\t');
            if (fields.size() != 5) {
                throw std::runtime_error("expected 5 tab-separated fields, not " +
                                         std::to_string(fields.size()));
            }
            HostlistExample example;
            example.id = optional_field(fields[0]);
            example.set = optional_field(fields[1]);
            example.diff = optional_field(fields[2]);
            if (!example.diff.empty() && example.diff != "ref" && example.diff != "edge") {
                throw std::runtime_error("diff must be ref, edge or -");
            }
            example.list = unescape(fields[3]);
            parse_expect(fields[4], example);
            example.line = number;
            examples.push_back(std::move(example));
        } catch (const std::exception& error) {
            throw std::runtime_error(path + ":" + std::to_string(number) + ": " + error.what());
        }
    }
    return examples;
}

std::vector<HostlistExample> hostlist_examples(std::string_view set) {
    std::vector<HostlistExample> selected;
    for (auto& example : read_hostlist_table(hostlist_table_path())) {
        if (example.set == set) {
            selected.push_back(std::move(example));
        }
    }
    if (selected.empty()) {
        throw std::runtime_error(hostlist_table_path() + ": no example in set " + std::string(set));
    }
    return selected;
}

std::vector<HostlistExample> hostlist_examples(std::string_view set,
                                               HostlistExample::Expect expect) {
    std::vector<HostlistExample> selected;
    for (auto& example : hostlist_examples(set)) {
        if (example.expect == expect) {
            selected.push_back(std::move(example));
        }
    }
    if (selected.empty()) {
        throw std::runtime_error(hostlist_table_path() + ": no example in set " + std::string(set) +
                                 " with that expectation");
    }
    return selected;
}

std::string table_place(const HostlistExample& example) {
    return "hostlists.tsv:" + std::to_string(example.line) + " " + example.id;
}

} // namespace tfslurm::test
