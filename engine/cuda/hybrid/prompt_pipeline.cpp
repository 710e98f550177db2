// The prompt pipeline (prompt_pipeline.h, docs/CUDA.md "Prefill"): layer-major (each layer over
// every block of the prompt) or block-major; per layer the dense part on tensor cores, then each
// expert once over its tokens, from its slot, staged into a scratch slot or on the CPU.
#include "cuda/hybrid/prompt_pipeline.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <span>
#include <string>
#include <vector>

#include "cuda/driver/gpu.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend/backend.h"
#include "cpu/kernels/expert_kernel.h"
#include "cpu/record_checks.h"
#include "cuda/cuda_check.h"
#include "cuda/attention_prefill.h"
#include "cuda/expert_gemm.h"
#include "cuda/gemm_bf16_rows.h"
#include "cuda/hybrid/clock.h"
#include "cuda/hybrid/vram_plan.h"
#include "cuda/residual.h"
#include "cuda/rms_norm.h"
#include "cuda/rope_kv.h"
#include "cuda/router.h"
#include "model/config.h"
#include "neural/error.h"

namespace neural::hybrid {

bool PromptPipeline::wanted(const GpuOptions& options, const ModelShape& shape) {
    const std::string& order = options.prefill_order;
    if (!is_prefill_order(order)) {
        fail("--prefill-order \"{}\": expected layer, block or token", order);
    }
    if (order == "token") return false;
    if (shape.head_dim != cuda::kPrefillHeadDim) {
        spdlog::warn("GPU prefill needs head_dim {} (this model: {}); prompts run token by token",
                     cuda::kPrefillHeadDim, shape.head_dim);
        return false;
    }
    return true;
}

PromptPipeline::PromptPipeline(const ModelConfig& config, const GpuOptions& options,
                               DeviceModel& device, std::vector<cuda::ExpertShape> expert_shapes)
    : config_(config),
      opt_(options),
      shape_(device.shape()),
      context_(device.context()),
      layers_(device.layers()),
      inv_freq_(device.inv_freq()),
      concentration_(device.concentration()),
      stream_(device.stream()),
      copy_stream_(device.copy_stream()),
      slots_(device.slots()),
      shapes_(std::move(expert_shapes)) {
    try {
        allocate(device);
    } catch (...) {
        release();
        throw;
    }
}

PromptPipeline::~PromptPipeline() { release(); }

// Prefill buffers: the VRAM plan's prefill rows (cuda/hybrid/vram_plan.h), allocated before the
// slot pool takes the rest; the plan checked --prefill-block, --scratch and --prompt-rows.
void PromptPipeline::allocate(DeviceModel& device) {
    const VramPlan& plan = device.plan();
    const auto alloc_f = [&](const char* row) { return device.allocate_as<float>(row); };
    const auto alloc_i = [&](const char* row) { return device.allocate_as<int>(row); };
    const auto alloc_b = [&](const char* row) { return device.allocate_as<std::uint8_t>(row); };
    if (opt_.staging_threads < 1 || opt_.staging_threads > 64)
        fail("--staging-threads must be 1..64");
    if (opt_.expert_streams != 1 && opt_.expert_streams != 2)
        fail("--expert-streams must be 1 or 2");
    if (opt_.prefill_cpu_tokens < 0 || opt_.prefill_cpu_tokens > cpu::ExpertKernel::kMaxTokens) {
        fail("--prefill-cpu-tokens must be 0..{}", cpu::ExpertKernel::kMaxTokens);
    }
    if (opt_.prefill_early < 0 || opt_.prefill_early > kMaxPrefillEarly) {
        fail("--prefill-early must be 0..{}", kMaxPrefillEarly);
    }
    const auto Hs = static_cast<std::size_t>(shape_.hidden),
               Ks = static_cast<std::size_t>(shape_.top_k),
               ctx = static_cast<std::size_t>(context_);
    block_ = plan.prefill_block;
    chunk_rows_ = static_cast<int>(plan.prompt_rows);
    if (static_cast<std::int64_t>(chunk_rows_) < context_) {
        spdlog::info(
            "prefill: prompts of more than {} positions run in chunks of {} (--prompt-rows)",
            chunk_rows_, chunk_rows_);
    }
    const auto B = static_cast<std::size_t>(block_), R = static_cast<std::size_t>(chunk_rows_);
    residual_ = alloc_f("prompt rows");
    expert_sum_ = alloc_f("prompt rows");  // zeroed by each prompt chunk
    expert_input_ = alloc_f("prompt rows");
    selected_ = alloc_i("prefill routing");
    gates_ = alloc_f("prefill routing");
    entries_ = alloc_i("prefill routing");
    normed_ = alloc_f("prefill hidden block");
    qkv_ = alloc_f("prefill QKV");
    attention_ = alloc_f("prefill attention");
    router_logits_ = alloc_f("prefill router logits");
    activations_ = alloc_f("prefill expert activations");
    // --expert-streams 2: a second act buffer, so an expert's gate_up can run beside the
    // previous expert's down (expert_rows). The QKV rows are idle during a layer's experts and
    // larger at gpt-oss's shapes (5,120 columns against 2,880); else its own (the plan's row).
    if (opt_.expert_streams == 2) {
        activations2_ = plan.find("prefill second expert activations") != nullptr
                            ? alloc_f("prefill second expert activations")
                            : qkv_;
        NEURAL_CUDA(cuda::drv::stream_create(&side_, cuda::drv::kStreamNonBlocking));
        NEURAL_CUDA(cuda::drv::event_create(&experts_start_, cuda::drv::kEventDisableTiming));
        for (int b = 0; b < 2; ++b) {
            NEURAL_CUDA(cuda::drv::event_create(&gate_up_done_[b], cuda::drv::kEventDisableTiming));
            NEURAL_CUDA(cuda::drv::event_create(&act_free_[b], cuda::drv::kEventDisableTiming));
        }
    }
    // Grouped GEMM's down rows (y, [block, H]): the QKV rows are idle during a layer's experts
    // and are larger at gpt-oss's shapes (5,120 columns against 2,880); else their own.
    if (opt_.grouped_gemm) {
        down_rows_ =
            plan.find("prefill down rows") != nullptr ? alloc_f("prefill down rows") : qkv_;
    }
    scratch_ = alloc_b("prefill scratch slots");
    for (int i = 0; i < opt_.scratch_slots; ++i) {
        CUevent a, b;
        NEURAL_CUDA(cuda::drv::event_create(&a, cuda::drv::kEventDisableTiming));
        NEURAL_CUDA(cuda::drv::event_create(&b, cuda::drv::kEventDisableTiming));
        scratch_landed_.push_back(a);
        scratch_free_.push_back(b);
    }
    NEURAL_CUDA(cuda::drv::event_create(&h_ready_, cuda::drv::kEventDisableTiming));
    NEURAL_CUDA(cuda::drv::event_create(&first_routed_, cuda::drv::kEventDisableTiming));
    emb_host_ = HostBuffer(B * Hs * 4);
    route_host_ = HostBuffer(ctx * Ks * 8);
    entries_host_ = HostBuffer(ctx * Ks * 4);
    h_host_ = HostBuffer(R * Hs * 4);
    if (opt_.prefill_cpu_tokens > 0) {
        cpu_rows_ = HostBuffer(static_cast<std::size_t>(shape_.experts) *
                               static_cast<std::size_t>(opt_.prefill_cpu_tokens) * Hs * 4);
        cpu_start_ = HostBuffer((ctx + 1) * 4);
    }
}

// Prefill's staging rings. A pinned store needs none: its records are uploaded from the mapping.
void PromptPipeline::attach(PromptPeers peers) {
    peers_ = std::move(peers);
    if (peers_.pinned_store == nullptr) {
        ring_ = std::make_unique<StagingRing>(
            opt_.device, opt_.staging_threads, opt_.staging_threads,
            static_cast<std::size_t>(slots_.record_bytes), peers_.records.fill_record);
        // Early staging (layer-major only): pinned buffers for the experts the first block's
        // routing already sends to staging, filled while the other blocks' dense parts run.
        if (opt_.prefill_early > 0 && opt_.prefill_order == "layer") {
            early_ = std::make_unique<StagingRing>(
                opt_.device, opt_.staging_threads, opt_.prefill_early,
                static_cast<std::size_t>(slots_.record_bytes), peers_.records.fill_record);
        }
    }
}

void PromptPipeline::abandon() {
    if (ring_) ring_->abandon();
    if (early_) early_->abandon();
}

void PromptPipeline::synchronize() {
    if (side_ != nullptr) cuda::drv::stream_synchronize(side_);
}

// The rings first (their producers), then the second stream and the events. The device
// buffers are the backend's allocations (freed with the others).
void PromptPipeline::release() {
    synchronize();
    ring_.reset();
    early_.reset();
    if (side_ != nullptr) cuda::drv::stream_destroy(side_);
    side_ = nullptr;
    for (CUevent e :
         {experts_start_, gate_up_done_[0], gate_up_done_[1], act_free_[0], act_free_[1]}) {
        if (e != nullptr) cuda::drv::event_destroy(e);
    }
    for (auto e : scratch_landed_) cuda::drv::event_destroy(e);
    if (first_routed_ != nullptr) cuda::drv::event_destroy(first_routed_);
    for (auto e : scratch_free_) cuda::drv::event_destroy(e);
    if (h_ready_ != nullptr) cuda::drv::event_destroy(h_ready_);
    experts_start_ = gate_up_done_[0] = gate_up_done_[1] = act_free_[0] = act_free_[1] = nullptr;
    scratch_landed_.clear();
    scratch_free_.clear();
    first_routed_ = h_ready_ = nullptr;
}

// What the backend's description says about prompts: the order, blocks, scratch slots, where
// staged experts come from, the CPU's share, the experts' operands, the expert streams.
std::string PromptPipeline::description() const {
    const auto half = std::count_if(shapes_.begin(), shapes_.end(),
                                    [](const cuda::ExpertShape& s) { return s.half_operands; });
    const std::string operands =
        half == 0 ? std::string("bf16 hi + lo experts")
        : half == static_cast<std::ptrdiff_t>(shapes_.size())
            ? std::string("fp16 experts")
            : fmt::format("fp16 experts in {} of {} layers (the others' norm has no finite bound)",
                          half, shapes_.size());
    return fmt::format(
        "{}-major, blocks of {}, {} scratch slots, {}, CPU up to {} tokens{}, {}, {} "
        "expert streams",
        opt_.prefill_order, block_, opt_.scratch_slots,
        peers_.pinned_store != nullptr ? std::string("staged from the pinned store")
                                       : fmt::format("{} staging threads", opt_.staging_threads),
        opt_.prefill_cpu_tokens, opt_.grouped_gemm ? ", grouped GEMM" : "", operands,
        opt_.expert_streams);
}

// Runs `work` at positions start .. start + n - 1 (docs/CUDA.md "Prefill"), writing the
// logits of rows first_out .. n - 1 to `logits_out` ([n - first_out, V]); the observer sees
// the routing of positions >= observe_from.
void PromptPipeline::run(const std::vector<TokenId>& work, std::int64_t start,
                         std::int64_t first_out, float* logits_out, std::int64_t observe_from,
                         RouterObserver* observer, const std::atomic<bool>* cancel,
                         const PromptTail& tail, std::int64_t& held) {
    const auto t_begin = Clock::now();
    const int n = static_cast<int>(work.size());
    Stats st;
    // Admissions in flight finish first: the host's slot map must equal the device table.
    // Streamed misses' copies into the scratch slots too (their kernels are on stream_,
    // synchronized below before any prompt copy).
    NEURAL_CUDA(cuda::drv::stream_synchronize(copy_stream_));
    if (peers_.streamed_misses != nullptr)
        NEURAL_CUDA(cuda::drv::stream_synchronize(peers_.streamed_misses));
    peers_.admissions->poll();
    counts_.assign(
        static_cast<std::size_t>(shape_.layers) * static_cast<std::size_t>(shape_.experts), 0);

    // The cancel flag is checked per block and layer, and per expert of a layer
    // (expert_rows): a long prompt stops within one block's dense part or one expert. A
    // Cancelled leaves through forward(), which drops this call's positions (the positions held
    // back to at most pos0; the K/V's high mark already covers every position written).
    cancel_ = cancel;
    struct ClearCancel {
        const std::atomic<bool>*& p;
        ~ClearCancel() { p = nullptr; }
    } clear_cancel{cancel_};

    // A prompt longer than the rows the GPU holds runs in chunks, each like a prompt of its own
    // (its K/V is in the cache for the next); the logits rows asked for come from whichever chunk
    // holds them, the prompt's experts are admitted once, after the last chunk.
    for (int c0 = 0; c0 < n; c0 += chunk_rows_) {
        const int rows = std::min(chunk_rows_, n - c0);
        const std::int64_t out0 = std::max<std::int64_t>(first_out - c0, 0);
        float* out = logits_out + std::max<std::int64_t>(c0 - first_out, 0) * shape_.vocab;
        run_chunk(std::span<const TokenId>(work).subspan(static_cast<std::size_t>(c0),
                                                         static_cast<std::size_t>(rows)),
                  start + c0, out0, out, observe_from, observer, tail, st);
        held = std::max(held, start + c0 + rows);
    }
    NEURAL_CUDA(cuda::drv::stream_synchronize(stream_));
    peers_.admissions->admit_prompt(counts_, opt_.prompt_admit);
    const std::uint64_t total_ns = ns_since(t_begin);
    spdlog::info(
        "prefill: {} tokens in {:.3f} s ({:.0f} tok/s), {}-major: host launch {:.3f} s, routing "
        "sync "
        "{:.3f} s, staging wait {:.3f} s, CPU multi-token {:.3f} s (waited {:.3f} s); {} experts "
        "staged ({:.2f} GB, {} early), {} from slots, {} on the CPU",
        n, total_ns / 1e9, n / (total_ns / 1e9), opt_.prefill_order, st.launch_ns / 1e9,
        st.route_ns / 1e9, st.staging_ns / 1e9, st.cpu_ns / 1e9, st.cpu_wait_ns / 1e9, st.staged,
        static_cast<double>(st.staged * slots_.record_bytes) / 1e9, st.early, st.resident,
        st.cpu_groups);
    if (BackendCounters* bc = peers_.counters) {
        constexpr auto rl = std::memory_order_relaxed;
        bc->prefill_tokens.fetch_add(static_cast<std::uint64_t>(n), rl);
        bc->prefill_ns.fetch_add(total_ns, rl);
        bc->prefill_launch_ns.fetch_add(st.launch_ns, rl);
        bc->prefill_route_ns.fetch_add(st.route_ns, rl);
        bc->prefill_staging_ns.fetch_add(st.staging_ns, rl);
        bc->prefill_cpu_ns.fetch_add(st.cpu_ns, rl);
        bc->prefill_cpu_wait_ns.fetch_add(st.cpu_wait_ns, rl);
        bc->prefill_staged.fetch_add(st.staged, rl);
        bc->prefill_staged_bytes.fetch_add(st.staged * slots_.record_bytes, rl);
        bc->prefill_resident.fetch_add(st.resident, rl);
        bc->prefill_cpu_groups.fetch_add(st.cpu_groups, rl);
        bc->prefill_early.fetch_add(st.early, rl);
        bc->prefill_grouped.fetch_add(st.grouped, rl);
        bc->prefill_chunks.fetch_add(
            static_cast<std::uint64_t>((n + chunk_rows_ - 1) / chunk_rows_), rl);
    }
}

// One chunk of a prompt (prefill): work at positions start .. start + n - 1, n <= chunk_rows_, the
// logits of its rows first_out .. n - 1 to logits_out.
void PromptPipeline::run_chunk(std::span<const TokenId> work, std::int64_t start,
                               std::int64_t first_out, float* logits_out, std::int64_t observe_from,
                               RouterObserver* observer, const PromptTail& tail, Stats& st) {
    const int n = static_cast<int>(work.size());
    const std::size_t Hs = static_cast<std::size_t>(shape_.hidden);
    // The experts' sums start at zero: a layer's add_moe_rows zeroes the rows it adds, but a
    // prompt cancelled during a layer's experts left partial sums behind.
    NEURAL_CUDA(
        cuda::drv::memset_async(expert_sum_, 0, static_cast<std::size_t>(n) * Hs * 4, stream_));
    // Embeddings (bf16 rows widened on the host) into the prompt's residual stream.
    for (int b0 = 0; b0 < n; b0 += block_) {
        throw_if_cancelled(cancel_);
        const int rows = std::min(block_, n - b0);
        float* dst = emb_host_.host<float>();
        for (int r = 0; r < rows; ++r)
            peers_.records.embed(work[static_cast<std::size_t>(b0 + r)],
                                 dst + static_cast<std::size_t>(r) * Hs);
        NEURAL_CUDA(cuda::drv::memcpy_async(residual_ + static_cast<std::size_t>(b0) * Hs, dst,
                                            static_cast<std::size_t>(rows) * Hs * 4,
                                            cuda::drv::kHostToDevice, stream_));
        NEURAL_CUDA(
            cuda::drv::stream_synchronize(stream_));  // emb_host_ is reused by the next block
    }

    // Grouped GEMM only for a prompt of one block of 1,024-4,096 new tokens (docs/CUDA.md).
    const bool grouped =
        opt_.grouped_gemm && n <= block_ && n >= kGroupedGemmMin && n <= kGroupedGemmMax;
    if (opt_.prefill_order == "layer") {
        const int rows0 = std::min(block_, n);
        const bool early = early_ != nullptr && n > block_;
        std::vector<int> early_of;
        for (int l = 0; l < shape_.layers; ++l) {
            throw_if_cancelled(cancel_);
            dense_rows(l, 0, rows0, start, st);
            if (early) {
                // The first block's routing comes to the host as soon as its dense part is
                // done, while the GPU goes on with the other blocks.
                NEURAL_CUDA(
                    cuda::drv::memcpy_async(route_host_.host<int>(), selected_,
                                            static_cast<std::size_t>(rows0) * shape_.top_k * 4,
                                            cuda::drv::kDeviceToHost, stream_));
                NEURAL_CUDA(cuda::drv::event_record(first_routed_, stream_));
            }
            for (int b0 = block_; b0 < n; b0 += block_) {
                throw_if_cancelled(cancel_);
                dense_rows(l, b0, std::min(block_, n - b0), start, st);
            }
            if (early) early_of = stage_early(l, rows0, st);
            expert_rows(l, 0, n, start, observe_from, observer, st, early_of, grouped);
        }
    } else {
        for (int b0 = 0; b0 < n; b0 += block_) {
            const int rows = std::min(block_, n - b0);
            for (int l = 0; l < shape_.layers; ++l) {
                throw_if_cancelled(cancel_);
                dense_rows(l, b0, rows, start, st);
                expert_rows(l, b0, rows, start, observe_from, observer, st, {}, grouped);
            }
        }
    }

    // Logits of the rows asked for, through the decode tail's kernels.
    for (std::int64_t r = first_out; r < n; ++r) {
        throw_if_cancelled(cancel_);
        NEURAL_CUDA(cuda::drv::memcpy_async(tail.x, residual_ + static_cast<std::size_t>(r) * Hs,
                                            Hs * 4, cuda::drv::kDeviceToDevice, stream_));
        NEURAL_CUDA(cuda::drv::graph_launch(tail.graph, stream_));
        NEURAL_CUDA(cuda::drv::stream_synchronize(stream_));
        std::memcpy(logits_out + (r - first_out) * shape_.vocab, tail.logits,
                    static_cast<std::size_t>(shape_.vocab) * 4);
    }
}

// Layer l, layer-major, more than one block: the experts that the first block's `rows0`
// tokens alone send to staging (not resident, more than --prefill-cpu-tokens tokens: the
// whole prompt can only add tokens) start staging now, up to --prefill-early of them in
// index order, into the early ring's own pinned buffers, while the GPU runs the other blocks'
// dense parts. Returns expert -> early job (-1: not early); expert_rows uploads them in the
// usual expert index order, so the results are the same bits as without.
std::vector<int> PromptPipeline::stage_early(int l, int rows0, Stats& st) {
    const auto t0 = Clock::now();
    NEURAL_CUDA(cuda::drv::event_synchronize(first_routed_));
    st.route_ns += ns_since(t0);
    const int* sel = route_host_.host<int>();
    std::vector<int> count(static_cast<std::size_t>(shape_.experts), 0);
    for (std::size_t i = 0;
         i < static_cast<std::size_t>(rows0) * static_cast<std::size_t>(shape_.top_k); ++i) {
        const int e = sel[i];
        if (e < 0 || e >= shape_.experts)
            fail("prefill: router chose expert {} of {}", e, shape_.experts);
        ++count[static_cast<std::size_t>(e)];
    }
    std::vector<int> early_of(static_cast<std::size_t>(shape_.experts), -1);
    std::vector<std::pair<int, int>> jobs;
    for (int e = 0; e < shape_.experts && static_cast<int>(jobs.size()) < opt_.prefill_early; ++e) {
        if (count[static_cast<std::size_t>(e)] > opt_.prefill_cpu_tokens &&
            peers_.residency->slot_of(l, e) < 0) {
            early_of[static_cast<std::size_t>(e)] = static_cast<int>(jobs.size());
            jobs.emplace_back(l, e);
        }
    }
    if (!jobs.empty()) early_->start(std::move(jobs));
    return early_of;
}

// Layer l's attention half for rows b0 .. b0 + rows - 1 of the prompt (positions start + b0 ..):
// norm, QKV, RoPE + K/V, attention, output projection (+= x), norm (the experts' input),
// router, top-k.
void PromptPipeline::dense_rows(int l, int b0, int rows, std::int64_t start, Stats& st) {
    const auto t0 = Clock::now();
    const ModelConfig& c = config_;
    const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
    const std::size_t Hs = static_cast<std::size_t>(shape_.hidden);
    float* x = residual_ + static_cast<std::size_t>(b0) * Hs;
    const int qkv_cols = shape_.q_width + 2 * shape_.kv_width;
    const int pos0 = static_cast<int>(start + b0);
    cuda::rms_norm_rows(x, ld.input_norm, c.rms_norm_eps, shape_.hidden, rows, normed_, stream_);
    cuda::gemm_bf16_rows(normed_, rows, shape_.hidden, ld.qkv_w, ld.qkv_b, qkv_cols, qkv_, qkv_cols,
                         false, stream_);
    cuda::rope_kv_rows(qkv_, rows, shape_.q_heads, shape_.kv_heads, shape_.head_dim, inv_freq_,
                       concentration_, pos0, ld.k_cache, ld.v_cache, ld.ring, stream_);
    const int window = c.layer_is_sliding[static_cast<std::size_t>(l)] ? c.sliding_window : 0;
    cuda::attention_prefill(qkv_, qkv_cols, rows, pos0, ld.k_cache, ld.v_cache, ld.sinks,
                            shape_.q_heads, shape_.kv_heads, window, ld.ring, attention_, stream_);
    cuda::gemm_bf16_rows(attention_, rows, shape_.q_width, ld.o_w, ld.o_b, shape_.hidden, x,
                         shape_.hidden, true, stream_);
    float* h = expert_input_ + static_cast<std::size_t>(b0) * Hs;
    cuda::rms_norm_rows(x, ld.post_norm, c.rms_norm_eps, shape_.hidden, rows, h, stream_);
    cuda::gemm_bf16_rows(h, rows, shape_.hidden, ld.router_w, ld.router_b, shape_.experts,
                         router_logits_, shape_.experts, false, stream_);
    cuda::router_topk_rows(router_logits_, rows, shape_.experts, shape_.top_k,
                           selected_ + static_cast<std::size_t>(b0) * shape_.top_k,
                           gates_ + static_cast<std::size_t>(b0) * shape_.top_k, stream_);
    NEURAL_CUDA(cuda::drv::get_last_error());
    st.launch_ns += ns_since(t0);
}

// Layer l's experts for rows b0 .. b0 + rows - 1: the routing comes to the host, tokens are
// grouped by expert (token order within a group), and each expert runs once over its tokens,
// in expert index order: from its VRAM slot, staged through the ring into a scratch slot, or
// (few tokens, not resident) on the CPU with the multi-token kernel while the GPU works.
void PromptPipeline::expert_rows(int l, int b0, int rows, std::int64_t start,
                                 std::int64_t observe_from, RouterObserver* observer, Stats& st,
                                 const std::vector<int>& early_of, bool grouped) {
    route_rows_to_host(b0, rows, st);
    const auto t0 = Clock::now();
    ExpertGroups groups = group_by_expert(l, b0, rows, start, observe_from, observer);
    for (int e = 0; e < shape_.experts; ++e)
        counts_[static_cast<std::size_t>(l) * static_cast<std::size_t>(shape_.experts) +
                static_cast<std::size_t>(e)] +=
            static_cast<std::uint32_t>(groups.count[static_cast<std::size_t>(e)]);
    place_experts(l, early_of, groups);
    CpuExperts cpu = start_cpu_experts(l, b0, rows, groups, st);
    std::uint64_t staging_wait = 0;
    // --expert-streams 2, not with grouped GEMM (gpu_experts).
    const bool overlap = side_ != nullptr && !grouped;
    try {
        gpu_experts(l, groups, early_of, grouped, overlap, st, staging_wait);
    } catch (...) {
        if (cpu.job.valid()) cpu.job.wait();
        // A gate_up whose down was not enqueued is not ordered before stream_'s later work.
        if (overlap) cuda::drv::stream_synchronize(side_);
        throw;
    }
    st.staging_ns += staging_wait;
    st.launch_ns += ns_since(t0) - staging_wait;
    if (cpu.job.valid()) {
        const auto w0 = Clock::now();
        st.cpu_ns += cpu.job.get();
        st.cpu_wait_ns += ns_since(w0);
    }
    const std::size_t xs_off =
        static_cast<std::size_t>(b0) * static_cast<std::size_t>(shape_.hidden);
    cuda::add_moe_rows(residual_ + xs_off, expert_sum_ + xs_off, shape_.hidden, rows, cpu.start_dev,
                       cpu.start_dev != nullptr ? cpu_rows_.device<float>() : nullptr, stream_);
    NEURAL_CUDA(cuda::drv::get_last_error());
}

// The routing (sel, gate) of rows b0 .. b0 + rows - 1 to the host.
void PromptPipeline::route_rows_to_host(int b0, int rows, Stats& st) {
    const std::size_t Ks = static_cast<std::size_t>(shape_.top_k);
    int* sel_host = route_host_.host<int>();
    float* gate_host = reinterpret_cast<float*>(sel_host + static_cast<std::size_t>(context_) * Ks);
    const auto t0 = Clock::now();
    NEURAL_CUDA(cuda::drv::memcpy_async(sel_host + b0 * Ks, selected_ + b0 * Ks, rows * Ks * 4,
                                        cuda::drv::kDeviceToHost, stream_));
    NEURAL_CUDA(cuda::drv::memcpy_async(gate_host + b0 * Ks, gates_ + b0 * Ks, rows * Ks * 4,
                                        cuda::drv::kDeviceToHost, stream_));
    NEURAL_CUDA(cuda::drv::stream_synchronize(stream_));
    st.route_ns += ns_since(t0);
}

// Groups: entries t * K + k (t relative to the prompt), token order within an expert, uploaded to
// entries_; the residency and the observer see each row's routing.
PromptPipeline::ExpertGroups PromptPipeline::group_by_expert(int l, int b0, int rows,
                                                             std::int64_t start,
                                                             std::int64_t observe_from,
                                                             RouterObserver* observer) {
    const std::size_t Ks = static_cast<std::size_t>(shape_.top_k);
    const int* sel_host = route_host_.host<int>();
    const float* gate_host =
        reinterpret_cast<const float*>(sel_host + static_cast<std::size_t>(context_) * Ks);
    ExpertGroups g;
    std::vector<int>& count = g.count;
    count.assign(static_cast<std::size_t>(shape_.experts), 0);
    for (int t = b0; t < b0 + rows; ++t) {
        const int* sel = sel_host + static_cast<std::size_t>(t) * Ks;
        for (int k = 0; k < shape_.top_k; ++k) {
            const int e = sel[k];
            if (e < 0 || e >= shape_.experts)
                fail("prefill: router chose expert {} of {}", e, shape_.experts);
            ++count[static_cast<std::size_t>(e)];
        }
        peers_.residency->observe(l, std::span<const int>(sel, Ks), true);
        if (observer != nullptr && start + t >= observe_from) {
            observer->on_route(
                l, start + t, std::span<const int>(sel, Ks),
                std::span<const float>(gate_host + static_cast<std::size_t>(t) * Ks, Ks));
        }
    }
    std::vector<int>& offset = g.offset;
    offset.assign(static_cast<std::size_t>(shape_.experts) + 1, 0);
    for (int e = 0; e < shape_.experts; ++e)
        offset[static_cast<std::size_t>(e) + 1] =
            offset[static_cast<std::size_t>(e)] + count[static_cast<std::size_t>(e)];
    int* entries = entries_host_.host<int>();
    {
        std::vector<int> fill(offset.begin(), offset.end() - 1);
        for (int t = b0; t < b0 + rows; ++t) {
            for (int k = 0; k < shape_.top_k; ++k) {
                const int e =
                    sel_host[static_cast<std::size_t>(t) * Ks + static_cast<std::size_t>(k)];
                entries[fill[static_cast<std::size_t>(e)]++] = t * shape_.top_k + k;
            }
        }
    }
    NEURAL_CUDA(cuda::drv::memcpy_async(entries_, entries,
                                        static_cast<std::size_t>(offset.back()) * 4,
                                        cuda::drv::kHostToDevice, stream_));
    return g;
}

// Where each expert runs: its VRAM slot, the CPU (at most --prefill-cpu-tokens tokens), else
// staged; the staged ones that were not staged early go to the ring now.
void PromptPipeline::place_experts(int l, const std::vector<int>& early_of, ExpertGroups& g) {
    g.where.assign(static_cast<std::size_t>(shape_.experts), Place::none);
    for (int e = 0; e < shape_.experts; ++e) {
        const int cnt = g.count[static_cast<std::size_t>(e)];
        if (cnt == 0) continue;
        Place& where = g.where[static_cast<std::size_t>(e)];
        if (peers_.residency->slot_of(l, e) >= 0) {
            where = Place::slot;
        } else if (cnt <= opt_.prefill_cpu_tokens) {
            where = Place::cpu;
            g.cpu_experts.push_back(e);
        } else {
            where = Place::staged;
            if (early_of.empty() || early_of[static_cast<std::size_t>(e)] < 0)
                g.staged.emplace_back(l, e);
        }
        if (!early_of.empty() && early_of[static_cast<std::size_t>(e)] >= 0 &&
            where != Place::staged) {
            fail("prefill: expert {} of layer {} was staged early but is not staged", e, l);
        }
    }
    // A pinned store's records need no producer (gpu_experts copies them from the mapping).
    if (!g.staged.empty() && peers_.pinned_store == nullptr) ring_->start(g.staged);
}

// The CPU's experts on a worker thread: one output row per (token, choice), grouped by token
// (CSR in cpu_start_) so the add kernel sums a token's rows in a fixed order. The job reads
// `g` until it is done: expert_rows waits for it before `g` goes.
PromptPipeline::CpuExperts PromptPipeline::start_cpu_experts(int l, int b0, int rows,
                                                             const ExpertGroups& g, Stats& st) {
    CpuExperts cpu;
    if (g.cpu_experts.empty()) return cpu;
    const std::size_t Hs = static_cast<std::size_t>(shape_.hidden),
                      Ks = static_cast<std::size_t>(shape_.top_k);
    const int* sel_host = route_host_.host<int>();
    const float* gate_host =
        reinterpret_cast<const float*>(sel_host + static_cast<std::size_t>(context_) * Ks);
    const int* entries = entries_host_.host<int>();
    NEURAL_CUDA(cuda::drv::memcpy_async(h_host_.host<float>() + static_cast<std::size_t>(b0) * Hs,
                                        expert_input_ + static_cast<std::size_t>(b0) * Hs,
                                        static_cast<std::size_t>(rows) * Hs * 4,
                                        cuda::drv::kDeviceToHost, stream_));
    NEURAL_CUDA(cuda::drv::event_record(h_ready_, stream_));
    int* cstart = cpu_start_.host<int>();
    std::vector<int> row_of_entry(static_cast<std::size_t>(rows) * Ks, -1);
    int next = 0;
    for (int t = b0; t < b0 + rows; ++t) {
        cstart[t - b0] = next;
        for (int k = 0; k < shape_.top_k; ++k) {
            const int e = sel_host[static_cast<std::size_t>(t) * Ks + static_cast<std::size_t>(k)];
            if (g.where[static_cast<std::size_t>(e)] == Place::cpu)
                row_of_entry[static_cast<std::size_t>(t - b0) * Ks + static_cast<std::size_t>(k)] =
                    next++;
        }
    }
    cstart[rows] = next;
    cpu.start_dev = cpu_start_.device<int>();
    cpu.job = std::async(
        std::launch::async, [this, l, b0, &cpu_experts = g.cpu_experts, &offset = g.offset, entries,
                             gate_host, row_of_entry = std::move(row_of_entry)]() {
            const auto c0 = Clock::now();
            // Records read for the first time are checked on the team while the GPU works.
            if (peers_.store != nullptr)
                cpu::verify_records(*peers_.store, l, cpu_experts, *peers_.team);
            NEURAL_CUDA(cuda::drv::event_synchronize(h_ready_));
            const std::size_t H = static_cast<std::size_t>(shape_.hidden);
            const float* hb = h_host_.host<float>();
            float* out_rows = cpu_rows_.host<float>();
            for (const int e : cpu_experts) {
                const int o0 = offset[static_cast<std::size_t>(e)],
                          o1 = offset[static_cast<std::size_t>(e) + 1];
                std::vector<const float*> xp;
                std::vector<float*> outp;
                std::vector<float> w;
                for (int j = o0; j < o1; ++j) {
                    const int entry = entries[j], t = entry / shape_.top_k;
                    const float* xr = hb + static_cast<std::size_t>(t) * H;
                    float* orow =
                        out_rows +
                        static_cast<std::size_t>(
                            row_of_entry[static_cast<std::size_t>(entry - b0 * shape_.top_k)]) *
                            H;
                    std::memset(orow, 0, H * 4);
                    xp.push_back(xr);
                    outp.push_back(orow);
                    w.push_back(gate_host[entry]);
                }
                cpu::ExpertInput in = peers_.records.cpu_input(l, e, 0);
                peers_.kernel->multi(*peers_.team, in, xp, w, outp);
            }
            return ns_since(c0);
        });
    st.cpu_groups += g.cpu_experts.size();
    return cpu;
}

// The GPU's experts, in expert index order: a resident one from its slot, a staged one copied
// into the next scratch slot (from the pinned store's mapping, the early ring or the ring) on
// the copy stream. Adds the time spent waiting for producers to `staging_wait`.
void PromptPipeline::gpu_experts(int l, const ExpertGroups& g, const std::vector<int>& early_of,
                                 bool grouped, bool overlap, Stats& st,
                                 std::uint64_t& staging_wait) {
    const LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
    const cuda::ExpertShape& shape = shapes_[static_cast<std::size_t>(l)];
    std::size_t next_staged = 0, next_scratch = 0;
    // Grouped GEMM: resident experts' jobs (an expert's rows, at most a block) wait here until
    // a group is full (kMaxGroupedExperts jobs or a block of rows) or a staged expert comes next
    // (it runs alone, as soon as its copy lands: grouping staged experts made the GPU wait for
    // several copies, docs/BENCHMARKS.md).
    std::vector<cuda::ExpertJob> group;
    int group_rows = 0;
    const auto flush = [&] {
        if (group.empty()) return;
        cuda::expert_gemm_grouped(group.data(), static_cast<int>(group.size()), shape, entries_,
                                  expert_input_, gates_, ld.gate_up_bias, ld.down_bias,
                                  activations_, down_rows_, expert_sum_, stream_);
        ++st.grouped;
        group.clear();
        group_rows = 0;
    };
    // overlap (--expert-streams 2, not with grouped GEMM, whose down rows use the QKV rows too):
    // each expert's gate_up runs on side_ into act buffer n % 2 while the previous expert's
    // down runs on stream_, so one launch's tail wave and the downs' partial waves (half as many
    // blocks as a gate_up) leave no SMs idle. The downs stay on stream_ in expert order, each
    // after its own gate_up: acc is the same bits as with one stream (tested).
    CUstream gate_up_stream = overlap ? side_ : stream_;
    int launches = 0;
    if (overlap) {
        // This block's h, entries and routing (and the QKV rows' last reader) come first.
        NEURAL_CUDA(cuda::drv::event_record(experts_start_, stream_));
        NEURAL_CUDA(cuda::drv::stream_wait_event(side_, experts_start_, 0));
    }
    for (int e = 0; e < shape_.experts; ++e) {
        const Place w = g.where[static_cast<std::size_t>(e)];
        if (w != Place::slot && w != Place::staged) continue;
        // A cancel waits for the CPU's experts and the side stream (expert_rows).
        throw_if_cancelled(cancel_);
        const std::uint8_t* record;
        int scratch = -1;
        if (w == Place::slot) {
            record = slots_.base +
                     static_cast<std::uint64_t>(peers_.residency->slot_of(l, e)) * slots_.stride;
            ++st.resident;
        } else {
            // The group's experts come before this one: launched before the GPU waits for
            // this one's copy (and before the host waits for its producer).
            flush();
            // A pinned store's record is copied straight from the mapping (registered
            // with CUDA); else from the early ring (staged since the first block's
            // routing) or the ring.
            const void* src;
            StagingRing* from = nullptr;
            std::size_t j = 0;
            if (peers_.pinned_store != nullptr) {
                src = peers_.records.raw_record(l, e);
            } else {
                const int ej = early_of.empty() ? -1 : early_of[static_cast<std::size_t>(e)];
                from = ej >= 0 ? early_.get() : ring_.get();
                j = ej >= 0 ? static_cast<std::size_t>(ej) : next_staged++;
                if (ej >= 0) ++st.early;
                const auto w0 = Clock::now();
                src = from->wait(j).ptr;
                staging_wait += ns_since(w0);
            }
            scratch = static_cast<int>(next_scratch++ % scratch_landed_.size());
            std::uint8_t* slot = scratch_ + static_cast<std::uint64_t>(scratch) * slots_.stride;
            // The scratch slot's previous expert must be done before it is overwritten.
            NEURAL_CUDA(cuda::drv::stream_wait_event(
                copy_stream_, scratch_free_[static_cast<std::size_t>(scratch)], 0));
            NEURAL_CUDA(cuda::drv::memcpy_async(slot, src, slots_.record_bytes,
                                                cuda::drv::kHostToDevice, copy_stream_));
            if (from != nullptr) from->issued(j, copy_stream_);
            NEURAL_CUDA(cuda::drv::event_record(scratch_landed_[static_cast<std::size_t>(scratch)],
                                                copy_stream_));
            // The gate_up waits for the copy; the down waits for the gate_up.
            NEURAL_CUDA(cuda::drv::stream_wait_event(
                gate_up_stream, scratch_landed_[static_cast<std::size_t>(scratch)], 0));
            record = slot;
            ++st.staged;
        }
        const int o0 = g.offset[static_cast<std::size_t>(e)];
        const int cnt = g.count[static_cast<std::size_t>(e)];
        for (int m0 = 0; m0 < cnt; m0 += block_) {
            const int rows_m = std::min(block_, cnt - m0);
            if (overlap) {
                const int b = launches++ % 2;
                float* act = b == 0 ? activations_ : activations2_;
                // act buffer b is free once the down of two launches ago has read it.
                NEURAL_CUDA(cuda::drv::stream_wait_event(side_, act_free_[b], 0));
                cuda::expert_gemm_gate_up(record, e, shape, entries_ + o0 + m0, rows_m,
                                          expert_input_, ld.gate_up_bias, act, side_);
                NEURAL_CUDA(cuda::drv::event_record(gate_up_done_[b], side_));
                NEURAL_CUDA(cuda::drv::stream_wait_event(stream_, gate_up_done_[b], 0));
                cuda::expert_gemm_down(record, e, shape, entries_ + o0 + m0, rows_m, act, gates_,
                                       ld.down_bias, expert_sum_, stream_);
                NEURAL_CUDA(cuda::drv::event_record(act_free_[b], stream_));
                continue;
            }
            if (!grouped || w == Place::staged) {
                cuda::expert_gemm(record, e, shape, entries_ + o0 + m0, rows_m, expert_input_,
                                  gates_, ld.gate_up_bias, ld.down_bias, activations_, expert_sum_,
                                  stream_);
                continue;
            }
            if (static_cast<int>(group.size()) == cuda::kMaxGroupedExperts ||
                group_rows + rows_m > block_)
                flush();
            group.push_back(cuda::ExpertJob{record, e, o0 + m0, rows_m, group_rows});
            group_rows += rows_m;
        }
        if (scratch >= 0)
            NEURAL_CUDA(
                cuda::drv::event_record(scratch_free_[static_cast<std::size_t>(scratch)], stream_));
    }
    flush();
    NEURAL_CUDA(cuda::drv::get_last_error());
}

}  // namespace neural::hybrid
