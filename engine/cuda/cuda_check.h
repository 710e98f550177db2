// Host-side CUDA error handling: every runtime call of the backend goes through NEURAL_CUDA,
// which turns a failure into neural::Error naming the call and the CUDA error text.
#pragma once

#include <cuda_runtime.h>

#include "neural/error.h"

#define NEURAL_CUDA(call)                                                                       \
    do {                                                                                        \
        const cudaError_t neural_cuda_err_ = (call);                                            \
        if (neural_cuda_err_ != cudaSuccess) {                                                  \
            ::neural::fail("CUDA: {} failed: {}", #call, cudaGetErrorString(neural_cuda_err_)); \
        }                                                                                       \
    } while (0)
