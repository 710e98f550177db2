// Host entry point of gemm_bf16_rows.cu.
#include "cuda/gemm_bf16_rows.h"

#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {
using GemmRows = Kernel<void(const float*, int, int, const std::uint16_t*, const std::uint16_t*,
                             int, float*, int, bool)>;
const GemmRows k_fast_n64("gemm_bf16_rows_fast_n64");
const GemmRows k_fast_n128("gemm_bf16_rows_fast_n128");
const GemmRows k_reference_n64("gemm_bf16_rows_reference_n64");
const GemmRows k_reference_n128("gemm_bf16_rows_reference_n128");
}  // namespace

void gemm_bf16_rows(const float* x, int m, int k, const std::uint16_t* w, const std::uint16_t* bias,
                    int n, float* y, int ldy, bool accumulate, CUstream stream, KernelPath path,
                    TileWidth width) {
    if (m <= 0) return;
    const int mt = (m + gemm::kBM - 1) / gemm::kBM;
    gemm::with_tile_width(width, mt, n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        const Dim3 grid(static_cast<unsigned>((n + BN - 1) / BN), static_cast<unsigned>(mt));
        const bool fast = path == KernelPath::fast;
        const GemmRows& kernel = BN == 64 ? (fast ? k_fast_n64 : k_reference_n64)
                                          : (fast ? k_fast_n128 : k_reference_n128);
        kernel.launch(grid, gemm::kThreads, 0, stream, x, m, k, w, bias, n, y, ldy, accumulate);
    });
}

}  // namespace neural::cuda
