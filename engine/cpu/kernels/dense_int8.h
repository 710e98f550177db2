// Int8 dense kernels of the fast CPU path (docs/KERNELS.md "Int8 dense weights"): y = W x + b
// with W a copy of the checkpoint's bf16 matrix quantized once at load to int8 blocks of 32
// weights with one bf16 scale each, and x quantized per call the same way (fp32 scale). A token
// then reads ~1.07 bytes per weight instead of 2: decode is bound by RAM bandwidth, so fewer
// bytes is the speed.
//
// Weights. Block b of row r: d = amax / 127 rounded up to a bf16 number (so |w| / d <= 127),
// q = round_half_even(w / d) in [-127, 127], stored offset as the byte q + 128; an all-zero
// block has d = 0; a block with a NaN or an infinity has d = NaN (its row's outputs are NaN).
// Columns are zero-padded to a multiple of 64 (two blocks), rows to a multiple of 4: a group of
// 4 rows is one contiguous stream of 256-byte chunks (4 rows x 64 columns), then its scales.
//
// Activations. Per token and block of 32: dx = amax / 127 (fp32), q = round_half_even(x * 127 /
// amax) in [-127, 127]; amax = 0 gives dx = 0; a NaN or infinity gives dx = NaN and q = 0.
//
// One arithmetic for every variant (scalar reference, AVX2, AVX512_VNNI): 16 fp32 lane sums
// per output; in each 64-column chunk lane j takes columns 4j..4j+3, so lanes 0-7 belong to
// the chunk's first block and 8-15 to its second. Its integer sum L = sum (qw * qx) over its
// 4 columns is exact (vpdpbusd on the offset bytes minus 128 * sum qx, or vpmaddubsw on |qw|
// and sign-adjusted qx: the same integer); then s = dw * dx, p = float(L) * s, lane = lane + p
// (three fp32 roundings in that order, no fused multiply-add). The 16 lanes are summed in the
// fixed tree of the bf16 kernels (8 + 8, 4 + 4, 2 + 2, 1 + 1) and the bias added last. So every
// variant gives the same bits, for any team, thread count, task split or token batch.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "cpu/kernels/expert_kernel.h"
#include "model/weights.h"

namespace neural::cpu {

class WorkerTeam;

enum class Int8Isa : std::uint8_t { scalar = 0, avx2 = 1, avx512vnni = 2 };

const char* int8_isa_name(Int8Isa isa);  // "int8-scalar", "int8-avx2", "int8-avx512vnni"
// This build contains the variant and this CPU (and OS) can run it.
bool int8_isa_available(Int8Isa isa);
// The int8 variant that goes with an expert-kernel variant: AVX512_VNNI with the AVX-512 kernel
// where the CPU has it, else AVX2 with either SIMD kernel, scalar with the scalar kernel.
Int8Isa int8_isa_for(KernelIsa isa);
// A SIMD int8 variant runs here for this expert kernel (what `--dense auto` takes int8 for).
bool int8_simd_for(KernelIsa isa);

// A bf16 matrix [rows, cols] quantized to the layout above. Owns its bytes (64-byte aligned).
class Int8Matrix {
public:
    static constexpr std::int64_t kGroupRows = 4;
    static constexpr std::int64_t kChunkCols = 64;

    Int8Matrix() = default;
    // Allocates without touching the bytes: quantize_groups() writes them (first touch by the
    // thread that quantizes them), or quantize() does it all on the calling thread.
    Int8Matrix(std::int64_t rows, std::int64_t cols);
    Int8Matrix(Int8Matrix&&) noexcept = default;
    Int8Matrix& operator=(Int8Matrix&&) noexcept = default;

    // Quantizes groups [g0, g1) of `w` (rows() x cols() bf16) into this matrix.
    void quantize_groups(const Bf16View& w, std::int64_t g0, std::int64_t g1);
    // The whole matrix, on the calling thread.
    static Int8Matrix quantize(const Bf16View& w);

    std::int64_t rows() const { return rows_; }
    std::int64_t cols() const { return cols_; }
    std::int64_t padded_cols() const { return padded_; }
    std::int64_t blocks() const { return padded_ / 32; }  // per row, padding included (even)
    std::int64_t groups() const { return (rows_ + kGroupRows - 1) / kGroupRows; }
    std::int64_t group_bytes() const { return group_bytes_; }
    std::uint64_t bytes() const { return static_cast<std::uint64_t>(groups() * group_bytes_); }
    // Group g: 4 x padded_cols() offset bytes, chunk-major, then 4 x blocks() bf16 scales.
    const std::uint8_t* group(std::int64_t g) const { return data_ + g * group_bytes_; }

    // The stored value of one weight (q * d, the dequantized weight) and one block's scale.
    float weight(std::int64_t r, std::int64_t c) const;
    float scale(std::int64_t r, std::int64_t block) const;

private:
    struct Free {
        void operator()(std::uint8_t* p) const;
    };
    std::unique_ptr<std::uint8_t, Free> buffer_;
    std::uint8_t* data_ = nullptr;
    std::int64_t rows_ = 0, cols_ = 0, padded_ = 0, group_bytes_ = 0;
};

// One matrix of an int8 dense call: y[t * y_stride + r] = sum_c W[r][c] x[t][c] + bias[r].
struct Int8Output {
    const Int8Matrix* w = nullptr;
    const Bf16View* bias = nullptr;  // null or a view without data: no bias
    float* y = nullptr;
    std::int64_t y_stride = 0;  // floats between tokens' outputs (0: w->rows())
};

// One token's activation quantized per block (see above): the kernels' operand.
struct Int8Operand {
    std::int8_t q[32] = {};
    float d = 0.0f;
};
Int8Operand int8_quantize_block(const float* x, int n);  // n <= 32 values, the rest zero

class Int8DenseKernel {
public:
    explicit Int8DenseKernel(Int8Isa isa);
    Int8Isa isa() const { return isa_; }

    // Every matrix in `outs` must have `cols` columns; x is [tokens, cols] fp32 (row stride
    // cols). All matrices run in one team job over one quantized x. Throws neural::Error for
    // mismatched shapes or more than 4 matrices.
    void run(WorkerTeam& team, std::span<const Int8Output> outs, const float* x,
             std::int64_t tokens, std::int64_t cols) const;
    void run(WorkerTeam& team, const Int8Output& out, const float* x, std::int64_t tokens,
             std::int64_t cols) const {
        run(team, std::span<const Int8Output>(&out, 1), x, tokens, cols);
    }

private:
    Int8Isa isa_;
};

// Quantizes in[i] into out[i] (allocated here) on `team`: each task a run of groups, so the
// team's threads touch the pages they write first. Returns the bytes of the int8 copies.
std::uint64_t quantize_on_team(WorkerTeam& team, std::span<const Bf16View* const> in,
                               std::span<Int8Matrix* const> out);

}  // namespace neural::cpu
