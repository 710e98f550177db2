// Host-side CUDA error handling: every driver call of the backend (driver/gpu.h, kernel
// launches) goes through NEURAL_CUDA, which turns a failure into neural::Error naming the call
// and the driver's error text.
#pragma once

#include "cuda/driver/gpu.h"
#include "neural/error.h"

#define NEURAL_CUDA(call)                                                  \
    do {                                                                   \
        const CUresult neural_cuda_err_ = (call);                          \
        if (neural_cuda_err_ != CUDA_SUCCESS) {                            \
            ::neural::fail("CUDA: {} failed: {}", #call,                   \
                           ::neural::cuda::result_text(neural_cuda_err_)); \
        }                                                                  \
    } while (0)
