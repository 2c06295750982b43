// SPDX-License-Identifier: MIT
#include "os/detail/shared_library.hpp"

#include <tfslurm/common/error.hpp>

#include <fmt/format.h>

#include <dlfcn.h>

namespace tfslurm::detail {

void* SharedLibrary::symbol(const char* function) const {
    void* address = ::dlsym(handle, function);
    if (address == nullptr) {
        throw errors::make(Errc::io, subject, fmt::format("{} has no {}()", name, function));
    }
    return address;
}

SharedLibrary load_first_library(const std::vector<std::string>& names,
                                 int flags,
                                 std::string_view subject,
                                 std::string_view hint) {
    if (names.empty()) {
        throw errors::make(Errc::io, std::string{subject}, "no library name to load");
    }
    std::string last_error;
    for (const auto& name : names) {
        if (void* handle = ::dlopen(name.c_str(), flags)) {
            return SharedLibrary{handle, name, std::string{subject}};
        }
        const char* why = ::dlerror();
        last_error = why != nullptr ? why : name + ": cannot be loaded";
    }
    std::string tried;
    for (const auto& name : names) {
        tried += (tried.empty() ? "" : ", ") + name;
    }
    throw errors::make(Errc::io,
                       std::string{subject},
                       fmt::format("cannot load any of {}: {}", tried, last_error),
                       std::string{hint});
}

} // namespace tfslurm::detail
