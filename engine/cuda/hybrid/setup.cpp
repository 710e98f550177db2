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
    device_.set_model(c);
    VramPlan plan = plan_vram(c, opt_, budget.bytes);
    plan.require_fits();
    // auto: 16,384 positions where the budget keeps enough expert slots beside them (or the
    // pool that was asked for), else the largest that does (cuda/hybrid/vram_plan.h).
    if (!plan.context_line.empty()) spdlog::info("{}", plan.context_line);
    device_.start(std::move(plan));

    device_.upload_dense_core(*in_.weights);
    device_.init_kv_cache(c);
    init_kv_checkpoints();
    init_decode_step();
    init_prompt_pipeline();
    init_slot_pool();
    device_.check_allocations();
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

// --kv-checkpoints: host copies of the K/V of sequences the GPU switched away from
// (kv_checkpoints.h), sized by the layers' K/V (a ring's layers keep their ring's positions).
void HybridBackend::init_kv_checkpoints() {
    const ModelConfig& c = *in_.config;
    if (opt_.kv_checkpoint_gib > 0) {
        std::uint64_t ring_layers = 0;
        for (int l = 0; l < device_.shape().layers; ++l)
            ring_layers += device_.layers()[static_cast<std::size_t>(l)].ring > 0 ? 1 : 0;
        const auto per_layer = 2 * static_cast<std::uint64_t>(device_.shape().kv_width);
        checkpoints_ = std::make_unique<KvCheckpoints>(
            static_cast<std::uint64_t>(opt_.kv_checkpoint_gib * kGiB),
            (static_cast<std::uint64_t>(device_.shape().layers) - ring_layers) * per_layer,
            ring_layers * per_layer, ring_layers > 0 ? c.sliding_window : 0);
    }
}

// The decode step (decode_step.h) with its device buffers (activations, logits, position) and
// host-mapped exchange buffers, then the slot table.
void HybridBackend::init_decode_step() {
    decode_ = std::make_unique<DecodeStep>(*in_.config, opt_, device_, expert_shape());
    device_.slots().table = device_.allocate_as<int>("slot table");
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
    decode_->allocate_streamed_misses(device_);
    device_.slots().record_bytes =
        cpu::ExpertRecordView::raw_bytes(device_.shape().hidden, device_.shape().intermediate);
    device_.slots().stride = device_.plan().slot_bytes;
    const std::int64_t slots = device_.plan().pool_slots;
    if (slots > 0) device_.slots().base = device_.allocate_as<std::uint8_t>("expert slot pool");
    ResidencyOptions ro;
    ro.static_fraction = opt_.static_fraction;
    ro.refresh_every = opt_.refresh_every;
    ro.refresh_m = opt_.refresh_m;
    ro.prefill_weight = opt_.prefill_weight;
    residency_ = std::make_unique<Residency>(device_.shape().layers, device_.shape().experts,
                                             static_cast<int>(slots), ro);
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
    admissions_ =
        std::make_unique<Admissions>(device_.slots(), *residency_, device_.stream(),
                                     device_.copy_stream(), std::move(records), in_.counters);
    for (int k = 0; k < device_.shape().top_k; ++k)
        assembled_.emplace_back(static_cast<std::size_t>(device_.slots().record_bytes));
}

// Initial placement (static slots from the ranking, the adaptive scores' prior from it too),
// uploaded synchronously.
void HybridBackend::place_static_experts() {
    const Ranking ranking = opt_.ranking.empty() ? in_.learned_ranking : load_ranking(opt_.ranking);
    const std::vector<Residency::Admission> placed = residency_->initial(ranking);
    residency_->prior(ranking, device_.shape().top_k);
    admissions_->place(placed);
    // --release-resident: static slots never leave VRAM, so their records' RAM can go back to
    // the OS (the uploads above were synchronous). A later CPU read would fault them back in.
    // A pinned store gives nothing back (ExpertStore::set_pinned).
    if (in_.store != nullptr) {
        for (int sl = 0; sl < residency_->static_slots(); ++sl) {
            const int owner = residency_->owner(sl);
            if (owner >= 0)
                in_.store->note_resident_in_vram(owner / device_.shape().experts,
                                                 owner % device_.shape().experts);
        }
    }
}

// The prompt pipeline (prompt_pipeline.h) where prompts run on the GPU: its buffers are the VRAM
// plan's prefill rows, allocated before the slot pool takes the rest.
void HybridBackend::init_prompt_pipeline() {
    if (!PromptPipeline::wanted(opt_, device_.shape())) return;
    std::vector<cuda::ExpertShape> shapes;
    for (int l = 0; l < device_.shape().layers; ++l)
        shapes.push_back(prefill_expert_shape(in_.weights->layers[static_cast<std::size_t>(l)]));
    prompt_ = std::make_unique<PromptPipeline>(*in_.config, opt_, device_, std::move(shapes));
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
        device_name, static_cast<double>(device_.plan().budget) / kGiB,
        static_cast<double>(device_.plan().bytes(VramUse::core_weights)) / kGiB,
        static_cast<double>(device_.plan().bytes(VramUse::kv_cache)) / kGiB, device_.context(),
        device_.kv_ring() > 0 ? fmt::format(" (sliding layers: a ring of {})", device_.kv_ring())
                              : std::string(),
        residency_->slots(),
        static_cast<double>(residency_->slots()) * static_cast<double>(device_.slots().stride) /
            kGiB,
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
    device_.synchronize();
    if (prompt_) prompt_->synchronize();
    if (decode_) decode_->synchronize();
    // The store's registration first (no copy from it is in flight any more); the store
    // outlives the backend (Model destroys its backend first).
    if (pinned_store_.mapping != nullptr) {
        cuda::drv::host_unregister(const_cast<void*>(pinned_store_.mapping));
        in_.store->set_pinned(false);
        pinned_store_.mapping = nullptr;
    }
    decode_.reset();    // its graphs, streamed misses' stream and events (buffers freed below)
    prompt_.reset();    // its rings, second stream and events (its buffers are freed below)
    device_.release();  // every VRAM allocation, the streams
}

}  // namespace neural::hybrid
