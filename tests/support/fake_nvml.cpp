// SPDX-License-Identifier: MIT
// A stand-in for NVML (libnvidia-ml.so.1) with the calls preflight makes, declared from
// NVIDIA's documented nvml.h, so that the unit tests load a real library through dlopen()
// without a GPU. FAKE_NVML (read at each call) shapes it: `init=N` makes nvmlInit_v2 return N;
// `gpus=2` is how many GPUs answer by index (0, 1); `lost=1` makes GPU 1's memory query return
// NVML_ERROR_GPU_IS_LOST (15); UUID `GPU-good` answers, any other UUID is not found (6).
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

int option(const char* key, int fallback) {
    const char* text = std::getenv("FAKE_NVML");
    if (text == nullptr) {
        return fallback;
    }
    const std::string all(text);
    const std::string prefix = std::string(key) + "=";
    const auto at = all.find(prefix);
    return at == std::string::npos ? fallback : std::atoi(all.c_str() + at + prefix.size());
}

struct Device {
    int index;
};

Device g_devices[8] = {{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}; // NOLINT

} // namespace

extern "C" {

struct nvmlMemory_t {
    unsigned long long total; // NOLINT(google-runtime-int): the C API's own type
    unsigned long long free;  // NOLINT(google-runtime-int)
    unsigned long long used;  // NOLINT(google-runtime-int)
};

__attribute__((visibility("default"))) int nvmlInit_v2() {
    return option("init", 0);
}

__attribute__((visibility("default"))) int nvmlShutdown() {
    return 0;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(int code) {
    switch (code) {
    case 2:
        return "Invalid Argument";
    case 6:
        return "Not Found";
    case 9:
        return "Driver Not Loaded";
    case 15:
        return "GPU is lost";
    default:
        return "Unknown Error";
    }
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByIndex_v2(unsigned index,
                                                                         void** device) {
    if (static_cast<int>(index) >= option("gpus", 0) || index >= 8) {
        return 2;
    }
    *device = &g_devices[index]; // NOLINT
    return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetHandleByUUID(const char* uuid,
                                                                     void** device) {
    if (std::strcmp(uuid, "GPU-good") != 0) {
        return 6;
    }
    *device = &g_devices[0]; // NOLINT
    return 0;
}

__attribute__((visibility("default"))) int nvmlDeviceGetMemoryInfo(void* device,
                                                                   nvmlMemory_t* memory) {
    const int index = static_cast<Device*>(device)->index;
    if (option("lost", -1) == index) {
        return 15;
    }
    memory->total = 1ULL << 34U;
    memory->free = 1ULL << 33U;
    memory->used = 1ULL << 33U;
    return 0;
}
}
