// The launch geometry the kernels (*.cu, device code) and their host entry points (*.cpp) share:
// block sizes, tile sizes and dynamic shared-memory sizes. Plain C++ with fixed-width types, read
// by nvcc and by the host compilers alike (docs/CUDA.md "One ABI"); the kernels static_assert
// their own layouts against these numbers.
#pragma once

#include <cstddef>
#include <type_traits>

#include "cuda/kernel_path.h"

#ifdef __CUDACC__
#define NEURAL_HOST_DEVICE __host__ __device__
#else
#define NEURAL_HOST_DEVICE
#endif

namespace neural::cuda {

// The multiprocessor count of the current device (device.cpp), for launch-shape choices.
int current_multiprocessors();

// A vector of n floats padded by one float per 32 (bank-conflict-free column reads).
NEURAL_HOST_DEVICE constexpr int padded_floats(int n) { return n / 32 * 33; }

namespace shape {
inline constexpr int kRmsNormThreads = 256;
inline constexpr int kGemvWarps = 8;
inline constexpr int kAttentionThreads = 128;  // keys per tile; also >= head_dim
inline constexpr int kExpertWarps = 8;
inline constexpr int kFusedThreads = 256;  // rms_inv_block's reduction is rms_norm's
inline constexpr int kFusedWarps = kFusedThreads / 32;

// Prefill attention (attention_prefill.cu): kPrefillTile queries per block and keys per step,
// 4 warps; the reference kernel's shared memory (bf16 tiles, fp32 scores) in bytes.
inline constexpr int kPrefillHeadDim = 64;
inline constexpr int kPrefillTile = 64;
inline constexpr int kPrefillThreads = 128;
inline constexpr int kPrefillLdh = kPrefillHeadDim + 8;  // bf16 row stride
inline constexpr int kPrefillLdf = kPrefillHeadDim + 4;  // fp32 row stride
inline constexpr std::size_t kPrefillReferenceSmemBytes =
    2 * 2 * (kPrefillTile * kPrefillLdh)  // q, q_lo
    + (2 * 2 * (kPrefillTile * kPrefillLdh) > 4 * (kPrefillTile * kPrefillLdf)
           ? 2 * 2 * (kPrefillTile * kPrefillLdh)
           : 4 * (kPrefillTile * kPrefillLdf))  // k, k_lo | s
    + 4 * 2 * (kPrefillTile * kPrefillLdh)      // v, v_lo, p, p_lo
    + 4 * (kPrefillTile * kPrefillLdf)          // o
    + 4 * 2 * kPrefillTile;                     // m, l
}  // namespace shape

namespace gemm {

// The prefill GEMM tile (gemm_tile.cuh): kBM rows per block, kThreads threads.
inline constexpr int kBM = 64;
inline constexpr int kThreads = 128;

// Whether a launch of `blocks128` blocks of the 128-wide tile (mt row tiles x its column tiles)
// fills the GPU: at least two waves' worth of its blocks (3 per SM) on `sms` multiprocessors.
// Otherwise the 64-wide tile's twice as many blocks run better (a 93-row expert of a 3k prompt
// would leave a third of the SMs idle).
inline bool wide_tile_pays(long long blocks128, int sms) { return blocks128 >= 2LL * sms; }

// Host side of a launch of mt row tiles over n weight rows: its width (automatic: 128 where
// wide_tile_pays on the current device), passed to f as std::integral_constant<int, BN>.
template <typename F>
void with_tile_width(TileWidth width, int mt, int n, F&& f) {
    const bool wide =
        width == TileWidth::n128 ||
        (width == TileWidth::automatic &&
         wide_tile_pays(static_cast<long long>(mt) * ((n + 127) / 128), current_multiprocessors()));
    if (wide) {
        f(std::integral_constant<int, 128>{});
    } else {
        f(std::integral_constant<int, 64>{});
    }
}

}  // namespace gemm

}  // namespace neural::cuda
