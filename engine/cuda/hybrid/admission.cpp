// Copy-on-compute admission (residency.h): a pending candidate's record, captured by the CPU
// kernel while it computes the miss, is uploaded by the copy stream into its slot once the victim
// left the slot table; the table flips on the compute stream when the copy has landed.
#include <algorithm>
#include <vector>

#include "cuda/driver/gpu.h"
#include <spdlog/spdlog.h>

#include "cuda/hybrid/hybrid_backend.h"
#include "cuda/residual.h"

namespace neural::hybrid {

// Layer l's admissions: uploads start for the pending candidates among the CPU's misses that
// were captured (or, from a packed store / the checkpoint, are assembled now), and the table
// flips for uploads that landed.
void HybridBackend::admit_misses(int l, const Route& route, const MissPlan& plan,
                                 DecodeTally& tally) {
    const auto t0 = Clock::now();
    if (!residency_->frozen()) {
        for (int j = 0; j < plan.n; ++j) {
            const int expert = route.sel[plan.missed_k[j]];
            const auto pending = residency_->admission_for(l, expert);
            if (!pending) continue;
            int b = plan.capture_of[j];
            if (b < 0 && !raw_store_) {
                // Packed store / checkpoint: a record is not a slot image, so admission
                // assembles one (an extra pass over the expert, counted here).
                b = free_capture();
                if (b < 0) continue;
                admissions_.capture_busy[static_cast<std::size_t>(b)] = true;
                fill_record(l, expert,
                            admissions_.captures[static_cast<std::size_t>(b)].host<std::uint8_t>());
            }
            if (b < 0) continue;
            start_upload(*pending, b);
        }
        poll_uploads();
    }
    tally.adm_ns += ns_since(t0);
}

int HybridBackend::free_capture() const {
    for (int b = 0; b < kCaptureBuffers; ++b) {
        if (!admissions_.capture_busy[static_cast<std::size_t>(b)]) return b;
    }
    return -1;
}

// The victim leaves the table (ordered after every graph already launched), then the copy
// stream uploads the captured record into its slot.
void HybridBackend::start_upload(const Residency::Admission& a, int buffer) {
    residency_->begin(a);
    if (a.victim_layer >= 0) {
        cuda::set_int(
            slots_.table + static_cast<std::size_t>(a.victim_layer) * n_experts_ + a.victim_expert,
            -1, stream_);
    }
    NEURAL_CUDA(cuda::drv::event_record(admissions_.evicted, stream_));
    NEURAL_CUDA(cuda::drv::stream_wait_event(copy_stream_, admissions_.evicted, 0));
    NEURAL_CUDA(
        cuda::drv::memcpy_async(slots_.base + static_cast<std::uint64_t>(a.slot) * slots_.stride,
                                admissions_.captures[static_cast<std::size_t>(buffer)].ptr,
                                slots_.record_bytes, cuda::drv::kHostToDevice, copy_stream_));
    NEURAL_CUDA(cuda::drv::event_record(admissions_.capture_done[static_cast<std::size_t>(buffer)],
                                        copy_stream_));
    admissions_.uploads.push_back({a, buffer});
}

// Uploads that landed: the slot joins the table on the compute stream.
void HybridBackend::poll_uploads() {
    poll_batch();
    for (std::size_t i = 0; i < admissions_.uploads.size();) {
        const Admissions::Upload& u = admissions_.uploads[i];
        const CUresult q =
            cuda::drv::event_query(admissions_.capture_done[static_cast<std::size_t>(u.buffer)]);
        if (q == CUDA_ERROR_NOT_READY) {
            ++i;
            continue;
        }
        NEURAL_CUDA(q);
        cuda::set_int(slots_.table + static_cast<std::size_t>(u.a.layer) * n_experts_ + u.a.expert,
                      u.a.slot, stream_);
        residency_->complete(u.a);
        admissions_.capture_busy[static_cast<std::size_t>(u.buffer)] = false;
        if (in_.counters != nullptr)
            in_.counters->admissions.fetch_add(1, std::memory_order_relaxed);
        admissions_.uploads.erase(admissions_.uploads.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

}  // namespace neural::hybrid

namespace neural::hybrid {

// After a prompt on the GPU (--prompt-admit, docs/CUDA.md "Residency"): the prompt's routing
// counts (prefill_.counts) become one batch of admissions (Residency::prompt_admissions): free adaptive
// slots take the prompt's most-used experts, and up to --prompt-admit more replace colder adaptive
// experts. The victims leave the table first (on the compute stream, after everything the prompt
// launched), then the copy stream uploads every record (straight from the raw store's mapping;
// assembled on the host otherwise, and then at most --prompt-admit of them), and the table flips
// for each chunk of kBatchChunk of them once its copies landed (poll_batch), so decode starts at
// once and reads the new slots as soon as they are there. Frozen residency admits nothing.
void HybridBackend::admit_prompt_experts() {
    if (opt_.prompt_admit <= 0 || residency_->frozen() ||
        residency_->slots() == residency_->static_slots() || prefill_.counts.empty())
        return;
    if (!admissions_.batch.empty()) {  // one batch at a time (a prompt right after a prompt)
        NEURAL_CUDA(cuda::drv::event_synchronize(
            admissions_.batch_chunks[(admissions_.batch.size() - 1) / kBatchChunk]));
        poll_batch();
    }
    const int max_free = raw_store_ ? residency_->slots() : opt_.prompt_admit;
    const std::vector<Residency::Admission> batch =
        residency_->prompt_admissions(prefill_.counts, max_free, opt_.prompt_admit);
    if (batch.empty()) return;
    int evicting = 0, placeholders = 0;
    for (const Residency::Admission& a : batch) {
        placeholders += residency_->placeholder(a.slot) ? 1 : 0;  // before begin() clears it
        residency_->begin(a);
        if (a.victim_layer < 0) continue;
        ++evicting;
        cuda::set_int(
            slots_.table + static_cast<std::size_t>(a.victim_layer) * n_experts_ + a.victim_expert,
            -1, stream_);
    }
    NEURAL_CUDA(cuda::drv::event_record(admissions_.evicted, stream_));
    NEURAL_CUDA(cuda::drv::stream_wait_event(copy_stream_, admissions_.evicted, 0));
    // One landing event per chunk of kBatchChunk copies, most-used experts first, so that
    // decode reads the first slots while the rest still cross PCIe.
    const std::size_t chunks = (batch.size() + kBatchChunk - 1) / kBatchChunk;
    while (admissions_.batch_chunks.size() < chunks) {
        CUevent ev;
        NEURAL_CUDA(cuda::drv::event_create(&ev, cuda::drv::kEventDisableTiming));
        admissions_.batch_chunks.push_back(ev);
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const Residency::Admission& a = batch[i];
        const std::uint8_t* src = nullptr;
        if (raw_store_) {
            src = raw_record(a.layer, a.expert);
        } else {
            // A pageable buffer: cudaMemcpyAsync has copied it out when it returns.
            admissions_.batch_record.resize(static_cast<std::size_t>(slots_.record_bytes));
            fill_record(a.layer, a.expert, admissions_.batch_record.data());
            src = admissions_.batch_record.data();
        }
        NEURAL_CUDA(cuda::drv::memcpy_async(
            slots_.base + static_cast<std::uint64_t>(a.slot) * slots_.stride, src,
            slots_.record_bytes, cuda::drv::kHostToDevice, copy_stream_));
        if ((i + 1) % kBatchChunk == 0 || i + 1 == batch.size())
            NEURAL_CUDA(
                cuda::drv::event_record(admissions_.batch_chunks[i / kBatchChunk], copy_stream_));
    }
    admissions_.batch = batch;
    admissions_.batch_flipped = 0;
    if (in_.counters != nullptr)
        in_.counters->prompt_admissions.fetch_add(batch.size(), std::memory_order_relaxed);
    spdlog::info(
        "prompt: admitting {} of its experts ({} into free slots, {} replacing placeholders, {} "
        "replacing colder)",
        batch.size(), batch.size() - static_cast<std::size_t>(evicting), placeholders,
        evicting - placeholders);
}

// The batch's chunks whose copies landed, in order: their slots join the table on the compute
// stream.
void HybridBackend::poll_batch() {
    while (admissions_.batch_flipped < admissions_.batch.size()) {
        const std::size_t c = admissions_.batch_flipped / kBatchChunk;
        const CUresult q = cuda::drv::event_query(admissions_.batch_chunks[c]);
        if (q == CUDA_ERROR_NOT_READY) return;
        NEURAL_CUDA(q);
        const std::size_t end = std::min(admissions_.batch.size(), (c + 1) * kBatchChunk);
        for (std::size_t i = admissions_.batch_flipped; i < end; ++i) {
            const Residency::Admission& a = admissions_.batch[i];
            cuda::set_int(slots_.table + static_cast<std::size_t>(a.layer) * n_experts_ + a.expert,
                          a.slot, stream_);
            residency_->complete(a);
        }
        if (in_.counters != nullptr)
            in_.counters->admissions.fetch_add(end - admissions_.batch_flipped,
                                               std::memory_order_relaxed);
        admissions_.batch_flipped = end;
    }
    admissions_.batch.clear();
    admissions_.batch_flipped = 0;
}

}  // namespace neural::hybrid
