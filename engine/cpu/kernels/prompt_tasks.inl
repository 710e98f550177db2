// The task bodies of the int8 prompt kernels, compiled once per ISA: prompt_scalar.cpp and
// prompt_vnni.cpp each define, inside an anonymous namespace,
//
//   struct Isa {
//       // out[i * ld + r] (r < 16, i < n) = sum over the row's blocks b, in order, of
//       //   c = (e8m0(s_b) / 2) * d_b,  S_j = sum_k q_jk w_k (pass j of the Q8, prompt_impl.h),
//       //   acc = fma(float(256 S_0 + S_1), c, acc)
//       //   (and with a third pass acc = fma(float(S_2), c / 256, acc))
//       // for row row0 + r of projection p (w_k = 2 x the E2M1 value, an integer) and operand
//       // row i (Operands): exact integer dot products per block, then the same fp32 operations
//       // in the same order, so every variant gives the same bits. scratch: at least
//       // G * kBlockBytes bytes, 64-aligned.
//       static void gemm16(const ExpertArgs& e, int p, std::int64_t row0, const Operands& x,
//                          int n, std::uint8_t* scratch, float* out, std::int64_t ld);
//   };
//
// and then include this file in the same anonymous namespace.

// Phase 0, task = token t: h[t] to Q8, into the operand row of each of its K slots.
void prompt_quantize(void* ctx, std::int64_t t, std::int32_t) {
    const PromptJob& j = *static_cast<const PromptJob*>(ctx);
    const std::int64_t H = j.hidden, G = H / 32;
    const std::int64_t first = j.row_of[t * j.K];
    std::uint8_t* q = j.hq + first * G * kQ8Bytes;
    float* d = j.hd + first * G;
    for (std::int64_t b = 0; b < G; ++b)
        quantize_block(j.h + t * H + 32 * b, q + b * kQ8Bytes, d + b);
    for (int k = 1; k < j.K; ++k) {
        const std::int64_t g = j.row_of[t * j.K + k];
        std::memcpy(j.hq + g * G * kQ8Bytes, q, static_cast<std::size_t>(G * kQ8Bytes));
        std::memcpy(j.hd + g * G, d, static_cast<std::size_t>(G) * sizeof(float));
    }
}

// Phase 1, task = (expert, 64 gate_up rows = 32 gate/up pairs): for every token of the expert,
// the 32 SwiGLU activations of the pairs, which are exactly one Q8 block of the down operand.
void prompt_gate_up(void* ctx, std::int64_t task, std::int32_t worker) {
    const PromptJob& j = *static_cast<const PromptJob*>(ctx);
    const auto ei = static_cast<int>(task / j.gate_up_tiles);
    const std::int64_t tile = task % j.gate_up_tiles;
    const ExpertArgs& e = j.experts[ei];
    const std::int32_t s0 = j.slot_begin[ei];
    const int n = j.slot_begin[ei + 1] - s0;
    std::uint8_t* scratch = j.scratch + worker * j.scratch_bytes;
    float* gu = reinterpret_cast<float*>(scratch + j.decode_bytes);  // [n][64]
    const std::int64_t Gh = j.hidden / 32;
    const Operands x{j.hq + s0 * Gh * kQ8Bytes, j.hd + s0 * Gh, Gh * kQ8Bytes, Gh};
    for (int sub = 0; sub < kGateUpRows / kSubRows; ++sub) {
        Isa::gemm16(e, 0, tile * kGateUpRows + sub * kSubRows, x, n, scratch, gu + sub * kSubRows,
                    kGateUpRows);
    }
    const std::int64_t I = j.inter, Gi = I / 32;
    float bias[kGateUpRows];
    for (int r = 0; r < kGateUpRows; ++r) bias[r] = bf16_at(e.gate_up_bias, tile * 64 + r);
    for (int i = 0; i < n; ++i) {
        const std::int64_t g = s0 + i;
        const float* row = gu + i * kGateUpRows;
        float act[32];
        for (int q = 0; q < 32; ++q) {
            act[q] = swiglu_value(row[2 * q] + bias[2 * q], row[2 * q + 1] + bias[2 * q + 1],
                                  j.limit, j.alpha);
        }
        quantize_block(act, j.aq + (g * Gi + tile) * kQ8Bytes, j.ad + g * Gi + tile);
    }
}

// Phase 2, task = (expert, 32 down rows): y[slot][r] = W2[r] . act[slot] + b2[r].
void prompt_down(void* ctx, std::int64_t task, std::int32_t worker) {
    const PromptJob& j = *static_cast<const PromptJob*>(ctx);
    const auto ei = static_cast<int>(task / j.down_tiles);
    const std::int64_t tile = task % j.down_tiles;
    const ExpertArgs& e = j.experts[ei];
    const std::int32_t s0 = j.slot_begin[ei];
    const int n = j.slot_begin[ei + 1] - s0;
    std::uint8_t* scratch = j.scratch + worker * j.scratch_bytes;
    float* res = reinterpret_cast<float*>(scratch + j.decode_bytes);  // [n][16]
    const std::int64_t Gi = j.inter / 32;
    const Operands x{j.aq + s0 * Gi * kQ8Bytes, j.ad + s0 * Gi, Gi * kQ8Bytes, Gi};
    const std::int64_t H = j.hidden;
    for (int sub = 0; sub < kDownRows / kSubRows; ++sub) {
        const std::int64_t row0 = tile * kDownRows + sub * kSubRows;
        Isa::gemm16(e, 1, row0, x, n, scratch, res, kSubRows);
        float bias[kSubRows];
        for (int r = 0; r < kSubRows; ++r) bias[r] = bf16_at(e.down_bias, row0 + r);
        for (int i = 0; i < n; ++i) {
            float* y = j.y + static_cast<std::int64_t>(j.slots[s0 + i]) * H + row0;
            for (int r = 0; r < kSubRows; ++r) y[r] = res[i * kSubRows + r] + bias[r];
        }
    }
}

constexpr PromptOps make_prompt_ops(const char* name) {
    return PromptOps{name, &prompt_quantize, &prompt_gate_up, &prompt_down, &Isa::gemm16};
}
