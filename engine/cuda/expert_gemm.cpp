// Host entry points of expert_gemm.cu: the entry point for a launch's path, operands (bf16 hi + lo
// or fp16, ExpertShape::half_operands) and tile width.
#include "cuda/expert_gemm.h"

#include <algorithm>
#include <stdexcept>

#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {

using GateUp = Kernel<void(const std::uint8_t*, int, ExpertShape, const int*, int, const float*,
                           const std::uint16_t*, float*)>;
using Down = Kernel<void(const std::uint8_t*, int, ExpertShape, const int*, int, const float*,
                         const float*, const std::uint16_t*, float*)>;
using GroupedGateUp =
    Kernel<void(ExpertGroup, ExpertShape, const int*, const float*, const std::uint16_t*, float*)>;
using GroupedDown =
    Kernel<void(ExpertGroup, ExpertShape, const int*, const float*, const std::uint16_t*, float*)>;

// [path: fast, reference][operands: split_bf16, half][width: 64, 128]
const GateUp k_gate_up[2][2][2] = {
    {{GateUp("expert_gate_up_fast_split_bf16_n64"), GateUp("expert_gate_up_fast_split_bf16_n128")},
     {GateUp("expert_gate_up_fast_half_n64"), GateUp("expert_gate_up_fast_half_n128")}},
    {{GateUp("expert_gate_up_reference_split_bf16_n64"),
      GateUp("expert_gate_up_reference_split_bf16_n128")},
     {GateUp("expert_gate_up_reference_half_n64"), GateUp("expert_gate_up_reference_half_n128")}}};
const Down k_down[2][2][2] = {
    {{Down("expert_down_fast_split_bf16_n64"), Down("expert_down_fast_split_bf16_n128")},
     {Down("expert_down_fast_half_n64"), Down("expert_down_fast_half_n128")}},
    {{Down("expert_down_reference_split_bf16_n64"), Down("expert_down_reference_split_bf16_n128")},
     {Down("expert_down_reference_half_n64"), Down("expert_down_reference_half_n128")}}};
// [operands][width]
const GroupedGateUp k_grouped_gate_up[2][2] = {
    {GroupedGateUp("grouped_gate_up_split_bf16_n64"),
     GroupedGateUp("grouped_gate_up_split_bf16_n128")},
    {GroupedGateUp("grouped_gate_up_half_n64"), GroupedGateUp("grouped_gate_up_half_n128")}};
const GroupedDown k_grouped_down[2][2] = {
    {GroupedDown("grouped_down_split_bf16_n64"), GroupedDown("grouped_down_split_bf16_n128")},
    {GroupedDown("grouped_down_half_n64"), GroupedDown("grouped_down_half_n128")}};
const Kernel<void(ExpertJob, int, int, const int*, const float*, const float*, float*)> k_combine(
    "combine_kernel");

int path_index(KernelPath path) { return path == KernelPath::reference ? 1 : 0; }
int ops_index(const ExpertShape& shape) { return shape.half_operands ? 1 : 0; }
template <int BN>
constexpr int width_index() {
    return BN == 128 ? 1 : 0;
}

}  // namespace

void expert_gemm_gate_up(const std::uint8_t* record, int expert, const ExpertShape& shape,
                         const int* entries, int count, const float* h,
                         const std::uint16_t* gate_up_bias, float* act, CUstream stream,
                         KernelPath path, TileWidth width) {
    if (count <= 0) return;
    const int mt = (count + gemm::kBM - 1) / gemm::kBM, n = 2 * shape.intermediate;
    gemm::with_tile_width(width, mt, n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        k_gate_up[path_index(path)][ops_index(shape)][width_index<BN>()].launch(
            Dim3(static_cast<unsigned>((n + BN - 1) / BN), static_cast<unsigned>(mt)),
            gemm::kThreads, 0, stream, record, expert, shape, entries, count, h, gate_up_bias, act);
    });
}

void expert_gemm_down(const std::uint8_t* record, int expert, const ExpertShape& shape,
                      const int* entries, int count, const float* act, const float* gate,
                      const std::uint16_t* down_bias, float* acc, CUstream stream, KernelPath path,
                      TileWidth width) {
    if (count <= 0) return;
    const int mt = (count + gemm::kBM - 1) / gemm::kBM, n = shape.hidden;
    gemm::with_tile_width(width, mt, n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        k_down[path_index(path)][ops_index(shape)][width_index<BN>()].launch(
            Dim3(static_cast<unsigned>((n + BN - 1) / BN), static_cast<unsigned>(mt)),
            gemm::kThreads, 0, stream, record, expert, shape, entries, count, act, gate, down_bias,
            acc);
    });
}

void expert_gemm(const std::uint8_t* record, int expert, const ExpertShape& shape,
                 const int* entries, int count, const float* h, const float* gate,
                 const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias, float* act,
                 float* acc, CUstream stream, KernelPath path, TileWidth width) {
    expert_gemm_gate_up(record, expert, shape, entries, count, h, gate_up_bias, act, stream, path,
                        width);
    expert_gemm_down(record, expert, shape, entries, count, act, gate, down_bias, acc, stream, path,
                     width);
}

void expert_gemm_grouped(const ExpertJob* jobs, int job_count, const ExpertShape& shape,
                         const int* entries, const float* h, const float* gate,
                         const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
                         float* act, float* y, float* acc, CUstream stream, TileWidth width) {
    if (job_count <= 0) return;
    if (job_count > kMaxGroupedExperts) {
        throw std::invalid_argument("expert_gemm_grouped: more jobs than kMaxGroupedExperts");
    }
    ExpertGroup g{};
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
    const int ops = ops_index(shape);
    gemm::with_tile_width(width, mt, gu_n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        k_grouped_gate_up[ops][width_index<BN>()].launch(
            Dim3(static_cast<unsigned>((gu_n + BN - 1) / BN), static_cast<unsigned>(mt)),
            gemm::kThreads, 0, stream, g, shape, entries, h, gate_up_bias, act);
    });
    gemm::with_tile_width(width, mt, down_n, [&](auto bn) {
        constexpr int BN = decltype(bn)::value;
        k_grouped_down[ops][width_index<BN>()].launch(
            Dim3(static_cast<unsigned>((down_n + BN - 1) / BN), static_cast<unsigned>(mt)),
            gemm::kThreads, 0, stream, g, shape, entries, act, down_bias, y);
    });
    for (int j = 0; j < g.jobs; ++j) {
        const long long total = static_cast<long long>(g.job[j].count) * shape.hidden;
        const int blocks = static_cast<int>(std::min<long long>((total + 255) / 256, 4096));
        k_combine.launch(static_cast<unsigned>(blocks), 256, 0, stream, g.job[j], shape.hidden,
                         shape.k, entries, gate, y, acc);
    }
}

}  // namespace neural::cuda
