// Copy-on-compute admission (residency.h): a pending candidate's record, captured by the CPU
// kernel while it computes the miss, is uploaded by the copy stream into its slot once the victim
// left the slot table; the table flips on the compute stream when the copy has landed.
#include <cuda_runtime.h>

#include "cuda/hybrid/hybrid_backend.h"
#include "cuda/residual.cuh"

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
                adm_.capture_busy[static_cast<std::size_t>(b)] = true;
                fill_record(l, expert,
                            adm_.captures[static_cast<std::size_t>(b)].host<std::uint8_t>());
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
        if (!adm_.capture_busy[static_cast<std::size_t>(b)]) return b;
    }
    return -1;
}

// The victim leaves the table (ordered after every graph already launched), then the copy
// stream uploads the captured record into its slot.
void HybridBackend::start_upload(const Residency::Admission& a, int buffer) {
    residency_->begin(a);
    if (a.victim_layer >= 0) {
        cuda::set_int(
            slots_.table + static_cast<std::size_t>(a.victim_layer) * E_ + a.victim_expert, -1,
            stream_);
    }
    NEURAL_CUDA(cudaEventRecord(adm_.evicted, stream_));
    NEURAL_CUDA(cudaStreamWaitEvent(copy_stream_, adm_.evicted, 0));
    NEURAL_CUDA(cudaMemcpyAsync(slots_.base + static_cast<std::uint64_t>(a.slot) * slots_.stride,
                                adm_.captures[static_cast<std::size_t>(buffer)].ptr,
                                slots_.record_bytes, cudaMemcpyHostToDevice, copy_stream_));
    NEURAL_CUDA(cudaEventRecord(adm_.capture_done[static_cast<std::size_t>(buffer)], copy_stream_));
    adm_.uploads.push_back({a, buffer});
}

// Uploads that landed: the slot joins the table on the compute stream.
void HybridBackend::poll_uploads() {
    for (std::size_t i = 0; i < adm_.uploads.size();) {
        const Admissions::Upload& u = adm_.uploads[i];
        const cudaError_t q = cudaEventQuery(adm_.capture_done[static_cast<std::size_t>(u.buffer)]);
        if (q == cudaErrorNotReady) {
            ++i;
            continue;
        }
        NEURAL_CUDA(q);
        cuda::set_int(slots_.table + static_cast<std::size_t>(u.a.layer) * E_ + u.a.expert,
                      u.a.slot, stream_);
        residency_->complete(u.a);
        adm_.capture_busy[static_cast<std::size_t>(u.buffer)] = false;
        if (in_.counters != nullptr)
            in_.counters->admissions.fetch_add(1, std::memory_order_relaxed);
        adm_.uploads.erase(adm_.uploads.begin() + static_cast<std::ptrdiff_t>(i));
    }
}

}  // namespace neural::hybrid
