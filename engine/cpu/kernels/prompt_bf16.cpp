// The bf16 prompt path (prompt_bf16.h): the grouping of a pass's (token, k) choices by expert
// and the team job's six phases around the bf16 expert GEMM. Baseline code under
// -ffp-contract=off: the bias adds, SwiGLU and the combine are the fp32 path's operations, one
// rounding each, on every CPU.
#include "cpu/kernels/prompt_bf16.h"

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
namespace {

constexpr int kGateUpRows = 64;  // gate_up rows per task: 32 gate/up pairs

// 64-byte aligned bytes, grown on demand and reused across calls.
class Buffer {
public:
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { release(); }
    template <class T>
    T* as(std::size_t count) {
        const std::size_t want = count * sizeof(T);
        if (want > n_) {
            release();
            p_ = static_cast<std::uint8_t*>(::operator new[](want, std::align_val_t(64)));
            n_ = want;
        }
        return reinterpret_cast<T*>(p_);
    }

private:
    void release() {
        if (p_ != nullptr) ::operator delete[](p_, std::align_val_t(64));
        p_ = nullptr;
        n_ = 0;
    }
    std::uint8_t* p_ = nullptr;
    std::size_t n_ = 0;
};

std::size_t round64(std::size_t n) { return (n + 63) / 64 * 64; }

struct Job {
    Bf16ExpertIsa isa;
    const ExpertInput* const* experts;  // [n_used] by rank
    const std::int32_t* slot_begin;     // [n_used + 1] operand rows of each expert
    const std::int32_t* slots;          // operand row -> t * K + k
    const std::int32_t* row_of;         // t * K + k -> slot
    const std::int32_t* unit_of;        // slot -> expert rank
    int K;
    int parts;  // operand rows per slot: 1 (bf16) or 2 (hi and lo)
    std::int64_t hidden, inter;
    std::int64_t gate_up_tiles, down_tiles, down_rows;
    float limit, alpha;
    const float* h;  // [T][H]
    // Operand rows, per expert u (slots s0 .. s0 + n - 1): from parts * s0 on, the n hi rows,
    // then (parts 2) the n lo rows, so one GEMM call takes all of them.
    std::uint16_t* hb;  // [T * K * parts][H] bf16 h
    std::uint16_t* ab;  // [T * K * parts][I] bf16 activations
    // Each expert's GEMM operand prepared once per projection (bf16_expert_prepare): expert u's
    // at prep + prep_gate_up[u] (from hb) and, reusing the bytes, prep + prep_down[u] (from ab);
    // op[u] the one of the current projection.
    std::uint8_t* prep;
    const std::size_t* prep_gate_up;  // [n_used]
    const std::size_t* prep_down;     // [n_used]
    Bf16PreparedOperand* op;          // [n_used]
    float* y;                         // [T * K][H] expert outputs by t * K + k (bias included)
    const float* gate;                // [T][K]
    float* x;                         // [T][H]
    std::uint8_t* scratch;            // per worker: GEMM scratch, then the GEMM's [n][64] outputs
    std::size_t scratch_bytes, gemm_bytes;
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
};

// x as bf16 operand rows: hi = bf16(x), and with `lo` also lo = bf16(x - hi) (x - hi is exact;
// lo = 0 where hi is an infinity or NaN, which hi carries).
void round_operand(const float* x, std::int64_t n, std::uint16_t* hi, std::uint16_t* lo) {
    bf16_round_activations(x, n, hi);
    if (lo == nullptr) return;
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t bits = static_cast<std::uint32_t>(hi[i]) << 16;
        float h;
        std::memcpy(&h, &bits, 4);
        const float r = (bits & 0x7F800000u) == 0x7F800000u ? 0.0f : x[i] - h;
        bf16_round_activations(&r, 1, lo + i);
    }
}

// The operand row of slot g's hi part (its lo part: + n, the expert's slot count).
std::int64_t hi_row(const Job& j, std::int32_t g) {
    const std::int32_t u = j.unit_of[g];
    return static_cast<std::int64_t>(j.parts - 1) * j.slot_begin[u] + g;
}
std::int64_t lo_row(const Job& j, std::int32_t g) {
    const std::int32_t u = j.unit_of[g];
    return hi_row(j, g) + (j.slot_begin[u + 1] - j.slot_begin[u]);
}

// Phase 0, task = token t: h[t] rounded to bf16 into the operand rows of its K choices.
void round_task(void* ctx, std::int64_t t, std::int32_t) {
    Job& j = *static_cast<Job*>(ctx);
    if (j.stop()) return;
    const std::int64_t H = j.hidden;
    const std::int32_t g0 = j.row_of[t * j.K];
    std::uint16_t* hi = j.hb + hi_row(j, g0) * H;
    std::uint16_t* lo = j.parts == 2 ? j.hb + lo_row(j, g0) * H : nullptr;
    round_operand(j.h + t * H, H, hi, lo);
    const auto bytes = static_cast<std::size_t>(H) * sizeof(std::uint16_t);
    for (int k = 1; k < j.K; ++k) {
        const std::int32_t g = j.row_of[t * j.K + k];
        std::memcpy(j.hb + hi_row(j, g) * H, hi, bytes);
        if (lo != nullptr) std::memcpy(j.hb + lo_row(j, g) * H, lo, bytes);
    }
}

// Phase 1, task = expert u: its gate_up operand (the hb rows of its slots) prepared.
void prepare_gate_up_task(void* ctx, std::int64_t task, std::int32_t) {
    Job& j = *static_cast<Job*>(ctx);
    if (j.stop()) return;
    const auto u = static_cast<std::size_t>(task);
    const std::int32_t s0 = j.slot_begin[u];
    const int n = j.slot_begin[u + 1] - s0;
    const std::int64_t H = j.hidden, base = std::int64_t{j.parts} * s0;
    j.op[u] =
        bf16_expert_prepare(j.isa, H, j.hb + base * H, H, j.parts * n, j.prep + j.prep_gate_up[u]);
}

// Phase 2, task = (expert, 64 gate_up rows): for each of the expert's tokens the 32 SwiGLU
// activations of the rows' gate/up pairs, rounded to bf16.
void gate_up_task(void* ctx, std::int64_t task, std::int32_t worker) {
    Job& j = *static_cast<Job*>(ctx);
    if (j.stop()) return;
    const auto u = static_cast<int>(task / j.gate_up_tiles);
    const std::int64_t tile = task % j.gate_up_tiles;
    const ExpertInput& e = *j.experts[u];
    const std::int32_t s0 = j.slot_begin[u];
    const int n = j.slot_begin[u + 1] - s0;
    std::uint8_t* scratch = j.scratch + static_cast<std::size_t>(worker) * j.scratch_bytes;
    auto* gu = reinterpret_cast<float*>(scratch + j.gemm_bytes);  // [parts * n][64]
    const std::int64_t I = j.inter, base = std::int64_t{j.parts} * s0;
    bf16_expert_gemm_prepared(e.record, 0, tile * kGateUpRows, kGateUpRows, j.op[u], gu,
                              kGateUpRows, scratch);
    float bias[kGateUpRows];
    for (int r = 0; r < kGateUpRows; ++r)
        bias[r] = prompt_detail::bf16_at(e.gate_up_bias, tile * kGateUpRows + r);
    constexpr int kPairs = kGateUpRows / 2;
    for (int i = 0; i < n; ++i) {
        float row[kGateUpRows];
        for (int r = 0; r < kGateUpRows; ++r) {
            const float hi = gu[i * kGateUpRows + r];
            row[r] = j.parts == 2 ? hi + gu[(n + i) * kGateUpRows + r] : hi;
        }
        float act[kPairs];
        for (int q = 0; q < kPairs; ++q) {
            act[q] = prompt_detail::swiglu_value(
                row[2 * q] + bias[2 * q], row[2 * q + 1] + bias[2 * q + 1], j.limit, j.alpha);
        }
        round_operand(act, kPairs, j.ab + (base + i) * I + tile * kPairs,
                      j.parts == 2 ? j.ab + (base + n + i) * I + tile * kPairs : nullptr);
    }
}

// Phase 3, task = expert u: its down operand (the ab rows of its slots, all of phase 2's
// activations) prepared.
void prepare_down_task(void* ctx, std::int64_t task, std::int32_t) {
    Job& j = *static_cast<Job*>(ctx);
    if (j.stop()) return;
    const auto u = static_cast<std::size_t>(task);
    const std::int32_t s0 = j.slot_begin[u];
    const int n = j.slot_begin[u + 1] - s0;
    const std::int64_t I = j.inter, base = std::int64_t{j.parts} * s0;
    j.op[u] =
        bf16_expert_prepare(j.isa, I, j.ab + base * I, I, j.parts * n, j.prep + j.prep_down[u]);
}

// Phase 4, task = (expert, down_rows rows): y[slot][r] = W2[r] . act[slot] + b2[r].
void down_task(void* ctx, std::int64_t task, std::int32_t worker) {
    Job& j = *static_cast<Job*>(ctx);
    if (j.stop()) return;
    const auto u = static_cast<int>(task / j.down_tiles);
    const std::int64_t tile = task % j.down_tiles;
    const ExpertInput& e = *j.experts[u];
    const std::int32_t s0 = j.slot_begin[u];
    const int n = j.slot_begin[u + 1] - s0;
    std::uint8_t* scratch = j.scratch + static_cast<std::size_t>(worker) * j.scratch_bytes;
    auto* res = reinterpret_cast<float*>(scratch + j.gemm_bytes);  // [parts * n][down_rows]
    const std::int64_t H = j.hidden, R = j.down_rows, row0 = tile * R;
    bf16_expert_gemm_prepared(e.record, 1, row0, R, j.op[u], res, R, scratch);
    float bias[64];
    for (std::int64_t r = 0; r < R; ++r) bias[r] = prompt_detail::bf16_at(e.down_bias, row0 + r);
    for (int i = 0; i < n; ++i) {
        float* y = j.y + static_cast<std::int64_t>(j.slots[s0 + i]) * H + row0;
        for (std::int64_t r = 0; r < R; ++r) {
            const float hi = res[i * R + r];
            y[r] = (j.parts == 2 ? hi + res[(n + i) * R + r] : hi) + bias[r];
        }
    }
}

// Phase 5, task = token t: x[t] += w_0 y_0 + w_1 y_1 + ..., added in k order.
void combine_task(void* ctx, std::int64_t t, std::int32_t) {
    Job& j = *static_cast<Job*>(ctx);
    if (j.stopped.load(std::memory_order_relaxed)) return;
    const std::int64_t H = j.hidden;
    float* xt = j.x + t * H;
    for (int k = 0; k < j.K; ++k) {
        const float g = j.gate[t * j.K + k];
        const float* yk = j.y + (t * j.K + k) * H;
        for (std::int64_t i = 0; i < H; ++i) xt[i] += g * yk[i];
    }
}

}  // namespace

struct Bf16PromptKernel::Scratch {
    Buffer hb, ab, y, prep, workers;
    PromptGroups groups;
    std::vector<std::int32_t> unit_of;
    std::vector<std::size_t> prep_gate_up, prep_down;
    std::vector<Bf16PreparedOperand> ops;
    std::vector<const ExpertInput*> inputs;
};

const char* bf16_prompt_operand_name(Bf16PromptOperand operand) {
    return operand == Bf16PromptOperand::split ? "bf16x2" : "bf16";
}

Bf16PromptKernel::Bf16PromptKernel(Bf16ExpertIsa isa, Bf16PromptOperand operand,
                                   SwigluParams params)
    : isa_(isa), operand_(operand), params_(params), scratch_(std::make_unique<Scratch>()) {
    if (!bf16_expert_isa_available(isa)) {
        fail("bf16 prompt kernel: the {} variant is not available on this CPU/build ({})",
             bf16_expert_isa_name(isa), cpu_features().summary());
    }
}

Bf16PromptKernel::~Bf16PromptKernel() = default;

void Bf16PromptKernel::run(WorkerTeam& team, std::span<const ExpertInput> experts, const float* h,
                           std::int64_t T, int K, const int* sel, const float* gate, float* x,
                           const std::atomic<bool>* cancel) {
    throw_if_cancelled(cancel);
    if (T < 1) return;
    Scratch& s = *scratch_;
    PromptGroups& g = s.groups;
    g.build("bf16 prompt kernel", experts, T, K, sel);
    const int n_used = g.n_used();
    const std::int64_t H = g.hidden, I = g.inter;
    // The GEMM takes rows in groups of 16: H and 2I are multiples of 32 (MXFP4 blocks).
    if (H % 32 != 0 || I % 32 != 0 || H < 32 || I < 32)
        fail("bf16 prompt kernel: H={} I={} are not multiples of 32", H, I);
    s.inputs.resize(static_cast<std::size_t>(n_used));
    s.unit_of.resize(static_cast<std::size_t>(T * K));
    for (int u = 0; u < n_used; ++u) {
        s.inputs[static_cast<std::size_t>(u)] =
            &experts[static_cast<std::size_t>(g.used[static_cast<std::size_t>(u)])];
        for (std::int32_t slot = g.slot_begin[static_cast<std::size_t>(u)];
             slot < g.slot_begin[static_cast<std::size_t>(u) + 1]; ++slot)
            s.unit_of[static_cast<std::size_t>(slot)] = u;
    }

    const auto TK = static_cast<std::size_t>(T * K);
    const std::size_t parts = operand_ == Bf16PromptOperand::split ? 2 : 1;
    Job j;
    j.isa = isa_;
    j.experts = s.inputs.data();
    j.slot_begin = g.slot_begin.data();
    j.slots = g.slots.data();
    j.row_of = g.row_of.data();
    j.unit_of = s.unit_of.data();
    j.K = K;
    j.parts = static_cast<int>(parts);
    j.hidden = H;
    j.inter = I;
    j.gate_up_tiles = 2 * I / kGateUpRows;
    j.down_rows = H % 64 == 0 ? 64 : 32;
    j.down_tiles = H / j.down_rows;
    j.limit = params_.limit;
    j.alpha = params_.alpha;
    j.h = h;
    j.hb = s.hb.as<std::uint16_t>(parts * TK * static_cast<std::size_t>(H));
    j.ab = s.ab.as<std::uint16_t>(parts * TK * static_cast<std::size_t>(I));
    j.y = s.y.as<float>(TK * static_cast<std::size_t>(H));
    j.gate = gate;
    j.x = x;
    // The prepared operands: per expert, its parts * count operand rows in the variant's layout;
    // gate_up's and (once those are spent) down's share the bytes.
    s.prep_gate_up.resize(static_cast<std::size_t>(n_used));
    s.prep_down.resize(static_cast<std::size_t>(n_used));
    s.ops.resize(static_cast<std::size_t>(n_used));
    std::size_t gate_up_bytes = 0, down_bytes = 0;
    for (std::size_t u = 0; u < static_cast<std::size_t>(n_used); ++u) {
        const auto rows = static_cast<int>(parts) * (g.slot_begin[u + 1] - g.slot_begin[u]);
        s.prep_gate_up[u] = gate_up_bytes;
        s.prep_down[u] = down_bytes;
        gate_up_bytes += round64(bf16_expert_prepared_bytes(isa_, H, rows));
        down_bytes += round64(bf16_expert_prepared_bytes(isa_, I, rows));
    }
    j.prep = s.prep.as<std::uint8_t>(std::max(gate_up_bytes, down_bytes));
    j.prep_gate_up = s.prep_gate_up.data();
    j.prep_down = s.prep_down.data();
    j.op = s.ops.data();
    const auto max_rows = static_cast<int>(parts) * g.max_count;
    j.gemm_bytes = round64(bf16_expert_prepared_scratch_bytes(std::max(H, I)));
    j.scratch_bytes =
        j.gemm_bytes + round64(static_cast<std::size_t>(max_rows) * 64 * sizeof(float));
    j.scratch = s.workers.as<std::uint8_t>(j.scratch_bytes * static_cast<std::size_t>(team.size()));
    j.cancel = cancel;
    const TeamPhase phases[6] = {{T, &round_task, &j},
                                 {n_used, &prepare_gate_up_task, &j},
                                 {n_used * j.gate_up_tiles, &gate_up_task, &j},
                                 {n_used, &prepare_down_task, &j},
                                 {n_used * j.down_tiles, &down_task, &j},
                                 {T, &combine_task, &j}};
    team.run(phases);
    if (j.stopped.load(std::memory_order_relaxed)) throw Cancelled();
}

}  // namespace neural::cpu
