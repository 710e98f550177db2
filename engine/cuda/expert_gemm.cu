#include "cuda/expert_gemm.cuh"
#include "cuda/gemm_tile.cuh"

#include <algorithm>
#include <stdexcept>

namespace neural::cuda {

namespace {

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
__global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<BN>)
    expert_gate_up_kernel(const std::uint8_t* __restrict__ rec, int expert, ExpertShape sh,
                          const int* __restrict__ entries, int count, const float* __restrict__ h,
                          const std::uint16_t* __restrict__ bias, float* __restrict__ act) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    gate_up_tile<kPath, kOps, BN>(s, rec, expert, sh, entries, count, blockIdx.y * gemm::kBM, h,
                                  bias, act);
}

template <KernelPath kPath, Operands kOps, int BN>
__global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<BN>)
    expert_down_kernel(const std::uint8_t* __restrict__ rec, int expert, ExpertShape sh,
                       const int* __restrict__ entries, int count, const float* __restrict__ act,
                       const float* __restrict__ gate, const std::uint16_t* __restrict__ bias,
                       float* __restrict__ acc) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    down_tile<kPath, kOps, BN, true>(s, rec, expert, sh, entries, count, blockIdx.y * gemm::kBM,
                                     act, gate, bias, acc);
}

// A group's row tiles one after the other: job j owns blockIdx.y in [tiles[j], tiles[j + 1]).
struct Group {
    ExpertJob job[kMaxGroupedExperts];
    int tiles[kMaxGroupedExperts + 1];
    int jobs;
};

// This block's job and its first row within the job.
__device__ __forceinline__ const ExpertJob& job_of(const Group& g, int& m0) {
    const int tile = blockIdx.y;
    int j = 0;
    while (j + 1 < g.jobs && tile >= g.tiles[j + 1]) ++j;
    m0 = (tile - g.tiles[j]) * gemm::kBM;
    return g.job[j];
}

template <Operands kOps, int BN>
__global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<BN>)
    grouped_gate_up_kernel(Group g, ExpertShape sh, const int* __restrict__ entries,
                           const float* __restrict__ h, const std::uint16_t* __restrict__ bias,
                           float* __restrict__ act) {
    __shared__ __align__(16) gemm::Smem<BN> s;
    int m0 = 0;
    const ExpertJob& jb = job_of(g, m0);
    gate_up_tile<KernelPath::fast, kOps, BN>(
        s, jb.record, jb.expert, sh, entries + jb.entry0, jb.count, m0, h, bias,
        act + static_cast<std::size_t>(jb.row0) * sh.intermediate);
}

template <Operands kOps, int BN>
__global__ void __launch_bounds__(gemm::kThreads, gemm::kMinBlocks<BN>)
    grouped_down_kernel(Group g, ExpertShape sh, const int* __restrict__ entries,
                        const float* __restrict__ act, const std::uint16_t* __restrict__ bias,
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
__global__ void combine_kernel(ExpertJob jb, int H, int k, const int* __restrict__ entries,
                               const float* __restrict__ gate, const float* __restrict__ y,
                               float* __restrict__ acc) {
    const std::size_t total = static_cast<std::size_t>(jb.count) * H;
    for (std::size_t idx = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
         idx < total; idx += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        const int m = static_cast<int>(idx / H), n = static_cast<int>(idx % H);
        const int e = entries[jb.entry0 + m];
        float* dst = acc + static_cast<std::size_t>(e / k) * H + n;
        *dst = __fmaf_rn(gate[e], y[(static_cast<std::size_t>(jb.row0) + m) * H + n], *dst);
    }
}

template <KernelPath kPath, Operands kOps>
void launch_gate_up(const std::uint8_t* record, int expert, const ExpertShape& shape,
                    const int* entries, int count, const float* h,
                    const std::uint16_t* gate_up_bias, float* act, cudaStream_t stream,
                    TileWidth width) {
    const int mt = (count + gemm::kBM - 1) / gemm::kBM, n = 2 * shape.intermediate;
    gemm::with_tile_width(width, mt, n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        expert_gate_up_kernel<kPath, kOps, BN>
            <<<dim3((n + BN - 1) / BN, mt), gemm::kThreads, 0, stream>>>(
                record, expert, shape, entries, count, h, gate_up_bias, act);
    });
}

template <KernelPath kPath, Operands kOps>
void launch_down(const std::uint8_t* record, int expert, const ExpertShape& shape,
                 const int* entries, int count, const float* act, const float* gate,
                 const std::uint16_t* down_bias, float* acc, cudaStream_t stream, TileWidth width) {
    const int mt = (count + gemm::kBM - 1) / gemm::kBM, n = shape.hidden;
    gemm::with_tile_width(width, mt, n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        expert_down_kernel<kPath, kOps, BN>
            <<<dim3((n + BN - 1) / BN, mt), gemm::kThreads, 0, stream>>>(
                record, expert, shape, entries, count, act, gate, down_bias, acc);
    });
}

// Calls f(Variant<path, operands>{}) for a path and the shape's operands.
template <KernelPath kPath, Operands kOps>
struct Variant {
    static constexpr KernelPath path = kPath;
    static constexpr Operands ops = kOps;
};
template <typename F>
void dispatch(KernelPath path, const ExpertShape& shape, F&& f) {
    const bool half = shape.half_operands;
    if (path == KernelPath::reference) {
        half ? f(Variant<KernelPath::reference, Operands::half>{})
             : f(Variant<KernelPath::reference, Operands::split_bf16>{});
    } else {
        half ? f(Variant<KernelPath::fast, Operands::half>{})
             : f(Variant<KernelPath::fast, Operands::split_bf16>{});
    }
}

}  // namespace

void expert_gemm_gate_up(const std::uint8_t* record, int expert, const ExpertShape& shape,
                         const int* entries, int count, const float* h,
                         const std::uint16_t* gate_up_bias, float* act, cudaStream_t stream,
                         KernelPath path, TileWidth width) {
    if (count <= 0) return;
    dispatch(path, shape, [&](auto v) {
        launch_gate_up<decltype(v)::path, decltype(v)::ops>(record, expert, shape, entries, count,
                                                            h, gate_up_bias, act, stream, width);
    });
}

void expert_gemm_down(const std::uint8_t* record, int expert, const ExpertShape& shape,
                      const int* entries, int count, const float* act, const float* gate,
                      const std::uint16_t* down_bias, float* acc, cudaStream_t stream,
                      KernelPath path, TileWidth width) {
    if (count <= 0) return;
    dispatch(path, shape, [&](auto v) {
        launch_down<decltype(v)::path, decltype(v)::ops>(record, expert, shape, entries, count, act,
                                                         gate, down_bias, acc, stream, width);
    });
}

void expert_gemm(const std::uint8_t* record, int expert, const ExpertShape& shape,
                 const int* entries, int count, const float* h, const float* gate,
                 const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias, float* act,
                 float* acc, cudaStream_t stream, KernelPath path, TileWidth width) {
    expert_gemm_gate_up(record, expert, shape, entries, count, h, gate_up_bias, act, stream, path,
                        width);
    expert_gemm_down(record, expert, shape, entries, count, act, gate, down_bias, acc, stream, path,
                     width);
}

void expert_gemm_grouped(const ExpertJob* jobs, int job_count, const ExpertShape& shape,
                         const int* entries, const float* h, const float* gate,
                         const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
                         float* act, float* y, float* acc, cudaStream_t stream, TileWidth width) {
    if (job_count <= 0) return;
    if (job_count > kMaxGroupedExperts) {
        throw std::invalid_argument("expert_gemm_grouped: more jobs than kMaxGroupedExperts");
    }
    Group g{};
    g.jobs = 0;
    g.tiles[0] = 0;
    for (int i = 0; i < job_count; ++i) {
        const ExpertJob& j = jobs[i];
        if (j.count <= 0) continue;
        g.job[g.jobs] = j;
        g.tiles[g.jobs + 1] = g.tiles[g.jobs] + (j.count + gemm::kBM - 1) / gemm::kBM;
        ++g.jobs;
    }
    if (g.jobs == 0) return;
    const int mt = g.tiles[g.jobs];
    const int gu_n = 2 * shape.intermediate, down_n = shape.hidden;
    dispatch(KernelPath::fast, shape, [&](auto v) {
        constexpr Operands kOps = decltype(v)::ops;
        gemm::with_tile_width(width, mt, gu_n, [&](auto bn) {
            constexpr int BN = decltype(bn)::value;
            grouped_gate_up_kernel<kOps, BN>
                <<<dim3((gu_n + BN - 1) / BN, mt), gemm::kThreads, 0, stream>>>(
                    g, shape, entries, h, gate_up_bias, act);
        });
        gemm::with_tile_width(width, mt, down_n, [&](auto bn) {
            constexpr int BN = decltype(bn)::value;
            grouped_down_kernel<kOps, BN>
                <<<dim3((down_n + BN - 1) / BN, mt), gemm::kThreads, 0, stream>>>(
                    g, shape, entries, act, down_bias, y);
        });
    });
    for (int j = 0; j < g.jobs; ++j) {
        const long long total = static_cast<long long>(g.job[j].count) * shape.hidden;
        const int blocks = static_cast<int>(std::min<long long>((total + 255) / 256, 4096));
        combine_kernel<<<blocks, 256, 0, stream>>>(g.job[j], shape.hidden, shape.k, entries, gate,
                                                   y, acc);
    }
}

}  // namespace neural::cuda
