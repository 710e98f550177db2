#include "cpu/kernels/expert_kernel.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <string_view>

#include "cpu/kernels/expert_kernel_impl.h"
#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "platform/cpu_features.h"

namespace neural::cpu {

using kernel_detail::IsaOps;

#ifndef NEURAL_KERNELS_X86
// Builds for other architectures have only the scalar variant.
namespace kernel_detail {
const IsaOps* ops_avx2() { return nullptr; }
const IsaOps* ops_avx512() { return nullptr; }
}  // namespace kernel_detail
#endif

namespace {

const IsaOps* ops_for(KernelIsa isa) {
    switch (isa) {
        case KernelIsa::scalar:
            return kernel_detail::ops_scalar();
        case KernelIsa::avx2:
            return kernel_detail::ops_avx2();
        case KernelIsa::avx512:
            return kernel_detail::ops_avx512();
    }
    return nullptr;
}

// Work per task: 32 gate/up pairs (64 rows, ~98 KB of a 2880-wide record) or 32 down rows per
// expert. Small enough that 8-16 threads balance over the 90 tasks of a 2880-row phase, large
// enough that claiming a task (one atomic) is noise. Any split gives the same bits.
constexpr std::int64_t kPairsPerTask = 32;
constexpr std::int64_t kDownRowsPerTask = 32;
static_assert(kDownRowsPerTask <= kernel_detail::kMaxDownRows);

// x (H floats) into the operand layout of `ops`.
void to_operand_layout(const IsaOps& ops, const float* x, std::int64_t n, float* out) {
    if (!ops.deinterleaved) {
        std::memcpy(out, x, static_cast<size_t>(n) * sizeof(float));
        return;
    }
    for (std::int64_t b = 0; b < n; b += 32) {
        for (int j = 0; j < 16; ++j) {
            out[b + j] = x[b + 2 * j];
            out[b + 16 + j] = x[b + 2 * j + 1];
        }
    }
}

kernel_detail::ExpertArgs make_args(const ExpertInput& in, int prefetch) {
    kernel_detail::ExpertArgs a{};
    a.rec = kernel_detail::make_record_ref(in.record);
    a.gate_up_bias = in.gate_up_bias;
    a.down_bias = in.down_bias;
    a.weight = in.weight;
    a.capture = in.capture;
    a.capture_stream =
        in.capture != nullptr && (reinterpret_cast<std::uintptr_t>(in.capture) & 15) == 0;
    a.prefetch = prefetch;
    a.prefetch_down = prefetch;
    if (in.record.sliced() && prefetch > 0) {
        // A slice's down rows are apart: prefetch the same blocks whole rows ahead (at least
        // `prefetch` bytes), not the other part's bytes right after them.
        const auto stride = static_cast<int>(a.rec.code_stride[1]);
        a.prefetch_down = (prefetch + stride - 1) / stride * stride;
    }
    return a;
}

void check_record(const ExpertInput& in, const char* what) {
    if (in.record.data() == nullptr) fail("expert kernel: {} has no record", what);
    if (in.record.sliced() && in.capture != nullptr)
        fail("expert kernel: {} is a slice of a record and cannot be captured", what);
}

}  // namespace

const char* kernel_isa_name(KernelIsa isa) {
    switch (isa) {
        case KernelIsa::scalar:
            return "scalar";
        case KernelIsa::avx2:
            return "avx2";
        case KernelIsa::avx512:
            return "avx512";
    }
    return "?";
}

bool kernel_isa_available(KernelIsa isa) {
    if (ops_for(isa) == nullptr) return false;
    switch (isa) {
        case KernelIsa::scalar:
            return true;
        case KernelIsa::avx2:
            return cpu_features().has_avx2_fma();
        case KernelIsa::avx512:
            return cpu_features().has_avx512();
    }
    return false;
}

KernelIsa best_kernel_isa() {
    if (kernel_isa_available(KernelIsa::avx512)) return KernelIsa::avx512;
    if (kernel_isa_available(KernelIsa::avx2)) return KernelIsa::avx2;
    return KernelIsa::scalar;
}

KernelIsa select_kernel_isa() {
    const char* env = std::getenv("NEURAL_KERNEL");
    if (env == nullptr || *env == '\0') return best_kernel_isa();
    const std::string_view name(env);
    for (KernelIsa isa : {KernelIsa::scalar, KernelIsa::avx2, KernelIsa::avx512}) {
        if (name != kernel_isa_name(isa)) continue;
        if (!kernel_isa_available(isa)) {
            fail("NEURAL_KERNEL={}: this {} cannot run it (CPU features: {})", name,
                 ops_for(isa) == nullptr ? "build" : "CPU", cpu_features().summary());
        }
        return isa;
    }
    fail("NEURAL_KERNEL={}: unknown kernel (scalar, avx2 or avx512)", name);
}

// 64-byte aligned float buffers (operands are read with 64-byte vector loads).
struct ExpertKernel::Scratch {
    struct Buffer {
        float* p = nullptr;
        size_t n = 0;
        ~Buffer() { release(); }
        void release() {
            if (p != nullptr) ::operator delete[](p, std::align_val_t(64));
            p = nullptr;
            n = 0;
        }
        float* get(size_t want) {
            if (want > n) {
                release();
                p = static_cast<float*>(
                    ::operator new[](want * sizeof(float), std::align_val_t(64)));
                n = want;
            }
            return p;
        }
    };
    Buffer x, act;
    kernel_detail::DecodeJob decode{};
    kernel_detail::MultiJob multi{};
    float* out_rows[kernel_detail::kMaxTokens] = {};
    float weights[kernel_detail::kMaxTokens] = {};
};

ExpertKernel::ExpertKernel(KernelIsa isa, SwigluParams params)
    : isa_(isa), params_(params), scratch_(std::make_unique<Scratch>()) {
    if (const char* env = std::getenv("NEURAL_KERNEL_PREFETCH"); env != nullptr && *env != '\0') {
        set_prefetch_bytes(std::atoi(env));
    }
    if (!kernel_isa_available(isa)) {
        fail("expert kernel: the {} variant is not available on this CPU/build ({})",
             kernel_isa_name(isa), cpu_features().summary());
    }
}

ExpertKernel::~ExpertKernel() = default;

void ExpertKernel::set_prefetch_bytes(int bytes) {
    // Multiples of 64 (one prefetch per cache line), capped well inside a typical record.
    prefetch_ = bytes <= 0 ? 0 : std::min((bytes + 63) / 64 * 64, 1 << 20);
}

void ExpertKernel::decode(WorkerTeam& team, std::span<const ExpertInput> experts, const float* x,
                          float* out) {
    const auto n = static_cast<int>(experts.size());
    if (n < 1 || n > kMaxExperts) fail("expert kernel: decode takes 1-4 experts, got {}", n);
    for (const ExpertInput& e : experts) check_record(e, "an expert");
    // One H; I may differ only by slices (ExpertRecordView::slice) of experts of the widest I.
    const std::int64_t H = experts[0].record.hidden();
    std::int64_t I = 0;
    for (const ExpertInput& e : experts) I = std::max(I, e.record.intermediate());
    for (const ExpertInput& e : experts) {
        if (e.record.hidden() != H || (e.record.intermediate() != I && !e.record.sliced())) {
            fail("expert kernel: experts of one call must have one shape (H={} I={} vs H={} I={})",
                 H, I, e.record.hidden(), e.record.intermediate());
        }
    }
    const IsaOps& ops = *ops_for(isa_);
    Scratch& s = *scratch_;
    kernel_detail::DecodeJob& job = s.decode;
    job.n_experts = n;
    for (int k = 0; k < n; ++k)
        job.experts[k] = make_args(experts[static_cast<size_t>(k)], prefetch_);
    job.hidden = H;
    job.inter = I;
    job.limit = params_.limit;
    job.alpha = params_.alpha;
    if (ops.deinterleaved) {
        float* xp = s.x.get(static_cast<size_t>(H));
        to_operand_layout(ops, x, H, xp);
        job.x = xp;
    } else {
        job.x = x;
    }
    job.act = s.act.get(static_cast<size_t>(n * I));
    job.out = out;
    job.i_per_task = kPairsPerTask;
    job.gate_up_tasks = (I + kPairsPerTask - 1) / kPairsPerTask;
    job.rows_per_task = kDownRowsPerTask;
    const TeamPhase phases[2] = {
        {n * job.gate_up_tasks, ops.decode_gate_up, &job},
        {(H + kDownRowsPerTask - 1) / kDownRowsPerTask, ops.decode_down, &job}};
    team.run(phases);
}

void ExpertKernel::multi(WorkerTeam& team, const ExpertInput& expert,
                         std::span<const float* const> x, std::span<const float> weights,
                         std::span<float* const> out) {
    const auto T = static_cast<int>(x.size());
    if (T < 1 || T > kMaxTokens) fail("expert kernel: multi takes 1-16 tokens, got {}", T);
    if (weights.size() != x.size() || out.size() != x.size()) {
        fail("expert kernel: multi needs as many weights ({}) and outputs ({}) as tokens ({})",
             weights.size(), out.size(), T);
    }
    check_record(expert, "the expert");
    const std::int64_t H = expert.record.hidden(), I = expert.record.intermediate();
    const IsaOps& ops = *ops_for(isa_);
    Scratch& s = *scratch_;
    float* xp = s.x.get(static_cast<size_t>(T * H));
    for (int t = 0; t < T; ++t) to_operand_layout(ops, x[static_cast<size_t>(t)], H, xp + t * H);
    for (int t = 0; t < T; ++t) {
        s.out_rows[t] = out[static_cast<size_t>(t)];
        s.weights[t] = weights[static_cast<size_t>(t)];
    }
    kernel_detail::MultiJob& job = s.multi;
    job.expert = make_args(expert, prefetch_);
    job.tokens = T;
    job.hidden = H;
    job.inter = I;
    job.limit = params_.limit;
    job.alpha = params_.alpha;
    job.x = xp;
    job.act = s.act.get(static_cast<size_t>(T * I));
    job.out = s.out_rows;
    job.weights = s.weights;
    job.i_per_task = kPairsPerTask;
    job.rows_per_task = kDownRowsPerTask;
    const TeamPhase phases[2] = {
        {(I + kPairsPerTask - 1) / kPairsPerTask, ops.multi_gate_up, &job},
        {(H + kDownRowsPerTask - 1) / kDownRowsPerTask, ops.multi_down, &job}};
    team.run(phases);
}

}  // namespace neural::cpu
