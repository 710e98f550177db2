#include "cuda/expert_gemm.h"
#include "cuda/gemm_tile.cuh"

namespace neural::cuda {

namespace expert_gemm_kernels {

using gemm::Operands;

// The tile's fp32 result for weight column c (0..63) back at the true scale: Operands::half
// decoded the row times 2^shift[c] and took the activations times 2^a_exp (gemm_tile.cuh).
template <Operands kOps, int BN>
__device__ __forceinline__ float unscaled(const gemm::Smem<BN>& s, int r, int c, int a_exp) {
    const float v = s.c[r * gemm::kLdc<BN> + c];
    if constexpr (kOps == Operands::half) {
        return ldexpf(v, -(s.shift[c] + a_exp));
    } else {
        return v;
    }
}

// One 64 x BN tile of act = swiglu(W1 h[token] + b1) (BN / 2 act columns) for rows m0 .. of one
// expert's `count` entries (act row m at act + m * I).
template <KernelPath kPath, Operands kOps, int BN>
__device__ __forceinline__ void gate_up_tile(gemm::Smem<BN>& s, const std::uint8_t* rec, int expert,
                                             const ExpertShape& sh, const int* entries, int count,
                                             int m0, const float* h, const std::uint16_t* bias,
                                             float* act) {
    const int H = sh.hidden, I = sh.intermediate, G = H / 32;
    const int n0 = blockIdx.x * BN;
    auto row_of = [&](int r) -> const float* {
        const int m = m0 + r;
        return m < count ? h + static_cast<std::size_t>(entries[m] / sh.k) * H : nullptr;
    };
    const gemm::WeightRows w{nullptr, rec, rec + static_cast<std::size_t>(2 * I) * G * 16};
    gemm::gemm_tile<kPath, kOps>(s, row_of, w, n0, 2 * I, H, ldexpf(1.0f, sh.in_exp));
    const std::uint16_t* b = bias + static_cast<std::size_t>(expert) * 2 * I;
    for (int idx = threadIdx.x; idx < gemm::kBM * BN / 2; idx += gemm::kThreads) {
        const int r = idx / (BN / 2), p = idx % (BN / 2), m = m0 + r;
        const int i = n0 / 2 + p;  // gate row 2i, up row 2i + 1
        if (m >= count || i >= I) continue;
        float g = unscaled<kOps, BN>(s, r, 2 * p, sh.in_exp) + bf16_bits_to_float(b[2 * i]);
        float u = unscaled<kOps, BN>(s, r, 2 * p + 1, sh.in_exp) + bf16_bits_to_float(b[2 * i + 1]);
        g = fminf(g, sh.limit);
        u = fminf(fmaxf(u, -sh.limit), sh.limit);
        const float glu = g / (1.0f + expf(-sh.alpha * g));
        act[static_cast<std::size_t>(m) * I + i] = glu * (u + 1.0f);
    }
}

// One 64 x BN tile of y = W2 act + b2 for rows m0 .. of one expert's entries. kAccumulate: the
// ungrouped form, acc[token] = fma(gate, y, acc[token]); otherwise y is stored at row m of `out`
// ([rows, H]) for combine_kernel, which does the same fma later in the same order.
template <KernelPath kPath, Operands kOps, int BN, bool kAccumulate>
__device__ __forceinline__ void down_tile(gemm::Smem<BN>& s, const std::uint8_t* rec, int expert,
                                          const ExpertShape& sh, const int* entries, int count,
                                          int m0, const float* act, const float* gate,
                                          const std::uint16_t* bias, float* out) {
    const int H = sh.hidden, I = sh.intermediate, Gh = H / 32, Gi = I / 32;
    const int n0 = blockIdx.x * BN;
    auto row_of = [&](int r) -> const float* {
        const int m = m0 + r;
        return m < count ? act + static_cast<std::size_t>(m) * I : nullptr;
    };
    const std::uint8_t* codes = rec + static_cast<std::size_t>(2 * I) * Gh * 17;
    const gemm::WeightRows w{nullptr, codes, codes + static_cast<std::size_t>(H) * Gi * 16};
    gemm::gemm_tile<kPath, kOps>(s, row_of, w, n0, H, I, ldexpf(1.0f, sh.act_exp));
    const std::uint16_t* b = bias + static_cast<std::size_t>(expert) * H;
    for (int idx = threadIdx.x; idx < gemm::kBM * BN; idx += gemm::kThreads) {
        const int r = idx / BN, c = idx % BN, m = m0 + r, n = n0 + c;
        if (m >= count || n >= H) continue;
        const float y = unscaled<kOps, BN>(s, r, c, sh.act_exp) + bf16_bits_to_float(b[n]);
        if constexpr (kAccumulate) {
            const int e = entries[m];
            float* dst = out + static_cast<std::size_t>(e / sh.k) * H + n;
            *dst = __fmaf_rn(gate[e], y, *dst);
        } else {
            out[static_cast<std::size_t>(m) * H + n] = y;
        }
    }
}

template <KernelPath kPath, Operands kOps, int BN>
__device__ __forceinline__ void expert_gate_up_body(const std::uint8_t* __restrict__ rec,
                                                    int expert, ExpertShape sh,
                                                    const int* __restrict__ entries, int count,
                                                    const float* __restrict__ h,
                                                    const std::uint16_t* __restrict__ bias,
                                                    float* __restrict__ act) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    gate_up_tile<kPath, kOps, BN>(s, rec, expert, sh, entries, count, blockIdx.y * gemm::kBM, h,
                                  bias, act);
}

template <KernelPath kPath, Operands kOps, int BN>
__device__ __forceinline__ void expert_down_body(const std::uint8_t* __restrict__ rec, int expert,
                                                 ExpertShape sh, const int* __restrict__ entries,
                                                 int count, const float* __restrict__ act,
                                                 const float* __restrict__ gate,
                                                 const std::uint16_t* __restrict__ bias,
                                                 float* __restrict__ acc) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    down_tile<kPath, kOps, BN, true>(s, rec, expert, sh, entries, count, blockIdx.y * gemm::kBM,
                                     act, gate, bias, acc);
}

// This block's job and its first row within the job.
__device__ __forceinline__ const ExpertJob& job_of(const ExpertGroup& g, int& m0) {
    const int tile = blockIdx.y;
    int j = 0;
    while (j + 1 < g.jobs && tile >= g.tiles[j + 1]) ++j;
    m0 = (tile - g.tiles[j]) * gemm::kBM;
    return g.job[j];
}

template <Operands kOps, int BN>
__device__ __forceinline__ void grouped_gate_up_body(ExpertGroup g, ExpertShape sh,
                                                     const int* __restrict__ entries,
                                                     const float* __restrict__ h,
                                                     const std::uint16_t* __restrict__ bias,
                                                     float* __restrict__ act) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    int m0 = 0;
    const ExpertJob& jb = job_of(g, m0);
    gate_up_tile<KernelPath::fast, kOps, BN>(
        s, jb.record, jb.expert, sh, entries + jb.entry0, jb.count, m0, h, bias,
        act + static_cast<std::size_t>(jb.row0) * sh.intermediate);
}

template <Operands kOps, int BN>
__device__ __forceinline__ void grouped_down_body(ExpertGroup g, ExpertShape sh,
                                                  const int* __restrict__ entries,
                                                  const float* __restrict__ act,
                                                  const std::uint16_t* __restrict__ bias,
                                                  float* __restrict__ y) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    int m0 = 0;
    const ExpertJob& jb = job_of(g, m0);
    down_tile<KernelPath::fast, kOps, BN, false>(
        s, jb.record, jb.expert, sh, entries + jb.entry0, jb.count, m0,
        act + static_cast<std::size_t>(jb.row0) * sh.intermediate, nullptr, bias,
        y + static_cast<std::size_t>(jb.row0) * sh.hidden);
}

// acc[token_m] = fma(gate[entry_m], y[row0 + m], acc[token_m]) for one job: a token appears once
// per expert, so the job's rows are independent; jobs are launched in expert order.
extern "C" __global__ void combine_kernel(ExpertJob jb, int H, int k,
                                          const int* __restrict__ entries,
                                          const float* __restrict__ gate,
                                          const float* __restrict__ y, float* __restrict__ acc) {
    const std::size_t total = static_cast<std::size_t>(jb.count) * H;
    for (std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
         idx < total; idx += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const int m = static_cast<int>(idx / H), n = static_cast<int>(idx % H);
        const int e = entries[jb.entry0 + m];
        float* dst = acc + static_cast<std::size_t>(e / k) * H + n;
        *dst = __fmaf_rn(gate[e], y[(static_cast<std::size_t>(jb.row0) + m) * H + n], *dst);
    }
}

// The entry points, one per path, operands and tile width (expert_gate_up_<path>_<ops>_n<BN>,
// expert_down_..., grouped_gate_up_<ops>_n<BN>, grouped_down_...).
#define NEURAL_EXPERT_GEMM(path, ops, bn)                                                         \
    extern "C" __global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<bn>)            \
        expert_gate_up_##path##_##ops##_n##bn(                                                    \
            const std::uint8_t* __restrict__ rec, int expert, ExpertShape sh,                     \
            const int* __restrict__ entries, int count, const float* __restrict__ h,              \
            const std::uint16_t* __restrict__ bias, float* __restrict__ act) {                    \
        expert_gate_up_body<KernelPath::path, Operands::ops, bn>(rec, expert, sh, entries, count, \
                                                                 h, bias, act);                   \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<bn>)            \
        expert_down_##path##_##ops##_n##bn(                                                       \
            const std::uint8_t* __restrict__ rec, int expert, ExpertShape sh,                     \
            const int* __restrict__ entries, int count, const float* __restrict__ act,            \
            const float* __restrict__ gate, const std::uint16_t* __restrict__ bias,               \
            float* __restrict__ acc) {                                                            \
        expert_down_body<KernelPath::path, Operands::ops, bn>(rec, expert, sh, entries, count,    \
                                                              act, gate, bias, acc);              \
    }
NEURAL_EXPERT_GEMM(fast, split_bf16, 64)
NEURAL_EXPERT_GEMM(fast, split_bf16, 128)
NEURAL_EXPERT_GEMM(fast, half, 64)
NEURAL_EXPERT_GEMM(fast, half, 128)
NEURAL_EXPERT_GEMM(reference, split_bf16, 64)
NEURAL_EXPERT_GEMM(reference, split_bf16, 128)
NEURAL_EXPERT_GEMM(reference, half, 64)
NEURAL_EXPERT_GEMM(reference, half, 128)
#undef NEURAL_EXPERT_GEMM

#define NEURAL_GROUPED_GEMM(ops, bn)                                                               \
    extern "C" __global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<bn>)             \
        grouped_gate_up_##ops##_n##bn(                                                             \
            ExpertGroup g, ExpertShape sh, const int* __restrict__ entries,                        \
            const float* __restrict__ h, const std::uint16_t* __restrict__ bias,                   \
            float* __restrict__ act) {                                                             \
        grouped_gate_up_body<Operands::ops, bn>(g, sh, entries, h, bias, act);                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<bn>)             \
        grouped_down_##ops##_n##bn(ExpertGroup g, ExpertShape sh, const int* __restrict__ entries, \
                                   const float* __restrict__ act,                                  \
                                   const std::uint16_t* __restrict__ bias,                         \
                                   float* __restrict__ y) {                                        \
        grouped_down_body<Operands::ops, bn>(g, sh, entries, act, bias, y);                        \
    }
NEURAL_GROUPED_GEMM(split_bf16, 64)
NEURAL_GROUPED_GEMM(split_bf16, 128)
NEURAL_GROUPED_GEMM(half, 64)
NEURAL_GROUPED_GEMM(half, 128)
#undef NEURAL_GROUPED_GEMM

}  // namespace expert_gemm_kernels

}  // namespace neural::cuda
