#include "cpu/kernels/dense_kernel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/kernels/dense_impl.h"
#include "cpu/team/worker_team.h"
#include "model/bf16.h"
#include "neural/error.h"
#include "platform/cpu_features.h"
#include "platform/thread_scratch.h"

namespace neural::cpu {

namespace dense_detail {
#ifndef NEURAL_KERNELS_X86
TaskFn task_avx2() { return nullptr; }
TaskFn task_avx512() { return nullptr; }
TaskFn task_tile_avx2() { return nullptr; }
TaskFn task_tile_avx512() { return nullptr; }
#endif
#ifndef NEURAL_KERNELS_AVX512BF16
TaskFn task_avx512bf16() { return nullptr; }
#endif
#ifndef NEURAL_KERNELS_AMX_BF16
TaskFn task_amx_bf16() { return nullptr; }
#endif
}  // namespace dense_detail

namespace {

// Multiply-adds below which a call runs on the calling thread alone.
constexpr std::int64_t kInlineMacs = std::int64_t{1} << 16;

dense_detail::TaskFn task_for(DenseIsa isa) {
    switch (isa) {
        case DenseIsa::scalar:
            return dense_detail::task_scalar();
        case DenseIsa::avx2:
            return dense_detail::task_avx2();
        case DenseIsa::avx512:
            return dense_detail::task_avx512();
        case DenseIsa::avx512bf16:
            return dense_detail::task_avx512bf16();
        case DenseIsa::amx_bf16:
            return dense_detail::task_amx_bf16();
        case DenseIsa::amx_emulated:
            return dense_detail::task_amx_emulated();
        case DenseIsa::tile_scalar:
            return dense_detail::task_tile_scalar();
        case DenseIsa::tile_avx2:
            return dense_detail::task_tile_avx2();
        case DenseIsa::tile_avx512:
            return dense_detail::task_tile_avx512();
    }
    return nullptr;
}

// The variants that read the operand as fp32 planes (Job::planes).
bool reads_planes(DenseIsa isa) {
    return isa == DenseIsa::tile_avx2 || isa == DenseIsa::tile_avx512;
}

}  // namespace

const char* dense_isa_name(DenseIsa isa) {
    switch (isa) {
        case DenseIsa::scalar:
            return "scalar";
        case DenseIsa::avx2:
            return "avx2";
        case DenseIsa::avx512:
            return "avx512";
        case DenseIsa::avx512bf16:
            return "avx512bf16";
        case DenseIsa::amx_bf16:
            return "amx-bf16";
        case DenseIsa::amx_emulated:
            return "amx-emulated";
        case DenseIsa::tile_scalar:
            return "tile-scalar";
        case DenseIsa::tile_avx2:
            return "tile-avx2";
        case DenseIsa::tile_avx512:
            return "tile-avx512";
    }
    return "?";
}

bool dense_isa_available(DenseIsa isa) {
    if (task_for(isa) == nullptr) return false;
    switch (isa) {
        case DenseIsa::scalar:
        case DenseIsa::tile_scalar:
            return true;
        case DenseIsa::avx2:
        case DenseIsa::tile_avx2:
            return cpu_features().has_avx2_fma();
        case DenseIsa::avx512:
        case DenseIsa::tile_avx512:
            return cpu_features().has_avx512();
        case DenseIsa::avx512bf16:
            return cpu_features().has_avx512_bf16();
        case DenseIsa::amx_bf16:
            return cpu_features().has_amx_bf16();
        case DenseIsa::amx_emulated:
            return true;
    }
    return false;
}

bool dense_isa_tile_order(DenseIsa isa) {
    return isa == DenseIsa::amx_bf16 || isa == DenseIsa::amx_emulated ||
           isa == DenseIsa::tile_scalar || isa == DenseIsa::tile_avx2 ||
           isa == DenseIsa::tile_avx512;
}

DenseIsa best_dense_isa() {
    for (DenseIsa isa : {DenseIsa::avx512bf16, DenseIsa::avx512, DenseIsa::avx2}) {
        if (dense_isa_available(isa)) return isa;
    }
    return DenseIsa::scalar;
}

DenseIsa dense_isa_for(KernelIsa isa) {
    switch (isa) {
        case KernelIsa::scalar:
            return DenseIsa::scalar;
        case KernelIsa::avx2:
            return DenseIsa::avx2;
        case KernelIsa::avx512:
            return dense_isa_available(DenseIsa::avx512bf16) ? DenseIsa::avx512bf16
                                                             : DenseIsa::avx512;
    }
    return DenseIsa::scalar;
}

namespace {
std::uint16_t flush_subnormal(std::uint16_t b) {
    return (b & 0x7F80u) == 0 ? static_cast<std::uint16_t>(b & 0x8000u) : b;  // as vdpbf16ps
}
}  // namespace

DenseOperand dense_split_operand(float x) {
    DenseOperand o;
    o.hi = flush_subnormal(float_to_bf16(x));
    const float rest = x - bf16_to_float(o.hi);  // exact (Sterbenz); NaN / inf: NaN
    o.lo = flush_subnormal(float_to_bf16(std::isfinite(rest) ? rest : 0.0f));
    if (!std::isfinite(x)) o.lo = 0;
    return o;
}

namespace {

float widen(std::uint16_t v) {
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Task = token t: its operand row (high parts, low parts, zero padding) from x[t], and where
// `planes` is set the same values as fp32 planes (dense_impl.h Job::planes).
struct SplitJob {
    const float* x;
    std::uint16_t* out;
    std::int64_t cols, padded;
    float* planes = nullptr;

    static void task(void* ctx, std::int64_t t, std::int32_t) {
        const auto& j = *static_cast<const SplitJob*>(ctx);
        const float* xr = j.x + t * j.cols;
        std::uint16_t* hi = j.out + t * 2 * j.padded;
        std::uint16_t* lo = hi + j.padded;
        for (std::int64_t c = 0; c < j.cols; ++c) {
            const DenseOperand o = dense_split_operand(xr[c]);
            hi[c] = o.hi;
            lo[c] = o.lo;
        }
        for (std::int64_t c = j.cols; c < j.padded; ++c) hi[c] = lo[c] = 0;
        if (j.planes == nullptr) return;
        float* p = j.planes + t * dense_detail::plane_floats(j.padded);
        for (std::int64_t c = 0; c < j.padded; c += 32, p += 64) {
            for (int k = 0; k < 16; ++k) {
                p[k] = widen(hi[c + 2 * k]);
                p[16 + k] = widen(hi[c + 2 * k + 1]);
                p[32 + k] = widen(lo[c + 2 * k]);
                p[48 + k] = widen(lo[c + 2 * k + 1]);
            }
        }
    }
};

}  // namespace

DenseIsa dense_amx_prompt_isa(DenseIsa isa) {
    return isa == DenseIsa::avx512bf16 && dense_isa_available(DenseIsa::amx_bf16)
               ? DenseIsa::amx_bf16
               : isa;
}

DenseIsa dense_tile_isa_for(Bf16ExpertIsa gemm) {
    // Each GEMM variant's instruction set (the GEMM's availability implies the dense one's),
    // falling back where this build lacks the AMX dense variant (Windows: not built).
    DenseIsa want = DenseIsa::tile_scalar;
    switch (gemm) {
        case Bf16ExpertIsa::scalar:
            want = DenseIsa::tile_scalar;
            break;
        case Bf16ExpertIsa::avx2:
            want = DenseIsa::tile_avx2;
            break;
        case Bf16ExpertIsa::avx512:
            want = DenseIsa::tile_avx512;
            break;
        case Bf16ExpertIsa::amx_bf16:
            want = DenseIsa::amx_bf16;
            break;
        case Bf16ExpertIsa::amx_emulated:
            want = DenseIsa::amx_emulated;
            break;
    }
    for (DenseIsa isa : {want, DenseIsa::tile_avx512, DenseIsa::tile_avx2}) {
        if (dense_isa_available(isa)) return isa;
    }
    return DenseIsa::tile_scalar;
}

DenseKernel::DenseKernel(DenseIsa isa) : DenseKernel(isa, isa) {}

DenseKernel::DenseKernel(DenseIsa isa, DenseIsa prompt, DensePrompts prompts)
    : isa_(isa), prompt_isa_(prompt), prompts_(prompts) {
    if (dense_isa_tile_order(isa)) {
        fail("dense kernel: {} is a prompt variant (decode runs a lane-tree one)",
             dense_isa_name(isa));
    }
    for (DenseIsa v : {isa, prompt}) {
        if (!dense_isa_available(v)) {
            fail("dense kernel: the {} variant is not available on this CPU/build ({})",
                 dense_isa_name(v), cpu_features().summary());
        }
    }
}

void DenseKernel::run(WorkerTeam& team, std::span<const DenseOutput> outs, const float* x,
                      std::int64_t tokens, std::int64_t cols, bool prompt) const {
    using namespace dense_detail;
    if (outs.empty() || outs.size() > kMaxOutputs) {
        fail("dense kernel: 1-{} matrices per call, got {}", kMaxOutputs, outs.size());
    }
    if (tokens < 1 || cols < 1) fail("dense kernel: {} tokens of {} columns", tokens, cols);
    Job job{};
    job.n_outputs = static_cast<int>(outs.size());
    job.cols = cols;
    job.padded = (cols + 31) / 32 * 32;
    job.tokens = tokens;
    std::int64_t tasks = 0;
    const std::int64_t threads = std::max(1, team.size());
    for (std::size_t i = 0; i < outs.size(); ++i) {
        const DenseOutput& o = outs[i];
        if (o.w == nullptr || o.w->data == nullptr || o.y == nullptr) {
            fail("dense kernel: matrix {} has no weights or no output", i);
        }
        if (o.w->cols != cols) {
            fail("dense kernel: matrix {} has {} columns, the input {}", i, o.w->cols, cols);
        }
        const bool has_bias = o.bias != nullptr && o.bias->data != nullptr;
        if (has_bias && o.bias->rows * o.bias->cols != o.w->rows) {
            fail("dense kernel: matrix {} has {} rows but a bias of {}", i, o.w->rows,
                 o.bias->rows * o.bias->cols);
        }
        Output& d = job.out[i];
        d.w = o.w->data;
        d.bias = has_bias ? o.bias->data : nullptr;
        d.y = o.y;
        d.rows = o.w->rows;
        d.y_stride = o.y_stride > 0 ? o.y_stride : o.w->rows;
        // About 8 tasks per thread of 4 to 64 rows: the lm_head in 3,142 tasks rather than
        // 12,568 (claiming a task is a contended atomic), the router's 32 rows still on 8
        // threads. Any split gives the same bits.
        d.rows_per_task =
            std::clamp<std::int64_t>(d.rows / (8 * threads) / 4 * 4, 4, kMaxRowsPerTask);
        d.first_task = tasks;
        tasks += (d.rows + d.rows_per_task - 1) / d.rows_per_task;
    }
    // The operand, split once per call: per token its bf16 high parts, then its low parts,
    // each row zero-padded to a multiple of 32. A prompt's split is the team's first phase (a
    // task per token: 1.5 M values per call at 512 tokens, too many for the caller alone).
    const DenseIsa isa = prompt ? prompt_isa_ : isa_;
    const bool amx = isa == DenseIsa::amx_bf16 || isa == DenseIsa::amx_emulated;
    const std::int64_t pad = amx ? kAmxTokenPad : 0;  // zero rows the AMX token tiles read
    auto& operand = thread_scratch<std::vector<std::uint16_t>, struct DenseOperand>();
    operand.resize(static_cast<std::size_t>((tokens + pad) * 2 * job.padded));
    std::fill(operand.begin() + tokens * 2 * job.padded, operand.end(), std::uint16_t{0});
    job.x = operand.data();
    SplitJob split{x, operand.data(), cols, job.padded};
    if (reads_planes(isa)) {
        auto& planes = thread_scratch<std::vector<float>, struct DensePlanes>();
        planes.resize(static_cast<std::size_t>(tokens * plane_floats(job.padded)));
        split.planes = planes.data();
        job.planes = planes.data();
    }
    if (amx || reads_planes(isa)) {  // a repacked group of rows per worker
        auto& scratch = thread_scratch<std::vector<std::uint32_t>, struct DenseRepack>();
        job.scratch_dwords = repack_dwords(job.padded);
        scratch.resize(static_cast<std::size_t>(threads * job.scratch_dwords));
        job.scratch = scratch.data();
    }
    // A small job (the tiny shapes' router or projections: a few microseconds of work) runs on
    // the caller: waking the team would cost more than the work. Same tasks, same bits.
    std::int64_t macs = 0;
    for (int i = 0; i < job.n_outputs; ++i) macs += job.out[i].rows * job.padded * tokens;
    const bool on_caller = macs < kInlineMacs;
    const dense_detail::TaskFn fn = task_for(isa);
    // One token's split stays on the caller too: a phase of one task would only add a barrier.
    if (on_caller || tokens < 2) {
        for (std::int64_t t = 0; t < tokens; ++t) SplitJob::task(&split, t, 0);
    }
    if (on_caller) {
        for (std::int64_t t = 0; t < tasks; ++t) fn(&job, t, 0);
    } else if (tokens < 2) {
        team.run(TeamPhase{tasks, fn, &job});
    } else {
        const TeamPhase phases[2] = {{tokens, &SplitJob::task, &split}, {tasks, fn, &job}};
        team.run(phases);
    }
}

namespace {

// Rows of DenseKernel::run_rows per team task.
constexpr std::int64_t kRowsPerTask = 16;

// Task = up to kRowsPerTask listed rows: each one as a job of one one-row output, run by the
// variant's own task function (so the same micro-kernel and lane tree as a whole-matrix call).
struct RowsJob {
    dense_detail::Job base;  // the operand, columns and token count; out[0] set per row
    const std::int32_t* rows;
    std::int64_t n;
    const std::uint8_t* w;
    float* y;
    dense_detail::TaskFn fn;

    static void task(void* ctx, std::int64_t task, std::int32_t worker) {
        const auto& j = *static_cast<const RowsJob*>(ctx);
        const std::int64_t i0 = task * kRowsPerTask;
        const std::int64_t i1 = std::min(j.n, i0 + kRowsPerTask);
        for (std::int64_t i = i0; i < i1; ++i) {
            const std::int64_t r = j.rows[i];
            dense_detail::Job one = j.base;
            dense_detail::Output& o = one.out[0];
            o.w = j.w + 2 * r * j.base.cols;
            o.bias = nullptr;
            o.y = j.y + r;
            o.rows = 1;
            o.y_stride = 1;
            o.rows_per_task = 4;
            o.first_task = 0;
            j.fn(&one, 0, worker);
        }
    }
};

}  // namespace

void DenseKernel::run_rows(WorkerTeam& team, const Bf16View& w, std::span<const std::int32_t> rows,
                           const float* x, float* y) const {
    using namespace dense_detail;
    if (w.data == nullptr || y == nullptr) fail("dense kernel: no weights or no output");
    for (const std::int32_t r : rows) {
        if (r < 0 || r >= w.rows) fail("dense kernel: row {} outside 0..{}", r, w.rows - 1);
    }
    if (rows.empty()) return;
    RowsJob job{};
    job.base.n_outputs = 1;
    job.base.cols = w.cols;
    job.base.padded = (w.cols + 31) / 32 * 32;
    job.base.tokens = 1;
    auto& operand = thread_scratch<std::vector<std::uint16_t>, struct DenseRowsOperand>();
    operand.resize(static_cast<std::size_t>(2 * job.base.padded));
    SplitJob split{x, operand.data(), w.cols, job.base.padded};
    SplitJob::task(&split, 0, 0);
    job.base.x = operand.data();
    job.rows = rows.data();
    job.n = static_cast<std::int64_t>(rows.size());
    job.w = w.data;
    job.y = y;
    job.fn = task_for(isa_);
    const std::int64_t tasks = (job.n + kRowsPerTask - 1) / kRowsPerTask;
    if (job.n * job.base.padded < kInlineMacs) {
        for (std::int64_t t = 0; t < tasks; ++t) RowsJob::task(&job, t, 0);
    } else {
        team.run(TeamPhase{tasks, &RowsJob::task, &job});
    }
}

}  // namespace neural::cpu
