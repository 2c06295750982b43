// SPDX-License-Identifier: MIT
#pragma once

/// \file
/// `--help` as tfslurm prints it: every line wrapped at the terminal width, flags written as
/// `--chief/--no-chief`. CLI11 2.1's own formatter never wraps a description.

#include <CLI/CLI.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace tfslurm::cli {

/// The width `--help` wraps at: COLUMNS when it is a number from 20 to 1000, else the width of
/// the terminal on standard output, else 80.
/// Input: COLUMNS "100". Output: 100. Input: no COLUMNS, stdout a pipe. Output: 80.
[[nodiscard]] std::size_t help_width(std::optional<std::string_view> columns);

/// Break `text` into lines of at most `width` columns (a longer word stays whole): the first
/// line after `first`, the others after `indent` spaces; newlines in `text` are kept.
/// Input: "a bb cc", width 4, first "", indent 0. Output: "a bb\ncc\n".
[[nodiscard]] std::string
wrap_text(std::string_view text, std::size_t width, std::string_view first, std::size_t indent);

/// A CLI11 formatter that wraps descriptions, option help and the footer at `width`, and lays
/// the whole text out itself: the same text whichever CLI11 builds it (2.1 to 2.6; 2.5 began to
/// re-wrap descriptions and footers at 80 columns, dropped `Usage:` and renamed the default
/// groups `OPTIONS` and `SUBCOMMANDS`).
class HelpFormatter : public CLI::Formatter {
  public:
    explicit HelpFormatter(std::size_t width);

    std::string
    make_help(const CLI::App* app, std::string name, CLI::AppFormatMode mode) const override;

    std::string make_option(const CLI::Option* opt, bool is_positional) const override;
    std::string make_option_name(const CLI::Option* opt, bool is_positional) const override;
    std::string make_subcommand(const CLI::App* sub) const override;
    std::string make_description(const CLI::App* app) const override;
    std::string make_footer(const CLI::App* app) const override;

  private:
    /// `Usage: tfslurm plan [OPTIONS] POSITIONALS... [SUBCOMMAND]`, one line.
    [[nodiscard]] std::string usage_line(const CLI::App* app, const std::string& name) const;
    /// Each group of options under its title, a blank line between groups.
    [[nodiscard]] std::string option_groups(const CLI::App* app) const;
    /// The subcommands under their group's title.
    [[nodiscard]] std::string subcommand_list(const CLI::App* app, CLI::AppFormatMode mode) const;
    /// `  NAME   description...`, the description wrapped in its column.
    [[nodiscard]] std::string two_columns(const std::string& name,
                                          const std::string& description) const;

    std::size_t m_width;
};

} // namespace tfslurm::cli
