#include "cuda/gemm_bf16_rows.cuh"
#include "cuda/gemm_tile.cuh"

namespace neural::cuda {

namespace {

template <KernelPath kPath>
__global__ void __launch_bounds__(gemm::kThreads)
    gemm_bf16_rows_kernel(const float* __restrict__ x, int M, int K,
                          const std::uint16_t* __restrict__ w, const std::uint16_t* __restrict__ bias,
                          int N, float* __restrict__ y, int ldy, bool accumulate) {
    __shared__ __align__(16) gemm::Smem s;
    const int n0 = blockIdx.x * gemm::kBN, m0 = blockIdx.y * gemm::kBM;
    auto row_of = [&](int r) -> const float* {
        const int m = m0 + r;
        return m < M ? x + static_cast<std::size_t>(m) * K : nullptr;
    };
    gemm::gemm_tile<kPath>(s, row_of, gemm::WeightRows{w, nullptr, nullptr}, n0, N, K);
    for (int idx = threadIdx.x; idx < gemm::kBM * gemm::kBN; idx += gemm::kThreads) {
        const int r = idx / gemm::kBN, c = idx % gemm::kBN, m = m0 + r, n = n0 + c;
        if (m >= M || n >= N) continue;
        const float v = s.c[r * gemm::kLdc + c] + (bias != nullptr ? bf16_bits_to_float(bias[n]) : 0.0f);
        float* dst = y + static_cast<std::size_t>(m) * ldy + n;
        *dst = accumulate ? *dst + v : v;
    }
}

}  // namespace

void gemm_bf16_rows(const float* x, int m, int k, const std::uint16_t* w,
                    const std::uint16_t* bias, int n, float* y, int ldy, bool accumulate,
                    cudaStream_t stream, KernelPath path) {
    if (m <= 0) return;
    const dim3 grid((n + gemm::kBN - 1) / gemm::kBN, (m + gemm::kBM - 1) / gemm::kBM);
    if (path == KernelPath::fast) {
        gemm_bf16_rows_kernel<KernelPath::fast><<<grid, gemm::kThreads, 0, stream>>>(x, m, k, w, bias, n, y, ldy, accumulate);
    } else {
        gemm_bf16_rows_kernel<KernelPath::reference><<<grid, gemm::kThreads, 0, stream>>>(x, m, k, w, bias, n, y, ldy, accumulate);
    }
}

}  // namespace neural::cuda
