// Pinned host memory mapped into the device address space (zero-copy both ways): the decode
// graphs' exchange buffers, the capture buffers of admissions, prefill's staging buffers.
#pragma once

#include <cstddef>
#include <cstring>

#include <cuda_runtime.h>

#include "cuda/cuda_check.h"

namespace neural::hybrid {

struct HostBuffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    HostBuffer() = default;
    explicit HostBuffer(std::size_t n) : bytes(n) {
        NEURAL_CUDA(cudaHostAlloc(&ptr, n, cudaHostAllocMapped | cudaHostAllocPortable));
        std::memset(ptr, 0, n);
    }
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    HostBuffer(HostBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
    HostBuffer& operator=(HostBuffer&& o) noexcept {
        if (this != &o) {
            if (ptr != nullptr) cudaFreeHost(ptr);
            ptr = o.ptr;
            bytes = o.bytes;
            o.ptr = nullptr;
        }
        return *this;
    }
    ~HostBuffer() {
        if (ptr != nullptr) cudaFreeHost(ptr);
    }
    template <typename T>
    T* host() const {
        return static_cast<T*>(ptr);
    }
    template <typename T>
    T* device() const {
        void* d = nullptr;
        NEURAL_CUDA(cudaHostGetDevicePointer(&d, ptr, 0));
        return static_cast<T*>(d);
    }
};

}  // namespace neural::hybrid
