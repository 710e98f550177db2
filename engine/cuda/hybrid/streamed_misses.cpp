// --stream-misses (GpuOptions::stream_misses, docs/CUDA.md "Streamed misses"): a share of a
// decode layer's misses copied from the pinned store into the prompt pipeline's scratch slots and
// computed on the GPU while the CPU computes the rest; the share is measured at load and refined while decoding.
#include <algorithm>
#include <string>

#include "cuda/driver/gpu.h"
#include <spdlog/spdlog.h>

#include "backend/autotune.h"
#include "cpu/kernels/expert_record.h"
#include "cuda/expert_mxfp4.h"
#include "cuda/hybrid/clock.h"
#include "cuda/hybrid/decode_step.h"

namespace neural::hybrid {

// --stream-misses (GpuOptions::stream_misses): with the store pinned, a share of each layer's
// missed experts (autotune::choose_stream_share: auto balances the probes' copy and RAM
// bandwidth) is copied by DMA from the store mapping into prefill's scratch slots (idle during
// decode: no VRAM added) and computed on the GPU, while the CPU computes the rest from RAM: the
// two read RAM side by side (docs/CUDA.md "Streamed misses"). Sets streamed_.note for the description
// (the decision's line); where it cannot run, --stream-misses 1 warns and the CPU keeps every
// miss.
void DecodeStep::start_streamed_misses(const StreamedMissInputs& inputs) {
    streamed_.scratch = inputs.scratch;
    autotune::StreamInputs in;
    in.mode = opt_.stream_misses;
    in.fixed_share = opt_.stream_share;
    in.frozen = inputs.frozen;
    in.ram_gb_s = inputs.ram_gb_s;
    in.pcie_gb_s = inputs.pinned_gb_s;
    if (inputs.pinned_store == nullptr) {
        in.can_stream = false;
        in.why_not = "the store is not pinned (--pin-store)";
    } else if (inputs.scratch == nullptr || opt_.scratch_slots < 2) {
        in.can_stream = false;
        in.why_not = "it needs prefill's scratch slots (--scratch 2 or more)";
    }
    const autotune::StreamChoice c = autotune::choose_stream_share(in);
    streamed_.note = c.line;
    if (opt_.stream_misses == 1 && !in.can_stream)
        spdlog::warn("--stream-misses 1: every miss stays on the CPU: {}", in.why_not);
    else if (opt_.stream_misses != 0)
        spdlog::info("{}", c.line);
    if (c.share <= 0) return;
    streamed_.share = c.share;
    streamed_.refine = c.refine;
    NEURAL_CUDA(cuda::drv::stream_create(&streamed_.stream, cuda::drv::kStreamNonBlocking));
    NEURAL_CUDA(cuda::drv::event_create(&streamed_.landed, cuda::drv::kEventDisableTiming));
    NEURAL_CUDA(cuda::drv::event_create(&streamed_.done, cuda::drv::kEventDisableTiming));
    // Per choice its scratch slot (K ints), then its slice (2K ints: first neuron, neurons).
    const std::size_t ints = static_cast<std::size_t>(3 * shape_.top_k);
    // streamed_.slot: the VRAM plan's "streamed misses" row (allocate_streamed_misses).
    streamed_.slot_host = HostBuffer(ints * 4);
    std::fill_n(streamed_.slot_host.host<int>(), ints, 0);
    // One graph per layer (few API calls per streamed layer: they are on the critical path):
    // the choices' slots and slices from the pinned host array, then the resident-expert kernel
    // over the scratch slots, added to the resident sum.
    const cuda::ExpertShape shape = expert_shape_;
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        NEURAL_CUDA(cuda::drv::stream_begin_capture(stream_, cuda::drv::kCaptureThreadLocal));
        NEURAL_CUDA(cuda::drv::memcpy_async(streamed_.slot, streamed_.slot_host.ptr, ints * 4,
                                            cuda::drv::kHostToDevice, stream_));
        cuda::experts_resident(streamed_.scratch, slots_.stride, shape, ld.sel, ld.gate,
                               streamed_.slot, ld.gate_up_bias, ld.down_bias, decode_.h,
                               decode_.act, decode_.moe_gpu, stream_, true,
                               streamed_.slot + shape_.top_k);
        streamed_.graphs.push_back(end_capture());
    }
}

// After a decode token (refining shares only): every autotune::kRefineEvery tokens, one step of
// the share towards the side that finished first in the streamed layers (backend/autotune.h).
void DecodeStep::refine_stream_share() {
    if (!streamed_.refine || ++streamed_.tokens < autotune::kRefineEvery) return;
    const double before = streamed_.share;
    streamed_.share = autotune::refine_share(streamed_.share, streamed_.tally);
    if (streamed_.share != before)
        spdlog::debug("streamed share {:.0f}% -> {:.0f}% (CPU slower in {}, copies in {} layers)",
                      100.0 * before, 100.0 * streamed_.share, streamed_.tally.cpu_slower,
                      streamed_.tally.copies_slower);
    streamed_.tally = {};
    streamed_.tokens = 0;
}

// Layer l's streamed misses (plan.streamed_k[0 .. ns), and the GPU's part of plan.split): each
// whole record is copied from the pinned store into scratch slot j on streamed_.stream (after the
// previous streamed layer's kernel, the slots' last reader), a split miss's last neurons as the
// record of an expert of that many neurons (copy_slice); then, on stream_ after the layer's
// graph, the layer's miss graph computes them from those slots and adds their gate-weighted sum,
// in choice order, to the resident experts' (decode_.moe_gpu), which the next layer's graph adds
// to x with the CPU's part. The host writes the slot and slice arrays after this layer's
// routing, when the previous layer's miss graph (their reader) is done. A prompt synchronizes
// stream_ before it uses the scratch slots. Deterministic: which misses stream, and where a
// split one is cut, depends only on the routing, the residency and the share.
void DecodeStep::stream_misses(int l, const int* sel, const MissPlan& plan) {
    int* slots = streamed_.slot_host.host<int>();
    int* part = slots + shape_.top_k;
    for (int k = 0; k < shape_.top_k; ++k) {
        slots[k] = -1;
        part[2 * k] = part[2 * k + 1] = 0;
    }
    NEURAL_CUDA(cuda::drv::stream_wait_event(streamed_.stream, streamed_.done, 0));
    auto scratch = [&](int j) {
        return streamed_.scratch + static_cast<std::uint64_t>(j) * slots_.stride;
    };
    int j = 0;
    for (; j < plan.ns; ++j) {
        slots[plan.streamed_k[j]] = j;
        NEURAL_CUDA(cuda::drv::memcpy_async(
            scratch(j), peers_.records.raw_record(l, sel[plan.streamed_k[j]]), slots_.record_bytes,
            cuda::drv::kHostToDevice, streamed_.stream));
    }
    if (plan.split >= 0) {
        const int first = shape_.intermediate - plan.split_neurons;
        slots[plan.split] = j;
        part[2 * plan.split] = first;
        part[2 * plan.split + 1] = plan.split_neurons;
        copy_slice(scratch(j), peers_.records.raw_record(l, sel[plan.split]), first,
                   plan.split_neurons);
    }
    NEURAL_CUDA(cuda::drv::event_record(streamed_.landed, streamed_.stream));
    NEURAL_CUDA(cuda::drv::stream_wait_event(stream_, streamed_.landed, 0));
    NEURAL_CUDA(cuda::drv::graph_launch(streamed_.graphs[static_cast<std::size_t>(l)], stream_));
    NEURAL_CUDA(cuda::drv::event_record(streamed_.done, stream_));
}

// Neurons [first, first + neurons) of a raw record (host, pinned) into dst (a scratch slot) as
// the raw record of an expert of `neurons` neurons (cuda::experts_resident's `part`): the CPU
// kernels' slice of the record (cpu::ExpertRecordView::slice) says where its four parts are in
// the record and, as an expert of that many neurons, where they go in the slot. The gate_up codes
// and scales are contiguous runs of rows; the down rows' blocks are one 2D copy per part (codes,
// scales), on streamed_.stream.
void DecodeStep::copy_slice(std::uint8_t* dst, const std::uint8_t* record, int first, int neurons) {
    const cpu::ExpertRecordView s =
        cpu::ExpertRecordView::make(record, shape_.hidden, shape_.intermediate,
                                    cpu::RecordKind::raw)
            .slice(first, neurons);
    const Projection gu = Projection::kGateUp, down = Projection::kDown;
    const auto row = static_cast<std::size_t>(s.blocks_per_row(down));  // blocks (scale bytes)
    const auto stride = static_cast<std::size_t>(s.row_stride_blocks(down));
    const auto rows = static_cast<std::size_t>(s.rows(down));
    NEURAL_CUDA(cuda::drv::memcpy_async(dst + s.codes_offset(gu), s.codes(gu),
                                        s.scales_offset(gu) - s.codes_offset(gu),
                                        cuda::drv::kHostToDevice, streamed_.stream));
    NEURAL_CUDA(cuda::drv::memcpy_async(dst + s.scales_offset(gu), s.scales(gu),
                                        s.codes_offset(down) - s.scales_offset(gu),
                                        cuda::drv::kHostToDevice, streamed_.stream));
    NEURAL_CUDA(cuda::drv::memcpy_2d_async(dst + s.codes_offset(down), row * 16, s.codes(down),
                                           stride * 16, row * 16, rows, cuda::drv::kHostToDevice,
                                           streamed_.stream));
    NEURAL_CUDA(cuda::drv::memcpy_2d_async(dst + s.scales_offset(down), row, s.scales(down), stride,
                                           row, rows, cuda::drv::kHostToDevice, streamed_.stream));
}

}  // namespace neural::hybrid
