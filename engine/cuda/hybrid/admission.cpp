// The expert slot pool's admissions (admission.h): copy-on-compute uploads into adaptive slots,
// the batch after a prompt, the initial placement.
#include "cuda/hybrid/admission.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "cuda/driver/gpu.h"
#include <spdlog/spdlog.h>

#include "cuda/cuda_check.h"
#include "cuda/residual.h"

namespace neural::hybrid {

Admissions::Admissions(const SlotPool& pool, Residency& residency, CUstream compute, CUstream copy,
                       Records records, BackendCounters* counters)
    : pool_(pool),
      residency_(residency),
      compute_(compute),
      copy_(copy),
      records_(std::move(records)),
      counters_(counters) {
    for (int b = 0; b < kCaptureBuffers; ++b) {
        captures_.emplace_back(static_cast<std::size_t>(pool_.record_bytes));
        CUevent ev;
        NEURAL_CUDA(cuda::drv::event_create(&ev, cuda::drv::kEventDisableTiming));
        capture_done_.push_back(ev);
    }
    NEURAL_CUDA(cuda::drv::event_create(&evicted_, cuda::drv::kEventDisableTiming));
}

Admissions::~Admissions() {
    for (auto e : capture_done_) cuda::drv::event_destroy(e);
    if (evicted_ != nullptr) cuda::drv::event_destroy(evicted_);
    for (CUevent e : batch_chunks_) cuda::drv::event_destroy(e);
}

void Admissions::place(const std::vector<Residency::Admission>& placed) {
    const auto Es = static_cast<std::size_t>(residency_.experts());
    std::vector<int> table(static_cast<std::size_t>(residency_.layers()) * Es, -1);
    for (const Residency::Admission& a : placed) {
        records_.fill(a.layer, a.expert, captures_[0].host<std::uint8_t>());
        NEURAL_CUDA(cuda::drv::memcpy(pool_.slot(a.slot), captures_[0].ptr, pool_.record_bytes,
                                      cuda::drv::kHostToDevice));
        table[static_cast<std::size_t>(a.layer) * Es + static_cast<std::size_t>(a.expert)] = a.slot;
    }
    NEURAL_CUDA(
        cuda::drv::memcpy(pool_.table, table.data(), table.size() * 4, cuda::drv::kHostToDevice));
}

int Admissions::claim_capture() {
    const int b = free_capture();
    if (b >= 0) capture_busy_[static_cast<std::size_t>(b)] = true;
    return b;
}

std::uint8_t* Admissions::capture(int buffer) const {
    return captures_[static_cast<std::size_t>(buffer)].host<std::uint8_t>();
}

int Admissions::free_capture() const {
    for (int b = 0; b < kCaptureBuffers; ++b) {
        if (!capture_busy_[static_cast<std::size_t>(b)]) return b;
    }
    return -1;
}

void Admissions::admit_misses(int layer, std::span<const int> experts,
                              std::span<const int> captures) {
    if (residency_.frozen()) return;
    for (std::size_t j = 0; j < experts.size(); ++j) {
        const int expert = experts[j];
        const auto pending = residency_.admission_for(layer, expert);
        if (!pending) continue;
        int b = captures[j];
        if (b < 0 && !records_.raw) {
            // Packed store / checkpoint: a record is not a slot image, so admission assembles
            // one (an extra pass over the expert, counted in the decode token's admission time).
            b = claim_capture();
            if (b < 0) continue;
            records_.fill(layer, expert, capture(b));
        }
        if (b < 0) continue;
        start_upload(*pending, b);
    }
    poll();
}

// The victim leaves the table (ordered after every graph already launched), then the copy
// stream uploads the captured record into its slot.
void Admissions::start_upload(const Residency::Admission& a, int buffer) {
    residency_.begin(a);
    if (a.victim_layer >= 0)
        cuda::set_int(table_entry(a.victim_layer, a.victim_expert), -1, compute_);
    NEURAL_CUDA(cuda::drv::event_record(evicted_, compute_));
    NEURAL_CUDA(cuda::drv::stream_wait_event(copy_, evicted_, 0));
    NEURAL_CUDA(cuda::drv::memcpy_async(pool_.slot(a.slot),
                                        captures_[static_cast<std::size_t>(buffer)].ptr,
                                        pool_.record_bytes, cuda::drv::kHostToDevice, copy_));
    NEURAL_CUDA(cuda::drv::event_record(capture_done_[static_cast<std::size_t>(buffer)], copy_));
    uploads_.push_back({a, buffer});
}

// Uploads that landed: the slot joins the table on the compute stream.
void Admissions::poll() {
    poll_batch();
    for (std::size_t i = 0; i < uploads_.size();) {
        const Upload& u = uploads_[i];
        const CUresult q =
            cuda::drv::event_query(capture_done_[static_cast<std::size_t>(u.buffer)]);
        if (q == CUDA_ERROR_NOT_READY) {
            ++i;
            continue;
        }
        NEURAL_CUDA(q);
        cuda::set_int(table_entry(u.a.layer, u.a.expert), u.a.slot, compute_);
        residency_.complete(u.a);
        capture_busy_[static_cast<std::size_t>(u.buffer)] = false;
        if (counters_ != nullptr) counters_->admissions.fetch_add(1, std::memory_order_relaxed);
        uploads_.erase(uploads_.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

// After a prompt on the GPU (--prompt-admit, docs/CUDA.md "Residency"): the prompt's routing
// counts become one batch of admissions (Residency::prompt_admissions): free adaptive slots take
// the prompt's most-used experts, and up to --prompt-admit more replace colder adaptive experts.
// The victims leave the table first (on the compute stream, after everything the prompt
// launched), then the copy stream uploads every record (straight from the raw store's mapping;
// assembled on the host otherwise, and then at most --prompt-admit of them), and the table flips
// for each chunk of kBatchChunk of them once its copies landed (poll_batch), so decode starts at
// once and reads the new slots as soon as they are there. Frozen residency admits nothing.
void Admissions::admit_prompt(std::span<const std::uint32_t> counts, int prompt_admit) {
    if (prompt_admit <= 0 || residency_.frozen() ||
        residency_.slots() == residency_.static_slots() || counts.empty())
        return;
    if (!batch_.empty()) {  // one batch at a time (a prompt right after a prompt)
        NEURAL_CUDA(cuda::drv::event_synchronize(batch_chunks_[(batch_.size() - 1) / kBatchChunk]));
        poll_batch();
    }
    const bool raw = static_cast<bool>(records_.raw);
    const int max_free = raw ? residency_.slots() : prompt_admit;
    const std::vector<Residency::Admission> batch =
        residency_.prompt_admissions(counts, max_free, prompt_admit);
    if (batch.empty()) return;
    int evicting = 0, placeholders = 0;
    for (const Residency::Admission& a : batch) {
        placeholders += residency_.placeholder(a.slot) ? 1 : 0;  // before begin() clears it
        residency_.begin(a);
        if (a.victim_layer < 0) continue;
        ++evicting;
        cuda::set_int(table_entry(a.victim_layer, a.victim_expert), -1, compute_);
    }
    NEURAL_CUDA(cuda::drv::event_record(evicted_, compute_));
    NEURAL_CUDA(cuda::drv::stream_wait_event(copy_, evicted_, 0));
    // One landing event per chunk of kBatchChunk copies, most-used experts first, so that
    // decode reads the first slots while the rest still cross PCIe.
    const std::size_t chunks = (batch.size() + kBatchChunk - 1) / kBatchChunk;
    while (batch_chunks_.size() < chunks) {
        CUevent ev;
        NEURAL_CUDA(cuda::drv::event_create(&ev, cuda::drv::kEventDisableTiming));
        batch_chunks_.push_back(ev);
    }
    for (std::size_t i = 0; i < batch.size(); ++i) {
        const Residency::Admission& a = batch[i];
        const std::uint8_t* src = nullptr;
        if (raw) {
            src = records_.raw(a.layer, a.expert);
        } else {
            // A pageable buffer: cudaMemcpyAsync has copied it out when it returns.
            batch_record_.resize(static_cast<std::size_t>(pool_.record_bytes));
            records_.fill(a.layer, a.expert, batch_record_.data());
            src = batch_record_.data();
        }
        NEURAL_CUDA(cuda::drv::memcpy_async(pool_.slot(a.slot), src, pool_.record_bytes,
                                            cuda::drv::kHostToDevice, copy_));
        if ((i + 1) % kBatchChunk == 0 || i + 1 == batch.size())
            NEURAL_CUDA(cuda::drv::event_record(batch_chunks_[i / kBatchChunk], copy_));
    }
    batch_ = batch;
    batch_flipped_ = 0;
    if (counters_ != nullptr)
        counters_->prompt_admissions.fetch_add(batch.size(), std::memory_order_relaxed);
    spdlog::info(
        "prompt: admitting {} of its experts ({} into free slots, {} replacing placeholders, {} "
        "replacing colder)",
        batch.size(), batch.size() - static_cast<std::size_t>(evicting), placeholders,
        evicting - placeholders);
}

void Admissions::poll_batch() {
    while (batch_flipped_ < batch_.size()) {
        const std::size_t c = batch_flipped_ / kBatchChunk;
        const CUresult q = cuda::drv::event_query(batch_chunks_[c]);
        if (q == CUDA_ERROR_NOT_READY) return;
        NEURAL_CUDA(q);
        const std::size_t end = std::min(batch_.size(), (c + 1) * kBatchChunk);
        for (std::size_t i = batch_flipped_; i < end; ++i) {
            const Residency::Admission& a = batch_[i];
            cuda::set_int(table_entry(a.layer, a.expert), a.slot, compute_);
            residency_.complete(a);
        }
        if (counters_ != nullptr)
            counters_->admissions.fetch_add(end - batch_flipped_, std::memory_order_relaxed);
        batch_flipped_ = end;
    }
    batch_.clear();
    batch_flipped_ = 0;
}

}  // namespace neural::hybrid
