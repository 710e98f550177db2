// --stream-misses (GpuOptions::stream_misses, docs/CUDA.md "Streamed misses"): half of a decode
// layer's misses copied from the pinned store into prefill's scratch slots and computed on the
// GPU while the CPU computes the other half.
#include <string>

#include <cuda_runtime.h>
#include <spdlog/spdlog.h>

#include "cuda/expert_mxfp4.cuh"
#include "cuda/hybrid/hybrid_backend.h"

namespace neural::hybrid {

// --stream-misses (GpuOptions::stream_misses): with the store pinned, half of each layer's
// missed experts (rounded down) are copied by DMA from the store mapping into prefill's
// scratch slots (idle during decode: no VRAM added) and computed on the GPU, while the CPU
// computes the other half from RAM: the two read RAM side by side (docs/CUDA.md "Streamed
// misses"). Sets miss_.note for the description; where it cannot run it warns and the CPU
// keeps every miss.
void HybridBackend::init_stream_misses() {
    if (opt_.stream_misses != 0 && opt_.stream_misses != 1) fail("--stream-misses must be 0 or 1");
    if (opt_.stream_misses == 0) return;
    const auto off = [&](const std::string& why) {
        spdlog::warn("--stream-misses 1: every miss stays on the CPU: {}", why);
        miss_.note = "misses not streamed: " + why;
    };
    if (pin_.mapping == nullptr) return off("the store is not pinned (--pin-store)");
    if (pf_.scratch == nullptr || opt_.scratch_slots < 2)
        return off("it needs prefill's scratch slots (--scratch 2 or more)");
    NEURAL_CUDA(cudaStreamCreateWithFlags(&miss_.stream, cudaStreamNonBlocking));
    NEURAL_CUDA(cudaEventCreateWithFlags(&miss_.landed, cudaEventDisableTiming));
    NEURAL_CUDA(cudaEventCreateWithFlags(&miss_.done, cudaEventDisableTiming));
    miss_.slot = dalloc<int>(static_cast<std::size_t>(K_), "streamed misses");
    miss_.slot_host = HostBuffer(static_cast<std::size_t>(K_) * 4);
    // One graph per layer (few API calls per streamed layer: they are on the critical path):
    // the choices' slots from the pinned host array, then the resident-expert kernel over
    // the scratch slots, added to the resident sum.
    const cuda::ExpertShape shape = expert_shape();
    for (int l = 0; l < L_; ++l) {
        const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        NEURAL_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
        NEURAL_CUDA(cudaMemcpyAsync(miss_.slot, miss_.slot_host.ptr,
                                    static_cast<std::size_t>(K_) * 4, cudaMemcpyHostToDevice,
                                    stream_));
        cuda::experts_resident(pf_.scratch, slots_.stride, shape, ld.sel, ld.gate, miss_.slot,
                               ld.gate_up_bias, ld.down_bias, dec_.h, dec_.act, dec_.moe_gpu,
                               stream_, true);
        miss_.graphs.push_back(end_capture());
    }
    miss_.note = "half of each layer's misses streamed from the pinned store";
}

// Layer l's streamed misses (choices ks[0 .. ns)): each record is copied from the pinned
// store into scratch slot j on miss_.stream (after the previous streamed layer's kernel, the
// slots' last reader), then, on stream_ after the layer's graph, the layer's miss graph
// computes them from those slots and adds their gate-weighted sum, in choice order, to the
// resident experts' (dec_.moe_gpu), which the next layer's graph adds to x with the CPU's part.
// The host writes the slot array after this layer's routing, when the previous layer's miss
// graph (its reader) is done. A prompt synchronizes stream_ before it uses the scratch slots.
// Deterministic: which misses stream depends only on the routing and the residency.
void HybridBackend::stream_misses(int l, const int* sel, const int* ks, int ns) {
    int* slots = miss_.slot_host.host<int>();
    for (int k = 0; k < K_; ++k) slots[k] = -1;
    NEURAL_CUDA(cudaStreamWaitEvent(miss_.stream, miss_.done, 0));
    for (int j = 0; j < ns; ++j) {
        slots[ks[j]] = j;
        NEURAL_CUDA(cudaMemcpyAsync(pf_.scratch + static_cast<std::uint64_t>(j) * slots_.stride,
                                    raw_record(l, sel[ks[j]]), slots_.record_bytes,
                                    cudaMemcpyHostToDevice, miss_.stream));
    }
    NEURAL_CUDA(cudaEventRecord(miss_.landed, miss_.stream));
    NEURAL_CUDA(cudaStreamWaitEvent(stream_, miss_.landed, 0));
    NEURAL_CUDA(cudaGraphLaunch(miss_.graphs[static_cast<std::size_t>(l)], stream_));
    NEURAL_CUDA(cudaEventRecord(miss_.done, stream_));
}

}  // namespace neural::hybrid
