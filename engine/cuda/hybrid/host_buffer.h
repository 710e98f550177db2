// Pinned host memory mapped into the device address space (zero-copy both ways): the decode
// graphs' exchange buffers, the capture buffers of admissions, prefill's staging buffers.
#pragma once

#include <cstddef>
#include <cstring>

#include "cuda/driver/gpu.h"

#include "cuda/cuda_check.h"

namespace neural::hybrid {

struct HostBuffer {
    void* ptr = nullptr;
    std::size_t bytes = 0;
    HostBuffer() = default;
    explicit HostBuffer(std::size_t n) : bytes(n) {
        NEURAL_CUDA(cuda::drv::host_alloc(
            &ptr, n, cuda::drv::kHostAllocMapped | cuda::drv::kHostAllocPortable));
        std::memset(ptr, 0, n);
    }
    HostBuffer(const HostBuffer&) = delete;
    HostBuffer& operator=(const HostBuffer&) = delete;
    HostBuffer(HostBuffer&& o) noexcept : ptr(o.ptr), bytes(o.bytes) { o.ptr = nullptr; }
    HostBuffer& operator=(HostBuffer&& o) noexcept {
        if (this != &o) {
            if (ptr != nullptr) cuda::drv::free_host(ptr);
            ptr = o.ptr;
            bytes = o.bytes;
            o.ptr = nullptr;
        }
        return *this;
    }
    ~HostBuffer() {
        if (ptr != nullptr) cuda::drv::free_host(ptr);
    }
    template <typename T>
    T* host() const {
        return static_cast<T*>(ptr);
    }
    template <typename T>
    T* device() const {
        void* d = nullptr;
        NEURAL_CUDA(cuda::drv::host_get_device_pointer(&d, ptr, 0));
        return static_cast<T*>(d);
    }
};

}  // namespace neural::hybrid
