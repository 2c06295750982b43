// SPDX-License-Identifier: MIT
// This source file is MIT. The plugin built from it (spank_tfslurm.so) is compiled against
// Slurm's GPL-2.0-or-later headers and is distributed as a whole under GPL-2.0-or-later; see
// plugins/spank/LICENSE-NOTE.md.
//
// The SPANK face of tfslurm: the only file that includes <slurm/spank.h>. Each hook dispatches on
// spank_context() and moves data between Slurm and the pure code in options.cpp; resolution is
// libtfslurm's. No exception leaves a hook: each catches everything, logs one "tfslurm: ..." line
// and returns -1 on failure (Slurm's src/common/plugstack.c ignores positive return codes).
#include "options.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log_sink.hpp>

#include <spdlog/sinks/base_sink.h>

// spank.h (22.05) declares the hooks outside its own extern "C" block: wrap it, or the hook
// definitions below would get C++ names that Slurm cannot find.
extern "C" {
#include <slurm/slurm.h>
#include <slurm/spank.h>
}

#include <dlfcn.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

/// Built with -fvisibility=hidden: only what this marks reaches the version script.
#define TFSLURM_SPANK_EXPORT __attribute__((visibility("default")))

// The symbols Slurm's plugin loader looks up. Defined by hand instead of with SPANK_PLUGIN():
// a namespace-scope const has internal linkage in C++, so the macro would export nothing.
// NOLINTBEGIN(readability-identifier-naming): the names Slurm's plugin loader requires.
extern "C" {
TFSLURM_SPANK_EXPORT extern const char plugin_name[] = "tfslurm";
TFSLURM_SPANK_EXPORT extern const char plugin_type[] = "spank";
TFSLURM_SPANK_EXPORT extern const unsigned int plugin_version = SLURM_VERSION_NUMBER;
TFSLURM_SPANK_EXPORT extern const unsigned int spank_plugin_version = 1;
}
// NOLINTEND(readability-identifier-naming)

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
// Weak: a plugin built for 23.11+ still loads (and says which release it is built for, below)
// into an older slurmstepd without it, even when linked with -z now.
extern "C" spank_err_t spank_prepend_task_argv(spank_t spank, int argc, const char* argv[])
    __attribute__((weak));
#endif

namespace tfslurm::spank {
namespace {

/// The release whose slurm/spank.h this plugin is compiled against.
constexpr unsigned k_built_for_version = SLURM_VERSION_NUMBER;

/// Where `run` finds tfslurm when plugstack.conf has no `tfslurm=PATH`: where the package
/// installs it (TFSLURM_SPANK_TFSLURM, set by CMake).
constexpr const char* k_default_tfslurm = TFSLURM_SPANK_TFSLURM;

// ---------------------------------------------------------------------------------------------
// Plugin state. One copy per process that loads the plugin (srun, sbatch, salloc, slurmstepd);
// slurmstepd forks each task after the option callbacks ran, so task_init sees these values.

/// Site defaults from plugstack.conf, or why they could not be parsed.
std::optional<SiteConfig> g_site; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
std::string g_site_error;         // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
/// The raw --tfslurm value ("" for a bare --tfslurm) once the option callback ran.
std::optional<std::string> g_option; // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
bool g_sink_installed = false;       // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)

// struct spank_option has char* fields: give it mutable storage.
char g_opt_name[] = "tfslurm"; // NOLINT(cppcoreguidelines-avoid-c-arrays,modernize-avoid-c-arrays)
char g_opt_arginfo[] = "SPEC"; // NOLINT(cppcoreguidelines-avoid-c-arrays,modernize-avoid-c-arrays)
char g_opt_usage[] =           // NOLINT(cppcoreguidelines-avoid-c-arrays,modernize-avoid-c-arrays)
    "Set TF_CONFIG and tfslurm's other variables (TFSLURM_*, MASTER_ADDR, RANK, ...) in every "
    "task. SPEC: empty, off, or comma-separated key=value settings: ps=N, chief, evaluator, "
    "roles=ps+worker*3, only=tf+torch, layout=tf-compat, port_base=N, address=ip, ... "
    "(see spank_tfslurm(8))";

int option_callback(int val, const char* optarg, int remote) noexcept;

// has_arg 2: the value is optional (--tfslurm or --tfslurm=SPEC).
// NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
spank_option g_option_def{g_opt_name, g_opt_arginfo, g_opt_usage, 2, 0, &option_callback};

// ---------------------------------------------------------------------------------------------
// Logging: the library's spdlog logger forwarded to Slurm's log (the plugin has no other sink).

class SlurmSink final : public spdlog::sinks::base_sink<std::mutex> {
  protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        // A setting the library names reads as the plugin's key (without origins: neutral).
        const std::string text =
            render_settings(std::string_view(msg.payload.data(), msg.payload.size()),
                            [](std::string_view key, std::string_view value) {
                                return plugin_setting_name(key, value, {});
                            });
        switch (msg.level) {
        case spdlog::level::critical:
        case spdlog::level::err:
            slurm_error("tfslurm: %s", text.c_str());
            break;
        case spdlog::level::warn:
            slurm_info("tfslurm: warning: %s", text.c_str());
            break;
        case spdlog::level::info:
            slurm_verbose("tfslurm: %s", text.c_str());
            break;
        default:
            slurm_debug("tfslurm: %s", text.c_str());
            break;
        }
    }
    void flush_() override {}
};

void install_log_sink() {
    if (!g_sink_installed) {
        spdlog_logger().sinks().push_back(std::make_shared<SlurmSink>());
        spdlog_logger().set_level(spdlog::level::debug);
        g_sink_installed = true;
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers

/// Run `body`, turning every exception into one error line and -1.
template <typename Body> int guarded(const char* hook, Body&& body) noexcept {
    try {
        return body();
    } catch (const std::exception& e) {
        slurm_error("tfslurm: %s", describe(e).c_str());
    } catch (...) {
        slurm_error("tfslurm: %s: unknown exception", hook);
    }
    return -1;
}

Release built_for() {
    return release_of_version_number(k_built_for_version);
}

/// Runs when any process dlopen()s the plugin, before Slurm's loader reads plugin_version: in a
/// process of another release (whose loader then refuses the plugin with a line naming only
/// the plugin's release), one line naming both releases and the way out. slurm_api_version()
/// of the process's own libslurm tells its release; outside Slurm there is none: nothing to say.
__attribute__((constructor)) void check_release_at_load() noexcept {
    try {
        using ApiVersion = long (*)();
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's contract
        const auto api = reinterpret_cast<ApiVersion>(dlsym(RTLD_DEFAULT, "slurm_api_version"));
        if (api == nullptr) {
            return;
        }
        if (const auto why = release_mismatch(built_for(), api())) {
            slurm_error("tfslurm: %s", why->c_str());
        }
    } catch (...) {
        // Never let a load fail here: Slurm's loader decides.
    }
}

bool user_facing(spank_context_t context) {
    return context == S_CTX_LOCAL || context == S_CTX_ALLOCATOR;
}

std::vector<std::string> arguments(int ac, char** av) {
    std::vector<std::string> args;
    for (int i = 0; i < ac; ++i) {
        if (av[i] != nullptr) {       // NOLINT(cppcoreguidelines-pro-bounds-pointer-arithmetic)
            args.emplace_back(av[i]); // NOLINT(cppcoreguidelines-pro-bounds-pointer-arithmetic)
        }
    }
    return args;
}

/// The --tfslurm value in a task: from the callback if it ran in this slurmstepd, else asked
/// from Slurm (the documented fallback where callbacks did not run).
std::optional<std::string> option_in_task(spank_t sp) {
    if (g_option) {
        return g_option;
    }
    char* optarg = nullptr;
    if (spank_option_getopt(sp, &g_option_def, &optarg) == ESPANK_SUCCESS) {
        return std::string{optarg != nullptr ? optarg : ""};
    }
    return std::nullopt;
}

/// `run`: the task's settings as tfslurm run's variables, then `tfslurm run --` in front of the
/// task's command (spank_prepend_task_argv, 23.11+). Returns why it could not, or "".
std::string run_under_tfslurm(spank_t sp, const EnvVars& variables) {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
    const std::string tfslurm = g_site->tfslurm.empty() ? k_default_tfslurm : g_site->tfslurm;
    if (access(tfslurm.c_str(), X_OK) != 0) {
        const char* subject = g_site->tfslurm.empty() ? "run" : "plugstack.conf tfslurm";
        return std::string{subject} + ": no executable tfslurm at \"" + tfslurm +
               "\" on this node (set tfslurm=PATH in plugstack.conf)";
    }
    if (spank_prepend_task_argv == nullptr) {
        return "run: this slurmstepd has no spank_prepend_task_argv (Slurm before 23.11)";
    }
    for (const auto& [name, value] : variables) {
        if (const auto rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
            rc != ESPANK_SUCCESS) {
            return "cannot set " + name + ": " + spank_strerror(rc);
        }
    }
    std::array<const char*, 3> argv{tfslurm.c_str(), "run", "--"};
    if (const auto rc = spank_prepend_task_argv(sp, static_cast<int>(argv.size()), argv.data());
        rc != ESPANK_SUCCESS) {
        return std::string{"run: cannot start the task under tfslurm run: "} + spank_strerror(rc);
    }
    return {};
#else
    static_cast<void>(sp);
    static_cast<void>(variables);
    return "run: needs Slurm 23.11 or later, and this plugin is built for Slurm " +
           built_for().text();
#endif
}

int set_task_variables(spank_t sp) {
    std::uint32_t step_id = 0;
    if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS) {
        slurm_error("tfslurm: cannot read the step id of this task");
        return -1;
    }
    if (step_id >= SLURM_MAX_NORMAL_STEP_ID) {
        return 0; // batch script, extern or interactive step: no task layout to describe
    }
    const auto option = option_in_task(sp);
    if (!option && (!g_site || g_site->activation != Activation::always)) {
        return 0; // not asked for in this step
    }
    // Asked for explicitly: every problem fails the task (srun prints the line). Enabled only by
    // the site (enabled=always): best effort, the task starts without the variables.
    const bool explicit_request = option.has_value();
    const auto fail = [explicit_request](const std::string& message) {
        if (explicit_request) {
            slurm_error("tfslurm: %s", message.c_str());
            return -1;
        }
        slurm_verbose("tfslurm: variables not set: %s", message.c_str());
        return 0;
    };
    try {
        if (!g_site) {
            return fail(g_site_error);
        }
        const auto spec = parse_option_spec(option.value_or(""));
        if (spec.off) {
            return 0;
        }
        char** envp = nullptr;
        if (spank_get_item(sp, S_JOB_ENV, &envp) != ESPANK_SUCCESS) {
            return fail("cannot read the task's environment");
        }
        const auto env = Environment::from_envp(envp);
        std::uint32_t rank = 0;
        if (spank_get_item(sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS) {
            return fail("cannot read the task's global id");
        }
        const auto environment = environment_settings(env);
        const auto settings = resolve_settings(*g_site, environment, spec);
        if (settings.values.plugin_run) {
            if (const auto rc =
                    run_under_tfslurm(sp, launcher_variables(*g_site, environment, spec));
                !rc.empty()) {
                return fail(rc);
            }
            slurm_debug("tfslurm: rank %u runs under tfslurm run", rank);
            return 0;
        }
        for (const auto& [name, value] : task_variables(settings, env, rank)) {
            if (const auto rc = spank_setenv(sp, name.c_str(), value.c_str(), 1);
                rc != ESPANK_SUCCESS) {
                return fail("cannot set " + name + ": " + spank_strerror(rc));
            }
        }
        slurm_debug("tfslurm: variables set for rank %u", rank);
        return 0;
    } catch (const std::exception& e) {
        return fail(describe(e));
    }
}

int option_callback(int /*val*/, const char* optarg, int remote) noexcept {
    return guarded("option", [&] {
        std::string spec = optarg != nullptr ? optarg : "";
        if (remote != 0) {
            // Already validated where the user typed it; a value that still fails is reported
            // by task_init, which fails the tasks rather than the whole step (never a drained
            // node).
            g_option = std::move(spec);
            return 0;
        }
        // Throws: srun/sbatch/salloc fail here.
        check_run_supported(parse_option_spec(spec).settings, built_for());
        g_option = std::move(spec);
        return 0;
    });
}

} // namespace
} // namespace tfslurm::spank

// -------------------------------------------------------------------------------------------------
// Hooks. The version script (spank_tfslurm.map) exports these, plugin_* and spank_plugin_version.
// spank.h fixes their type (spank_f, without noexcept; clang rejects a noexcept redefinition), so
// each body is a single call to the noexcept guarded(), which catches everything.

extern "C" {

TFSLURM_SPANK_EXPORT int slurm_spank_init(spank_t sp, int ac, char** av) {
    using namespace tfslurm::spank;
    return guarded("slurm_spank_init", [&] {
        const auto context = spank_context();
        if (context != S_CTX_LOCAL && context != S_CTX_REMOTE && context != S_CTX_ALLOCATOR) {
            return 0; // slurmd, prolog/epilog: nothing to do
        }
        install_log_sink();
        if (const auto rc = spank_option_register(sp, &g_option_def); rc != ESPANK_SUCCESS) {
            slurm_error("tfslurm: cannot register --tfslurm: %s", spank_strerror(rc));
            return user_facing(context) ? -1 : 0;
        }
        try {
            g_site = parse_plugstack_args(arguments(ac, av));
            check_run_supported(g_site->settings, built_for());
        } catch (const std::exception& e) {
            g_site.reset();
            g_site_error = describe(e);
            slurm_error("tfslurm: %s", g_site_error.c_str());
            // srun/sbatch/salloc stop here with that line. slurmstepd carries on: failing its
            // init could drain the node; task_init reports the error in steps that use --tfslurm.
            return user_facing(context) ? -1 : 0;
        }
        return 0;
    });
}

TFSLURM_SPANK_EXPORT int slurm_spank_init_post_opt(spank_t /*sp*/, int /*ac*/, char** /*av*/) {
    using namespace tfslurm::spank;
    return guarded("slurm_spank_init_post_opt", [&] {
        if (!user_facing(spank_context()) || !g_option) {
            return 0;
        }
        // The job's TFSLURM_* variables reach the tasks (srun exports the environment): check
        // them now, so that a bad one fails the submission rather than every task.
        if (!parse_option_spec(*g_option).off) {
            const auto env = tfslurm::Environment::from_process();
            check_run_supported(environment_settings(env), built_for());
            // A misspelt TFSLURM_* variable would be ignored without a word.
            for (const auto& unknown : tfslurm::unknown_variables(env)) {
                slurm_info("tfslurm: warning: %s",
                           tfslurm::unknown_variable_warning(unknown).c_str());
            }
        }
        return 0;
    });
}

TFSLURM_SPANK_EXPORT int slurm_spank_task_init(spank_t sp, int /*ac*/, char** /*av*/) {
    using namespace tfslurm::spank;
    return guarded("slurm_spank_task_init", [&] {
        if (spank_context() != S_CTX_REMOTE) {
            return 0;
        }
        return set_task_variables(sp);
    });
}

} // extern "C"
