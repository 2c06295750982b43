// SPDX-License-Identifier: MIT
#include "help.hpp"

#include <fmt/format.h>

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <string>
#include <utility>
#include <vector>

namespace tfslurm::cli {
namespace {

constexpr std::size_t k_default_width = 80;
constexpr std::size_t k_min_width = 20;
constexpr std::size_t k_max_width = 1000;

/// Words of one paragraph (no newline inside), separated by runs of spaces.
std::vector<std::string_view> words_of(std::string_view line) {
    std::vector<std::string_view> words;
    std::size_t pos = 0;
    while (pos < line.size()) {
        const auto start = line.find_first_not_of(' ', pos);
        if (start == std::string_view::npos) {
            break;
        }
        const auto end = std::min(line.find(' ', start), line.size());
        words.push_back(line.substr(start, end - start));
        pos = end;
    }
    return words;
}

/// A group's title as CLI11 2.1 wrote the default ones: "Options" and "Subcommands" (2.5
/// writes "OPTIONS" and "SUBCOMMANDS"); tfslurm's own titles stay as they are.
std::string group_title(const std::string& group) {
    if (group == "OPTIONS") {
        return "Options";
    }
    if (group == "SUBCOMMANDS") {
        return "Subcommands";
    }
    return group;
}

/// Whether two group names are one group (CLI11 compares them ignoring case).
bool same_group(std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

} // namespace

std::size_t help_width(std::optional<std::string_view> columns) {
    if (columns && !columns->empty() &&
        std::all_of(
            columns->begin(), columns->end(), [](char c) { return c >= '0' && c <= '9'; }) &&
        columns->size() <= 4) {
        const auto width = static_cast<std::size_t>(std::stoul(std::string{*columns}));
        if (width >= k_min_width && width <= k_max_width) {
            return width;
        }
    }
    winsize size{};
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col >= k_min_width) {
        return std::min<std::size_t>(size.ws_col, k_max_width);
    }
    return k_default_width;
}

std::string
wrap_text(std::string_view text, std::size_t width, std::string_view first, std::size_t indent) {
    std::string out{first};
    std::size_t column = first.size();
    const std::string margin(indent, ' ');
    std::size_t pos = 0;
    bool first_line = true;
    while (pos <= text.size()) {
        const auto end = std::min(text.find('\n', pos), text.size());
        if (!first_line) {
            out += '\n';
            out += margin;
            column = indent;
        }
        first_line = false;
        bool line_start = true;
        for (const auto word : words_of(text.substr(pos, end - pos))) {
            if (!line_start && column + 1 + word.size() > width) {
                out += '\n';
                out += margin;
                column = indent;
                line_start = true;
            }
            if (!line_start) {
                out += ' ';
                ++column;
            }
            out += word;
            column += word.size();
            line_start = false;
        }
        pos = end + 1;
    }
    out += '\n';
    return out;
}

HelpFormatter::HelpFormatter(std::size_t width) : m_width(width) {
    // The name column: CLI11's 30, narrower on a narrow terminal.
    column_width(std::min<std::size_t>(30, width / 3));
}

std::string HelpFormatter::two_columns(const std::string& name,
                                       const std::string& description) const {
    const std::size_t column = get_column_width();
    std::string first = "  " + name;
    if (description.empty()) {
        return first + "\n";
    }
    if (first.size() + 2 > column) {
        // A long name gets its own line, as CLI11 does.
        return first + "\n" + wrap_text(description, m_width, std::string(column, ' '), column);
    }
    first.resize(column, ' ');
    return wrap_text(description, m_width, first, column);
}

std::string
HelpFormatter::make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const {
    if (mode == CLI::AppFormatMode::Sub) {
        return CLI::Formatter::make_help(app, std::move(name), mode);
    }
    std::string out = make_description(app);
    out += usage_line(app, name);
    const auto positionals = app->get_options(
        [](const CLI::Option* opt) { return !opt->get_group().empty() && opt->get_positional(); });
    if (!positionals.empty()) {
        out += "\nPositionals:\n";
        for (const CLI::Option* opt : positionals) {
            out += make_option(opt, true);
        }
    }
    out += option_groups(app);
    out += subcommand_list(app, mode);
    out += '\n';
    out += make_footer(app);
    return out;
}

std::string HelpFormatter::usage_line(const CLI::App* app, const std::string& name) const {
    std::string out = name.empty() ? "Usage:" : "Usage: " + name;
    if (!app->get_options([](const CLI::Option* opt) { return opt->nonpositional(); }).empty()) {
        out += " [OPTIONS]";
    }
    for (const CLI::Option* opt :
         app->get_options([](const CLI::Option* opt) { return opt->get_positional(); })) {
        out += ' ';
        out += make_option_usage(opt);
    }
    const auto subcommands = app->get_subcommands(
        [](const CLI::App* sub) { return !sub->get_disabled() && !sub->get_name().empty(); });
    if (!subcommands.empty()) {
        const bool optional = app->get_require_subcommand_min() == 0;
        const bool one =
            app->get_require_subcommand_max() < 2 || app->get_require_subcommand_min() > 1;
        out += optional ? " [" : " ";
        out += one ? "SUBCOMMAND" : "SUBCOMMANDS";
        out += optional ? "]" : "";
    }
    out += '\n';
    return out;
}

std::string HelpFormatter::option_groups(const CLI::App* app) const {
    std::string out;
    const auto groups = app->get_groups();
    for (const auto& group : groups) {
        const auto opts = app->get_options([&group](const CLI::Option* opt) {
            return opt->get_group() == group && opt->nonpositional();
        });
        if (group.empty() || opts.empty()) {
            continue;
        }
        out += '\n' + group_title(group) + ":\n";
        for (const CLI::Option* opt : opts) {
            out += make_option(opt, false);
        }
        if (group != groups.back()) {
            out += '\n';
        }
    }
    return out;
}

std::string HelpFormatter::subcommand_list(const CLI::App* app, CLI::AppFormatMode mode) const {
    // The groups in the order their first subcommand was defined.
    std::vector<std::string> groups;
    for (const CLI::App* sub : app->get_subcommands({})) {
        const auto& group = sub->get_group();
        if (sub->get_name().empty() || group.empty() ||
            std::any_of(groups.begin(), groups.end(), [&group](const std::string& seen) {
                return same_group(seen, group);
            })) {
            continue;
        }
        groups.push_back(group);
    }
    std::string out;
    for (const auto& group : groups) {
        out += '\n' + group_title(group) + ":\n";
        for (const CLI::App* sub : app->get_subcommands({})) {
            if (sub->get_name().empty() || !same_group(sub->get_group(), group)) {
                continue;
            }
            if (mode == CLI::AppFormatMode::All) {
                out += sub->help(sub->get_name(), CLI::AppFormatMode::Sub);
                out += '\n';
            } else {
                out += make_subcommand(sub);
            }
        }
    }
    return out;
}

std::string HelpFormatter::make_option(const CLI::Option* opt, bool is_positional) const {
    // A flag shows no value: CLI11 2.4 and later would print a counting flag's default (`-v,
    // --verbose [0]`). tfslurm's flags have no environment variable, needs or excludes.
    const bool flag = !is_positional && opt->get_expected_max() == 0;
    return two_columns(make_option_name(opt, is_positional) +
                           (flag ? std::string{} : make_option_opts(opt)),
                       make_option_desc(opt));
}

std::string HelpFormatter::make_option_name(const CLI::Option* opt, bool is_positional) const {
    if (is_positional) {
        return opt->get_name(true, false);
    }
    // `-f, --format` and, for a flag with a negation, `--chief/--no-chief` (CLI11 would print
    // the flag values: `--chief{1},--no-chief{0}`).
    std::vector<std::string> names;
    for (const auto& name : opt->get_snames()) {
        names.push_back("-" + name);
    }
    const auto& lnames = opt->get_lnames();
    for (const auto& name : lnames) {
        if (name.rfind("no-", 0) == 0 &&
            std::find(lnames.begin(), lnames.end(), name.substr(3)) != lnames.end()) {
            continue;
        }
        const bool negated = std::find(lnames.begin(), lnames.end(), "no-" + name) != lnames.end();
        names.push_back(negated ? fmt::format("--{}/--no-{}", name, name) : "--" + name);
    }
    std::string out;
    for (const auto& name : names) {
        out += out.empty() ? "" : ", ";
        out += name;
    }
    return out;
}

std::string HelpFormatter::make_subcommand(const CLI::App* sub) const {
    return two_columns(sub->get_display_name(true), sub->get_description());
}

std::string HelpFormatter::make_description(const CLI::App* app) const {
    const auto& description = app->get_description();
    return description.empty() ? std::string{} : wrap_text(description, m_width, "", 0);
}

std::string HelpFormatter::make_footer(const CLI::App* app) const {
    const auto& footer = app->get_footer();
    return footer.empty() ? std::string{} : wrap_text(footer, m_width, "", 0);
}

} // namespace tfslurm::cli
