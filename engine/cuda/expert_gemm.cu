#include "cuda/expert_gemm.cuh"
#include "cuda/gemm_tile.cuh"

namespace neural::cuda {

namespace {

template <KernelPath kPath>
__global__ void __launch_bounds__(gemm::kThreads)
    expert_gate_up_kernel(const std::uint8_t* __restrict__ rec, int expert, ExpertShape sh,
                          const int* __restrict__ entries, int count,
                          const float* __restrict__ h,
                          const std::uint16_t* __restrict__ bias, float* __restrict__ act) {
    __shared__ __align__(16) gemm::Smem s;
    const int H = sh.hidden, I = sh.intermediate, G = H / 32;
    const int n0 = blockIdx.x * gemm::kBN, m0 = blockIdx.y * gemm::kBM;
    auto row_of = [&](int r) -> const float* {
        const int m = m0 + r;
        return m < count ? h + static_cast<std::size_t>(entries[m] / sh.k) * H : nullptr;
    };
    const gemm::WeightRows w{nullptr, rec, rec + static_cast<std::size_t>(2 * I) * G * 16};
    gemm::gemm_tile<kPath>(s, row_of, w, n0, 2 * I, H);
    const std::uint16_t* b = bias + static_cast<std::size_t>(expert) * 2 * I;
    for (int idx = threadIdx.x; idx < gemm::kBM * gemm::kBN / 2; idx += gemm::kThreads) {
        const int r = idx / (gemm::kBN / 2), p = idx % (gemm::kBN / 2), m = m0 + r;
        const int i = n0 / 2 + p;  // gate row 2i, up row 2i + 1
        if (m >= count || i >= I) continue;
        float g = s.c[r * gemm::kLdc + 2 * p] + bf16_bits_to_float(b[2 * i]);
        float u = s.c[r * gemm::kLdc + 2 * p + 1] + bf16_bits_to_float(b[2 * i + 1]);
        g = fminf(g, sh.limit);
        u = fminf(fmaxf(u, -sh.limit), sh.limit);
        const float glu = g / (1.0f + expf(-sh.alpha * g));
        act[static_cast<std::size_t>(m) * I + i] = glu * (u + 1.0f);
    }
}

template <KernelPath kPath>
__global__ void __launch_bounds__(gemm::kThreads)
    expert_down_kernel(const std::uint8_t* __restrict__ rec, int expert, ExpertShape sh,
                       const int* __restrict__ entries, int count,
                       const float* __restrict__ act, const float* __restrict__ gate,
                       const std::uint16_t* __restrict__ bias, float* __restrict__ acc) {
    __shared__ __align__(16) gemm::Smem s;
    const int H = sh.hidden, I = sh.intermediate, Gh = H / 32, Gi = I / 32;
    const int n0 = blockIdx.x * gemm::kBN, m0 = blockIdx.y * gemm::kBM;
    auto row_of = [&](int r) -> const float* {
        const int m = m0 + r;
        return m < count ? act + static_cast<std::size_t>(m) * I : nullptr;
    };
    const std::uint8_t* codes = rec + static_cast<std::size_t>(2 * I) * Gh * 17;
    const gemm::WeightRows w{nullptr, codes, codes + static_cast<std::size_t>(H) * Gi * 16};
    gemm::gemm_tile<kPath>(s, row_of, w, n0, H, I);
    const std::uint16_t* b = bias + static_cast<std::size_t>(expert) * H;
    for (int idx = threadIdx.x; idx < gemm::kBM * gemm::kBN; idx += gemm::kThreads) {
        const int r = idx / gemm::kBN, c = idx % gemm::kBN, m = m0 + r, n = n0 + c;
        if (m >= count || n >= H) continue;
        const int e = entries[m];
        const float y = s.c[r * gemm::kLdc + c] + bf16_bits_to_float(b[n]);
        float* dst = acc + static_cast<std::size_t>(e / sh.k) * H + n;
        *dst += gate[e] * y;
    }
}

template <KernelPath kPath>
void launch(const std::uint8_t* record, int expert, const ExpertShape& shape, const int* entries, int count,
            const float* h, const float* gate, const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
            float* act, float* acc, cudaStream_t stream) {
    const int mt = (count + gemm::kBM - 1) / gemm::kBM;
    expert_gate_up_kernel<kPath><<<dim3((2 * shape.intermediate + gemm::kBN - 1) / gemm::kBN, mt), gemm::kThreads, 0,
                                   stream>>>(record, expert, shape, entries, count, h, gate_up_bias, act);
    expert_down_kernel<kPath><<<dim3((shape.hidden + gemm::kBN - 1) / gemm::kBN, mt), gemm::kThreads, 0, stream>>>(
        record, expert, shape, entries, count, act, gate, down_bias, acc);
}

}  // namespace

void expert_gemm(const std::uint8_t* record, int expert, const ExpertShape& shape,
                 const int* entries, int count, const float* h, const float* gate,
                 const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
                 float* act, float* acc, cudaStream_t stream, KernelPath path) {
    if (count <= 0) return;
    if (path == KernelPath::reference) {
        launch<KernelPath::reference>(record, expert, shape, entries, count, h, gate, gate_up_bias, down_bias, act, acc, stream);
    } else {
        launch<KernelPath::fast>(record, expert, shape, entries, count, h, gate, gate_up_bias, down_bias, act, acc, stream);
    }
}

}  // namespace neural::cuda
