#include "cuda/driver/cuda_driver.h"

#include <cstdlib>
#include <mutex>

#ifdef _WIN32
#include <windows.h>
#else
#include <dlfcn.h>
#endif

#include <fmt/format.h>

#include "neural/error.h"

namespace neural::cuda {

namespace {

#define NEURAL_CU_STR2(x) #x
#define NEURAL_CU_STR(x) NEURAL_CU_STR2(x)

struct Loaded {
    DriverApi api;
    bool ok = false;
    std::string why;
};

std::string version_text(int v) { return fmt::format("{}.{}", v / 1000, v % 1000 / 10); }

#ifdef _WIN32
using Library = HMODULE;
Library open_library(const char* name, std::string* error) {
    Library lib = LoadLibraryA(name);
    if (lib == nullptr) *error = fmt::format("{}: LoadLibrary error {}", name, GetLastError());
    return lib;
}
void* symbol(Library lib, const char* name) {
    return reinterpret_cast<void*>(GetProcAddress(lib, name));
}
#else
using Library = void*;
Library open_library(const char* name, std::string* error) {
    Library lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char* e = dlerror();
        *error = e != nullptr ? e : "dlopen failed";
    }
    return lib;
}
void* symbol(Library lib, const char* name) { return dlsym(lib, name); }
#endif

// Loads the library, resolves every entry point, checks the version and counts the devices.
// The library stays loaded for the life of the process (the table points into it).
Loaded load() {
    Loaded out;
    std::string error;
    const char* name = driver_library_name();
    Library lib = open_library(name, &error);
    if (lib == nullptr) {
        out.why = fmt::format("no NVIDIA driver found ({})", error);
        return out;
    }
    DriverApi& a = out.api;
    std::string missing;  // the first few missing names
    int missing_count = 0, total = 0;
#define NEURAL_CU_FN(fn)                                                     \
    a.fn = reinterpret_cast<decltype(a.fn)>(symbol(lib, NEURAL_CU_STR(fn))); \
    ++total;                                                                 \
    if (a.fn == nullptr && ++missing_count <= 3)                             \
        missing += (missing.empty() ? "" : ", ") + std::string(NEURAL_CU_STR(fn));
#include "cuda/driver/driver_functions.inc"
#undef NEURAL_CU_FN
    if (!missing.empty()) {
        out.why = fmt::format(
            "NVIDIA driver too old: {} lacks {} of {} entry points ({}) (this build needs a CUDA "
            "{} "
            "driver or newer)",
            name, missing_count, total, missing, version_text(kMinDriverVersion));
        return out;
    }
    CUresult r = a.cuDriverGetVersion(&a.version);
    if (r != CUDA_SUCCESS) {
        out.why = fmt::format("NVIDIA driver unusable: cuDriverGetVersion failed ({})",
                              static_cast<int>(r));
        return out;
    }
    if (a.version < kMinDriverVersion) {
        out.why = fmt::format(
            "NVIDIA driver too old: it supports CUDA {}, this build needs CUDA {} or newer",
            version_text(a.version), version_text(kMinDriverVersion));
        return out;
    }
    r = a.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) {
        out.why = "no NVIDIA GPU found";
        return out;
    }
    if (r != CUDA_SUCCESS) {
        const char* text = nullptr;
        if (a.cuGetErrorString(r, &text) != CUDA_SUCCESS || text == nullptr) text = "unknown";
        out.why = fmt::format("NVIDIA driver failed to start: {}", text);
        return out;
    }
    int count = 0;
    if (a.cuDeviceGetCount(&count) != CUDA_SUCCESS || count <= 0) {
        out.why = "no NVIDIA GPU found";
        return out;
    }
    out.ok = true;
    return out;
}

const Loaded& loaded() {
    static const Loaded l = load();
    return l;
}

}  // namespace

const char* driver_library_name() {
    const char* env = std::getenv("NEURAL_CUDA_DRIVER");
    if (env != nullptr && *env != '\0') return env;
#ifdef _WIN32
    return "nvcuda.dll";
#else
    return "libcuda.so.1";
#endif
}

const DriverApi* driver_api(std::string* why) {
    const Loaded& l = loaded();
    if (!l.ok) {
        if (why != nullptr) *why = l.why;
        return nullptr;
    }
    return &l.api;
}

const DriverApi& api() {
    std::string why;
    const DriverApi* a = driver_api(&why);
    if (a == nullptr) fail("CUDA backend unavailable: {}", why);
    return *a;
}

std::string result_text(CUresult r) {
    const DriverApi* a = driver_api();
    const char* name = nullptr;
    const char* text = nullptr;
    if (a != nullptr) {
        if (a->cuGetErrorName(r, &name) != CUDA_SUCCESS) name = nullptr;
        if (a->cuGetErrorString(r, &text) != CUDA_SUCCESS) text = nullptr;
    }
    if (name == nullptr) return fmt::format("CUDA error {}", static_cast<int>(r));
    return text != nullptr ? fmt::format("{}: {}", name, text) : std::string(name);
}

}  // namespace neural::cuda
