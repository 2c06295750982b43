// SPDX-License-Identifier: MIT
// slurm_api: which declarations each release's libslurm has, that each is called with its own
// signature and arguments (stand-ins of each API, tests/support/fake_libslurm.cpp), and what
// loading says when the node's libslurm is missing, not Slurm's or unknown (no Slurm needed:
// nothing here reaches a slurmctld).
#include "test_paths.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/os/slurm_api.hpp>

#include <catch2/catch.hpp>

#include <dlfcn.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <string>
#include <tuple>
#include <vector>

using namespace tfslurm;

TEST_CASE("slurm_api: the declarations of each release", "[slurm_api]") {
    // slurm_api_version() values: API_CURRENT << 16 | API_REVISION << 8 | API_AGE.
    using K = KillStepAbi;
    using J = JobIdAbi;
    using Row = std::tuple<long, long, K, J, std::string>;
    const auto [version, as_api, kill, job, text] = GENERATE(table<long, long, K, J, std::string>({
        Row{0x260000, 38, K::signal, J::job_id, "Slurm 22.05 (API 38)"},
        Row{0x260100, 38, K::signal, J::job_id, "Slurm 22.05 (API 38)"},
        Row{0x270000, 39, K::signal, J::job_id, "Slurm 23.02 (API 39)"},
        Row{0x280000, 40, K::signal_flags, J::job_id, "Slurm 23.11 (API 40)"},
        Row{0x290000, 41, K::signal_flags, J::job_id, "Slurm 24.05 (API 41)"},
        Row{0x2a0000, 42, K::signal_flags, J::job_id, "Slurm 24.11 (API 42)"},
        Row{0x2b0000, 43, K::signal_flags, J::job_id, "Slurm 25.05 (API 43)"},
        Row{0x2c0000, 44, K::step_id_pointer, J::job_id, "Slurm 25.11 (API 44)"},
        Row{0x2d0000, 45, K::step_id_pointer, J::step_id, "Slurm 26.05 (API 45)"},
        // Newer: 26.05's declarations only when API_AGE says API 45 is still provided.
        Row{0x2e0001, 45, K::step_id_pointer, J::step_id, "Slurm API 46"},
        Row{0x2f0002, 45, K::step_id_pointer, J::step_id, "Slurm API 47"},
        Row{0x2e0000, 0, K::unsupported, J::unsupported, "Slurm API 46"},
        Row{0x2f0001, 0, K::unsupported, J::unsupported, "Slurm API 47"},
        Row{0x250000, 0, K::unsupported, J::unsupported, "Slurm API 37"},
        // A release number is not an API version (22.05.8 would be 0x160508).
        Row{0x160508, 0, K::unsupported, J::unsupported, "Slurm API 22"},
    }));
    INFO(text);
    const SlurmAbi abi = slurm_abi(version);
    CHECK(abi.api == ((version >> 16) & 0xff));
    CHECK(abi.as_api == as_api);
    CHECK(abi.kill == kill);
    CHECK(abi.job == job);
    CHECK(kill_step_abi(version) == kill);
    CHECK(slurm_version_text(version) == text);
}

TEST_CASE("slurm_api: libslurm.so first, then every soname newest first", "[slurm_api]") {
    const std::vector<std::string> expected{"libslurm.so",
                                            "libslurm.so.46",
                                            "libslurm.so.45",
                                            "libslurm.so.44",
                                            "libslurm.so.43",
                                            "libslurm.so.42",
                                            "libslurm.so.41",
                                            "libslurm.so.40",
                                            "libslurm.so.39",
                                            "libslurm.so.38"};
    CHECK(default_libslurm_names() == expected);
    CHECK(to_string(StepRef{12, 0}) == "12.0");
}

TEST_CASE("slurm_api: loading names what was tried and why it failed", "[slurm_api]") {
    SECTION("no such file") {
        try {
            (void)SlurmLibrary::load({"/nonexistent/libslurm.so", "/nonexistent/libslurm.so.38"});
            FAIL("loaded a library that does not exist");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::io);
            CHECK(std::string(e.what()) ==
                  "libslurm: cannot load any of /nonexistent/libslurm.so, "
                  "/nonexistent/libslurm.so.38: /nonexistent/libslurm.so.38: cannot open shared "
                  "object file: No such file or directory");
            CHECK(e.hint() == "is Slurm's library (libslurm) installed on this node?");
        }
    }
    SECTION("a library that is not Slurm's") {
        try {
            (void)SlurmLibrary::load({"/nonexistent/libslurm.so", "libc.so.6"});
            FAIL("took the C library for Slurm's");
        } catch (const Error& e) {
            CHECK(e.code() == Errc::io);
            CHECK(std::string(e.what()) == "libslurm: libc.so.6 has no slurm_api_version()");
        }
    }
    SECTION("no name at all") {
        CHECK_THROWS_WITH(SlurmLibrary::load({}), "libslurm: no library name to load");
    }
}

namespace {

/// The path of the stand-in libslurm for `api` with API_AGE `age` (tests/support).
std::string fake_libslurm(int api, int age) {
    return std::string(tfslurm::test::paths::fake_libslurm_dir) + "/fake_libslurm_" +
           std::to_string(api) + "_" + std::to_string(age) + ".so";
}

/// Every call the stand-in at `path` received so far, one per line (it was loaded by
/// SlurmLibrary::load(): RTLD_NOLOAD finds it again).
std::string fake_calls(const std::string& path) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(handle != nullptr);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's documented use
    const auto calls = reinterpret_cast<const char* (*)()>(::dlsym(handle, "fake_slurm_calls"));
    REQUIRE(calls != nullptr);
    std::string text = calls();
    ::dlclose(handle);
    return text;
}

/// Forget the calls of an earlier test case (a library stays loaded for the whole process).
void fake_reset(const std::string& path) {
    if (void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD)) {
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's documented use
        reinterpret_cast<void (*)()>(::dlsym(handle, "fake_slurm_reset"))();
        ::dlclose(handle);
    }
}

void fake_set_end(const std::string& path, std::time_t end) {
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(handle != nullptr);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): dlsym's documented use
    const auto set = reinterpret_cast<void (*)(std::time_t)>(::dlsym(handle, "fake_slurm_set_end"));
    REQUIRE(set != nullptr);
    set(end);
    ::dlclose(handle);
}

} // namespace

TEST_CASE("slurm_api: each release's library is called with its own signatures", "[slurm_api]") {
    // What the stand-in of each API records for: cancel step 12.3, the end time of job 12,
    // requeue job 12 (slurm_init first, once, at load).
    const std::string none = std::to_string(0xfffffffeU);
    const std::string v45 = "slurm_init(NULL)\n"
                            "slurm_kill_job_step(&{sluid=0 job=12 het=" +
                            none + " step=3}, 9, 0)\n" +
                            "slurm_get_end_time({sluid=0 job=12 het=" + none + " step=" + none +
                            "})\n" + "slurm_requeue({sluid=0 job=12 het=" + none + " step=" + none +
                            "}, 0)\n";
    using Row = std::tuple<int, int, std::string, std::string>;
    const auto [api, age, release, calls] =
        GENERATE_COPY(table<int, int, std::string, std::string>({
            Row{38,
                0,
                "Slurm 22.05 (API 38)",
                "slurm_init(NULL)\nslurm_kill_job_step(12, 3, 9)\nslurm_get_end_time(12)\n"
                "slurm_requeue(12, 0)\n"},
            Row{42,
                0,
                "Slurm 24.11 (API 42)",
                "slurm_init(NULL)\nslurm_kill_job_step(12, 3, 9, 0)\nslurm_get_end_time(12)\n"
                "slurm_requeue(12, 0)\n"},
            Row{44,
                0,
                "Slurm 25.11 (API 44)",
                "slurm_init(NULL)\nslurm_kill_job_step(&{sluid=0 job=12 het=" + none +
                    " step=3}, 9, 0)\nslurm_get_end_time(12)\nslurm_requeue(12, 0)\n"},
            Row{45, 0, "Slurm 26.05 (API 45)", v45},
            Row{46, 1, "Slurm API 46", v45},
        }));
    INFO(release);
    const std::string path = fake_libslurm(api, age);
    fake_reset(path);
    const SlurmLibrary library = SlurmLibrary::load({path});
    CHECK(library.description() == path + " (" + release + ")");
    // One hour ahead, on a whole second: what the library says is what job_end_time() returns.
    const std::time_t end = std::time(nullptr) + 3600;
    fake_set_end(path, end);
    library.cancel_step(StepRef{12, 3});
    const auto got = library.job_end_time(12);
    REQUIRE(got.has_value());
    CHECK(*got == std::chrono::system_clock::from_time_t(end));
    library.requeue(12);
    CHECK(fake_calls(path) == calls);
}

TEST_CASE("slurm_api: Slurm's refusals keep its own text", "[slurm_api]") {
    const std::string path = fake_libslurm(45, 0);
    const SlurmLibrary library = SlurmLibrary::load({path});
    // The stand-in fails job 99 as slurmctld does: ESLURM_INVALID_JOB_ID in errno.
    CHECK_THROWS_WITH(library.cancel_step(StepRef{99, 0}),
                      "slurm: cannot cancel step 99.0: Invalid job id specified");
    CHECK_THROWS_WITH(library.job_end_time(99),
                      "slurm: cannot read the end time of job 99: Invalid job id specified");
    CHECK_THROWS_WITH(library.requeue(99),
                      "slurm: cannot requeue job 99: Invalid job id specified");
}

TEST_CASE("slurm_api: a newer release that is not declared compatible is refused by name",
          "[slurm_api]") {
    const std::string path = fake_libslurm(46, 0);
    fake_reset(path);
    try {
        (void)SlurmLibrary::load({path});
        FAIL("loaded a libslurm whose calls this tfslurm does not know");
    } catch (const Error& e) {
        CHECK(e.code() == Errc::io);
        CHECK(std::string(e.what()) ==
              "libslurm: Slurm API 46 (" + path +
                  ") is not supported: this tfslurm knows the library calls of Slurm 22.05 to "
                  "26.05 (API 38 to 45), and a newer API only when it declares itself compatible "
                  "with API 45");
        CHECK(
            e.hint() ==
            "end the step with scancel <job>.<step>, requeue the job with scontrol requeue <job>");
    }
    // Refused before any call: not even slurm_init().
    CHECK(fake_calls(path).empty());
}
