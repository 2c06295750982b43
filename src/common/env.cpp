// SPDX-License-Identifier: MIT
#include <tfslurm/common/env.hpp>

#include <cstring>
#include <utility>

extern "C" {
extern char** environ; // NOLINT(readability-identifier-naming): POSIX name
}

namespace tfslurm {

Environment::Environment(std::initializer_list<std::pair<const std::string, std::string>> vars)
    : m_vars(vars) {}

Environment::Environment(Map vars) : m_vars(std::move(vars)) {}

Environment Environment::from_process() {
    return from_envp(environ);
}

Environment Environment::from_envp(const char* const* envp) {
    Map vars;
    if (envp == nullptr) {
        return Environment{std::move(vars)};
    }
    for (const char* const* entry = envp; *entry != nullptr; ++entry) {
        const std::string_view text{*entry};
        const auto eq = text.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            continue;
        }
        // execve() semantics: the first occurrence of a name wins (getenv() finds it first).
        vars.emplace(std::string{text.substr(0, eq)}, std::string{text.substr(eq + 1)});
    }
    return Environment{std::move(vars)};
}

std::optional<std::string_view> Environment::get(std::string_view name) const {
    const auto found = m_vars.find(name);
    if (found == m_vars.end()) {
        return std::nullopt;
    }
    return std::string_view{found->second};
}

bool Environment::contains(std::string_view name) const {
    return m_vars.find(name) != m_vars.end();
}

void Environment::set(std::string name, std::string value) {
    m_vars.insert_or_assign(std::move(name), std::move(value));
}

void Environment::unset(std::string_view name) {
    const auto found = m_vars.find(name);
    if (found != m_vars.end()) {
        m_vars.erase(found);
    }
}

std::vector<std::string> Environment::to_strings() const {
    std::vector<std::string> out;
    out.reserve(m_vars.size());
    for (const auto& [name, value] : m_vars) {
        std::string entry;
        entry.reserve(name.size() + 1 + value.size());
        entry.append(name).append(1, '=').append(value);
        out.push_back(std::move(entry));
    }
    return out;
}

} // namespace tfslurm
