#include "cuda/gemm_bf16_rows.cuh"
#include "cuda/gemm_tile.cuh"

namespace neural::cuda {

namespace {

template <KernelPath kPath, int BN>
__global__ void __launch_bounds__(gemm::kThreads)
    gemm_bf16_rows_kernel(const float* __restrict__ x, int M, int K,
                          const std::uint16_t* __restrict__ w,
                          const std::uint16_t* __restrict__ bias, int N, float* __restrict__ y,
                          int ldy, bool accumulate) {
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

}  // namespace

void gemm_bf16_rows(const float* x, int m, int k, const std::uint16_t* w, const std::uint16_t* bias,
                    int n, float* y, int ldy, bool accumulate, cudaStream_t stream, KernelPath path,
                    TileWidth width) {
    if (m <= 0) return;
    const int mt = (m + gemm::kBM - 1) / gemm::kBM;
    gemm::with_tile_width(width, mt, n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        const dim3 grid((n + BN - 1) / BN, mt);
        if (path == KernelPath::fast) {
            gemm_bf16_rows_kernel<KernelPath::fast, BN>
                <<<grid, gemm::kThreads, 0, stream>>>(x, m, k, w, bias, n, y, ldy, accumulate);
        } else {
            gemm_bf16_rows_kernel<KernelPath::reference, BN>
                <<<grid, gemm::kThreads, 0, stream>>>(x, m, k, w, bias, n, y, ldy, accumulate);
        }
    });
}

}  // namespace neural::cuda
