// SPDX-License-Identifier: MIT
// The one place tfslurm calls Slurm's PMI2 client library. As in slurm_api.cpp, licensing is
// the reason for the shape: libpmi2 is loaded at run time and called through the declarations
// below, written from the documented PMI2 API (Slurm's pmi2.h), never copied.
#include "os/detail/shared_library.hpp"

#include <tfslurm/common/error.hpp>
#include <tfslurm/common/log.hpp>
#include <tfslurm/os/pmi2.hpp>
#include <tfslurm/resolve/exchange.hpp>

#include <fmt/format.h>

#include <dlfcn.h>

#include <array>
#include <chrono>
#include <utility>

namespace tfslurm {
namespace {

constexpr int k_pmi2_success = 0;      // PMI2_SUCCESS
constexpr int k_pmi2_max_jobid = 1024; // PMI2_MAX_VALLEN bounds every value, the job id too

/// The PMI2 functions tfslurm calls, looked up in the loaded library.
struct Pmi2Functions {
    int (*init)(int* spawned, int* size, int* rank, int* appnum) = nullptr;
    int (*finalize)() = nullptr;
    int (*job_get_id)(char* jobid, int jobid_size) = nullptr;
    int (*put)(const char* key, const char* value) = nullptr;
    int (*fence)() = nullptr;
    int (*get)(const char* jobid,
               int src_pmi_id,
               const char* key,
               char* value,
               int maxvalue,
               int* vallen) = nullptr;
};

// The library is never unloaded: PMI2 keeps its connection state for the whole process.
Pmi2Functions load_libpmi2(const std::vector<std::string>& names) {
    const detail::SharedLibrary library = detail::load_first_library(
        names,
        RTLD_NOW | RTLD_LOCAL,
        "libpmi2",
        "install Slurm's PMI2 library on every node (Debian: libpmi2-0)");
    const auto symbol = [&library](const char* name) { return library.symbol(name); };
    Pmi2Functions f;
    // dlsym returns void*: converting it to a function pointer is how POSIX defines its use.
    // NOLINTBEGIN(cppcoreguidelines-pro-type-reinterpret-cast)
    f.init = reinterpret_cast<decltype(f.init)>(symbol("PMI2_Init"));
    f.finalize = reinterpret_cast<decltype(f.finalize)>(symbol("PMI2_Finalize"));
    f.job_get_id = reinterpret_cast<decltype(f.job_get_id)>(symbol("PMI2_Job_GetId"));
    f.put = reinterpret_cast<decltype(f.put)>(symbol("PMI2_KVS_Put"));
    f.fence = reinterpret_cast<decltype(f.fence)>(symbol("PMI2_KVS_Fence"));
    f.get = reinterpret_cast<decltype(f.get)>(symbol("PMI2_KVS_Get"));
    // NOLINTEND(cppcoreguidelines-pro-type-reinterpret-cast)
    logger().debug("libpmi2: loaded {}", library.name);
    return f;
}

void check(int rc, std::string_view call) {
    if (rc != k_pmi2_success) {
        throw errors::make(Errc::io,
                           "PMI2",
                           fmt::format("{}() failed with error {}", call, rc),
                           "was the step started with srun --mpi=pmi2?");
    }
}

/// PMI2_Init() .. PMI2_Finalize(), finalized on every way out.
class Pmi2Session {
  public:
    explicit Pmi2Session(const Pmi2Functions& f) : m_f(f) {
        int spawned = 0;
        int appnum = 0;
        check(m_f.init(&spawned, &m_size, &m_rank, &appnum), "PMI2_Init");
    }
    Pmi2Session(const Pmi2Session&) = delete;
    Pmi2Session& operator=(const Pmi2Session&) = delete;
    Pmi2Session(Pmi2Session&&) = delete;
    Pmi2Session& operator=(Pmi2Session&&) = delete;
    ~Pmi2Session() { static_cast<void>(m_f.finalize()); }

    [[nodiscard]] int size() const noexcept { return m_size; }
    [[nodiscard]] int rank() const noexcept { return m_rank; }

  private:
    const Pmi2Functions& m_f;
    int m_size = 0;
    int m_rank = 0;
};

} // namespace

std::vector<std::string> default_libpmi2_names() {
    return {"libpmi2.so.0", "libpmi2.so"};
}

std::map<std::string, std::string, std::less<>> exchange_addresses_pmi2(
    const Plan& plan, const std::string& own_address, const std::vector<std::string>& libraries) {
    const auto started = std::chrono::steady_clock::now();
    const auto steps = pmi2_exchange(plan, own_address);
    const auto f = load_libpmi2(libraries);
    const Pmi2Session session{f};
    check_pmi2_world(session.size(), session.rank(), plan);
    std::map<std::string, std::string, std::less<>> addresses;
    if (plan.hosts.size() == 1) {
        // One node: nothing to learn, no fence needed.
        if (!own_address.empty()) {
            addresses.emplace(plan.ranks.at(*plan.self_rank).host, own_address);
        }
        return addresses;
    }
    std::array<char, k_pmi2_max_jobid> jobid{};
    check(f.job_get_id(jobid.data(), static_cast<int>(jobid.size())), "PMI2_Job_GetId");
    if (steps.put) {
        check(f.put(steps.put->key.c_str(), steps.put->value.c_str()), "PMI2_KVS_Put");
    }
    check(f.fence(), "PMI2_KVS_Fence");
    if (own_address.empty()) {
        return addresses; // took part so that nobody waits; the caller reports why
    }
    addresses.emplace(plan.ranks.at(*plan.self_rank).host, own_address);
    std::array<char, k_pmi2_max_value> value{};
    for (const auto& get : steps.gets) {
        int length = 0;
        value.fill('\0');
        check(f.get(jobid.data(),
                    static_cast<int>(get.source_rank),
                    get.key.c_str(),
                    value.data(),
                    static_cast<int>(value.size()),
                    &length),
              "PMI2_KVS_Get");
        // Slurm's length counts the bytes copied; the value is a C string either way.
        const std::string_view text{value.data()};
        addresses.emplace(get.node, read_pmi2_address(get, text));
    }
    logger().debug("PMI2: {} node addresses exchanged in {} us ({} put, 1 fence, {} gets)",
                   addresses.size(),
                   std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::steady_clock::now() - started)
                       .count(),
                   steps.put ? 1 : 0,
                   steps.gets.size());
    return addresses;
}

} // namespace tfslurm
