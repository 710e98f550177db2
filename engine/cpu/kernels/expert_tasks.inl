// The task bodies of the expert kernels, compiled once per ISA: expert_scalar.cpp,
// expert_avx2.cpp and expert_avx512.cpp each define, inside an anonymous namespace,
//
//   struct Isa {
//       static constexpr bool kDeinterleaved;  // operand layout (expert_kernel_impl.h)
//       // true: the reference model's arithmetic (its dot order, the C library's expf), so the
//       // variant equals cpu/reference_model.cpp bit for bit; false: the SIMD variants' lane
//       // order and exp_poly (exp_poly.h), the same bits on every such variant and OS.
//       static constexpr bool kReference;
//       static constexpr int kGroup;           // most tokens one dot<> call handles
//       // res[r * NT + t] = dot(row r, x[t]) for NR rows of G blocks and NT operands, each
//       // (row, token) pair accumulated in the ISA's one fixed order, independent of NR and NT;
//       // kCapture: a row with cap != null also gets its code bytes stored there (stream: 16-byte
//       // aligned, use streaming stores); pf > 0: prefetch code bytes pf ahead.
//       template <int NR, int NT, bool kCapture>
//       static void dot(const Row* rows, int G, const float* const* x, float* res, bool stream,
//                       int pf);
//       static void fence();  // orders the streaming stores before completion is published
//   };
//
// and then include this file in the same anonymous namespace. Everything here has internal
// linkage (see expert_kernel_impl.h for why), including the small helpers.

inline std::int64_t min_i64(std::int64_t a, std::int64_t b) { return a < b ? a : b; }

inline float bf16_at(const std::uint8_t* p, std::int64_t i) {
    if (p == nullptr) return 0.0f;
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

// Position of element k of a vector in the operand layout.
inline std::int64_t operand_pos(std::int64_t k) {
    if constexpr (Isa::kDeinterleaved) {
        const std::int64_t j = k & 31;
        return (k & ~std::int64_t{31}) + ((j & 1) << 4) + (j >> 1);
    } else {
        return k;
    }
}

// docs/MODEL.md "Experts", written as cpu/reference_model.cpp (std::min, std::clamp); the
// reference variant (scalar) takes its std::exp too, so it matches it bit for bit; the SIMD
// variants take exp_poly (exp_poly.h), the same bits on every CPU and OS.
inline float swiglu(float g, float u, float limit, float alpha) {
    g = (limit < g) ? limit : g;                            // gate: clamped from above only
    u = (u < -limit) ? -limit : ((limit < u) ? limit : u);  // up: both sides
    const float e = Isa::kReference ? ::expf(-alpha * g) : exp_poly(-alpha * g);
    const float glu = g / (1.0f + e);
    return glu * (u + 1.0f);
}

// sbuf: kMaxBlocks + 32 bytes, receives a packed row's scales.
inline Row make_row(const ExpertArgs& e, int p, std::int64_t r, std::uint8_t* sbuf) {
    const RecordRef& rec = e.rec;
    const int g = rec.blocks[p];
    const std::uint64_t off =
        rec.codes[p] + static_cast<std::uint64_t>(r) * static_cast<std::uint64_t>(g) * 16;
    Row row;
    row.codes = rec.code_base[p] + static_cast<std::uint64_t>(r) * rec.code_stride[p];
    row.cap = e.capture != nullptr ? e.capture + off : nullptr;
    const std::uint8_t* slot =
        rec.scale_base[p] + static_cast<std::uint64_t>(r) * static_cast<std::uint64_t>(rec.slot[p]);
    if (!rec.packed) {
        row.scales = slot;
    } else if (slot[0] != 0xFF) {
        decode_packed_scales(slot, g, sbuf);
        row.scales = sbuf;
    } else {
        // Escaped row: its raw scale bytes at a payload offset inside the escape rows.
        std::uint32_t at;
        std::memcpy(&at, slot + 1, 4);
        const bool ok = at >= rec.escape && at + static_cast<std::uint64_t>(g) <= rec.bytes;
        row.scales = ok ? rec.data + at : kNanScales.v;
    }
    return row;
}

// Isa::dot with the capture branch resolved once per call instead of once per block.
template <int NR, int NT>
inline void dot(const Row* rows, int G, const float* const* x, float* res, bool stream, int pf) {
    bool cap = false;
    for (int r = 0; r < NR; ++r) cap = cap || rows[r].cap != nullptr;
    if (cap) {
        Isa::template dot<NR, NT, true>(rows, G, x, res, stream, pf);
    } else {
        Isa::template dot<NR, NT, false>(rows, G, x, res, stream, pf);
    }
}

// Copies the scale slots of rows [r0, r1) of projection p into the capture buffer.
inline void capture_scales(const ExpertArgs& e, int p, std::int64_t r0, std::int64_t r1) {
    const auto slot = static_cast<std::uint64_t>(e.rec.slot[p]);
    const std::uint64_t rel = static_cast<std::uint64_t>(r0) * slot;
    std::memcpy(e.capture + e.rec.scales[p] + rel, e.rec.scale_base[p] + rel,
                static_cast<size_t>(static_cast<std::uint64_t>(r1 - r0) * slot));
}

// Copies a packed record's escape rows into the capture buffer.
inline void capture_escape(const ExpertArgs& e) {
    if (!e.rec.packed) return;
    std::memcpy(e.capture + e.rec.escape, e.rec.data + e.rec.escape,
                static_cast<size_t>(e.rec.bytes - e.rec.escape));
}

// Isa::dot<NR, N> for a run-time token count n <= Isa::kGroup.
template <int NR, int N>
inline void dot_n(int n, const Row* rows, int G, const float* const* x, float* res, bool stream,
                  int pf) {
    if constexpr (N >= 1) {
        if (n == N) {
            dot<NR, N>(rows, G, x, res, stream, pf);
            return;
        }
        dot_n<NR, N - 1>(n, rows, G, x, res, stream, pf);
    }
}

// res[r * nt + t] for any nt <= kMaxTokens, in groups of Isa::kGroup tokens; only the first
// group captures (the row bytes are the same for every group).
template <int NR>
inline void dot_tokens(const Row* rows, int G, const float* const* x, int nt, float* res,
                       bool stream, int pf) {
    float part[NR * Isa::kGroup];
    Row local[NR];
    for (int r = 0; r < NR; ++r) local[r] = rows[r];
    for (int t0 = 0; t0 < nt; t0 += Isa::kGroup) {
        const int n = nt - t0 < Isa::kGroup ? nt - t0 : Isa::kGroup;
        dot_n<NR, Isa::kGroup>(n, local, G, x + t0, part, stream, t0 == 0 ? pf : 0);
        for (int r = 0; r < NR; ++r) {
            for (int t = 0; t < n; ++t) res[r * nt + t0 + t] = part[r * n + t];
            local[r].cap = nullptr;
        }
    }
}

// --- decode: one token, 1-4 experts ---------------------------------------------------------

// Phase 1, task = (expert k, chunk of i): act_k[i] = swiglu(gate_i, up_i) from rows 2i, 2i+1.
void decode_gate_up(void* ctx, std::int64_t task, std::int32_t) {
    const DecodeJob& job = *static_cast<const DecodeJob*>(ctx);
    const auto k = static_cast<int>(task / job.gate_up_tasks);
    const std::int64_t chunk = task % job.gate_up_tasks;
    const ExpertArgs& e = job.experts[k];
    const int G = e.rec.blocks[0];
    const std::int64_t i0 = chunk * job.i_per_task;
    // A slice (expert_record.h) has fewer neurons than job.inter: its tasks past them are empty.
    const std::int64_t i1 = min_i64(i0 + job.i_per_task, e.rec.rows[0] / 2);
    if (i0 >= i1) return;
    float* act = job.act + k * job.inter;
    const float* x[1] = {job.x};
    alignas(64) std::uint8_t sbuf[2][kMaxBlocks + 32];
    for (std::int64_t i = i0; i < i1; ++i) {
        const Row rows[2] = {make_row(e, 0, 2 * i, sbuf[0]), make_row(e, 0, 2 * i + 1, sbuf[1])};
        float res[2];
        dot<2, 1>(rows, G, x, res, e.capture_stream, e.prefetch);
        const float g = res[0] + bf16_at(e.gate_up_bias, 2 * i);
        const float u = res[1] + bf16_at(e.gate_up_bias, 2 * i + 1);
        act[operand_pos(i)] = swiglu(g, u, job.limit, job.alpha);
    }
    if (e.capture != nullptr) {
        capture_scales(e, 0, 2 * i0, 2 * i1);
        if (chunk == 0) capture_escape(e);
        Isa::fence();
    }
}

// Phase 2, task = chunk of down rows r, all experts: y_k[r] = W2_k[r] . act_k + b2_k[r], then
// out[r] += w_0 y_0[r] + w_1 y_1[r] + ... added in expert order (as the reference does).
void decode_down(void* ctx, std::int64_t task, std::int32_t) {
    const DecodeJob& job = *static_cast<const DecodeJob*>(ctx);
    const std::int64_t r0 = task * job.rows_per_task;
    const std::int64_t r1 = min_i64(r0 + job.rows_per_task, job.hidden);
    float y[kMaxExperts][kMaxDownRows];
    alignas(64) std::uint8_t sbuf[2][kMaxBlocks + 32];
    bool captured = false;
    for (int k = 0; k < job.n_experts; ++k) {
        const ExpertArgs& e = job.experts[k];
        const int G = e.rec.blocks[1];
        const float* x[1] = {job.act + k * job.inter};
        std::int64_t r = r0;
        for (; r + 2 <= r1; r += 2) {
            const Row rows[2] = {make_row(e, 1, r, sbuf[0]), make_row(e, 1, r + 1, sbuf[1])};
            float res[2];
            dot<2, 1>(rows, G, x, res, e.capture_stream, e.prefetch_down);
            y[k][r - r0] = res[0] + bf16_at(e.down_bias, r);
            y[k][r + 1 - r0] = res[1] + bf16_at(e.down_bias, r + 1);
        }
        if (r < r1) {
            const Row rows[1] = {make_row(e, 1, r, sbuf[0])};
            float res[1];
            dot<1, 1>(rows, G, x, res, e.capture_stream, e.prefetch_down);
            y[k][r - r0] = res[0] + bf16_at(e.down_bias, r);
        }
        if (e.capture != nullptr) {
            capture_scales(e, 1, r0, r1);
            captured = true;
        }
    }
    for (std::int64_t r = r0; r < r1; ++r) {
        float v = job.out[r];
        for (int k = 0; k < job.n_experts; ++k) v = v + job.experts[k].weight * y[k][r - r0];
        job.out[r] = v;
    }
    if (captured) Isa::fence();
}

// --- multi: up to 16 tokens of one expert ---------------------------------------------------

void multi_gate_up(void* ctx, std::int64_t task, std::int32_t) {
    const MultiJob& job = *static_cast<const MultiJob*>(ctx);
    const ExpertArgs& e = job.expert;
    const int G = e.rec.blocks[0];
    const int nt = job.tokens;
    const std::int64_t i0 = task * job.i_per_task;
    const std::int64_t i1 = min_i64(i0 + job.i_per_task, job.inter);
    const float* x[kMaxTokens];
    for (int t = 0; t < nt; ++t) x[t] = job.x + t * job.hidden;
    alignas(64) std::uint8_t sbuf[kMaxBlocks + 32];
    for (std::int64_t i = i0; i < i1; ++i) {
        float gu[2][kMaxTokens];
        for (int h = 0; h < 2; ++h) {
            const Row row = make_row(e, 0, 2 * i + h, sbuf);
            dot_tokens<1>(&row, G, x, nt, gu[h], e.capture_stream, e.prefetch);
        }
        const float bg = bf16_at(e.gate_up_bias, 2 * i), bu = bf16_at(e.gate_up_bias, 2 * i + 1);
        for (int t = 0; t < nt; ++t) {
            job.act[t * job.inter + operand_pos(i)] =
                swiglu(gu[0][t] + bg, gu[1][t] + bu, job.limit, job.alpha);
        }
    }
    if (e.capture != nullptr) {
        capture_scales(e, 0, 2 * i0, 2 * i1);
        if (task == 0) capture_escape(e);
        Isa::fence();
    }
}

void multi_down(void* ctx, std::int64_t task, std::int32_t) {
    const MultiJob& job = *static_cast<const MultiJob*>(ctx);
    const ExpertArgs& e = job.expert;
    const int G = e.rec.blocks[1];
    const int nt = job.tokens;
    const std::int64_t r0 = task * job.rows_per_task;
    const std::int64_t r1 = min_i64(r0 + job.rows_per_task, job.hidden);
    const float* x[kMaxTokens];
    for (int t = 0; t < nt; ++t) x[t] = job.act + t * job.inter;
    alignas(64) std::uint8_t sbuf[kMaxBlocks + 32];
    for (std::int64_t r = r0; r < r1; ++r) {
        const Row row = make_row(e, 1, r, sbuf);
        float res[kMaxTokens];
        dot_tokens<1>(&row, G, x, nt, res, e.capture_stream, e.prefetch_down);
        const float b = bf16_at(e.down_bias, r);
        for (int t = 0; t < nt; ++t) {
            // Same expression as decode_down with one expert: v + w * (dot + b).
            const float y = res[t] + b;
            job.out[t][r] = job.out[t][r] + job.weights[t] * y;
        }
    }
    if (e.capture != nullptr) {
        capture_scales(e, 1, r0, r1);
        Isa::fence();
    }
}

constexpr IsaOps make_ops(const char* name) {
    return IsaOps{name,         Isa::kDeinterleaved, &decode_gate_up,
                  &decode_down, &multi_gate_up,      &multi_down};
}
