// The int8 dense kernels' dispatcher (baseline ISA): the quantized matrix (layout and weight
// quantization), the per-call activation quantization and the team job; the per-ISA dot
// products are in dense_int8_{scalar,avx2,avx512vnni}.cpp (dense_int8.h has the arithmetic).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "cpu/kernels/dense_int8.h"
#include "cpu/kernels/dense_int8_impl.h"
#include "cpu/team/worker_team.h"
#include "neural/error.h"
#include "platform/cpu_features.h"
#include "platform/memory.h"
#include "platform/thread_scratch.h"

namespace neural::cpu {

namespace int8_detail {
#ifndef NEURAL_KERNELS_X86
TaskFn task_avx2() { return nullptr; }
#endif
#ifndef NEURAL_KERNELS_AVX512VNNI
TaskFn task_avx512vnni() { return nullptr; }
#endif
}  // namespace int8_detail

namespace {

// Multiply-adds below which a call runs on the calling thread alone (as the bf16 kernels).
constexpr std::int64_t kInlineMacs = std::int64_t{1} << 16;
// Tokens from which the activation is quantized in a team phase instead of on the caller.
constexpr std::int64_t kTeamQuantizeTokens = 16;
constexpr std::int64_t kAlign = 64;

int8_detail::TaskFn task_for(Int8Isa isa) {
    switch (isa) {
        case Int8Isa::scalar:
            return int8_detail::task_scalar();
        case Int8Isa::avx2:
            return int8_detail::task_avx2();
        case Int8Isa::avx512vnni:
            return int8_detail::task_avx512vnni();
    }
    return nullptr;
}

float bits_to_float(std::uint32_t bits) {
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

std::uint32_t float_bits(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

float bf16_value(const std::uint8_t* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return bits_to_float(static_cast<std::uint32_t>(v) << 16);
}

// Round half to even for |v| < 2^22, in the caller's rounding mode (nearest by default): the
// 1.5 * 2^23 shift leaves no fraction bits. Compiled without contraction (kernels/CMakeLists).
int round_small(float v) {
    constexpr float kShift = 12582912.0f;
    return static_cast<int>((v + kShift) - kShift);
}

int clamp127(int v) { return v < -127 ? -127 : (v > 127 ? 127 : v); }

// The smallest bf16 number >= f (f >= 0 finite), as its 16 bits.
std::uint16_t bf16_round_up(float f) {
    std::uint32_t bits = float_bits(f);
    if ((bits & 0xFFFFu) != 0) bits += 0x10000u;
    return static_cast<std::uint16_t>(bits >> 16);
}

constexpr std::uint16_t kBf16Nan = 0x7FC0;

}  // namespace

const char* int8_isa_name(Int8Isa isa) {
    switch (isa) {
        case Int8Isa::scalar:
            return "int8-scalar";
        case Int8Isa::avx2:
            return "int8-avx2";
        case Int8Isa::avx512vnni:
            return "int8-avx512vnni";
    }
    return "?";
}

bool int8_isa_available(Int8Isa isa) {
    if (task_for(isa) == nullptr) return false;
    switch (isa) {
        case Int8Isa::scalar:
            return true;
        case Int8Isa::avx2:
            return cpu_features().has_avx2_fma();
        case Int8Isa::avx512vnni:
            return cpu_features().has_avx512_vnni();
    }
    return false;
}

Int8Isa int8_isa_for(KernelIsa isa) {
    if (isa == KernelIsa::avx512 && int8_isa_available(Int8Isa::avx512vnni)) {
        return Int8Isa::avx512vnni;
    }
    if (isa != KernelIsa::scalar && int8_isa_available(Int8Isa::avx2)) return Int8Isa::avx2;
    return Int8Isa::scalar;
}

bool int8_simd_for(KernelIsa isa) { return int8_isa_for(isa) != Int8Isa::scalar; }

// --- the quantized matrix ---------------------------------------------------------------------

void Int8Matrix::Free::operator()(std::uint8_t* p) const {
    ::operator delete (p, std::align_val_t{kAlign});
}

Int8Matrix::Int8Matrix(std::int64_t rows, std::int64_t cols) : rows_(rows), cols_(cols) {
    if (rows < 1 || cols < 1) fail("int8 matrix: {} x {} has no weights", rows, cols);
    padded_ = (cols + kChunkCols - 1) / kChunkCols * kChunkCols;
    const std::int64_t raw = kGroupRows * padded_ + kGroupRows * blocks() * 2;
    group_bytes_ = (raw + kAlign - 1) / kAlign * kAlign;
    // Not value-initialized: the pages are first touched by whoever quantizes them.
    buffer_.reset(static_cast<std::uint8_t*>(
        ::operator new (static_cast<std::size_t>(bytes()), std::align_val_t{kAlign})));
    data_ = buffer_.get();
    advise_huge_pages(data_, static_cast<std::size_t>(bytes()));  // streamed every token
}

void Int8Matrix::quantize_groups(const Bf16View& w, std::int64_t g0, std::int64_t g1) {
    const std::int64_t nb = blocks();
    for (std::int64_t g = g0; g < g1; ++g) {
        std::uint8_t* base = data_ + g * group_bytes_;
        std::uint8_t* scales = base + kGroupRows * padded_;
        for (std::int64_t r = 0; r < kGroupRows; ++r) {
            const std::int64_t row = g * kGroupRows + r;
            for (std::int64_t b = 0; b < nb; ++b) {
                std::uint8_t* q = base + 256 * (b / 2) + 64 * r + 32 * (b % 2);
                const std::int64_t c0 = 32 * b;
                const std::int64_t n =
                    row < rows_ ? std::clamp<std::int64_t>(cols_ - c0, 0, 32) : 0;
                float v[32] = {};
                float amax = 0.0f;
                bool finite = true;
                for (std::int64_t i = 0; i < n; ++i) {
                    v[i] = bf16_value(w.data + 2 * (row * cols_ + c0 + i));
                    if (!std::isfinite(v[i])) finite = false;
                    amax = std::max(amax, std::abs(v[i]));
                }
                std::uint16_t d = 0;
                std::memset(q, 128, 32);
                if (!finite) {
                    d = kBf16Nan;
                } else if (amax > 0.0f) {
                    d = bf16_round_up(amax / 127.0f);
                    const float df = bits_to_float(static_cast<std::uint32_t>(d) << 16);
                    for (std::int64_t i = 0; i < n; ++i) {
                        q[i] = static_cast<std::uint8_t>(clamp127(round_small(v[i] / df)) + 128);
                    }
                }
                std::memcpy(scales + 2 * (r * nb + b), &d, 2);
            }
        }
        const std::int64_t used = kGroupRows * padded_ + kGroupRows * nb * 2;
        std::memset(base + used, 0, static_cast<std::size_t>(group_bytes_ - used));
    }
}

Int8Matrix Int8Matrix::quantize(const Bf16View& w) {
    if (w.data == nullptr) fail("int8 matrix: the bf16 matrix has no data");
    Int8Matrix m(w.rows, w.cols);
    m.quantize_groups(w, 0, m.groups());
    return m;
}

float Int8Matrix::scale(std::int64_t r, std::int64_t block) const {
    return bf16_value(group(r / kGroupRows) + kGroupRows * padded_ +
                      2 * ((r % kGroupRows) * blocks() + block));
}

float Int8Matrix::weight(std::int64_t r, std::int64_t c) const {
    const std::int64_t b = c / 32;
    const std::uint8_t q =
        group(r / kGroupRows)[256 * (b / 2) + 64 * (r % kGroupRows) + 32 * (b % 2) + c % 32];
    return static_cast<float>(static_cast<int>(q) - 128) * scale(r, b);
}

// --- activations --------------------------------------------------------------------------------

Int8Operand int8_quantize_block(const float* x, int n) {
    Int8Operand o;
    float amax = 0.0f;
    bool finite = true;
    for (int i = 0; i < n; ++i) {
        if (!std::isfinite(x[i])) finite = false;
        amax = std::max(amax, std::abs(x[i]));
    }
    if (!finite) {
        o.d = std::numeric_limits<float>::quiet_NaN();
        return o;
    }
    if (amax == 0.0f) return o;
    o.d = amax / 127.0f;
    const float inv = 127.0f / amax;
    for (int i = 0; i < n; ++i)
        o.q[i] = static_cast<std::int8_t>(clamp127(round_small(x[i] * inv)));
    return o;
}

namespace {

struct QuantizeX {
    const float* x;
    std::int64_t cols;
    int8_detail::Job* job;
    std::int8_t* xq;
    float* xd;

    // Token t: its padded bytes and its 16-float chunk vectors.
    static void task(void* ctx, std::int64_t t, std::int32_t) {
        const auto& c = *static_cast<const QuantizeX*>(ctx);
        const int8_detail::Job& job = *c.job;
        std::int8_t* q = c.xq + t * job.xq_stride;
        float* d = c.xd + t * job.xd_stride;
        const float* xr = c.x + t * c.cols;
        for (std::int64_t b = 0; b < 2 * job.chunks; ++b) {
            const std::int64_t c0 = 32 * b;
            const int n = static_cast<int>(std::clamp<std::int64_t>(c.cols - c0, 0, 32));
            const Int8Operand o = n > 0 ? int8_quantize_block(xr + c0, n) : Int8Operand{};
            std::memcpy(q + c0, o.q, 32);
            float* lanes = d + 16 * (b / 2) + 8 * (b % 2);
            for (int i = 0; i < 8; ++i) lanes[i] = o.d;
        }
    }
};

}  // namespace

// --- the kernel -------------------------------------------------------------------------------

Int8DenseKernel::Int8DenseKernel(Int8Isa isa) : isa_(isa) {
    if (!int8_isa_available(isa)) {
        fail("int8 dense kernel: the {} variant is not available on this CPU/build ({})",
             int8_isa_name(isa), cpu_features().summary());
    }
}

void Int8DenseKernel::run(WorkerTeam& team, std::span<const Int8Output> outs, const float* x,
                          std::int64_t tokens, std::int64_t cols) const {
    using namespace int8_detail;
    if (outs.empty() || outs.size() > kMaxOutputs) {
        fail("int8 dense kernel: 1-{} matrices per call, got {}", kMaxOutputs, outs.size());
    }
    if (tokens < 1 || cols < 1) fail("int8 dense kernel: {} tokens of {} columns", tokens, cols);
    Job job{};
    job.n_outputs = static_cast<int>(outs.size());
    job.padded =
        (cols + Int8Matrix::kChunkCols - 1) / Int8Matrix::kChunkCols * Int8Matrix::kChunkCols;
    job.chunks = job.padded / Int8Matrix::kChunkCols;
    job.tokens = tokens;
    job.xq_stride = job.padded;
    job.xd_stride = 16 * job.chunks;
    std::int64_t tasks = 0, macs = 0;
    const std::int64_t threads = std::max(1, team.size());
    for (std::size_t i = 0; i < outs.size(); ++i) {
        const Int8Output& o = outs[i];
        if (o.w == nullptr || o.w->rows() < 1 || o.y == nullptr) {
            fail("int8 dense kernel: matrix {} has no weights or no output", i);
        }
        if (o.w->cols() != cols) {
            fail("int8 dense kernel: matrix {} has {} columns, the input {}", i, o.w->cols(), cols);
        }
        const bool has_bias = o.bias != nullptr && o.bias->data != nullptr;
        if (has_bias && o.bias->rows * o.bias->cols != o.w->rows()) {
            fail("int8 dense kernel: matrix {} has {} rows but a bias of {}", i, o.w->rows(),
                 o.bias->rows * o.bias->cols);
        }
        Output& d = job.out[i];
        d.w = o.w->group(0);
        d.bias = has_bias ? o.bias->data : nullptr;
        d.y = o.y;
        d.rows = o.w->rows();
        d.y_stride = o.y_stride > 0 ? o.y_stride : o.w->rows();
        d.group_bytes = o.w->group_bytes();
        d.groups = o.w->groups();
        // About 8 tasks per thread, 1 to 16 groups (4 to 64 rows) each: a large matrix (the
        // lm_head) in few enough tasks that claiming them costs little, a small one still
        // spread over every thread. Any split gives the same bits.
        d.groups_per_task = std::clamp<std::int64_t>(d.groups / (8 * threads), 1, 16);
        d.first_task = tasks;
        tasks += (d.groups + d.groups_per_task - 1) / d.groups_per_task;
        macs += d.rows * job.padded * tokens;
    }
    auto& xq = thread_scratch<std::vector<std::int8_t>, struct DenseInt8Xq>();
    auto& xd = thread_scratch<std::vector<float>, struct DenseInt8Xd>();
    xq.resize(static_cast<std::size_t>(tokens * job.xq_stride));
    xd.resize(static_cast<std::size_t>(tokens * job.xd_stride));
    job.xq = xq.data();
    job.xd = xd.data();
    QuantizeX qx{x, cols, &job, xq.data(), xd.data()};
    const TaskFn fn = task_for(isa_);
    if (macs < kInlineMacs) {
        for (std::int64_t t = 0; t < tokens; ++t) QuantizeX::task(&qx, t, 0);
        for (std::int64_t t = 0; t < tasks; ++t) fn(&job, t, 0);
        return;
    }
    if (tokens >= kTeamQuantizeTokens) {
        const TeamPhase phases[2] = {{tokens, &QuantizeX::task, &qx}, {tasks, fn, &job}};
        team.run(phases);
        return;
    }
    for (std::int64_t t = 0; t < tokens; ++t) QuantizeX::task(&qx, t, 0);
    team.run(TeamPhase{tasks, fn, &job});
}

// --- quantizing at load -----------------------------------------------------------------------

namespace {

struct QuantizeJob {
    struct Task {
        std::size_t matrix;
        std::int64_t g0, g1;
    };
    std::span<const Bf16View* const> in;
    std::span<Int8Matrix* const> out;
    std::vector<Task> tasks;

    static void task(void* ctx, std::int64_t i, std::int32_t) {
        const auto& j = *static_cast<const QuantizeJob*>(ctx);
        const Task& t = j.tasks[static_cast<std::size_t>(i)];
        j.out[t.matrix]->quantize_groups(*j.in[t.matrix], t.g0, t.g1);
    }
};

}  // namespace

std::uint64_t quantize_on_team(WorkerTeam& team, std::span<const Bf16View* const> in,
                               std::span<Int8Matrix* const> out) {
    if (in.size() != out.size())
        fail("int8 quantize: {} inputs, {} outputs", in.size(), out.size());
    QuantizeJob job{in, out, {}};
    std::uint64_t bytes = 0;
    constexpr std::int64_t kGroupsPerTask = 64;
    for (std::size_t i = 0; i < in.size(); ++i) {
        if (in[i] == nullptr || in[i]->data == nullptr)
            fail("int8 quantize: matrix {} has no data", i);
        *out[i] = Int8Matrix(in[i]->rows, in[i]->cols);
        bytes += out[i]->bytes();
        for (std::int64_t g = 0; g < out[i]->groups(); g += kGroupsPerTask) {
            job.tasks.push_back({i, g, std::min(g + kGroupsPerTask, out[i]->groups())});
        }
    }
    team.run(TeamPhase{static_cast<std::int64_t>(job.tasks.size()), &QuantizeJob::task, &job});
    return bytes;
}

}  // namespace neural::cpu
