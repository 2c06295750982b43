// SPDX-License-Identifier: MIT
#include "app.hpp"

#include "cmd_run.hpp"
#include "commands.hpp"
#include "completion.hpp"
#include "help.hpp"
#include "logging.hpp"
#include "plan_args.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tfslurm::cli {
namespace {

void print_error(const std::string& message, const std::string& hint) {
    std::fputs(fmt::format("tfslurm: error: {}\n", message).c_str(), stderr);
    if (!hint.empty()) {
        std::fputs(fmt::format("tfslurm: hint: {}\n", hint).c_str(), stderr);
    }
}

/// The subcommand being parsed when CLI11 failed (the deepest one that was given), or `app`.
const CLI::App& failing_command(const CLI::App& app) {
    const CLI::App* command = &app;
    while (true) {
        const auto parsed = command->get_subcommands();
        if (parsed.empty()) {
            return *command;
        }
        command = parsed.front();
    }
}

std::string command_names(const CLI::App& app) {
    std::string names;
    for (const auto* sub : app.get_subcommands({})) {
        names += names.empty() ? "" : ", ";
        names += sub->get_name();
    }
    return names;
}

/// The problem of a CLI11 error in tfslurm's words where its text is known:
/// `--job-id: 1 required ID missing` becomes `option needs a value (ID): "--job-id"`.
std::string cli11_problem(const CLI::ParseError& e) {
    const std::string text = e.what();
    const auto colon = text.find(": ");
    const std::string option = colon == std::string::npos ? "" : text.substr(0, colon);
    const std::string rest = colon == std::string::npos ? text : text.substr(colon + 2);
    if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr && !option.empty()) {
        // "1 required TYPE missing" and "At Most 1 required but received 2" ("At most" from
        // CLI11 2.6).
        const auto required = rest.find(" required ");
        if (rest.size() > 8 && rest.compare(rest.size() - 8, 8, " missing") == 0 &&
            required != std::string::npos && required + 10 <= rest.size() - 8) {
            const auto type = rest.substr(required + 10, rest.size() - 8 - required - 10);
            return fmt::format("option needs a value ({}): {}", type, quote(option));
        }
        if (rest.rfind("At Most ", 0) == 0 || rest.rfind("At most ", 0) == 0) {
            return "option given more than once: " + quote(option);
        }
    }
    std::string problem = text;
    // "Option ... required" reads as "option ...", but a name stays as it is ("SHELL is ...").
    const bool name = problem.size() > 1 && problem[1] >= 'A' && problem[1] <= 'Z';
    if (!name && !problem.empty() && problem.front() >= 'A' && problem.front() <= 'Z') {
        problem.front() = static_cast<char>(problem.front() - 'A' + 'a');
    }
    return problem;
}

/// A value given to a flag of the top level (`--verbose=abc`), which CLI11 reports as a
/// conversion error of whichever command ran: the flag's name and the value, else nullopt.
std::optional<std::pair<std::string, std::string>> global_flag_value(const CLI::App& app,
                                                                     const CLI::ParseError& e) {
    if (dynamic_cast<const CLI::ConversionError*>(&e) == nullptr) {
        return std::nullopt;
    }
    // "Could not convert: --verbose = abc".
    const std::string text = e.what();
    const auto colon = text.find(": ");
    const auto equals = text.find(" = ", colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || equals == std::string::npos) {
        return std::nullopt;
    }
    std::string name = text.substr(colon + 2, equals - colon - 2);
    const CLI::Option* option = app.get_option_no_throw(name);
    if (option == nullptr || option->get_expected_max() != 0) { // a flag expects no value
        return std::nullopt;
    }
    return std::make_pair(std::move(name), text.substr(equals + 3));
}

/// An option of srun that users write after `tfslurm run` (srun makes the allocation): its
/// short and long names (empty where tfslurm has an option of that name, such as the preview's
/// `--nodelist`) and whether it takes a value.
struct SrunOption {
    std::string_view short_name;
    std::string_view long_name;
    bool value;
};

constexpr std::array<SrunOption, 20> k_srun_options{{
    {"-N", "--nodes", true},
    {"-n", "--ntasks", true},
    {"", "--ntasks-per-node", true},
    {"-w", "", true},
    {"-m", "", true},
    {"-c", "--cpus-per-task", true},
    {"-p", "--partition", true},
    {"-t", "--time", true},
    {"", "--mem", true},
    {"", "--gres", true},
    {"-G", "", true},
    {"-A", "--account", true},
    {"-J", "--job-name", true},
    {"-C", "--constraint", true},
    {"-x", "--exclude", true},
    {"", "--mpi", true},
    {"", "--exclusive", false},
    {"", "--overlap", false},
    {"", "--resv-ports", false},
    {"-K", "--kill-on-bad-exit", false},
}};

/// How many words of `args` from `index` on are srun's option `args[index]` (with its value):
/// 0 when it is not one of k_srun_options. Input: {"-N", "2"}, 0. Output: 2. Input: {"-N2"}.
/// Output: 1.
std::size_t srun_option_words(const std::vector<std::string>& args, std::size_t index) {
    const std::string_view word = args[index];
    for (const auto& option : k_srun_options) {
        const bool is_short = !option.short_name.empty() && word.rfind(option.short_name, 0) == 0;
        const bool is_long =
            !option.long_name.empty() && word.rfind(option.long_name, 0) == 0 &&
            (word.size() == option.long_name.size() || word[option.long_name.size()] == '=');
        if (!is_short && !is_long) {
            continue;
        }
        const auto name_size = is_short ? option.short_name.size() : option.long_name.size();
        const bool attached = word.size() > name_size;
        if (is_short && attached && !option.value) {
            continue; // `-Kx` is no srun flag of this table
        }
        return option.value && !attached && index + 1 < args.size() ? 2 : 1;
    }
    return 0;
}

/// The command line with srun's options moved in front, as srun: `tfslurm run -N2 --ps 1 cmd`
/// becomes `srun -N2 tfslurm run --ps 1 cmd`. Words are shown as typed (this is a hint).
std::string srun_line(const std::vector<std::string>& args) {
    std::vector<std::string> srun{"srun"};
    std::vector<std::string> rest{"tfslurm"};
    for (std::size_t i = 0; i < args.size();) {
        const auto words = args[i] == "--" ? 0 : srun_option_words(args, i);
        if (words == 0) {
            rest.push_back(args[i++]);
            continue;
        }
        for (std::size_t w = 0; w < words; ++w) {
            srun.push_back(args[i++]);
        }
    }
    srun.insert(srun.end(), rest.begin(), rest.end());
    return fmt::format("{}", fmt::join(srun, " "));
}

/// CLI11's parse errors in tfslurm's words: `tfslurm: error: ` and exit status 2 like every
/// other usage mistake, the subject first, the input quoted, a hint to --help. Its own texts
/// ("The following argument was not expected: b") are kept only where nothing better is known.
int report_parse_error(const CLI::App& app,
                       const CLI::ParseError& e,
                       const std::vector<std::string>& args) {
    const CLI::App& command = failing_command(app);
    const bool top = &command == &app;
    const std::string subject = top ? "command line" : command.get_name();
    const std::string help_hint =
        fmt::format("'tfslurm {}--help' lists the options", top ? "" : command.get_name() + " ");
    const std::string commands_hint =
        fmt::format("the commands are {}; 'tfslurm --help' describes them", command_names(app));
    // With fallthrough, an argument a subcommand did not take may be left to its parent.
    auto extras = command.remaining();
    if (extras.empty()) {
        extras = app.remaining();
    }
    const bool no_command = top && app.get_subcommands().empty();
    const auto separator = std::find(args.begin(), args.end(), "--");
    const bool after_separator =
        !extras.empty() && std::find(separator, args.end(), extras.front()) != args.end();
    const auto typed = std::find(args.begin(), separator, extras.empty() ? "" : extras.front());
    const auto is_srun_option = [&](auto word) {
        return srun_option_words(args, static_cast<std::size_t>(word - args.begin())) > 0;
    };
    // srun's option that the user typed: the word CLI11 refused, or, when it names another one
    // (`--` itself, after `-N2 --`), the first of srun's options before `--`.
    auto srun_word = typed != separator && is_srun_option(typed) ? typed : separator;
    if (srun_word == separator && !top) {
        for (auto word = args.begin(); word != separator; ++word) {
            if (is_srun_option(word)) {
                srun_word = word;
                break;
            }
        }
    }
    if (!top && !extras.empty() && after_separator && command.get_option_no_throw(extras.front())) {
        // `tfslurm plan ... -- --ps 1`: after `--` nothing is an option, and plan takes no
        // arguments.
        print_error(fmt::format("{}: an option after '--' is no longer read as one, and {} takes "
                                "no arguments: {}",
                                subject,
                                subject,
                                quote(extras.front())),
                    "put the options before '--', or leave '--' out");
    } else if (!top && srun_word != separator) {
        // `tfslurm run -N2 ...`: srun's option; srun makes the allocation.
        print_error(fmt::format("{}: an option of srun, not of tfslurm {}: {}",
                                subject,
                                command.get_name(),
                                quote(*srun_word)),
                    command.get_name() == "plan"
                        ? "preview an allocation with --nodelist, --tasks-per-node and "
                          "--distribution, or run tfslurm plan inside srun"
                        : "srun makes the allocation and starts one tfslurm per task: " +
                              srun_line(args));
    } else if (no_command && !extras.empty() && extras.front().rfind('-', 0) != 0) {
        print_error("command: not a tfslurm command: " + quote(extras.front()), commands_hint);
    } else if (!extras.empty() &&
               (no_command || dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr)) {
        const bool option = extras.front().size() > 1 && extras.front().front() == '-';
        print_error(fmt::format("{}: {}: {}",
                                subject,
                                option ? "unknown option" : "unexpected argument",
                                quote(extras.front())),
                    help_hint);
    } else if (no_command) {
        print_error("command: missing", commands_hint);
    } else if (const auto global = global_flag_value(app, e)) {
        // `tfslurm --verbose=abc hostnames`: the option is every command's, not `hostnames`'.
        print_error(fmt::format("{}: an option of every command, a flag that takes no value: {}",
                                global->first,
                                quote(global->second)),
                    "-v for more log output on stderr, -vv for trace");
    } else {
        print_error(fmt::format("{}: {}", subject, cli11_problem(e)), help_hint);
    }
    return 2;
}

/// A command of tfslurm and what adds it (its options, its callback) to the app.
struct Command {
    std::string_view name;
    void (*setup)(CLI::App&, int&);
    /// What adds it when no option can follow its name (see bare_command()); nullptr: setup.
    void (*setup_bare)(CLI::App&, int&) = nullptr;
};

/// Every command, in the order `tfslurm --help` lists them.
constexpr std::array<Command, 8> k_commands{
    {{"hostnames", setup_hostnames},
     {"hostlist", setup_hostlist},
     {"plan", setup_plan},
     {"env", setup_env},
     {"run",
      [](CLI::App& app, int& status) { setup_run(app, status, RunOptions::all); },
      [](CLI::App& app, int& status) { setup_run(app, status, RunOptions::none); }},
     {"events", setup_events},
     {"top", setup_top},
     {"completion", setup_completion}}};

/// The command the arguments name (see named_command()) and where its name is.
struct Named {
    const Command* command = nullptr;
    int index = 0; ///< argv[index] is the command's name
};

/// The one command that the arguments name, whose options alone need making: the first word
/// that is not an option (the top level's are flags without a separate value), if it names a
/// command other than `completion` (which describes them all). No command for anything else
/// (`--help`, no command, a misspelt one, a word after `--`): then every command is made, for
/// the help and the errors. A launcher runs in every task of a step, and making the options of
/// the seven other commands cost it more than parsing its own (issue #33).
/// Input: {"tfslurm", "-v", "run", "--", "python"}. Output: the `run` entry, index 2.
Named named_command(int argc, char** argv) {
    for (int index = 1; index < argc; ++index) {
        const std::string_view word = argv[index];
        if (word == "--") {
            return {};
        }
        if (word.empty() || word.front() != '-') {
            const auto found =
                std::find_if(k_commands.begin(), k_commands.end(), [&](const Command& command) {
                    return command.name == word;
                });
            if (found == k_commands.end() || found->name == "completion") {
                return {};
            }
            return {&*found, index};
        }
    }
    return {};
}

/// Whether none of the named command's options can be on this command line, so that it need
/// not make them: the words before its name are verbosity flags (not --help, which would show
/// the options), and the word after it is `--` or the start of the trainer's command (a word
/// that is not an option: everything after it is the trainer's). Nothing after the name, or an
/// option there, and every option is made (for the option, the help and the errors).
/// `srun tfslurm run -- python train.py` in every task of a step, its settings in TFSLURM_*
/// variables, is the case: making run's hundred options was 60% of a launcher's instructions,
/// a third of them in CLI11's check of each new option against every earlier one (issue #33).
/// Input: {"tfslurm", "-v", "run", "--", "true"}, index 2. Output: true. Input: {"tfslurm",
/// "run", "--ps", "1", "true"}, index 1. Output: false.
bool bare_command(int argc, char** argv, const Named& named) {
    if (named.command == nullptr || named.command->setup_bare == nullptr ||
        named.index + 1 >= argc) {
        return false;
    }
    for (int index = 1; index < named.index; ++index) {
        const std::string_view word = argv[index];
        const bool verbosity = word == "--verbose" || word == "--quiet" || word == "-q" ||
                               (word.size() >= 2 && word.front() == '-' &&
                                word.find_first_not_of('v', 1) == std::string_view::npos);
        if (!verbosity) {
            return false;
        }
    }
    const std::string_view next = argv[named.index + 1];
    return next == "--" || next.empty() || next.front() != '-';
}

} // namespace

int run_main(int argc, char** argv) {
    CLI::App app{"tfslurm: exact TF_CONFIG, torch and tf4slurm settings for every task of a Slurm "
                 "step, and a launcher that ends the step when the training is done.",
                 "tfslurm"};
    // Before the subcommands: each one copies its parent's formatter.
    const char* columns = std::getenv("COLUMNS");
    app.formatter(std::make_shared<HelpFormatter>(
        help_width(columns == nullptr ? std::nullopt : std::optional<std::string_view>{columns})));
    app.set_version_flag("-V,--version", TFSLURM_VERSION);
    app.require_subcommand(1);
    app.fallthrough();
    app.footer("Run 'tfslurm <command> --help' for a command's options; man tfslurm for the "
               "whole story.");
    int verbosity = 0;
    bool quiet = false;
    app.add_flag("-v,--verbose", verbosity, "More log output on stderr (-vv for trace)");
    app.add_flag("-q,--quiet", quiet, "Only errors on stderr");
    app.parse_complete_callback([&] { setup_logging(verbosity, quiet); });

    int status = 0;
    if (const Named named = named_command(argc, argv); bare_command(argc, argv, named)) {
        named.command->setup_bare(app, status);
    } else if (named.command != nullptr) {
        named.command->setup(app, status);
    } else {
        for (const Command& command : k_commands) {
            command.setup(app, status);
        }
    }

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help and --version are "errors" with status 0.
        if (e.get_exit_code() == 0) {
            return app.exit(e);
        }
        return report_parse_error(app, e, std::vector<std::string>(argv + 1, argv + argc));
    } catch (const Error& e) {
        // The library names settings by key; the user typed an option or a variable.
        const auto shown = cli_error(e);
        print_error(shown.what(), shown.hint());
        return exit_status(e.code());
    } catch (const std::exception& e) {
        print_error(e.what(), {});
        return 1;
    }
    return status;
}

} // namespace tfslurm::cli
