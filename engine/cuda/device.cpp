#include "cuda/device.h"

#include <array>
#include <atomic>
#include <vector>

#include <fmt/format.h>

#include "cuda/driver/gpu.h"
#include "cuda/driver/kernels.h"

namespace neural::cuda {

namespace {
const Kernel<void(int, float, const float*, float*)> k_axpy("axpy_kernel");
}  // namespace

std::vector<DeviceInfo> list_devices(std::string* why) {
    std::vector<DeviceInfo> out;
    const DriverApi* a = driver_api(why);
    if (a == nullptr) return out;  // the reason: no driver, too old, no GPU
    int count = 0;
    const CUresult err = a->cuDeviceGetCount(&count);
    if (err != CUDA_SUCCESS) {
        if (why) *why = fmt::format("no usable CUDA device: {}", result_text(err));
        return out;
    }
    if (count == 0 && why) *why = "no NVIDIA GPU found";
    // Reading each device's free memory needs its context current: the caller's device is put
    // back, so listing never moves later work (kernel attributes, allocations) to another GPU.
    int current = -1;
    if (drv::get_device(&current) != CUDA_SUCCESS) current = -1;
    for (int i = 0; i < count; ++i) {
        CUdevice dev = 0;
        if (a->cuDeviceGet(&dev, i) != CUDA_SUCCESS) continue;
        DeviceInfo d;
        d.index = i;
        std::array<char, 256> name{};
        if (a->cuDeviceGetName(name.data(), static_cast<int>(name.size()), dev) == CUDA_SUCCESS)
            d.name = name.data();
        a->cuDeviceGetAttribute(&d.compute_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                dev);
        a->cuDeviceGetAttribute(&d.compute_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                dev);
        a->cuDeviceGetAttribute(&d.multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
        std::size_t total = 0;
        if (a->cuDeviceTotalMem(&total, dev) == CUDA_SUCCESS) d.total_bytes = total;
        std::size_t free_b = 0, total_b = 0;
        if (drv::set_device(i) == CUDA_SUCCESS &&
            drv::mem_get_info(&free_b, &total_b) == CUDA_SUCCESS)
            d.free_bytes = free_b;
        out.push_back(d);
    }
    if (current >= 0) drv::set_device(current);
    drv::get_last_error();  // a device that failed to answer leaves nothing for later checks
    return out;
}

std::string self_test(int index) {
    if (drv::set_device(index) != CUDA_SUCCESS)
        return fmt::format("cannot select device {}", index);
    const int n = 1000;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = static_cast<float>(i);
        y[i] = 1.0f;
    }
    float *dx = nullptr, *dy = nullptr;
    std::string result;
    auto check = [&](CUresult e, const char* what) {
        if (e != CUDA_SUCCESS && result.empty())
            result = fmt::format("{}: {}", what, result_text(e));
        return e == CUDA_SUCCESS;
    };
    if (check(drv::malloc(&dx, n * sizeof(float)), "cuMemAlloc") &&
        check(drv::malloc(&dy, n * sizeof(float)), "cuMemAlloc") &&
        check(drv::memcpy(dx, x.data(), n * sizeof(float), drv::kHostToDevice), "copy") &&
        check(drv::memcpy(dy, y.data(), n * sizeof(float), drv::kHostToDevice), "copy")) {
        if (check(k_axpy.launch((n + 255) / 256, 256, 0, nullptr, n, 2.0f, dx, dy),
                  "kernel launch") &&
            check(drv::memcpy(y.data(), dy, n * sizeof(float), drv::kDeviceToHost), "copy back")) {
            for (int i = 0; i < n && result.empty(); ++i) {
                if (y[i] != 2.0f * static_cast<float>(i) + 1.0f) {
                    result = fmt::format("wrong result at {}: {}", i, y[i]);
                }
            }
        }
    }
    drv::free(dx);
    drv::free(dy);
    drv::get_last_error();
    return result;
}

int current_multiprocessors() {
    constexpr int kCached = 64;
    static std::atomic<int> cache[kCached] = {};
    int dev = 0;
    if (drv::get_device(&dev) != CUDA_SUCCESS) return 1;
    if (dev >= 0 && dev < kCached) {
        const int c = cache[dev].load(std::memory_order_relaxed);
        if (c > 0) return c;
    }
    int n = 0;
    if (drv::multiprocessor_count(dev, &n) != CUDA_SUCCESS || n < 1) return 1;
    if (dev >= 0 && dev < kCached) cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

}  // namespace neural::cuda
