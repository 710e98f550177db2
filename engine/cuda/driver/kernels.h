// The kernels: entry points of the embedded fatbin (engine/cuda/*.cu, `extern "C" __global__`),
// looked up by name in the module loaded once per device, and launched through cuLaunchKernel.
// A Kernel<void(P...)> states the kernel's parameter types on the host: launch() converts its
// arguments to exactly those types, so the bytes handed to the driver are the ones the device
// code reads (fixed-width types only, docs/CUDA.md "One ABI").
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/driver/gpu.h"

namespace neural::cuda {

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
    Dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}  // NOLINT
};

// The embedded fatbin (generated from the build's nvcc output, engine/cuda/CMakeLists.txt).
struct Fatbin {
    const unsigned char* data;
    std::size_t size;
};
Fatbin embedded_fatbin();

// Loads the fatbin into the current device's context (once per device) and returns its module.
CUresult module_for_current_device(CUmodule* module, std::string* why = nullptr);

// Milliseconds the first module load took on this process (0 before it happened).
double module_load_ms();

// A kernel by name, resolved once per device.
class KernelRef {
public:
    explicit KernelRef(const char* name);
    ~KernelRef();
    KernelRef(const KernelRef&) = delete;
    KernelRef& operator=(const KernelRef&) = delete;
    const char* name() const { return name_; }
    // The function on the current device (or a failure: module not loadable, name missing).
    CUresult function(CUfunction* f) const;
    CUresult launch(Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream,
                    void** args) const;

private:
    static constexpr int kDevices = 16;
    const char* name_;
    mutable std::atomic<CUfunction> per_device_[kDevices] = {};
};

// Every kernel name the host code refers to (registered by the KernelRef constructors): a test
// resolves each against the fatbin.
const std::vector<const char*>& kernel_names();

template <typename Sig>
class Kernel;

template <typename... P>
class Kernel<void(P...)> {
public:
    explicit Kernel(const char* name) : ref_(name) {}
    // Launch errors are recorded for drv::get_last_error() (as a <<<>>> launch's would be) and
    // returned.
    CUresult launch(Dim3 grid, Dim3 block, std::size_t shared_bytes, CUstream stream,
                    std::type_identity_t<P>... args) const {
        void* params[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
        const CUresult r =
            ref_.launch(grid, block, static_cast<unsigned>(shared_bytes), stream, params);
        drv::record_error(r);
        return r;
    }
    const KernelRef& ref() const { return ref_; }

private:
    KernelRef ref_;
};

}  // namespace neural::cuda
