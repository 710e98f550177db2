#include "cuda/transfer.cuh"

#include <cstdlib>
#include <cstring>

#include <cuda_runtime.h>

#include <fmt/format.h>

namespace neural::cuda {

namespace {

double h2d_gbps(int index, std::size_t bytes, int passes, bool pinned, std::string* why) {
    auto failed = [&](const char* what, cudaError_t err) {
        if (why) *why = fmt::format("{}: {}", what, cudaGetErrorString(err));
        cudaGetLastError();
        return 0.0;
    };
    cudaError_t err = cudaSetDevice(index);
    if (err != cudaSuccess) return failed("cudaSetDevice", err);
    void* host = nullptr;
    void* dev = nullptr;
    const auto free_host = [&] {
        if (pinned)
            cudaFreeHost(host);
        else
            std::free(host);
    };
    if (pinned) {
        if ((err = cudaMallocHost(&host, bytes)) != cudaSuccess)
            return failed("cudaMallocHost", err);
    } else {
        host = std::malloc(bytes);
        if (host == nullptr) return failed("malloc", cudaErrorMemoryAllocation);
        std::memset(host, 1, bytes);  // fault the pages in before timing
    }
    if ((err = cudaMalloc(&dev, bytes)) != cudaSuccess) {
        free_host();
        return failed("cudaMalloc", err);
    }
    cudaEvent_t start = nullptr, stop = nullptr;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    double best = 0;
    err = cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice);  // warm-up
    for (int p = 0; err == cudaSuccess && p < (passes < 1 ? 1 : passes); ++p) {
        cudaEventRecord(start);
        err = cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice);
        cudaEventRecord(stop);
        cudaEventSynchronize(stop);
        float ms = 0;
        cudaEventElapsedTime(&ms, start, stop);
        if (ms > 0) {
            const double gbps = static_cast<double>(bytes) / (ms / 1e3) / 1e9;
            if (gbps > best) best = gbps;
        }
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    cudaFree(dev);
    free_host();
    if (err != cudaSuccess) return failed("cudaMemcpy", err);
    return best;
}

}  // namespace

double pinned_h2d_gbps(int index, std::size_t bytes, int passes, std::string* why) {
    return h2d_gbps(index, bytes, passes, true, why);
}

double pageable_h2d_gbps(int index, std::size_t bytes, int passes, std::string* why) {
    return h2d_gbps(index, bytes, passes, false, why);
}

}  // namespace neural::cuda
