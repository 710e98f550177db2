// The decode step (decode_step.h): its buffers, and one decode token: per layer, the layer's
// graph is launched, the host waits for its routing, computes the misses on the CPU (some
// streamed to the GPU) while the GPU computes the resident experts, and starts admissions; the
// tail graph gives the logits where they are needed.
#include <atomic>
#include <cstring>
#include <span>
#include <thread>
#include <utility>

#include "cuda/driver/gpu.h"

#include "cpu/record_checks.h"
#include "cuda/cuda_check.h"
#include "cuda/hybrid/clock.h"
#include "cuda/hybrid/decode_step.h"
#include "telemetry/telemetry.h"

namespace neural::hybrid {

// The plan's decode rows (cuda/hybrid/vram_plan.h), in its allocation order, then the
// host-mapped exchange buffers the graphs read and write zero-copy (pinned host memory, not VRAM).
DecodeStep::DecodeStep(const ModelConfig& config, const GpuOptions& options, DeviceModel& device,
                       const cuda::ExpertShape& expert_shape)
    : config_(config),
      opt_(options),
      shape_(device.shape()),
      layers_(device.layers()),
      inv_freq_(device.inv_freq()),
      concentration_(device.concentration()),
      final_norm_(device.final_norm()),
      lm_head_(device.lm_head()),
      stream_(device.stream()),
      slots_(device.slots()),
      expert_shape_(expert_shape) {
    decode_.splits = device.plan().attention_splits;
    const auto alloc_f = [&](const char* row) { return device.allocate_as<float>(row); };
    decode_.x = alloc_f("decode hidden rows");
    decode_.h = alloc_f("decode hidden rows");
    decode_.qkv = alloc_f("decode QKV");
    decode_.attn = alloc_f("decode attention");
    decode_.attn_scratch = alloc_f("attention scratch");
    decode_.router_logits = alloc_f("router logits");
    decode_.act = alloc_f("expert activations");
    decode_.moe_gpu = alloc_f("decode hidden rows");
    decode_.logits = alloc_f("logits");
    decode_.pos = device.allocate_as<int>("position");
    decode_.fused_counters = device.allocate_as<unsigned>("decode counters");
    NEURAL_CUDA(cuda::drv::memset_async(
        decode_.fused_counters, 0, (1 + static_cast<std::size_t>(shape_.q_heads)) * 4,
        stream_));  // ordered before every graph on the compute stream
    const auto Hs = static_cast<std::size_t>(shape_.hidden);
    decode_.in_x = HostBuffer(Hs * 4);
    decode_.h_host = HostBuffer(Hs * 4);
    decode_.cpu_out = HostBuffer(Hs * 4);
    decode_.route = HostBuffer(static_cast<std::size_t>(shape_.top_k) * 12);
    decode_.logits_host = HostBuffer(static_cast<std::size_t>(shape_.vocab) * 4);
    decode_.pos_host = HostBuffer(4);
}

DecodeStep::~DecodeStep() { release(); }

void DecodeStep::allocate_streamed_misses(DeviceModel& device) {
    if (device.plan().find("streamed misses") != nullptr)
        streamed_.slot = device.allocate_as<int>("streamed misses");
}

void DecodeStep::attach(DecodePeers peers) { peers_ = std::move(peers); }

PromptTail DecodeStep::prompt_tail() const {
    return PromptTail{decode_.x, decode_.tail_rows, decode_.logits_host.ptr};
}

void DecodeStep::synchronize() {
    if (streamed_.stream != nullptr) cuda::drv::stream_synchronize(streamed_.stream);
}

// The graphs, the streamed misses' stream, graphs and events, the timing marks (the device
// buffers are the backend's allocations, freed with the others).
void DecodeStep::release() {
    synchronize();
    for (auto g : decode_.graphs) cuda::drv::graph_exec_destroy(g);
    if (decode_.tail != nullptr) cuda::drv::graph_exec_destroy(decode_.tail);
    if (decode_.tail_rows != nullptr) cuda::drv::graph_exec_destroy(decode_.tail_rows);
    if (streamed_.stream != nullptr) cuda::drv::stream_destroy(streamed_.stream);
    for (auto g : streamed_.graphs) cuda::drv::graph_exec_destroy(g);
    for (CUevent e : {streamed_.landed, streamed_.done}) {
        if (e != nullptr) cuda::drv::event_destroy(e);
    }
    for (auto e : decode_.routed) cuda::drv::event_destroy(e);
    for (auto e : timing_.layer_start) cuda::drv::event_destroy(e);
    for (auto e : timing_.layer_end) cuda::drv::event_destroy(e);
    for (auto e : timing_.tail_marks) cuda::drv::event_destroy(e);
    decode_.graphs.clear();
    decode_.tail = decode_.tail_rows = nullptr;
    streamed_.stream = nullptr;
    streamed_.graphs.clear();
    streamed_.landed = streamed_.done = nullptr;
    decode_.routed.clear();
    timing_.layer_start.clear();
    timing_.layer_end.clear();
    timing_.tail_marks.clear();
}

void DecodeStep::token(TokenId id, std::int64_t pos, bool prompt, float* logits_out,
                       RouterObserver* observer, const std::atomic<bool>* cancel) {
    DecodeTally tally;
    tally.count_moe = peers_.moe != nullptr && peers_.moe->enabled.load(std::memory_order_relaxed);
    begin_token(id, pos);
    for (int l = 0; l < shape_.layers; ++l) {
        throw_if_cancelled(cancel);
        launch_layer(l, tally);
        const Route route = wait_for_routing(l, tally);
        const std::span<const int> experts(route.sel, static_cast<std::size_t>(shape_.top_k));
        if (observer != nullptr) {
            observer->on_route(
                l, pos, experts,
                std::span<const float>(route.gate, static_cast<std::size_t>(shape_.top_k)));
        }
        peers_.residency->observe(l, experts, prompt);
        const MissPlan misses = compute_misses(l, route, tally);
        admit_misses(l, route, misses, tally);
    }
    if (logits_out != nullptr) finish_token(logits_out, tally);
    if (!prompt) {
        peers_.residency->end_token();
        refine_stream_share();
    }
    count_token(tally);
}

// The token's position (read by every graph from device memory) and its embedding row, which
// the first layer's graph copies into the residual stream.
void DecodeStep::begin_token(TokenId id, std::int64_t pos) {
    streamed_.carry = 0;  // streamed_choices: the share's remainder is carried within a token
    // The slots a prompt admitted join the table before the first layer.
    peers_.admissions->poll_batch();
    *decode_.pos_host.host<int>() = static_cast<int>(pos);
    NEURAL_CUDA(cuda::drv::memcpy_async(decode_.pos, decode_.pos_host.ptr, 4,
                                        cuda::drv::kHostToDevice, stream_));
    peers_.records.embed(id, decode_.in_x.host<float>());
}

void DecodeStep::launch_layer(int l, DecodeTally& tally) {
    const auto t0 = Clock::now();
    NEURAL_CUDA(cuda::drv::graph_launch(decode_.graphs[static_cast<std::size_t>(l)], stream_));
    tally.submit += ns_since(t0);
}

// Waits (polling, the host thread stays on the CPU) until layer l's graph has its routing in
// host-mapped memory, then reads the choices: expert, gate weight (as bits), VRAM slot.
DecodeStep::Route DecodeStep::wait_for_routing(int l, DecodeTally& tally) {
    volatile int* route = decode_.route.host<int>();
    const auto t0 = Clock::now();
    for (;;) {
        const CUresult q = cuda::drv::event_query(decode_.routed[static_cast<std::size_t>(l)]);
        if (q == CUDA_SUCCESS) break;
        if (q != CUDA_ERROR_NOT_READY) NEURAL_CUDA(q);
        std::this_thread::yield();
    }
    tally.wait += ns_since(t0);
    Route r;
    for (int k = 0; k < shape_.top_k; ++k) {
        r.sel[k] = route[k];
        const int g = route[shape_.top_k + k];
        std::memcpy(&r.gate[k], &g, 4);
        r.slot[k] = route[2 * shape_.top_k + k];
    }
    return r;
}

// The misses, on the CPU, while the GPU computes the resident experts; with --stream-misses, a
// share of them (streamed_choices; not those waiting for admission, which the CPU captures) are
// streamed to the GPU instead. The CPU's sum lands in host-mapped memory, which the next
// layer's graph (or the tail) adds to the residual stream.
DecodeStep::MissPlan DecodeStep::compute_misses(int l, const Route& route, DecodeTally& tally) {
    float* cpu_out = decode_.cpu_out.host<float>();
    MissPlan plan;
    auto t0 = Clock::now();
    std::memset(cpu_out, 0, static_cast<std::size_t>(shape_.hidden) * 4);
    choose_misses(l, route, plan, tally);
    const bool streams = plan.ns > 0 || plan.split >= 0;
    if (streams) {
        const auto s0 = Clock::now();
        stream_misses(l, route.sel, plan);
        tally.streamed += static_cast<std::uint64_t>(plan.ns);
        tally.split += plan.split >= 0 ? 1 : 0;
        tally.submit += ns_since(s0);
        t0 = Clock::now();
    }
    if (plan.n > 0) {
        peers_.kernel->decode(
            *peers_.team,
            std::span<const cpu::ExpertInput>(plan.inputs, static_cast<std::size_t>(plan.n)),
            decode_.h_host.host<float>(), cpu_out);
    }
    if (streams && streamed_.refine) {
        // Which side of this layer finished first: the copies had landed when the CPU was done
        // (stream more) or not yet (stream less); refine_stream_share steps from the tally.
        const CUresult q = cuda::drv::event_query(streamed_.landed);
        if (q == CUDA_SUCCESS) {
            ++streamed_.tally.cpu_slower;
        } else {
            if (q != CUDA_ERROR_NOT_READY) NEURAL_CUDA(q);
            ++streamed_.tally.copies_slower;
        }
    }
    timing_.cpu_busy[static_cast<std::size_t>(l)] = plan.n > 0;
    tally.misses += static_cast<std::uint64_t>(plan.n);
    tally.cpu_bytes += plan.cpu_bytes;
    tally.cpu_ns += ns_since(t0);
    return plan;
}

// Splits layer l's choices: hits (computed by the graph from their slots), misses streamed to
// the GPU (streamed_choices), and the CPU's misses with their inputs; a CPU miss that is a
// pending admission gets a free capture buffer, which the kernel fills with its record.
void DecodeStep::choose_misses(int l, const Route& route, MissPlan& plan, DecodeTally& tally) {
    for (int k = 0; k < shape_.top_k; ++k) {
        plan.admit[k] = route.slot[k] < 0 && peers_.raw_store && !peers_.residency->frozen() &&
                        peers_.residency->admission_for(l, route.sel[k]);
    }
    if (streamed_.stream != nullptr) {
        const std::span<const int> slots(route.slot, static_cast<std::size_t>(shape_.top_k));
        const std::span<const bool> admit(plan.admit, static_cast<std::size_t>(shape_.top_k));
        if (opt_.split_misses) {
            const StreamSplit sp =
                split_streamed_choices(slots, admit, opt_.scratch_slots, streamed_.share,
                                       shape_.intermediate, plan.streamed_k);
            plan.ns = sp.whole;
            plan.split = sp.split;
            plan.split_neurons = sp.split_neurons;
        } else {
            plan.ns = streamed_choices(slots, admit, opt_.scratch_slots, streamed_.share,
                                       streamed_.carry, plan.streamed_k);
        }
    }
    for (int j = 0; j < plan.ns; ++j) plan.streamed[plan.streamed_k[j]] = true;
    if (peers_.store != nullptr) {
        // The misses' records read for the first time (the first answers after load) are
        // checked on the team, not one after another below (cpu/record_checks.h).
        int missed[cuda::kRouterMaxK];
        int m = 0;
        for (int k = 0; k < shape_.top_k; ++k) {
            if (route.slot[k] < 0) missed[m++] = route.sel[k];
        }
        cpu::verify_records(*peers_.store, l,
                            std::span<const int>(missed, static_cast<std::size_t>(m)),
                            *peers_.team);
    }
    int n = 0;
    for (int k = 0; k < shape_.top_k; ++k) {
        if (route.slot[k] >= 0) {
            ++tally.hits;
            continue;
        }
        if (plan.streamed[k]) continue;
        plan.inputs[n] = peers_.records.cpu_input(l, route.sel[k], k);
        plan.inputs[n].weight = route.gate[k];
        if (k == plan.split) {
            // The CPU's part of a split miss: its first neurons, without the down bias (the
            // GPU's part adds it once).
            plan.inputs[n].record =
                plan.inputs[n].record.slice(0, shape_.intermediate - plan.split_neurons);
            plan.inputs[n].down_bias = nullptr;
        }
        plan.cpu_bytes += plan.inputs[n].record.bytes();
        plan.capture_of[n] = -1;
        plan.missed_k[n] = k;
        if (plan.admit[k]) {
            const int b = peers_.admissions->claim_capture();
            if (b >= 0) {
                plan.inputs[n].capture = peers_.admissions->capture(b);
                plan.capture_of[n] = b;
            }
        }
        ++n;
    }
    plan.n = n;
}

// Layer l's admissions (admission.h): uploads start for the pending candidates among the CPU's
// misses that were captured (or are assembled now), and the table flips for uploads that landed.
void DecodeStep::admit_misses(int l, const Route& route, const MissPlan& plan, DecodeTally& tally) {
    const auto t0 = Clock::now();
    int experts[cuda::kRouterMaxK];
    for (int j = 0; j < plan.n; ++j) experts[j] = route.sel[plan.missed_k[j]];
    const auto n = static_cast<std::size_t>(plan.n);
    peers_.admissions->admit_misses(l, std::span<const int>(experts, n),
                                    std::span<const int>(plan.capture_of, n));
    tally.adm_ns += ns_since(t0);
}

// The tail graph (the last layer's experts, final norm, lm_head) and the logits to the host.
void DecodeStep::finish_token(float* logits_out, DecodeTally& tally) {
    auto t0 = Clock::now();
    NEURAL_CUDA(cuda::drv::graph_launch(decode_.tail, stream_));
    tally.submit += ns_since(t0);
    t0 = Clock::now();
    NEURAL_CUDA(cuda::drv::stream_synchronize(stream_));
    tally.wait += ns_since(t0);
    std::memcpy(logits_out, decode_.logits_host.ptr, static_cast<std::size_t>(shape_.vocab) * 4);
    if (peers_.counters != nullptr && timing_.on) add_gpu_times(*peers_.counters);
}

void DecodeStep::count_token(const DecodeTally& tally) {
    if (BackendCounters* bc = peers_.counters) {
        bc->graph_submit_ns.fetch_add(tally.submit, std::memory_order_relaxed);
        bc->gpu_wait_ns.fetch_add(tally.wait, std::memory_order_relaxed);
        bc->admission_ns.fetch_add(tally.adm_ns, std::memory_order_relaxed);
        bc->experts_hit.fetch_add(tally.hits, std::memory_order_relaxed);
        bc->experts_streamed.fetch_add(tally.streamed, std::memory_order_relaxed);
        bc->experts_split.fetch_add(tally.split, std::memory_order_relaxed);
    }
    if (tally.count_moe) {
        telemetry::MoeCounters* mc = peers_.moe;
        mc->ns.fetch_add(tally.cpu_ns, std::memory_order_relaxed);
        mc->experts.fetch_add(tally.misses, std::memory_order_relaxed);
        // The records' bytes the CPU read (a raw record is an expert's MXFP4 blocks + scales,
        // 3 H I / 32 * 17 bytes; a split miss's slice its share of them).
        mc->bytes.fetch_add(tally.cpu_bytes, std::memory_order_relaxed);
    }
}

}  // namespace neural::hybrid
