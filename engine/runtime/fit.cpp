#include "runtime/fit.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cpu/ram_probe.h"
#include "cpu/kernels/expert_record.h"
#include "cpu/kernels/lm_head_screen.h"
#include "cpu/team/worker_team.h"
#include "platform/cpu_features.h"
#include "platform/system_info.h"
#include "neural/error.h"
#include "backend/backend.h"
#include "runtime/options.h"

namespace neural {

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;
constexpr std::uint64_t kStoreAlign = 4096;           // store records (store/format.h)
constexpr double kRamHeadroomGB = kFitRamHeadroomGB;  // the OS, the desktop, the app itself
constexpr double kCheckpointGiB =
    1.0;  // K/V checkpoints of a GPU plan where RAM has room (FitPlan)

std::uint64_t expert_count(const ModelConfig& c) {
    return static_cast<std::uint64_t>(c.num_layers) * static_cast<std::uint64_t>(c.num_experts);
}

// Store bytes of one record of each kind (records are 4 KiB-aligned in the file).
std::uint64_t store_record_bytes(const ModelConfig& c, bool packed) {
    const std::uint64_t b =
        packed ? cpu::ExpertRecordView::packed_bytes(c.hidden_size, c.intermediate_size)
               : cpu::ExpertRecordView::raw_bytes(c.hidden_size, c.intermediate_size);
    return (b + kStoreAlign - 1) / kStoreAlign * kStoreAlign;
}

}  // namespace

MachineInfo detect_machine() {
    MachineInfo m;
    const SystemMemory mem = system_memory();
    m.ram_total = mem.total_bytes;
    m.ram_available = mem.available_bytes;
    m.cpus = logical_cpus();
    m.avx512 = cpu_features().has_avx512();
    m.avx2 = cpu_features().has_avx2_fma();
    const auto gpus = gpu_devices(&m.gpu_why);
    if (!gpus.empty())
        m.gpu = MachineInfo::Gpu{gpus[0].name, gpus[0].total_bytes, gpus[0].free_bytes};
    return m;
}

void probe_bandwidth(MachineInfo& m) {
    m.ram_read.clear();
    for (const bench::ThreadBandwidth& b :
         bench::read_bandwidth_by_threads(autotune::thread_candidates(m.cpus)))
        m.ram_read.push_back({b.threads, b.gb_per_s});
    if (m.gpu) {
        const CopyBandwidth c = copy_bandwidth(0, std::size_t{32} << 20, 3);
        m.pinned_h2d_gb_s = c.pinned_gb_s;
        m.pageable_h2d_gb_s = c.pageable_gb_s;
    }
}

FitPlan plan_fit(const FitRequest& r, const MachineInfo& m) {
    const ModelConfig& c = r.config;
    FitPlan p;
    const std::uint64_t experts = expert_count(c);
    const autotune::ThreadChoice measured = autotune::choose_threads(m.ram_read);
    if (measured.threads > 0) {
        p.threads = measured.threads;
        p.reasons.push_back(measured.line);
    } else {
        p.threads = std::clamp(m.cpus, 1, 8);
        p.reasons.push_back(fmt::format(
            "threads {}: {} logical CPUs; the expert kernel is memory-bound, more than 8 "
            "threads rarely help a desktop's two memory channels",
            p.threads, m.cpus));
    }
    p.kernel = m.avx512 ? "avx512" : m.avx2 ? "avx2" : "scalar";
    p.reasons.push_back(fmt::format("kernel {}: the widest SIMD this CPU runs", p.kernel));

    // GPU: the budget, then the context, then the slots from what is left.
    std::int64_t context = std::min<std::int64_t>(c.max_position_embeddings, kAutoContext);
    std::string context_line;
    double resident_fraction = 0;
    if (m.gpu) {
        // The budget the engine's default would take (free VRAM minus the one margin rule,
        // cuda/hybrid/vram_plan.h), or the requested cap where that is smaller.
        const VramBudget free_budget =
            vram_budget(GpuOptions{}, {m.gpu->name, m.gpu->free_bytes, m.gpu->total_bytes});
        std::uint64_t budget = free_budget.bytes;
        std::string why = free_budget.line;
        if (r.vram_budget_gib > 0 && r.vram_budget_gib * kGiB < static_cast<double>(budget)) {
            budget = static_cast<std::uint64_t>(r.vram_budget_gib * kGiB);
            why = fmt::format("the requested cap (--vram-budget {:.2f})", r.vram_budget_gib);
        }
        // The engine's own plan for the flags printed below (the budget in hundredths of a GiB,
        // as --vram-budget carries it): the context the backend's auto picks for this budget
        // (context traded for slots first), and the slots that it leaves.
        GpuOptions o;
        o.vram_budget_gib = std::floor(static_cast<double>(budget) / kGiB * 100.0) / 100.0;
        const auto planned = static_cast<std::uint64_t>(o.vram_budget_gib * kGiB);
        const VramPlan plan = plan_vram(c, o, planned);
        const ContextChoice cc = auto_context(c, o, planned);
        context = plan.context;
        context_line = plan.context_line;
        if (plan.pool_slots < 1) {
            p.backend = "cpu";
            p.warnings.push_back(fmt::format(
                "GPU: the dense core, {} K/V positions and one expert slot need {:.2f} GiB, the "
                "budget "
                "is {:.2f} GiB ({}); planning for the CPU backend",
                context,
                static_cast<double>(plan.fixed_bytes() + kVramReserve + plan.slot_bytes) / kGiB,
                budget / kGiB, why));
            context = std::min<std::int64_t>(c.max_position_embeddings, kAutoContext);
        } else {
            p.backend = "cuda";
            p.vram_budget_gib = o.vram_budget_gib;
            p.reasons.push_back(
                fmt::format("backend cuda, VRAM budget {:.2f} GiB: {}", p.vram_budget_gib, why));
            p.reasons.push_back(
                fmt::format("dense core {:.2f} GiB (bf16 attention, router, lm_head; the embedding "
                            "stays in RAM)",
                            plan.bytes(VramUse::core_weights) / kGiB));
            if (context < cc.wanted) {
                p.warnings.push_back(fmt::format(
                    "context reduced from {} to {} positions so that at least {} expert slots fit; "
                    "longer conversations need --context and leave fewer slots",
                    cc.wanted, context, cc.min_slots));
            }
            p.pool_slots = plan.pool_slots;
            p.pool_gib =
                static_cast<double>(p.pool_slots) * static_cast<double>(plan.slot_bytes) / kGiB;
            resident_fraction = static_cast<double>(p.pool_slots) / static_cast<double>(experts);
            const std::uint64_t buffers =
                plan.bytes(VramUse::decode_buffers) + plan.bytes(VramUse::prefill_buffers) +
                plan.bytes(VramUse::scratch_slots) + plan.bytes(VramUse::reserve);
            p.reasons.push_back(fmt::format(
                "{} expert slots = {:.2f} GiB, {:.1f}% of the {} experts: what the budget leaves "
                "after "
                "the core, {:.2f} GiB of K/V and {:.2f} GiB of buffers",
                p.pool_slots, p.pool_gib, 100.0 * resident_fraction, experts,
                plan.bytes(VramUse::kv_cache) / kGiB, buffers / kGiB));
            const std::int64_t rows = plan.prompt_rows;
            if (rows < context) {
                GpuOptions whole_rows = o;  // the same plan with rows for the whole context
                whole_rows.context = context;
                whole_rows.prompt_rows = static_cast<int>(context);
                const std::uint64_t more =
                    plan_vram(c, whole_rows, planned).bytes(VramUse::prefill_buffers) -
                    plan.bytes(VramUse::prefill_buffers);
                p.reasons.push_back(fmt::format(
                    "prompt rows {}: longer prompts run in chunks of {} tokens; rows for the "
                    "whole context would take {:.2f} GiB more, {} expert slots (--prompt-rows)",
                    rows, rows, more / kGiB, more / plan.slot_bytes));
            } else {
                p.reasons.push_back(fmt::format(
                    "prompt rows {}: a prompt of the whole context runs at once; its rows are at "
                    "most {:.0f}% of the experts' bytes (--prompt-rows)",
                    rows, kPromptRowsShare * 100.0));
            }
            p.static_fraction = 0.5;
            p.reasons.push_back(
                "static fraction 0.5: half the slots keep the warm-up's hottest experts, "
                "half follow the conversation");
            p.kernel_persistent = true;
            p.reasons.push_back(
                "persistent CPU team: the misses run 36 short jobs per token, which OpenMP "
                "pays for in wake-ups");
        }
    } else {
        p.backend = "cpu";
        p.reasons.push_back(
            fmt::format("backend cpu: {}", m.gpu_why.empty() ? "no usable GPU" : m.gpu_why));
    }
    p.context = context;
    if (p.backend == "cuda") {
        p.reasons.push_back(context_line);
    }
    if (p.backend == "cpu") {
        // The fast path's many short jobs per token pay for OpenMP's wake-ups unless the workers
        // spin (docs/BENCHMARKS.md "CPU backend: the worker team"); on 2-3 CPUs they would
        // compete with the thread feeding them.
        p.kernel_persistent = p.threads >= options::kPersistentTeamMinCpus;
        if (p.kernel_persistent) {
            p.reasons.push_back(
                "persistent CPU team: the fast path runs hundreds of short jobs per "
                "token, which OpenMP pays for in wake-ups");
        }
    }

    // RAM: the experts the CPU computes must stay in RAM, or every token waits on the disk.
    const double ram_cap = r.ram_budget_gib > 0
                               ? std::min(r.ram_budget_gib * kGiB, static_cast<double>(m.ram_total))
                               : static_cast<double>(m.ram_total);
    const double raw_gb = static_cast<double>(store_record_bytes(c, false) * experts) / kGB;
    const double packed_gb = static_cast<double>(store_record_bytes(c, true) * experts) / kGB;
    // CPU backend: the whole dense core is read from RAM every token, and K/V lives in RAM (sized
    // as the GPU plan sizes them). GPU backend: embedding rows, tokenizer, buffers, and the
    // prefill's pinned buffers.
    GpuOptions at_context;
    at_context.context = context;
    const VramPlan dense = plan_vram(c, at_context, 0);
    double dense_gb =
        p.backend == "cpu"
            ? static_cast<double>(dense.bytes(VramUse::core_weights)) / kGB +
                  static_cast<double>(dense.bytes(VramUse::kv_cache)) / kGB +
                  // the screened lm_head's int8 copy (--lm-head-screen on)
                  static_cast<double>(cpu::LmHeadScreen::bytes_for(c.vocab_size, c.hidden_size)) /
                      kGB
            : 0.5 + static_cast<double>(prefill_pinned_bytes(c, context)) / kGB;
    auto needed = [&](double store_gb) {
        return store_gb * (1.0 - resident_fraction) + dense_gb + kRamHeadroomGB;
    };
    double store_gb = 0;
    if (!r.store_kind.empty()) {
        p.store_format = r.store_kind;
        const double have_gb = r.store_bytes > 0 ? static_cast<double>(r.store_bytes) / kGB
                                                 : (r.store_kind == "raw" ? raw_gb : packed_gb);
        store_gb = have_gb;
        p.ram_needed_gb = needed(have_gb);
        p.reasons.push_back(
            fmt::format("store: the existing {} store ({:.1f} GB)", r.store_kind, have_gb));
    } else if (needed(raw_gb) <= ram_cap / kGB) {
        p.store_format = "raw";
        store_gb = raw_gb;
        p.ram_needed_gb = needed(raw_gb);
        p.reasons.push_back(
            fmt::format("store format raw ({:.1f} GB): its records are the GPU slot format, so "
                        "admitting an expert "
                        "costs no extra pass; it fits in RAM",
                        raw_gb));
    } else {
        p.store_format = "packed";
        store_gb = packed_gb;
        p.ram_needed_gb = needed(packed_gb);
        p.reasons.push_back(
            fmt::format("store format packed ({:.1f} GB, {:.1f} GB less than raw): RAM is tight",
                        packed_gb, raw_gb - packed_gb));
    }
    // --pin-store auto (backend/backend.h): the engine page-locks a raw store of at most half the
    // RAM for the GPU's prompt copies, so the whole store stays in RAM, the experts in VRAM too.
    autotune::PinInputs pin_in;
    pin_in.store_bytes = static_cast<std::uint64_t>(store_gb * kGB);
    pin_in.ram_bytes = m.ram_total;
    pin_in.pinned_gb_s = m.pinned_h2d_gb_s;
    pin_in.pageable_gb_s = m.pageable_h2d_gb_s;
    const autotune::PinChoice pin = autotune::choose_pin(pin_in);
    if (p.backend == "cuda" && p.store_format == "raw" && !pin.pin &&
        pin_store_by_default(pin_in.store_bytes, m.ram_total)) {
        p.reasons.push_back(pin.line + " (--pin-store auto)");
    }
    if (p.backend == "cuda" && p.store_format == "raw" && pin.pin) {
        p.store_pinned = true;
        p.ram_needed_gb += store_gb * resident_fraction;
        // No staging rings: the store's records are copied from the store itself.
        const double rings_gb = static_cast<double>(prefill_pinned_bytes(c, context) -
                                                    prefill_pinned_bytes(c, context, true)) /
                                kGB;
        p.ram_needed_gb -= rings_gb;
        dense_gb -= rings_gb;
        p.reasons.push_back(fmt::format(
            "store pinned (--pin-store auto): the whole {:.1f} GB store stays page-locked in RAM, "
            "so prompts "
            "copy experts to the GPU straight from it (20b 4,096-token prompt 0.47 -> 0.42 s)",
            store_gb));
    }
    // --stream-misses auto (backend/autotune.h): the share the backend will stream, from the same
    // probes at the planned thread count.
    if (p.backend == "cuda") {
        autotune::StreamInputs si;
        si.can_stream = p.store_format == "raw" && p.store_pinned;
        si.why_not = p.store_format != "raw" ? "a packed store (its records are not slot images)"
                                             : "the store is not pinned";
        for (const autotune::RamPoint& pt : m.ram_read) {
            if (pt.threads <= p.threads && pt.gb_s > 0) si.ram_gb_s = pt.gb_s;
        }
        si.pcie_gb_s = m.pinned_h2d_gb_s;
        const autotune::StreamChoice sc = autotune::choose_stream_share(si);
        p.stream_share = sc.share;
        p.reasons.push_back(sc.line + " (--stream-misses auto)");
    }
    p.reasons.push_back(fmt::format(
        "RAM: {:.1f} GB needed (experts the CPU computes, {:.1f} GB of {}, {:.0f} GB for "
        "the system) of {:.1f} GB{}",
        p.ram_needed_gb, dense_gb,
        p.backend == "cpu" ? "dense weights, the lm_head screen and K/V"
                           : "buffers and pinned prompt buffers",
        kRamHeadroomGB, ram_cap / kGB, r.ram_budget_gib > 0 ? " (--ram-budget)" : ""));
    if (p.backend == "cuda" && !r.store_kind.empty() && !p.store_pinned) {
        p.release_resident = true;
        p.reasons.push_back(
            "release resident: the experts that live in VRAM for good give their RAM back "
            "(--release-resident 1; on a 64 GB PC it cost no speed and saved 3.2 GiB of peak "
            "memory)");
    }
    if (p.backend == "cuda") {
        const double checkpoint_gb = kCheckpointGiB * kGiB / kGB;
        if (p.ram_needed_gb + checkpoint_gb <= ram_cap / kGB) {
            p.kv_checkpoints_gib = kCheckpointGiB;
            p.ram_needed_gb += checkpoint_gb;
            p.reasons.push_back(fmt::format(
                "K/V checkpoints {:.0f} GiB of RAM: a conversation switched away from and back to "
                "is not "
                "processed again (about 0.5 GB per 13k-token conversation of the 120b model)",
                kCheckpointGiB));
        } else {
            p.reasons.push_back("no K/V checkpoints: RAM has no room for them beyond the experts");
        }
    }
    if (p.ram_needed_gb > ram_cap / kGB) {
        p.fits = false;
        p.warnings.push_back(
            fmt::format("needs {:.1f} GB more RAM: the experts that stay on the CPU do not all "
                        "fit, so tokens will "
                        "wait on page faults and the disk. Closest workable plans: more VRAM for "
                        "slots, a packed "
                        "store, or a smaller model (gpt-oss-20b)",
                        p.ram_needed_gb - ram_cap / kGB));
    }
    return p;
}

LoadOptions FitPlan::load_options() const {
    const auto hundredths = [](double v) { return std::round(v * 100) / 100; };
    LoadOptions o;
    o.backend = backend;
    o.store = store;
    o.kernel = kernel;  // the fused kernels read the store, else the checkpoint
    o.kernel_persistent = kernel_persistent;
    o.threads = threads;
    o.release_resident = release_resident;
    if (backend == "cuda") {
        o.gpu.vram_budget_gib = hundredths(vram_budget_gib);
        o.gpu.pool_slots = static_cast<int>(pool_slots);
        o.gpu.static_fraction = hundredths(static_fraction);
        o.gpu.context = context;
        o.gpu.kv_checkpoint_gib = hundredths(kv_checkpoints_gib);
    }
    return o;
}

std::vector<std::string> FitPlan::flags() const {
    std::vector<std::string> f = {"--backend", backend};
    const std::vector<std::string> rest = options::to_flags(load_options());
    for (std::size_t i = 0; i + 1 < rest.size(); i += 2) {
        if (rest[i] != "--backend") f.insert(f.end(), {rest[i], rest[i + 1]});
    }
    return f;
}

nlohmann::json FitPlan::to_json() const {
    return {{"fits", fits},
            {"backend", backend},
            {"vram_budget_gib", vram_budget_gib},
            {"pool_slots", pool_slots},
            {"pool_gib", pool_gib},
            {"static_fraction", static_fraction},
            {"context", context},
            {"threads", threads},
            {"kernel", kernel},
            {"kernel_persistent", kernel_persistent},
            {"store_format", store_format},
            {"ram_needed_gb", ram_needed_gb},
            {"store_pinned", store_pinned},
            {"stream_share", stream_share},
            {"release_resident", release_resident},
            {"kv_checkpoints_gib", kv_checkpoints_gib},
            {"flags", flags()},
            {"reasons", reasons},
            {"warnings", warnings}};
}

}  // namespace neural
