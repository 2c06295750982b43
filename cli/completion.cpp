// SPDX-License-Identifier: MIT
#include "completion.hpp"

#include "io.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/settings/plan_settings.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h> // fmt::join (fmt 11 has it only there)

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace tfslurm::cli {
namespace {

/// A word the script may hold between single quotes and in a `case` pattern unescaped.
bool plain_word(std::string_view word) {
    return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == ',' || c == '+' || c == '=';
    });
}

/// The choices a type name lists, space-separated; empty when it lists none. A type name in
/// lower case is literal values (`name|ip`, `bash`); one in upper case names a value (`N`).
/// Input: "auto|task|node". Output: "auto task node". Input: "N". Output: "".
std::string type_choices(std::string_view type_name) {
    if (std::none_of(
            type_name.begin(), type_name.end(), [](char c) { return c >= 'a' && c <= 'z'; }) ||
        std::any_of(
            type_name.begin(), type_name.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
        return {};
    }
    std::string words;
    for (const auto& choice : CLI::detail::split(std::string{type_name}, '|')) {
        if (!plain_word(choice)) {
            return {};
        }
        words += words.empty() ? "" : " ";
        words += choice;
    }
    return words;
}

/// The choices of the registry's setting behind `option` (SettingSpec::choices), else those its
/// type name lists. Input: `--layout`. Output: "native tf-compat".
std::string option_choices(const CLI::Option& option) {
    const auto name = "--" + option.get_single_name();
    for (const auto& spec : setting_registry()) {
        if (spec.option == name && !spec.choices.empty()) {
            return std::string{spec.choices};
        }
    }
    return type_choices(option.get_type_name());
}

/// What the script does after an option that takes a value: offer its choices, file names
/// (`FILE`) or nothing (a number, a list, a pattern: nothing sensible to offer).
/// Input: an option of type "name|ip". Output: "compgen -W 'name ip'".
std::string value_action(const CLI::Option& option) {
    const auto type_name = option.get_type_name();
    if (const auto choices = option_choices(option); !choices.empty()) {
        return fmt::format("mapfile -t COMPREPLY < <(compgen -W '{}' -- \"$cur\")", choices);
    }
    if (type_name == "FILE") {
        return "mapfile -t COMPREPLY < <(compgen -f -- \"$cur\")";
    }
    return ":";
}

/// One command's words: its visible options' names and the choices of its positionals (or,
/// for the root, its visible subcommands).
struct CommandWords {
    std::string options;
    std::string arguments;
};

void append_word(std::string& words, std::string_view word) {
    if (plain_word(word)) {
        words += words.empty() ? "" : " ";
        words += word;
    }
}

CommandWords command_words(const CLI::App& command, bool root) {
    CommandWords words;
    for (const auto* option : command.get_options()) {
        if (option->get_group().empty()) {
            continue;
        }
        if (!option->nonpositional()) {
            append_word(words.arguments, type_choices(option->get_type_name()));
            continue;
        }
        for (const auto& name : option->get_snames()) {
            append_word(words.options, "-" + name);
        }
        for (const auto& name : option->get_lnames()) {
            append_word(words.options, "--" + name);
        }
    }
    if (root) {
        for (const auto* sub : command.get_subcommands({})) {
            if (!sub->get_group().empty()) {
                append_word(words.arguments, sub->get_name());
            }
        }
    }
    return words;
}

/// The options that take a value, by what follows them (value_action()): patterns
/// `command:--option` of `case "$cmd:$word"`, the root's command empty.
/// Input: the root App. Output: {":" -> ["env:--ps", ...], "mapfile ... 'name ip' ..." ->
/// ["plan:--address", ...], ...}.
std::map<std::string, std::vector<std::string>> value_patterns(const CLI::App& app) {
    std::map<std::string, std::vector<std::string>> patterns;
    auto add = [&patterns](const CLI::App& command, const std::string& prefix) {
        for (const auto* option : command.get_options()) {
            if (option->get_group().empty() || !option->nonpositional() ||
                option->get_expected_max() <= 0 || option->get_type_size_max() <= 0) {
                continue;
            }
            auto& list = patterns[value_action(*option)];
            for (const auto& name : option->get_snames()) {
                list.push_back(fmt::format("{}:-{}", prefix, name));
            }
            for (const auto& name : option->get_lnames()) {
                list.push_back(fmt::format("{}:--{}", prefix, name));
            }
        }
    };
    add(app, "");
    for (const auto* sub : app.get_subcommands({})) {
        if (!sub->get_group().empty() && plain_word(sub->get_name())) {
            add(*sub, sub->get_name());
        }
    }
    return patterns;
}

/// The `case "$cmd:$prev"` arms: after an option that takes a value, its action.
std::string value_arms(const std::map<std::string, std::vector<std::string>>& patterns) {
    std::string arms;
    for (const auto& [action, list] : patterns) {
        arms += fmt::format(
            "    {})\n        {}\n        return 0\n        ;;\n", fmt::join(list, " | "), action);
    }
    return arms;
}

/// The `case "$cmd:$word"` pattern of every option that takes a value (its value is skipped
/// when the command line is scanned), or one that never matches.
std::string skip_pattern(const std::map<std::string, std::vector<std::string>>& patterns) {
    std::vector<std::string> all;
    for (const auto& entry : patterns) {
        all.insert(all.end(), entry.second.begin(), entry.second.end());
    }
    return all.empty() ? std::string{"-:-"} : fmt::format("{}", fmt::join(all, " | "));
}

/// Whether the options of `command` end at its first positional word, the rest being a command
/// line (`tfslurm run python train.py --ps 2`).
bool takes_command_line(const CLI::App& command) {
    return command.get_positionals_at_end() &&
           !command.get_options([](const CLI::Option* o) { return !o->nonpositional(); }).empty();
}

/// The `case "$cmd"` pattern of the commands that take_command_line().
std::string rest_pattern(const CLI::App& app) {
    std::vector<std::string> names;
    for (const auto* sub : app.get_subcommands({})) {
        if (!sub->get_group().empty() && plain_word(sub->get_name()) && takes_command_line(*sub)) {
            names.push_back(sub->get_name());
        }
    }
    return names.empty() ? std::string{"-"} : fmt::format("{}", fmt::join(names, " | "));
}

/// The `case "$cmd"` arms that set `opts` and `args` (and `rest`, for a command that
/// takes_command_line()) for each command.
std::string command_arms(const CLI::App& app) {
    auto arm = [](std::string_view pattern, const CommandWords& words, bool rest) {
        return fmt::format("    {})\n        opts='{}'\n        args='{}'\n{}        ;;\n",
                           pattern,
                           words.options,
                           words.arguments,
                           rest ? "        rest=1\n" : "");
    };
    std::string arms = arm("''", command_words(app, true), false);
    for (const auto* sub : app.get_subcommands({})) {
        if (!sub->get_group().empty() && plain_word(sub->get_name())) {
            arms += arm(sub->get_name(), command_words(*sub, false), takes_command_line(*sub));
        }
    }
    return arms;
}

} // namespace

// Mostly the bash script itself (~70 lines, one raw string): splitting it would scatter one
// program across C++ functions.
std::string bash_completion(const CLI::App& app, std::string_view version) {
    const auto& name = app.get_name();
    const auto patterns = value_patterns(app);
    // The scan: an option's value is skipped; the first other word that is not an option is
    // the command; after `--`, or after the first positional of a command whose options end
    // there (rest_pattern), the words are a command line: a program, then file names.
    return fmt::format(
        R"(# bash completion for {name} {version}, generated by '{name} completion bash' from the
# command line's own definition: do not edit; regenerate it.
# shellcheck shell=bash

_{name}() {{
    local cur=${{COMP_WORDS[COMP_CWORD]}} prev=${{COMP_WORDS[COMP_CWORD - 1]}} cmd='' word i
    local opts='' args='' rest=0
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        word=${{COMP_WORDS[i]}}
        case "$cmd:$word" in
        {skip_pattern})
            i=$((i + 1))
            continue
            ;;
        esac
        case $word in
        --) rest=1 ;;
        -*) ;;
        *)
            if [[ -z $cmd ]]; then
                cmd=$word
            else
                case $cmd in
                {rest_pattern}) rest=1 ;;
                esac
            fi
            ;;
        esac
        if ((rest)); then
            # A command line: its program (first word), then file names.
            if ((i == COMP_CWORD - 1)) && [[ $word == -- ]]; then
                mapfile -t COMPREPLY < <(compgen -c -- "$cur")
            else
                mapfile -t COMPREPLY < <(compgen -f -- "$cur")
            fi
            return 0
        fi
    done
    case "$cmd:$prev" in
{value_arms}    esac
    case $cmd in
{command_arms}    *) return 0 ;;
    esac
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$opts" -- "$cur")
    elif ((rest)); then
        mapfile -t COMPREPLY < <(compgen -c -- "$cur")
    else
        mapfile -t COMPREPLY < <(compgen -W "$args" -- "$cur")
    fi
}}
complete -F _{name} {name}
)",
        fmt::arg("name", name),
        fmt::arg("version", version),
        fmt::arg("skip_pattern", skip_pattern(patterns)),
        fmt::arg("rest_pattern", rest_pattern(app)),
        fmt::arg("value_arms", value_arms(patterns)),
        fmt::arg("command_arms", command_arms(app)));
}

void setup_completion(CLI::App& app, int& exit_status) {
    auto* sub = app.add_subcommand(
        "completion",
        "Print the bash completion script, generated from tfslurm's own options: source "
        "<(tfslurm completion bash). The Debian package installs it for bash-completion.");
    auto shell = std::make_shared<std::string>();
    sub->add_option("SHELL", *shell, "The shell (only bash)")->type_name("bash")->required();
    sub->callback([&app, shell, &exit_status] {
        if (*shell != "bash") {
            throw errors::invalid_argument(
                "SHELL", "not a supported shell", *shell, "the supported shell is bash");
        }
        write_stdout(bash_completion(app, TFSLURM_VERSION));
        exit_status = 0;
    });
}

} // namespace tfslurm::cli
