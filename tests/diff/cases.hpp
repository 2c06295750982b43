// SPDX-License-Identifier: MIT
#pragma once

// The inputs of the differential test: the examples of tests/data/hostlists.tsv and seeded,
// grammar-aware random lists, mutations of them, and host lists for the compressor.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::diff {

/// The lists of the table marked `ref`, in table order: compared and mutated.
[[nodiscard]] const std::vector<std::string>& reference_lists();

/// The lists of the table marked `edge`: inputs that make 22.05 crash, hang or print millions
/// of hosts: compared, never mutated.
[[nodiscard]] const std::vector<std::string>& edge_lists();

/// Seeded random lists: the same seed gives the same lists.
class Generator {
  public:
    explicit Generator(std::uint64_t seed) : m_rng(seed) {}

    std::size_t below(std::size_t n) {
        return std::uniform_int_distribution<std::size_t>(0, n - 1)(m_rng);
    }
    bool chance(double p) { return std::bernoulli_distribution(p)(m_rng); }
    template <class T> const T& pick(const std::vector<T>& values) {
        return values[below(values.size())];
    }

    static std::string padded(std::uint64_t value, std::size_t width) {
        std::string digits = std::to_string(value);
        return digits.size() < width ? std::string(width - digits.size(), '0') + digits : digits;
    }

    std::uint64_t small_number() {
        static const std::vector<std::uint64_t> edges = {0, 1, 7, 8, 9, 10, 99, 100, 999, 65535};
        return chance(0.2) ? pick(edges) : below(120);
    }

    std::string number_text(std::uint64_t value) {
        std::string text =
            padded(value, chance(0.25) ? std::to_string(value).size() + below(3) : 0);
        if (chance(0.03)) {
            text.insert(0, " ");
        } else if (chance(0.02)) {
            text.insert(0, "+");
        }
        return text;
    }

    std::string item(std::size_t max_span) {
        const std::uint64_t low = small_number();
        std::string text = number_text(low);
        if (chance(0.6)) {
            text += "-" + number_text(low + below(max_span + 1));
        }
        return text;
    }

    std::string group(std::size_t max_items, std::size_t max_span) {
        std::string text = "[";
        const std::size_t items = 1 + below(max_items);
        for (std::size_t i = 0; i < items; ++i) {
            text += (i > 0 ? "," : "") + item(max_span);
        }
        return text + "]";
    }

    std::string literal_host() {
        static const std::vector<std::string> names = {
            "login", "n", "a-b", "x]", "n1-]", "node-07", "gpu12", "c.1", "h_3", "5", "n]5"};
        std::string host = pick(names);
        if (chance(0.5)) {
            host += padded(small_number(), below(4));
        }
        return host;
    }

    std::string token() {
        static const std::vector<std::string> heads = {
            "n", "node", "gpu-", "r", "", "x.", "nid", "a1-", "t02n"};
        static const std::vector<std::string> mids = {"b", "-", "-node", ".", "s0b0n", ""};
        static const std::vector<std::string> suffixes = {"x", "-ib0", ".dom", "m", "-", "1"};
        if (chance(0.25)) {
            return literal_host();
        }
        // A ']' before the '[' is rare: 22.05 tokenizes it differently.
        std::string text = chance(0.03) ? "c]" : pick(heads);
        const std::size_t prefix_groups = chance(0.3) ? 1 + below(2) : 0;
        for (std::size_t i = 0; i < prefix_groups; ++i) {
            text += group(2, 3) + pick(mids);
        }
        text += prefix_groups > 0 ? group(2, 3) : group(4, 6);
        if (chance(0.15)) {
            text += pick(suffixes);
        }
        return text;
    }

    std::string list() {
        static const std::vector<std::string> separators = {
            ",", ",", ",", ",", " ", "\t", ",,", ", "};
        const auto separator = [&] { return chance(0.03) ? std::string("\n") : pick(separators); };
        std::string text;
        if (chance(0.05)) {
            text += separator();
        }
        const std::size_t tokens = 1 + below(4);
        for (std::size_t i = 0; i < tokens; ++i) {
            text += (i > 0 ? separator() : "") + token();
        }
        if (chance(0.05)) {
            text += separator();
        }
        return text;
    }

    std::string long_list() {
        std::string text = "n[";
        const std::size_t items = 200 + below(800);
        for (std::size_t i = 0; i < items; ++i) {
            text += (i > 0 ? "," : "") + std::to_string(i * 3) + "-" + std::to_string(i * 3 + 1);
        }
        text += "]";
        for (std::size_t i = 0; i < 300; ++i) {
            text += ",m" + std::to_string(below(1000));
        }
        return text;
    }

    std::string mutate(std::string text) {
        static const std::string alphabet = "[],- x+0123456789a\t";
        const std::size_t edits = 1 + below(2);
        for (std::size_t e = 0; e < edits; ++e) {
            const std::size_t at = text.empty() ? 0 : below(text.size() + 1);
            switch (below(9)) {
            case 0:
                if (!text.empty()) {
                    text.erase(std::min(at, text.size() - 1), 1);
                }
                break;
            case 1:
                text.insert(at, 1, alphabet[below(alphabet.size())]);
                break;
            case 2:
                text.insert(at, text.substr(below(text.size() + 1), below(6)));
                break;
            case 3:
                text.resize(at);
                break;
            case 4: {
                const std::size_t digit = text.find_first_of("0123456789", at);
                if (digit != std::string::npos) {
                    text.insert(digit,
                                pick(std::vector<std::string>{"99999", "6553", "1234567890123"}));
                }
                break;
            }
            case 5:
                text.insert(at, group(2, 3));
                break;
            case 6:
                text.insert(at,
                            pick(std::vector<std::string>{",]", "[,", "[]", "]", "[", "-", ",,"}));
                break;
            case 7:
                if (at + 1 < text.size()) {
                    std::swap(text[at], text[at + 1]);
                }
                break;
            default:
                text.insert(at, "-" + std::to_string(65530 + below(10)));
                break;
            }
        }
        return text;
    }

    /// A list of hosts as a compressor sees them: runs, padding, duplicates, literals.
    std::vector<std::string> hosts() {
        static const std::vector<std::string> prefixes = {
            "n", "node-", "gpu-a1-b", "", "x]", "r1n", "a-", "c.", "n01-", "t02n"};
        std::vector<std::string> hosts;
        const std::size_t pieces = 1 + below(6);
        for (std::size_t p = 0; p < pieces; ++p) {
            if (chance(0.15)) {
                hosts.push_back(literal_host());
                continue;
            }
            const std::string& prefix = pick(prefixes);
            std::uint64_t value = small_number();
            const std::size_t width = chance(0.3) ? 1 + below(4) : 0;
            const std::size_t length = 1 + below(chance(0.1) ? 300 : 8);
            for (std::size_t i = 0; i < length; ++i) {
                hosts.push_back(prefix + padded(value, width));
                const std::size_t step = below(10);
                value = step < 6   ? value + 1
                        : step < 8 ? value + below(5)
                                   : value - std::min<std::uint64_t>(value, below(3));
            }
            if (chance(0.2)) {
                hosts.push_back(hosts[below(hosts.size())]);
            }
        }
        return hosts;
    }

  private:
    std::mt19937_64 m_rng;
};

} // namespace tfslurm::diff
