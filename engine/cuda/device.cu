#include "cuda/device.cuh"

#include <atomic>

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace neural::cuda {

namespace {
__global__ void axpy_kernel(int n, float a, const float* x, float* y) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}
}  // namespace

std::vector<DeviceInfo> list_devices(std::string* why) {
    std::vector<DeviceInfo> out;
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
        if (why) *why = fmt::format("no usable CUDA device: {}", cudaGetErrorString(err));
        cudaGetLastError();  // clear the sticky error so later calls start clean
        return out;
    }
    if (count == 0 && why) *why = "no CUDA device found";
    // Reading each device's free memory selects it: the caller's current device is put back, so
    // listing never moves later work (kernel attributes, allocations) to another GPU.
    int current = -1;
    if (cudaGetDevice(&current) != cudaSuccess) current = -1;
    for (int i = 0; i < count; ++i) {
        cudaDeviceProp p{};
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
        DeviceInfo d;
        d.index = i;
        d.name = p.name;
        d.compute_major = p.major;
        d.compute_minor = p.minor;
        d.total_bytes = p.totalGlobalMem;
        d.multiprocessors = p.multiProcessorCount;
        size_t free_b = 0, total_b = 0;
        if (cudaSetDevice(i) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
            d.free_bytes = free_b;
        }
        out.push_back(d);
    }
    if (current >= 0) cudaSetDevice(current);
    cudaGetLastError();  // a device that failed to answer leaves no sticky error behind
    return out;
}

std::string self_test(int index) {
    if (cudaSetDevice(index) != cudaSuccess) return fmt::format("cannot select device {}", index);
    const int n = 1000;
    std::vector<float> x(n), y(n);
    for (int i = 0; i < n; ++i) {
        x[i] = static_cast<float>(i);
        y[i] = 1.0f;
    }
    float *dx = nullptr, *dy = nullptr;
    std::string result;
    auto check = [&](cudaError_t e, const char* what) {
        if (e != cudaSuccess && result.empty())
            result = fmt::format("{}: {}", what, cudaGetErrorString(e));
        return e == cudaSuccess;
    };
    if (check(cudaMalloc(&dx, n * sizeof(float)), "cudaMalloc") &&
        check(cudaMalloc(&dy, n * sizeof(float)), "cudaMalloc") &&
        check(cudaMemcpy(dx, x.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy") &&
        check(cudaMemcpy(dy, y.data(), n * sizeof(float), cudaMemcpyHostToDevice), "copy")) {
        axpy_kernel<<<(n + 255) / 256, 256>>>(n, 2.0f, dx, dy);
        if (check(cudaGetLastError(), "kernel launch") &&
            check(cudaMemcpy(y.data(), dy, n * sizeof(float), cudaMemcpyDeviceToHost),
                  "copy back")) {
            for (int i = 0; i < n && result.empty(); ++i) {
                if (y[i] != 2.0f * static_cast<float>(i) + 1.0f) {
                    result = fmt::format("wrong result at {}: {}", i, y[i]);
                }
            }
        }
    }
    cudaFree(dx);
    cudaFree(dy);
    return result;
}

int current_multiprocessors() {
    constexpr int kCached = 64;
    static std::atomic<int> cache[kCached] = {};
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) {
        cudaGetLastError();
        return 1;
    }
    if (dev >= 0 && dev < kCached) {
        const int c = cache[dev].load(std::memory_order_relaxed);
        if (c > 0) return c;
    }
    int n = 0;
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || n < 1) {
        cudaGetLastError();
        return 1;
    }
    if (dev >= 0 && dev < kCached) cache[dev].store(n, std::memory_order_relaxed);
    return n;
}

}  // namespace neural::cuda
