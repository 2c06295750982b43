// SPDX-License-Identifier: MIT
// A process environment as data (src/common/env.cpp): read from an envp as execve() hands it over,
// looked up, changed, and written back for a child.
#include <tfslurm/common/env.hpp>

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using tfslurm::Environment;

TEST_CASE("env: an envp is read as getenv() sees it", "[env]") {
    const char* const envp[] = {"SLURM_JOB_ID=7",
                                "EMPTY=",
                                "EQUALS=a=b=c",
                                "SLURM_JOB_ID=8", // a second copy: getenv() finds the first
                                "NO_EQUALS_SIGN",
                                "=no name",
                                nullptr};
    const Environment env = Environment::from_envp(envp);
    CHECK(env.get("SLURM_JOB_ID") == "7");
    CHECK(env.get("EMPTY") == "");
    CHECK(env.contains("EMPTY"));
    CHECK(env.get("EQUALS") == "a=b=c");
    CHECK_FALSE(env.contains("NO_EQUALS_SIGN"));
    CHECK_FALSE(env.get("MISSING"));
    CHECK(env.vars().size() == 3);
    CHECK(Environment::from_envp(nullptr).vars().empty());
}

TEST_CASE("env: set, unset, and the strings a child gets", "[env]") {
    Environment env{{"B", "2"}, {"A", "1"}};
    env.set("C", "3");
    env.set("A", "one"); // replaces
    env.unset("B");
    env.unset("NEVER_SET"); // nothing to do
    CHECK(env.to_strings() == std::vector<std::string>{"A=one", "C=3"});
    const std::vector<std::string> strings = env.to_strings();
    std::vector<const char*> envp;
    envp.reserve(strings.size() + 1);
    for (const auto& entry : strings) {
        envp.push_back(entry.c_str());
    }
    envp.push_back(nullptr);
    CHECK(Environment::from_envp(envp.data()).to_strings() == strings);
}
