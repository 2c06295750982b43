// SPDX-License-Identifier: MIT
#include <tfslurm/common/log.hpp>

#include <spdlog/spdlog.h>

#include <memory>

namespace tfslurm {

spdlog::logger& logger() noexcept {
    // A function-local static: created once, thread-safe, no sinks until a front-end adds them.
    static const std::shared_ptr<spdlog::logger> instance = [] {
        auto created = std::make_shared<spdlog::logger>("tfslurm");
        created->set_level(spdlog::level::info);
        return created;
    }();
    return *instance;
}

} // namespace tfslurm
