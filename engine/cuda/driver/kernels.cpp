#include "cuda/driver/kernels.h"

#include "cuda/fatbin_info.h"

#include <array>
#include <chrono>
#include <mutex>

#include <fmt/format.h>

namespace neural::cuda {

// Generated at build time from the nvcc output (engine/cuda/CMakeLists.txt).
extern "C" const unsigned char neural_cuda_fatbin[];
extern "C" const std::size_t neural_cuda_fatbin_size;

Fatbin embedded_fatbin() { return {neural_cuda_fatbin, neural_cuda_fatbin_size}; }

namespace {

constexpr int kMaxDevices = 64;
std::mutex g_module_mu;
std::array<CUmodule, kMaxDevices> g_modules{};
std::array<CUresult, kMaxDevices> g_module_error{};
double g_load_ms = 0;

std::vector<const char*>& names() {
    static std::vector<const char*> n;
    return n;
}
std::mutex& registry_mutex() {
    static std::mutex mu;
    return mu;
}
std::vector<const KernelRef*>& refs() {
    static std::vector<const KernelRef*> r;
    return r;
}

// On every bind of a device: its module loaded and each kernel resolved once, ahead of any
// launch (a first launch may come inside a stream capture). Failures are left for the launches
// to report.
void resolve_all(int device) {
    static std::mutex mu;
    static std::array<bool, kMaxDevices> done{};
    if (device < 0 || device >= kMaxDevices) return;
    const std::lock_guard<std::mutex> lock(mu);
    const std::lock_guard<std::mutex> registry(registry_mutex());
    if (done[static_cast<std::size_t>(device)]) return;
    done[static_cast<std::size_t>(device)] = true;
    for (const KernelRef* k : refs()) {
        CUfunction f = nullptr;
        (void)k->function(&f);
    }
}

[[maybe_unused]] const bool g_hook_set = [] {
    drv::set_bind_hook(resolve_all);
    return true;
}();

}  // namespace

const std::vector<const char*>& kernel_names() { return names(); }

double module_load_ms() {
    const std::lock_guard<std::mutex> lock(g_module_mu);
    return g_load_ms;
}

CUresult module_for_current_device(CUmodule* module, std::string* why) {
    int device = 0;
    CUresult r = drv::get_device(&device);
    if (r != CUDA_SUCCESS) return r;
    if (device < 0 || device >= kMaxDevices) return CUDA_ERROR_INVALID_DEVICE;
    const auto d = static_cast<std::size_t>(device);
    const std::lock_guard<std::mutex> lock(g_module_mu);
    if (g_modules[d] == nullptr && g_module_error[d] == CUDA_SUCCESS) {
        const auto start = std::chrono::steady_clock::now();
        CUmodule m = nullptr;
        r = api().cuModuleLoadData(&m, neural_cuda_fatbin);
        const std::chrono::duration<double, std::milli> took =
            std::chrono::steady_clock::now() - start;
        if (g_load_ms == 0) g_load_ms = took.count();
        if (r == CUDA_SUCCESS)
            g_modules[d] = m;
        else
            g_module_error[d] = r;
    }
    if (g_modules[d] == nullptr) {
        if (why != nullptr)
            *why = fmt::format(
                "the GPU kernels do not load on device {} ({}); this build's fatbin holds {}",
                device, result_text(g_module_error[d]), NEURAL_CUDA_FATBIN_ARCHS);
        return g_module_error[d];
    }
    *module = g_modules[d];
    return CUDA_SUCCESS;
}

KernelRef::KernelRef(const char* name) : name_(name) {
    const std::lock_guard<std::mutex> lock(registry_mutex());
    names().push_back(name);
    refs().push_back(this);
}

KernelRef::~KernelRef() {
    const std::lock_guard<std::mutex> lock(registry_mutex());
    auto& r = refs();
    for (std::size_t i = 0; i < r.size(); ++i) {
        if (r[i] == this) {
            r.erase(r.begin() + static_cast<std::ptrdiff_t>(i));
            names().erase(names().begin() + static_cast<std::ptrdiff_t>(i));
            break;
        }
    }
}

CUresult KernelRef::function(CUfunction* f) const {
    int device = 0;
    CUresult r = drv::get_device(&device);
    if (r != CUDA_SUCCESS) return r;
    if (device >= 0 && device < kDevices) {
        *f = per_device_[device].load(std::memory_order_acquire);
        if (*f != nullptr) return CUDA_SUCCESS;
    }
    CUmodule m = nullptr;
    r = module_for_current_device(&m);
    if (r != CUDA_SUCCESS) return r;
    r = api().cuModuleGetFunction(f, m, name_);
    if (r == CUDA_SUCCESS && device >= 0 && device < kDevices)
        per_device_[device].store(*f, std::memory_order_release);
    return r;
}

CUresult KernelRef::launch(Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream,
                           void** args) const {
    CUfunction f = nullptr;
    const CUresult r = function(&f);
    if (r != CUDA_SUCCESS) return r;
    return api().cuLaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                                stream, args, nullptr);
}

}  // namespace neural::cuda
