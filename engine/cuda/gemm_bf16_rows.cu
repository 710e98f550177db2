#include "cuda/gemm_bf16_rows.h"
#include "cuda/gemm_tile.cuh"

namespace neural::cuda {

namespace gemm_bf16_rows_kernels {

template <KernelPath kPath, int BN>
__device__ __forceinline__ void gemm_bf16_rows_tile(const float* __restrict__ x, int M, int K,
                                                    const std::uint16_t* __restrict__ w,
                                                    const std::uint16_t* __restrict__ bias, int N,
                                                    float* __restrict__ y, int ldy,
                                                    bool accumulate) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    const int n0 = blockIdx.x * BN, m0 = blockIdx.y * gemm::kBM;
    auto row_of = [&](int r) -> const float* {
        const int m = m0 + r;
        return m < M ? x + static_cast<std::size_t>(m) * K : nullptr;
    };
    gemm::gemm_tile<kPath>(s, row_of, gemm::WeightRows{w, nullptr, nullptr}, n0, N, K);
    for (int idx = threadIdx.x; idx < gemm::kBM * BN; idx += gemm::kThreads) {
        const int r = idx / BN, c = idx % BN, m = m0 + r, n = n0 + c;
        if (m >= M || n >= N) continue;
        const float v =
            s.c[r * gemm::kLdc<BN> + c] + (bias != nullptr ? bf16_bits_to_float(bias[n]) : 0.0f);
        float* dst = y + static_cast<std::size_t>(m) * ldy + n;
        *dst = accumulate ? *dst + v : v;
    }
}

// The entry points, one per path and tile width: gemm_bf16_rows_<path>_n<BN>.
#define NEURAL_GEMM_BF16_ROWS(path, bn)                                                         \
    extern "C" __global__ void __launch_bounds__(gemm::kThreads) gemm_bf16_rows_##path##_n##bn( \
        const float* __restrict__ x, int M, int K, const std::uint16_t* __restrict__ w,         \
        const std::uint16_t* __restrict__ bias, int N, float* __restrict__ y, int ldy,          \
        bool accumulate) {                                                                      \
        gemm_bf16_rows_tile<KernelPath::path, bn>(x, M, K, w, bias, N, y, ldy, accumulate);     \
    }
NEURAL_GEMM_BF16_ROWS(fast, 64)
NEURAL_GEMM_BF16_ROWS(fast, 128)
NEURAL_GEMM_BF16_ROWS(reference, 64)
NEURAL_GEMM_BF16_ROWS(reference, 128)
#undef NEURAL_GEMM_BF16_ROWS

}  // namespace gemm_bf16_rows_kernels

}  // namespace neural::cuda
