// Setup of the hybrid backend: the device and the VRAM plan's allocations (cuda/hybrid/vram_plan.h:
// dense core, K/V cache, decode and prefill buffers, then the expert slot pool from what the budget
// leaves), the CPU side, the initial slot placement, the staging rings, the graphs; and the
// release of all of it.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "cuda/driver/gpu.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend/backend.h"
#include "cpu/kernels/expert_kernel.h"
#include "cpu/rope.h"
#include "cpu/team/worker_team.h"
#include "cuda/attention.h"
#include "cuda/cuda_check.h"
#include "cuda/device.h"
#include "cuda/hybrid/hybrid_backend.h"
#include "cuda/hybrid/vram_plan.h"
#include "cuda/router.h"
#include "model/config.h"
#include "model/weights.h"
#include "neural/error.h"
#include "store/ranking.h"
#include "store/store.h"

namespace neural::hybrid {

HybridBackend::HybridBackend(const GpuBackendInputs& in, const GpuOptions& opt)
    : in_(in), opt_(opt) {
    try {
        init();
    } catch (...) {
        release();
        throw;
    }
}

HybridBackend::~HybridBackend() { release(); }

std::string HybridBackend::experts() const {
    return fmt::format("{} kernel, {} team, {} threads", cpu::kernel_isa_name(kernel_->isa()),
                       team_->name(), team_->size());
}

// Uploads a bf16 view (rows * cols values); a missing view (no bias) becomes zeros.
void HybridBackend::upload(std::uint16_t* dst, const Bf16View& v, std::size_t values) {
    if (v.data == nullptr) {
        NEURAL_CUDA(cuda::drv::memset(dst, 0, values * 2));
        return;
    }
    NEURAL_CUDA(cuda::drv::memcpy(dst, v.data, values * 2, cuda::drv::kHostToDevice));
}

// The VRAM plan (cuda/hybrid/vram_plan.h) sizes every allocation and the context; the steps below
// allocate its rows by name: the dense core, the K/V cache, the decode and prefill buffers, then
// the slot pool from what the budget leaves. Every row is allocated exactly as planned.
void HybridBackend::init() {
    const ModelConfig& c = *in_.config;
    std::string why;
    const auto devices = cuda::list_devices(&why);
    if (devices.empty()) fail("backend \"cuda\": {}", why);
    if (opt_.device < 0 || opt_.device >= static_cast<int>(devices.size())) {
        fail("--device {} does not exist ({} CUDA device(s))", opt_.device, devices.size());
    }
    const cuda::DeviceInfo& dev = devices[static_cast<std::size_t>(opt_.device)];
    NEURAL_CUDA(cuda::drv::set_device(opt_.device));
    const std::string err = cuda::self_test(opt_.device);
    if (!err.empty()) fail("backend \"cuda\": device self-test failed: {}", err);
    if (opt_.stream_misses < -1 || opt_.stream_misses > 1)
        fail("--stream-misses must be auto, 0 or 1");
    if (!(opt_.stream_share <= 1.0)) fail("--stream-share must be auto or a fraction in [0, 1]");
    probe_copies();
    const VramBudget budget = vram_budget(opt_, {dev.name, dev.free_bytes, dev.total_bytes});
    shape_.hidden = c.hidden_size;
    shape_.intermediate = c.intermediate_size;
    shape_.experts = c.num_experts;
    shape_.top_k = c.experts_per_token;
    shape_.layers = c.num_layers;
    shape_.q_heads = c.num_heads;
    shape_.kv_heads = c.num_kv_heads;
    shape_.head_dim = c.head_dim;
    shape_.q_width = c.q_dim();
    shape_.kv_width = c.kv_dim();
    shape_.vocab = c.vocab_size;
    if (shape_.top_k > cuda::kRouterMaxK)
        fail("backend \"cuda\": experts_per_token {} > {}", shape_.top_k, cuda::kRouterMaxK);
    if (shape_.head_dim > cuda::kAttentionMaxHeadDim || shape_.head_dim % 2 != 0)
        fail("backend \"cuda\": head_dim {} unsupported", shape_.head_dim);
    if (shape_.hidden % 32 != 0 || shape_.intermediate % 32 != 0 || shape_.q_width % 8 != 0)
        fail("backend \"cuda\": hidden/intermediate sizes must be multiples of 32");
    if (static_cast<std::size_t>(shape_.top_k) * (shape_.intermediate / 32 * 33) * 4 > 48 * 1024 ||
        static_cast<std::size_t>(shape_.hidden) * 4 > 48 * 1024) {
        fail("backend \"cuda\": hidden {} / intermediate {} exceed the kernels' shared memory",
             shape_.hidden, shape_.intermediate);
    }
    if (shape_.experts > 1024)
        fail("backend \"cuda\": {} experts per layer is more than 1024", shape_.experts);
    vram_.plan = plan_vram(c, opt_, budget.bytes);
    vram_.plan.require_fits();
    context_ = vram_.plan.context;
    // auto: 16,384 positions where the budget keeps enough expert slots beside them (or the
    // pool that was asked for), else the largest that does (cuda/hybrid/vram_plan.h).
    if (!vram_.plan.context_line.empty()) spdlog::info("{}", vram_.plan.context_line);

    NEURAL_CUDA(cuda::drv::stream_create(&stream_, cuda::drv::kStreamNonBlocking));
    NEURAL_CUDA(cuda::drv::stream_create(&copy_stream_, cuda::drv::kStreamNonBlocking));

    init_dense_core();
    init_kv_cache();
    init_decode_step();
    init_prompt_pipeline();
    init_slot_pool();
    check_allocations();
    init_cpu_side();
    // Before anything below reads the store or --release-resident gives its pages back.
    pin_store();
    start_streamed_misses();
    init_record_buffers();
    place_static_experts();
    attach_prompt_pipeline();
    decode_->attach(DecodePeers{residency_.get(), admissions_.get(), kernel_.get(), team_.get(),
                                in_.store, raw_store_, in_.counters, in_.moe, records()});
    decode_->capture_graphs();
    description_ = description(dev.name);
}

void* HybridBackend::allocate_row(const char* name) {
    const VramRow* row = vram_.plan.find(name);
    auto made = std::find_if(vram_.made.begin(), vram_.made.end(),
                             [&](const DeviceAllocation& a) { return a.name == name; });
    const std::uint64_t count = made == vram_.made.end() ? 0 : made->count;
    if (row == nullptr || !row->allocated() || count >= row->count) {
        fail("the CUDA backend allocates \"{}\" beyond its VRAM plan ({} planned)", name,
             row == nullptr ? 0 : row->count);
    }
    void* p = nullptr;
    NEURAL_CUDA(cuda::drv::malloc(&p, row->each));
    vram_.allocations.push_back(p);
    if (made == vram_.made.end()) {
        vram_.made.push_back({row->name, 1, row->each});
    } else {
        ++made->count;
        made->bytes += row->each;
    }
    return p;
}

// Every allocated row of the plan was allocated as often as planned (allocate_row refuses more).
void HybridBackend::check_allocations() const {
    for (const VramRow& r : vram_.plan.rows) {
        if (!r.allocated()) continue;
        const auto made = std::find_if(vram_.made.begin(), vram_.made.end(),
                                       [&](const DeviceAllocation& a) { return a.name == r.name; });
        const std::uint64_t count = made == vram_.made.end() ? 0 : made->count;
        if (count != r.count) {
            fail("the CUDA backend allocated \"{}\" {} times, its VRAM plan {} times", r.name,
                 count, r.count);
        }
    }
}

// Dense core (bf16, straight from the checkpoint). The embedding stays in RAM: a token needs one
// row, which the host widens into mapped memory.
void HybridBackend::init_dense_core() {
    const ModelWeights& w = *in_.weights;
    const auto Hs = static_cast<std::size_t>(shape_.hidden),
               Is = static_cast<std::size_t>(shape_.intermediate),
               Es = static_cast<std::size_t>(shape_.experts),
               Qs = static_cast<std::size_t>(shape_.q_width),
               KVs = static_cast<std::size_t>(shape_.kv_width);
    layers_.resize(static_cast<std::size_t>(shape_.layers));
    for (int l = 0; l < shape_.layers; ++l) {
        const LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
        LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        ld.input_norm = dalloc<std::uint16_t>("layer norms");
        upload(ld.input_norm, lw.input_norm, Hs);
        ld.post_norm = dalloc<std::uint16_t>("layer norms");
        upload(ld.post_norm, lw.post_norm, Hs);
        ld.qkv_w = dalloc<std::uint16_t>("QKV weights");
        upload(ld.qkv_w, lw.q_w, Qs * Hs);
        upload(ld.qkv_w + Qs * Hs, lw.k_w, KVs * Hs);
        upload(ld.qkv_w + (Qs + KVs) * Hs, lw.v_w, KVs * Hs);
        ld.qkv_b = dalloc<std::uint16_t>("QKV bias");
        upload(ld.qkv_b, lw.q_b, Qs);
        upload(ld.qkv_b + Qs, lw.k_b, KVs);
        upload(ld.qkv_b + Qs + KVs, lw.v_b, KVs);
        ld.o_w = dalloc<std::uint16_t>("output projection");
        upload(ld.o_w, lw.o_w, Hs * Qs);
        ld.o_b = dalloc<std::uint16_t>("output bias");
        upload(ld.o_b, lw.o_b, Hs);
        ld.sinks = dalloc<std::uint16_t>("sinks");
        upload(ld.sinks, lw.sinks, static_cast<std::size_t>(shape_.q_heads));
        ld.router_w = dalloc<std::uint16_t>("router");
        upload(ld.router_w, lw.router_w, Es * Hs);
        ld.router_b = dalloc<std::uint16_t>("router bias");
        upload(ld.router_b, lw.router_b, Es);
        ld.gate_up_bias = dalloc<std::uint16_t>("expert gate_up biases");
        upload(ld.gate_up_bias, lw.gate_up.bias, Es * 2 * Is);
        ld.down_bias = dalloc<std::uint16_t>("expert down biases");
        upload(ld.down_bias, lw.down.bias, Es * Hs);
        ld.sel = dalloc<int>("router outputs");
        ld.slot = dalloc<int>("router outputs");
        ld.gate = dalloc<float>("router outputs");
    }
    final_norm_ = dalloc<std::uint16_t>("final norm");
    upload(final_norm_, w.final_norm, Hs);
    lm_head_ = dalloc<std::uint16_t>("lm_head");
    upload(lm_head_, w.lm_head, static_cast<std::size_t>(shape_.vocab) * Hs);
}

// RoPE's frequencies, the K/V cache and the host-side K/V checkpoints.
void HybridBackend::init_kv_cache() {
    const ModelConfig& c = *in_.config;
    const auto KVs = static_cast<std::size_t>(shape_.kv_width);
    const cpu::Rope rope(c);
    inv_freq_ = dalloc<float>("RoPE frequencies");
    NEURAL_CUDA(cuda::drv::memcpy(inv_freq_, rope.inv_freq().data(), rope.inv_freq().size() * 4,
                                  cuda::drv::kHostToDevice));
    concentration_ = rope.concentration();

    // K/V: full layers keep the whole context; with --kv-ring, sliding layers keep a ring of
    // their last positions (position p in row p % ring). Zeroed: a prefill tile may read a
    // masked row of the ring before anything was written there.
    // K/V checkpoints of a ring keep the rings' last positions (ring checkpoints, switch_sequence).
    kv_ring_ = vram_.plan.kv_ring;
    for (int l = 0; l < shape_.layers; ++l) {
        LayerDevice& ld = layers_[static_cast<std::size_t>(l)];
        ld.ring = c.layer_is_sliding[static_cast<std::size_t>(l)] ? kv_ring_ : 0;
        const std::size_t rows = static_cast<std::size_t>(ld.ring > 0 ? ld.ring : context_);
        const char* row = c.layer_is_sliding[static_cast<std::size_t>(l)]
                              ? "K/V cache (sliding layers)"
                              : "K/V cache";
        ld.k_cache = dalloc<float>(row);
        ld.v_cache = dalloc<float>(row);
        NEURAL_CUDA(cuda::drv::memset(ld.k_cache, 0, rows * KVs * 4));
        NEURAL_CUDA(cuda::drv::memset(ld.v_cache, 0, rows * KVs * 4));
    }
    if (opt_.kv_checkpoint_gib > 0) {
        std::uint64_t ring_layers = 0;
        for (int l = 0; l < shape_.layers; ++l)
            ring_layers += layers_[static_cast<std::size_t>(l)].ring > 0 ? 1 : 0;
        const auto per_layer = 2 * static_cast<std::uint64_t>(shape_.kv_width);
        checkpoints_ = std::make_unique<KvCheckpoints>(
            static_cast<std::uint64_t>(opt_.kv_checkpoint_gib * kGiB),
            (static_cast<std::uint64_t>(shape_.layers) - ring_layers) * per_layer,
            ring_layers * per_layer, ring_layers > 0 ? c.sliding_window : 0);
    }
}

// The decode step (decode_step.h) with its device buffers (activations, logits, position) and
// host-mapped exchange buffers, then the slot table.
void HybridBackend::init_decode_step() {
    const DecodeDevice device{
        *in_.config, opt_,     shape_,  layers_, inv_freq_,      concentration_,
        final_norm_, lm_head_, stream_, slots_,  expert_shape(), vram_.plan.attention_splits};
    decode_ =
        std::make_unique<DecodeStep>(device, [this](const char* row) { return allocate_row(row); });
    slots_.table = dalloc<int>("slot table");
}

// --stream-misses (streamed_misses.cpp): decided from the probes once the store is pinned.
void HybridBackend::start_streamed_misses() {
    StreamedMissInputs in;
    in.frozen = residency_->frozen();
    in.ram_gb_s = probes_.ram_gb_s;
    in.pinned_gb_s = probes_.pinned_gb_s;
    in.pinned_store = pinned_store_.mapping;
    in.scratch = prompt_ ? prompt_->scratch() : nullptr;
    decode_->start_streamed_misses(in);
}

void HybridBackend::init_slot_pool() {
    // The streamed misses' buffer where the plan has it (it is used only where the load-time
    // choice streams, streamed_misses.cpp), then the expert slot pool: what the budget leaves
    // (minus a reserve for graphs and the allocator), or exactly what was asked.
    decode_->allocate_streamed_misses(vram_.plan,
                                      [this](const char* row) { return allocate_row(row); });
    slots_.record_bytes = cpu::ExpertRecordView::raw_bytes(shape_.hidden, shape_.intermediate);
    slots_.stride = vram_.plan.slot_bytes;
    const std::int64_t slots = vram_.plan.pool_slots;
    if (slots > 0) slots_.base = dalloc<std::uint8_t>("expert slot pool");
    ResidencyOptions ro;
    ro.static_fraction = opt_.static_fraction;
    ro.refresh_every = opt_.refresh_every;
    ro.refresh_m = opt_.refresh_m;
    ro.prefill_weight = opt_.prefill_weight;
    residency_ =
        std::make_unique<Residency>(shape_.layers, shape_.experts, static_cast<int>(slots), ro);
}

// The CPU side: the fused kernel on a worker team for the misses.
void HybridBackend::init_cpu_side() {
    const ModelConfig& c = *in_.config;
    cpu::KernelIsa isa = cpu::select_kernel_isa();
    if (in_.kernel == "scalar")
        isa = cpu::KernelIsa::scalar;
    else if (in_.kernel == "avx2")
        isa = cpu::KernelIsa::avx2;
    else if (in_.kernel == "avx512")
        isa = cpu::KernelIsa::avx512;
    else if (in_.kernel != "auto")
        fail("unknown kernel \"{}\"", in_.kernel);
    if (!cpu::kernel_isa_available(isa)) {
        fail("kernel \"{}\" cannot run on this CPU or build", in_.kernel);
    }
    kernel_ =
        std::make_unique<cpu::ExpertKernel>(isa, cpu::SwigluParams{c.swiglu_limit, c.swiglu_alpha});
    cpu::TeamOptions team;
    team.persistent = in_.kernel_persistent;
    team.library = in_.kdll;
    team.threads = probe_threads();
    std::string fallback;
    team_ = cpu::make_worker_team(team, &fallback);
    if (!fallback.empty()) spdlog::warn("persistent CPU team unavailable: {}", fallback);
    raw_store_ = in_.store != nullptr && in_.store->kind() == store::StoreKind::kRaw;
    if (in_.store == nullptr) {
        spdlog::warn(
            "backend cuda without an expert store: missed experts are assembled from the "
            "checkpoint tensors on every use; repack into a store for speed");
    }
}

// The slot pool's admissions (their pinned capture buffers and upload events), and per router
// choice one that cpu_input assembles a record into when there is no store.
void HybridBackend::init_record_buffers() {
    Admissions::Records records;
    records.fill = [this](int l, int e, std::uint8_t* dst) { fill_record(l, e, dst); };
    if (raw_store_) records.raw = [this](int l, int e) { return raw_record(l, e); };
    admissions_ = std::make_unique<Admissions>(slots_, *residency_, stream_, copy_stream_,
                                               std::move(records), in_.counters);
    for (int k = 0; k < shape_.top_k; ++k)
        assembled_.emplace_back(static_cast<std::size_t>(slots_.record_bytes));
}

// Initial placement (static slots from the ranking, the adaptive scores' prior from it too),
// uploaded synchronously.
void HybridBackend::place_static_experts() {
    const Ranking ranking = opt_.ranking.empty() ? in_.learned_ranking : load_ranking(opt_.ranking);
    const std::vector<Residency::Admission> placed = residency_->initial(ranking);
    residency_->prior(ranking, shape_.top_k);
    admissions_->place(placed);
    // --release-resident: static slots never leave VRAM, so their records' RAM can go back to
    // the OS (the uploads above were synchronous). A later CPU read would fault them back in.
    // A pinned store gives nothing back (ExpertStore::set_pinned).
    if (in_.store != nullptr) {
        for (int sl = 0; sl < residency_->static_slots(); ++sl) {
            const int owner = residency_->owner(sl);
            if (owner >= 0)
                in_.store->note_resident_in_vram(owner / shape_.experts, owner % shape_.experts);
        }
    }
}

// The prompt pipeline (prompt_pipeline.h) where prompts run on the GPU: its buffers are the VRAM
// plan's prefill rows, allocated before the slot pool takes the rest.
void HybridBackend::init_prompt_pipeline() {
    if (!PromptPipeline::wanted(opt_, shape_)) return;
    std::vector<cuda::ExpertShape> shapes;
    for (int l = 0; l < shape_.layers; ++l)
        shapes.push_back(prefill_expert_shape(in_.weights->layers[static_cast<std::size_t>(l)]));
    const PromptDevice device{*in_.config, opt_,           shape_,  context_,     layers_,
                              inv_freq_,   concentration_, stream_, copy_stream_, slots_};
    prompt_ = std::make_unique<PromptPipeline>(
        device, vram_.plan, [this](const char* row) { return allocate_row(row); },
        std::move(shapes));
}

// The prompt pipeline's peers, once the slot policy, the admissions, the CPU side and the store's
// pinning exist; it starts its staging rings (none for a pinned store).
void HybridBackend::attach_prompt_pipeline() {
    if (!prompt_) return;
    PromptPeers peers;
    peers.residency = residency_.get();
    peers.admissions = admissions_.get();
    peers.kernel = kernel_.get();
    peers.team = team_.get();
    peers.store = in_.store;
    peers.counters = in_.counters;
    peers.pinned_store = pinned_store_.mapping;
    peers.streamed_misses = decode_->streamed_stream();
    peers.records = records();
    prompt_->attach(std::move(peers));
}

std::string HybridBackend::description(const std::string& device_name) const {
    return fmt::format(
        "cuda ({}, VRAM budget {:.2f} GiB: core {:.2f} GiB, K/V {:.2f} GiB for {} positions{}, "
        "{} expert slots = {:.2f} GiB ({} static, {} resident, residency {}); misses: {} kernel, "
        "{} team, {} threads{}{}; prefill {}; {}; K/V checkpoints {})",
        device_name, static_cast<double>(vram_.plan.budget) / kGiB,
        static_cast<double>(vram_.plan.bytes(VramUse::core_weights)) / kGiB,
        static_cast<double>(vram_.plan.bytes(VramUse::kv_cache)) / kGiB, context_,
        kv_ring_ > 0 ? fmt::format(" (sliding layers: a ring of {})", kv_ring_) : std::string(),
        residency_->slots(),
        static_cast<double>(residency_->slots()) * static_cast<double>(slots_.stride) / kGiB,
        residency_->static_slots(), residency_->resident_count(),
        residency_->frozen() ? "frozen"
                             : fmt::format("adaptive every {} tokens", opt_.refresh_every),
        cpu::kernel_isa_name(kernel_->isa()), team_->name(), team_->size(),
        in_.store == nullptr ? ", experts from the checkpoint" : "",
        decode_->streamed_note().empty() ? std::string() : ", " + decode_->streamed_note(),
        prompt_ ? prompt_->description() : std::string("token by token"), pinned_store_.note,
        checkpoints_ ? fmt::format("{:.2f} GiB", opt_.kv_checkpoint_gib) : std::string("off"));
}

void HybridBackend::release() {
    if (stream_ != nullptr) cuda::drv::stream_synchronize(stream_);
    if (copy_stream_ != nullptr) cuda::drv::stream_synchronize(copy_stream_);
    if (prompt_) prompt_->synchronize();
    if (decode_) decode_->synchronize();
    // The store's registration first (no copy from it is in flight any more); the store
    // outlives the backend (Model destroys its backend first).
    if (pinned_store_.mapping != nullptr) {
        cuda::drv::host_unregister(const_cast<void*>(pinned_store_.mapping));
        in_.store->set_pinned(false);
        pinned_store_.mapping = nullptr;
    }
    decode_.reset();  // its graphs, streamed misses' stream and events (buffers freed below)
    prompt_.reset();  // its rings, second stream and events (its buffers are freed below)
    for (void* p : vram_.allocations) cuda::drv::free(p);
    vram_.allocations.clear();
    if (stream_ != nullptr) cuda::drv::stream_destroy(stream_);
    if (copy_stream_ != nullptr) cuda::drv::stream_destroy(copy_stream_);
    stream_ = copy_stream_ = nullptr;
}

}  // namespace neural::hybrid
