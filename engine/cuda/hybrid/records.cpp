// Expert records: the raw record of an expert (the slot image) from a raw store, a packed store or
// the checkpoint tensors; the shapes and inputs the GPU and CPU expert kernels take; embeddings.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cpu/kernels/expert_kernel.h"
#include "cuda/hybrid/hybrid_backend.h"
#include "model/bf16.h"
#include "model/config.h"
#include "model/weights.h"
#include "store/store.h"

namespace neural::hybrid {

// Writes expert (layer, e) as a raw record (the slot image) into dst: a copy of a raw store
// record, else assembled row by row from the packed store or the checkpoint tensors.
void HybridBackend::fill_record(int layer, int e, std::uint8_t* dst) const {
    if (raw_store_) {
        std::memcpy(dst, raw_record(layer, e), device_.slots().record_bytes);
        return;
    }
    if (in_.store != nullptr) in_.store->prepare(layer, e);
    const LayerWeights& lw = in_.weights->layers[static_cast<std::size_t>(layer)];
    std::uint64_t off = 0;
    std::vector<std::uint8_t> scale_buf(1024);
    for (const Projection p : {Projection::kGateUp, Projection::kDown}) {
        const Mxfp4Experts& m = p == Projection::kGateUp ? lw.gate_up : lw.down;
        const std::int64_t rows = m.rows, G = m.blocks_per_row();
        std::uint8_t* codes = dst + off;
        std::uint8_t* scales = codes + rows * G * 16;
        for (std::int64_t r = 0; r < rows; ++r) {
            if (in_.store == nullptr && m.ggml != nullptr) {  // a GGUF: converted in place
                m.row(e, r, codes + r * G * 16, scales + r * G);
                continue;
            }
            ExpertRow row = in_.store != nullptr
                                ? in_.store->row(layer, p, e, r, scale_buf.data())
                                : ExpertRow{m.row_blocks(e, r), m.row_scales(e, r)};
            std::memcpy(codes + r * G * 16, row.blocks, static_cast<std::size_t>(G * 16));
            std::memcpy(scales + r * G, row.scales, static_cast<std::size_t>(G));
        }
        off += static_cast<std::uint64_t>(rows * G * 17);
    }
}

// The experts' shape as the decode kernels take it (bf16 hi + lo operands for the GEMMs).
cuda::ExpertShape HybridBackend::expert_shape() const {
    const ModelConfig& c = *in_.config;
    return cuda::ExpertShape{device_.shape().hidden, device_.shape().intermediate,
                             device_.shape().top_k,  device_.shape().experts,
                             c.swiglu_limit,         c.swiglu_alpha};
}

// The shape prefill's expert GEMMs get for a layer: fp16 operands (--prefill-fp16) scaled for
// the bound of their input, the post-attention RMS norm: |x_i| / rms(x) <= sqrt(H), so
// |h_i| <= sqrt(H) * max|w| (cuda::with_half_operands; a non-finite weight keeps bf16 hi + lo).
cuda::ExpertShape HybridBackend::prefill_expert_shape(const LayerWeights& lw) const {
    const cuda::ExpertShape shape = expert_shape();
    if (!opt_.prefill_fp16) return shape;
    float w_max = 0.0f;
    for (std::int64_t i = 0; i < device_.shape().hidden; ++i) {
        const float v = std::fabs(lw.post_norm.at(i));
        w_max = std::isfinite(v) ? std::max(w_max, v) : std::numeric_limits<float>::infinity();
    }
    return cuda::with_half_operands(shape,
                                    std::sqrt(static_cast<float>(device_.shape().hidden)) * w_max);
}

// A raw store's record of expert (layer, e): the slot image, in the store mapping. Every
// copy or CPU read of a raw record comes through here, so its checksum is checked the first
// time (ExpertStore::verify_record: an error naming it, never a wrong answer).
const std::uint8_t* HybridBackend::raw_record(int layer, int e) const {
    in_.store->verify_record(layer, e);
    const auto rec = in_.store->record(layer, e);
    if (rec.size() < device_.slots().record_bytes)
        fail("store record ({}, {}) is shorter than a raw record", layer, e);
    return rec.data();
}

cpu::ExpertInput HybridBackend::cpu_input(int layer, int e, int k) {
    const LayerWeights& lw = in_.weights->layers[static_cast<std::size_t>(layer)];
    cpu::ExpertInput x;
    if (in_.store != nullptr) {
        in_.store->prepare(layer, e);  // a damaged record is an error, never a wild read
        const auto rec = in_.store->record(layer, e);
        x.record = cpu::ExpertRecordView::make(
            rec.data(), device_.shape().hidden, device_.shape().intermediate,
            raw_store_ ? cpu::RecordKind::raw : cpu::RecordKind::packed,
            in_.store->entry(layer, e).payload_bytes);
    } else {
        std::uint8_t* buf = assembled_[static_cast<std::size_t>(k)].host<std::uint8_t>();
        fill_record(layer, e, buf);
        x.record = cpu::ExpertRecordView::make(buf, device_.shape().hidden,
                                               device_.shape().intermediate, cpu::RecordKind::raw);
    }
    x.gate_up_bias = lw.gate_up.bias.row(e);
    x.down_bias = lw.down.bias.row(e);
    return x;
}

// Token id's embedding row (bf16 in RAM) widened to fp32 into dst [H]: the decode graph's
// input and the prefill's residual stream start the same way.
void HybridBackend::embed(TokenId id, float* dst) const {
    const Bf16View& emb = in_.weights->embed;
    for (int i = 0; i < device_.shape().hidden; ++i) dst[i] = emb.at(id, i);
}

// The records and embeddings as the backend's parts read them (device_model.h).
ExpertRecords HybridBackend::records() {
    ExpertRecords r;
    r.embed = [this](TokenId id, float* dst) { embed(id, dst); };
    r.raw_record = [this](int l, int e) { return raw_record(l, e); };
    r.cpu_input = [this](int l, int e, int k) { return cpu_input(l, e, k); };
    r.fill_record = [this](int l, int e, std::uint8_t* dst) { fill_record(l, e, dst); };
    return r;
}

}  // namespace neural::hybrid
