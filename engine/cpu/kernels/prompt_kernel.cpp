#include "cpu/kernels/prompt_kernel.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <vector>

#include "cpu/kernels/prompt_groups.h"
#include "cpu/kernels/prompt_impl.h"
#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "platform/cpu_features.h"

namespace neural::cpu {

using prompt_detail::PromptJob;
using prompt_detail::PromptOps;

#ifndef NEURAL_KERNELS_AVX512VNNI
namespace prompt_detail {
const PromptOps* prompt_ops_vnni() { return nullptr; }
const PromptOps* prompt_ops_amx_emulated() { return nullptr; }
}  // namespace prompt_detail
#endif
#ifndef NEURAL_KERNELS_AMX
namespace prompt_detail {
const PromptOps* prompt_ops_amx() { return nullptr; }
}  // namespace prompt_detail
#endif

namespace {

const PromptOps* ops_for(PromptIsa isa) {
    switch (isa) {
        case PromptIsa::scalar:
            return prompt_detail::prompt_ops_scalar();
        case PromptIsa::avx512vnni:
            return prompt_detail::prompt_ops_vnni();
        case PromptIsa::amx_int8:
            return prompt_detail::prompt_ops_amx();
        case PromptIsa::amx_emulated:
            return prompt_detail::prompt_ops_amx_emulated();
    }
    return nullptr;
}

// 64-byte aligned bytes, grown on demand and reused across calls.
struct Buffer {
    std::uint8_t* p = nullptr;
    std::size_t n = 0;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { release(); }
    void release() {
        if (p != nullptr) ::operator delete[](p, std::align_val_t(64));
        p = nullptr;
        n = 0;
    }
    std::uint8_t* get(std::size_t want) {
        if (want > n) {
            release();
            p = static_cast<std::uint8_t*>(::operator new[](want, std::align_val_t(64)));
            n = want;
        }
        return p;
    }
    template <class T>
    T* as(std::size_t count) {
        return reinterpret_cast<T*>(get(count * sizeof(T)));
    }
};

std::int64_t round64(std::int64_t n) { return (n + 63) / 64 * 64; }

// The job plus what the baseline wrappers need: the cancel flag, checked once per task, and
// whether a task saw it (then the remaining tasks return at once and x is not touched).
struct Wrapped {
    PromptJob job;
    const PromptOps* ops;
    const std::atomic<bool>* cancel;
    std::atomic<bool> stopped{false};

    bool stop() {
        if (stopped.load(std::memory_order_relaxed)) return true;
        if (cancel_requested(cancel)) {
            stopped.store(true, std::memory_order_relaxed);
            return true;
        }
        return false;
    }
    static void gate_up(void* ctx, std::int64_t task, std::int32_t worker) {
        auto& w = *static_cast<Wrapped*>(ctx);
        if (!w.stop()) w.ops->gate_up(&w.job, task, worker);
    }
    static void down(void* ctx, std::int64_t task, std::int32_t worker) {
        auto& w = *static_cast<Wrapped*>(ctx);
        if (!w.stop()) w.ops->down(&w.job, task, worker);
    }
    // x[t] += w_0 y_0 + w_1 y_1 + ..., added in k order (the fp32 path's expression).
    static void combine(void* ctx, std::int64_t t, std::int32_t) {
        auto& w = *static_cast<Wrapped*>(ctx);
        if (w.stopped.load(std::memory_order_relaxed)) return;
        const PromptJob& j = w.job;
        const std::int64_t H = j.hidden;
        float* xt = j.x + t * H;
        for (int k = 0; k < j.K; ++k) {
            const float g = j.gate[t * j.K + k];
            const float* yk = j.y + (t * j.K + k) * H;
            for (std::int64_t i = 0; i < H; ++i) xt[i] += g * yk[i];
        }
    }
};

}  // namespace

const char* prompt_isa_name(PromptIsa isa) {
    switch (isa) {
        case PromptIsa::scalar:
            return "scalar";
        case PromptIsa::avx512vnni:
            return "avx512vnni";
        case PromptIsa::amx_int8:
            return "amx-int8";
        case PromptIsa::amx_emulated:
            return "amx-emulated";
    }
    return "unknown";
}

bool prompt_isa_available(PromptIsa isa) {
    if (ops_for(isa) == nullptr) return false;
    switch (isa) {
        case PromptIsa::scalar:
            return true;
        case PromptIsa::avx512vnni:
        case PromptIsa::amx_emulated:
            return cpu_features().has_avx512_vnni();
        case PromptIsa::amx_int8:
            return cpu_features().has_amx_int8();
    }
    return false;
}

PromptIsa best_prompt_isa() {
    if (prompt_isa_available(PromptIsa::amx_int8)) return PromptIsa::amx_int8;
    return prompt_isa_available(PromptIsa::avx512vnni) ? PromptIsa::avx512vnni : PromptIsa::scalar;
}

struct PromptKernel::Scratch {
    Buffer hq, hd, aq, ad, y, workers;
    PromptGroups groups;
    std::vector<kernel_detail::ExpertArgs> args;
};

void PromptGroups::build(const char* kernel, std::span<const ExpertInput> experts, std::int64_t T,
                         int K, const int* sel) {
    const auto E = static_cast<int>(experts.size());
    if (K < 1 || K > E) fail("{}: {} experts per token of {}", kernel, K, E);
    count.assign(static_cast<std::size_t>(E), 0);
    for (std::int64_t i = 0; i < T * K; ++i) {
        if (sel[i] < 0 || sel[i] >= E)
            fail("{}: expert {} selected of {} experts", kernel, sel[i], E);
        ++count[static_cast<std::size_t>(sel[i])];
    }
    used.clear();
    for (int e = 0; e < E; ++e) {
        if (count[static_cast<std::size_t>(e)] > 0) used.push_back(e);
    }
    std::stable_sort(used.begin(), used.end(), [&](int a, int b) {
        return count[static_cast<std::size_t>(a)] > count[static_cast<std::size_t>(b)];
    });
    const ExpertRecordView& first = experts[static_cast<std::size_t>(used[0])].record;
    hidden = first.hidden();
    inter = first.intermediate();
    slot_begin.assign(used.size() + 1, 0);
    rank.assign(static_cast<std::size_t>(E), -1);
    max_count = 0;
    for (std::size_t u = 0; u < used.size(); ++u) {
        const ExpertInput& in = experts[static_cast<std::size_t>(used[u])];
        if (in.record.data() == nullptr) fail("{}: a selected expert has no record", kernel);
        if (in.record.sliced()) fail("{}: a slice of a record is for decode only", kernel);
        if (in.record.hidden() != hidden || in.record.intermediate() != inter) {
            fail("{}: experts of one call must have one shape (H={} I={} vs H={} I={})", kernel,
                 hidden, inter, in.record.hidden(), in.record.intermediate());
        }
        const std::int32_t c = count[static_cast<std::size_t>(used[u])];
        slot_begin[u + 1] = slot_begin[u] + c;
        rank[static_cast<std::size_t>(used[u])] = static_cast<std::int32_t>(u);
        max_count = std::max(max_count, c);
    }
    slots.resize(static_cast<std::size_t>(T * K));
    row_of.resize(static_cast<std::size_t>(T * K));
    fill.assign(slot_begin.begin(), slot_begin.end() - 1);
    for (std::int64_t i = 0; i < T * K; ++i) {
        const auto u = static_cast<std::size_t>(rank[static_cast<std::size_t>(sel[i])]);
        const std::int32_t g = fill[u]++;
        slots[static_cast<std::size_t>(g)] = static_cast<std::int32_t>(i);
        row_of[static_cast<std::size_t>(i)] = g;
    }
}

PromptKernel::PromptKernel(PromptIsa isa, SwigluParams params)
    : isa_(isa), params_(params), scratch_(std::make_unique<Scratch>()) {
    if (!prompt_isa_available(isa)) {
        fail("prompt kernel: the {} variant is not available on this CPU/build ({})",
             prompt_isa_name(isa), cpu_features().summary());
    }
}

PromptKernel::~PromptKernel() = default;

void PromptKernel::run(WorkerTeam& team, std::span<const ExpertInput> experts, const float* h,
                       std::int64_t T, int K, const int* sel, const float* gate, float* x,
                       const std::atomic<bool>* cancel) {
    throw_if_cancelled(cancel);
    if (T < 1) return;
    Scratch& s = *scratch_;
    PromptGroups& g = s.groups;
    g.build("prompt kernel", experts, T, K, sel);
    const int n_used = g.n_used();
    const std::int64_t H = g.hidden, I = g.inter;
    s.args.resize(static_cast<std::size_t>(n_used));
    for (int u = 0; u < n_used; ++u) {
        const ExpertInput& in =
            experts[static_cast<std::size_t>(g.used[static_cast<std::size_t>(u)])];
        kernel_detail::ExpertArgs& a = s.args[static_cast<std::size_t>(u)];
        a = kernel_detail::ExpertArgs{};
        a.rec = kernel_detail::make_record_ref(in.record);
        a.gate_up_bias = in.gate_up_bias;
        a.down_bias = in.down_bias;
        a.weight = 1.0f;
    }

    const std::int64_t Gh = H / 32, Gi = I / 32;
    const auto TK = static_cast<std::size_t>(T * K);
    // Operand rows by expert, then kOperandPad zero rows (the AMX variant reads whole tiles).
    const std::size_t rows = TK + prompt_detail::kOperandPad;
    const auto q8 = static_cast<std::size_t>(prompt_detail::kQ8Bytes);
    Wrapped w;
    PromptJob& j = w.job;
    j.experts = s.args.data();
    j.slot_begin = g.slot_begin.data();
    j.slots = g.slots.data();
    j.row_of = g.row_of.data();
    j.n_used = n_used;
    j.K = K;
    j.tokens = T;
    j.hidden = H;
    j.inter = I;
    j.limit = params_.limit;
    j.alpha = params_.alpha;
    j.h = h;
    j.hq = s.hq.as<std::uint8_t>(rows * static_cast<std::size_t>(Gh) * q8);
    j.hd = s.hd.as<float>(rows * static_cast<std::size_t>(Gh));
    j.aq = s.aq.as<std::uint8_t>(rows * static_cast<std::size_t>(Gi) * q8);
    j.ad = s.ad.as<float>(rows * static_cast<std::size_t>(Gi));
    const std::size_t pad = prompt_detail::kOperandPad;
    std::memset(j.hq + TK * static_cast<std::size_t>(Gh) * q8, 0, pad * Gh * q8);
    std::memset(j.hd + TK * static_cast<std::size_t>(Gh), 0, pad * Gh * sizeof(float));
    std::memset(j.aq + TK * static_cast<std::size_t>(Gi) * q8, 0, pad * Gi * q8);
    std::memset(j.ad + TK * static_cast<std::size_t>(Gi), 0, pad * Gi * sizeof(float));
    j.y = s.y.as<float>(TK * static_cast<std::size_t>(H));
    j.gate = gate;
    j.x = x;
    j.gate_up_tiles = 2 * I / prompt_detail::kGateUpRows;
    j.down_tiles = H / prompt_detail::kDownRows;
    j.decode_bytes = round64(std::max(Gh, Gi) * prompt_detail::kBlockBytes);
    j.scratch_bytes =
        j.decode_bytes + round64(std::int64_t{g.max_count} * prompt_detail::kGateUpRows * 4);
    j.scratch = s.workers.get(static_cast<std::size_t>(j.scratch_bytes * team.size()));
    w.ops = ops_for(isa_);
    w.cancel = cancel;
    const TeamPhase phases[4] = {{T, w.ops->quantize, &w.job},
                                 {n_used * j.gate_up_tiles, &Wrapped::gate_up, &w},
                                 {n_used * j.down_tiles, &Wrapped::down, &w},
                                 {T, &Wrapped::combine, &w}};
    team.run(phases);
    if (w.stopped.load(std::memory_order_relaxed)) throw Cancelled();
}

int prompt_q8_passes() { return prompt_detail::kPasses; }
int prompt_q8_bytes() { return prompt_detail::kQ8Bytes; }

void prompt_quantize_block(const float* v, std::uint8_t* q, float* d) {
    prompt_detail::quantize_block(v, q, d);
}

void prompt_gemm16(PromptIsa isa, const ExpertRecordView& record, int p, std::int64_t row0,
                   const std::uint8_t* q, const float* d, int n, float* out) {
    if (!prompt_isa_available(isa)) fail("prompt kernel: {} not available", prompt_isa_name(isa));
    if (record.sliced()) fail("prompt kernel: a slice of a record is for decode only");
    const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
    if (row0 < 0 || row0 + 16 > record.rows(proj) || row0 % 16 != 0)
        fail("prompt kernel: rows {}..{} of {}", row0, row0 + 15, record.rows(proj));
    kernel_detail::ExpertArgs a{};
    a.rec = kernel_detail::make_record_ref(record);
    const int G = record.blocks_per_row(proj);
    const std::size_t row_bytes = static_cast<std::size_t>(G) * prompt_detail::kQ8Bytes;
    const std::size_t rows = static_cast<std::size_t>(n) + prompt_detail::kOperandPad;
    std::vector<std::uint8_t> qp(rows * row_bytes, 0);
    std::vector<float> dp(rows * static_cast<std::size_t>(G), 0.0f);
    std::memcpy(qp.data(), q, static_cast<std::size_t>(n) * row_bytes);
    std::memcpy(dp.data(), d, static_cast<std::size_t>(n) * G * sizeof(float));
    const prompt_detail::Operands x{qp.data(), dp.data(), std::int64_t{G} * prompt_detail::kQ8Bytes,
                                    G};
    Buffer scratch;
    ops_for(isa)->gemm16(a, p, row0, x, n,
                         scratch.get(static_cast<std::size_t>(G * prompt_detail::kBlockBytes)), out,
                         16);
}

}  // namespace neural::cpu
