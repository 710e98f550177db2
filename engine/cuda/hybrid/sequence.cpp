// forward(): which positions of a call the GPU already holds (the resident sequence), sequence
// switches with K/V checkpoints (kv_checkpoints.h), then the prompt pipeline or the token loop.
#include <algorithm>
#include <span>
#include <vector>

#include "cuda/driver/gpu.h"

#include "cuda/hybrid/hybrid_backend.h"
#include "model/config.h"

namespace neural::hybrid {

// Backend::forward (CpuModel::forward's contract): decides which positions the GPU's K/V already
// holds for this sequence, then runs the rest as a prompt (prefill) or token by token; on an
// error or a cancel the cache stays as it was and the GPU keeps only what was valid before.
std::vector<float> HybridBackend::forward(std::span<const TokenId> tokens, KvCache& cache,
                                          const ForwardOptions& opt) {
    const auto T = static_cast<std::int64_t>(tokens.size());
    if (T == 0) fail("forward: no tokens to process");
    for (TokenId t : tokens) {
        if (t < 0 || t >= device_.shape().vocab)
            fail("token id {} is outside the model's vocabulary (0..{})", t,
                 device_.shape().vocab - 1);
    }
    const std::int64_t pos0 = cache.size();
    if (pos0 + T > device_.context()) {
        fail(
            "context of {} tokens exceeds the {} positions of the GPU K/V cache (--context; the "
            "model allows {})",
            pos0 + T, device_.context(), in_.config->max_position_embeddings);
    }
    NEURAL_CUDA(cuda::drv::set_device(opt_.device));
    std::vector<std::int32_t>& seq = cache.tokens();
    if (static_cast<std::int64_t>(seq.size()) < pos0) {
        fail("this K/V cache holds {} positions without their tokens (filled by another backend)",
             pos0);
    }
    seq.resize(static_cast<std::size_t>(pos0));
    // The sequence after this call: the cache's tokens, then the new ones.
    std::vector<std::int32_t> full(seq);
    full.insert(full.end(), tokens.begin(), tokens.end());
    // The GPU holds one sequence's K/V (resident_.tokens). Positions before `valid` are kept:
    // those whose tokens match what the GPU holds (this cache's, or another sequence's that
    // starts the same way), or a longer prefix restored from a K/V checkpoint. New tokens can
    // be skipped too, except the rows whose logits are asked for and when an observer must
    // see every route (neural rank; RouterObserver::needs_every_route).
    const bool every_route = opt.observer != nullptr && opt.observer->needs_every_route();
    const std::int64_t limit = opt.all_logits || every_route ? pos0 : pos0 + T - 1;
    // Without --kv-checkpoints only this cache's own positions are kept: the sharing rules
    // above are opt-in, with the checkpoints.
    std::int64_t valid;
    if (checkpoints_ == nullptr) {
        valid = cache.id() == resident_.id ? std::min(resident_.len, pos0) : 0;
        // With --kv-ring, positions written after `valid` (an edit, a regenerate) may have
        // overwritten the window before it in the sliding layers' rings: then start over.
        if (!ring_keeps(valid)) valid = 0;
    } else if (cache.id() == resident_.id) {
        const std::int64_t held = std::min<std::int64_t>(
            resident_.len, static_cast<std::int64_t>(resident_.tokens.size()));
        valid = std::min(common_prefix(std::span<const std::int32_t>(
                                           resident_.tokens.data(), static_cast<std::size_t>(held)),
                                       full),
                         limit);
        if (!ring_keeps(valid)) valid = 0;
    } else {
        valid = switch_sequence(cache.id(), full, limit);
    }
    if (in_.counters != nullptr && pos0 > valid) {
        in_.counters->kv_reprocessed.fetch_add(static_cast<std::uint64_t>(pos0 - valid),
                                               std::memory_order_relaxed);
    }
    resident_.id = cache.id();
    resident_.len = valid;
    // Highest position written since the K/V last started over (the ring rule above).
    resident_.kv_high = valid == 0 ? pos0 + T : std::max(resident_.kv_high, pos0 + T);
    resident_.tokens.assign(full.begin(), full.begin() + valid);
    const std::int64_t first_out = opt.all_logits ? 0 : T - 1;  // among the new tokens
    std::vector<float> logits(static_cast<std::size_t>((T - first_out) * device_.shape().vocab));
    try {
        if (prompt_ && pos0 + T - valid >= 2) {
            // Everything from `valid` on at once: re-processed positions and the prompt.
            const std::vector<TokenId> work(full.begin() + valid, full.end());
            prompt_->run(work, valid, pos0 + first_out - valid, logits.data(), pos0, opt.observer,
                         opt.cancel, decode_->prompt_tail(), resident_.len);
        } else {
            for (std::int64_t p = valid; p < pos0 + T; ++p) {
                const bool fresh = p >= pos0;
                float* out = fresh && p - pos0 >= first_out
                                 ? logits.data() + (p - pos0 - first_out) * device_.shape().vocab
                                 : nullptr;
                decode_->token(full[static_cast<std::size_t>(p)], p, !fresh || T > 1, out,
                               fresh ? opt.observer : nullptr, opt.cancel);
                resident_.len = p + 1;
            }
        }
    } catch (...) {
        cuda::drv::stream_synchronize(device_.stream());
        cuda::drv::stream_synchronize(device_.copy_stream());
        decode_->synchronize();
        if (prompt_) prompt_->abandon();
        // The cache stays at pos0 (contract); the GPU keeps what was computed for it.
        resident_.len = std::min(resident_.len, pos0);
        resident_.tokens.assign(full.begin(), full.begin() + resident_.len);
        throw;
    }
    resident_.len = pos0 + T;
    resident_.tokens = full;
    seq = std::move(full);
    cache.commit(pos0 + T);
    return logits;
}

// With a K/V ring, the positions [0, valid) can be kept only while the rings still hold the
// window before `valid`: positions written since (up to resident_.kv_high) overwrote the rows of the
// positions a ring's length before them.
bool HybridBackend::ring_keeps(std::int64_t valid) const {
    return device_.kv_ring() == 0 || valid == 0 ||
           resident_.kv_high - valid + in_.config->sliding_window - 1 <= device_.kv_ring();
}

// Checkpoint copies: positions [first, first + count) of layer `ld` to / from host rows
// (k, v: [count][kv_dim] each, position order).
void HybridBackend::save_kv_rows(const LayerDevice& ld, std::int64_t first, std::int64_t count,
                                 float* k, float* v) const {
    const auto kv = static_cast<std::size_t>(device_.shape().kv_width);
    for_kv_runs(ld, first, count, [&](std::size_t row, std::size_t i, std::size_t run) {
        NEURAL_CUDA(cuda::drv::memcpy(k + i * kv, ld.k_cache + row, run * kv * 4,
                                      cuda::drv::kDeviceToHost));
        NEURAL_CUDA(cuda::drv::memcpy(v + i * kv, ld.v_cache + row, run * kv * 4,
                                      cuda::drv::kDeviceToHost));
    });
}

void HybridBackend::restore_kv_rows(const LayerDevice& ld, std::int64_t first, std::int64_t count,
                                    const float* k, const float* v) const {
    const auto kv = static_cast<std::size_t>(device_.shape().kv_width);
    for_kv_runs(ld, first, count, [&](std::size_t row, std::size_t i, std::size_t run) {
        NEURAL_CUDA(cuda::drv::memcpy(ld.k_cache + row, k + i * kv, run * kv * 4,
                                      cuda::drv::kHostToDevice));
        NEURAL_CUDA(cuda::drv::memcpy(ld.v_cache + row, v + i * kv, run * kv * 4,
                                      cuda::drv::kHostToDevice));
    });
}

// The GPU holds sequence resident_.id's K/V for positions [0, resident_.len). Another
// sequence (id, its tokens `seq`, of which at most `limit` positions may be skipped) keeps
// what it shares with it in place, or restores a longer matching prefix from a checkpoint;
// the outgoing sequence is checkpointed first. Returns the positions valid for the incoming one.
// With a K/V ring the checkpoint keeps the rings' last positions (ring checkpoints,
// kv_checkpoints.h) and a restore sets resident_.kv_high to the restored length.
std::int64_t HybridBackend::switch_sequence(std::uint64_t id, const std::vector<std::int32_t>& seq,
                                            std::int64_t limit) {
    const std::span<const std::int32_t> want(seq.data(), static_cast<std::size_t>(limit));
    const std::int64_t held =
        std::min<std::int64_t>(resident_.len, static_cast<std::int64_t>(resident_.tokens.size()));
    std::int64_t in_place = std::min(
        common_prefix(
            std::span<const std::int32_t>(resident_.tokens.data(), static_cast<std::size_t>(held)),
            want),
        limit);
    if (!ring_keeps(in_place)) in_place = 0;
    BackendCounters* bc = in_.counters;
    constexpr auto rl = std::memory_order_relaxed;
    if (checkpoints_ && held > 0 && resident_.id != 0) {
        NEURAL_CUDA(cuda::drv::stream_synchronize(device_.stream()));
        // The rings hold positions [resident_.kv_high - ring, resident_.kv_high); those before `held` are this sequence's.
        const std::int64_t ring_rows =
            device_.kv_ring() > 0
                ? std::max<std::int64_t>(
                      0, held - std::max<std::int64_t>(0, resident_.kv_high - device_.kv_ring()))
                : held;
        const auto kv = static_cast<std::size_t>(device_.shape().kv_width);
        std::size_t floats = 0;
        for (const LayerDevice& ld : device_.layers())
            floats += 2 * kv * static_cast<std::size_t>(ld.ring > 0 ? ring_rows : held);
        std::vector<float> data(floats);
        float* at = data.data();
        for (const LayerDevice& ld : device_.layers()) {
            const std::int64_t count = ld.ring > 0 ? ring_rows : held;
            save_kv_rows(ld, held - count, count, at, at + static_cast<std::size_t>(count) * kv);
            at += 2 * kv * static_cast<std::size_t>(count);
        }
        std::vector<std::int32_t> toks(resident_.tokens.begin(), resident_.tokens.begin() + held);
        if (checkpoints_->save(resident_.id, std::move(toks), std::move(data), ring_rows) &&
            bc != nullptr) {
            bc->kv_saved.fetch_add(static_cast<std::uint64_t>(held), rl);
        }
    }
    std::int64_t valid = in_place;
    if (checkpoints_) {
        const KvCheckpoints::Match m = checkpoints_->best(id, want, limit);
        if (m.entry != nullptr && m.length > in_place) {
            NEURAL_CUDA(cuda::drv::stream_synchronize(device_.stream()));
            const auto n = static_cast<std::int64_t>(m.entry->tokens.size());
            const auto kv = static_cast<std::size_t>(device_.shape().kv_width);
            const std::int64_t len = m.length;
            const float* at = m.entry->data.data();
            for (const LayerDevice& ld : device_.layers()) {
                const std::int64_t count = ld.ring > 0 ? m.entry->ring_rows : n;
                const std::int64_t first = n - count;  // the entry's first position of this layer
                // Positions [from, len): all of them for a full layer, the ring's reach for a ring layer.
                const std::int64_t from = ld.ring > 0 ? std::max(first, len - ld.ring) : 0;
                if (len > from) {
                    const float* k = at + static_cast<std::size_t>(from - first) * kv;
                    restore_kv_rows(ld, from, len - from, k,
                                    k + static_cast<std::size_t>(count) * kv);
                }
                at += 2 * kv * static_cast<std::size_t>(count);
            }
            valid = len;
            resident_.kv_high = len;  // the rings now hold this sequence's positions up to len
            if (bc != nullptr) bc->kv_restored.fetch_add(static_cast<std::uint64_t>(len), rl);
        }
    }
    if (bc != nullptr && valid == in_place)
        bc->kv_reused.fetch_add(static_cast<std::uint64_t>(in_place), rl);
    return valid;
}

}  // namespace neural::hybrid
