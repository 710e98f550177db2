#include "runtime/options.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/gguf.h"
#include "neural/error.h"
#include "platform/memory.h"
#include "platform/thread_affinity.h"
#include "platform/prefetch.h"

namespace neural::options {

namespace {

constexpr double kGiB = 1073741824.0;

std::int64_t as_int(const Value& v) { return std::get<std::int64_t>(v); }
double as_real(const Value& v) { return std::get<double>(v); }
bool as_bool(const Value& v) { return std::get<bool>(v); }
const std::string& as_text(const Value& v) { return std::get<std::string>(v); }

// Row builders: the getter and setter are one member of LoadOptions (or its gpu).
Setting row(std::string key, Type type, std::string metavar, std::string label, std::string help,
            Applies applies, std::function<Value(const LoadOptions&)> get,
            std::function<void(LoadOptions&, const Value&)> set) {
    Setting s;
    s.flag = "--" + key;
    std::replace(key.begin(), key.end(), '-', '_');
    s.key = std::move(key);
    s.type = type;
    s.metavar = std::move(metavar);
    s.label = std::move(label);
    s.help = std::move(help);
    s.applies = applies;
    s.get = std::move(get);
    s.set = std::move(set);
    return s;
}

Setting ranged(Setting s, double min, double max, std::string unit = {}) {
    s.min = min;
    s.max = max;
    s.unit = std::move(unit);
    return s;
}

Setting with_auto(Setting s, double value) {
    s.auto_value = value;
    return s;
}

Setting with_choices(Setting s, std::vector<std::string> choices) {
    s.choices = std::move(choices);
    return s;
}

Setting with_default(Setting s, std::string text) {
    s.default_text = std::move(text);
    return s;
}

// Members of the two structs as Value getters / setters.
#define NEURAL_INT(member)                                                             \
    [](const LoadOptions& o) -> Value { return static_cast<std::int64_t>(o.member); }, \
        [](LoadOptions& o, const Value& v) {                                           \
            o.member = static_cast<decltype(o.member)>(as_int(v));                     \
        }
#define NEURAL_REAL(member)                                                      \
    [](const LoadOptions& o) -> Value { return static_cast<double>(o.member); }, \
        [](LoadOptions& o, const Value& v) { o.member = as_real(v); }
#define NEURAL_BOOL(member)                                                    \
    [](const LoadOptions& o) -> Value { return static_cast<bool>(o.member); }, \
        [](LoadOptions& o, const Value& v) {                                   \
            o.member = static_cast<decltype(o.member)>(as_bool(v));            \
        }
#define NEURAL_TEXT(member)                                              \
    [](const LoadOptions& o) -> Value { return std::string(o.member); }, \
        [](LoadOptions& o, const Value& v) { o.member = as_text(v); }
#define NEURAL_PATH(member)                                          \
    [](const LoadOptions& o) -> Value { return o.member.string(); }, \
        [](LoadOptions& o, const Value& v) { o.member = as_text(v); }
// GiB on the command line, bytes in LoadOptions.
#define NEURAL_GIB_BYTES(member)                                                        \
    [](const LoadOptions& o) -> Value { return static_cast<double>(o.member) / kGiB; }, \
        [](LoadOptions& o, const Value& v) {                                            \
            o.member = static_cast<std::uint64_t>(std::llround(as_real(v) * kGiB));     \
        }

// Every row's arithmetic class (Arithmetic in options.h): what the setting does to the answers,
// in row order of make_settings. A row missing here is a startup error, so a new setting must
// say what it does to the answers.
void classify(std::vector<Setting>& rows) {
    using C = Arithmetic;
    struct Class {
        const char* key;
        C arithmetic;
        const char* note;
        std::vector<std::string> lossy;
    };
    const std::vector<Class> classes = {
        {"store", C::same_bits, "the checkpoint's MXFP4 bytes, repacked (tested bit for bit)", {}},
        {"kernel",
         C::device_class,
         "fused kernels vs the fp32 reference: fp32 rounding (addition order)",
         {}},
        {"dense",
         C::lossy,
         "bf16 (auto): the checkpoint's bf16 weights; int8-head, int8: re-quantized weights",
         {"int8-head", "int8"}},
        {"lm_head_screen",
         C::same_bits,
         "the exact bf16 logits of every token the sampler can pick (tested bit for bit)",
         {}},
        {"prompt_kernel",
         C::lossy,
         "auto: bf16x2 for the conversation's context, the decode kernels' bits after it; "
         "bf16x2: exact (activations as bf16 hi + lo, as the dense kernels; the same bits on "
         "every CPU); fp32: the decode kernels' bits; bf16: exact (activations rounded to bf16, "
         "as on the GPU); int8, int8-vnni: int8 activations",
         {"int8", "int8-vnni"}},
        {"kernel_persistent", C::same_bits, "another worker team, the same partition", {}},
        {"kdll", C::exact, "where the team library is", {}},
        {"threads", C::same_bits, "each output reduced by one thread in a fixed order", {}},
        {"ws_min", C::exact, "memory residency", {}},
        {"prefetch", C::exact, "when weights are read", {}},
        {"warmup_ram", C::exact, "when experts are read", {}},
        {"warmup_sync", C::exact, "a wait", {}},
        {"lock_ram", C::exact, "memory residency", {}},
        {"release_resident", C::exact, "memory residency", {}},
        {"backend", C::device_class, "GPU kernels vs CPU kernels: fp32 rounding", {}},
        {"vram_budget", C::device_class, "how many experts the GPU computes", {}},
        {"pool", C::device_class, "how many experts the GPU computes", {}},
        {"pool_slots", C::device_class, "how many experts the GPU computes", {}},
        {"static_fraction", C::device_class, "which experts the GPU computes", {}},
        {"ranking", C::device_class, "which experts the GPU computes", {}},
        {"routing_stats", C::device_class, "which experts the GPU computes", {}},
        {"refresh_every", C::device_class, "which experts the GPU computes", {}},
        {"refresh_m", C::device_class, "which experts the GPU computes", {}},
        {"prefill_weight", C::device_class, "which experts the GPU computes", {}},
        {"context", C::exact, "how many positions the GPU holds", {}},
        {"device", C::exact, "which GPU", {}},
        {"prefill_order",
         C::device_class,
         "layer and block: the same bits; token: the decode kernels",
         {}},
        {"prefill_block", C::same_bits, "prompt blocks of any size (tested)", {}},
        {"prompt_rows", C::same_bits, "prompt chunks (tested)", {}},
        {"scratch", C::same_bits, "staging slots (tested)", {}},
        {"staging_threads", C::exact, "copy threads", {}},
        {"prefill_cpu_tokens", C::device_class, "which prompt experts the CPU computes", {}},
        {"prefill_early", C::same_bits, "staging order (tested)", {}},
        {"grouped_gemm", C::same_bits, "launch grouping (tested)", {}},
        {"prefill_fp16", C::lossy, "1: fp16 operands keep 11 bits of each activation", {"1"}},
        {"expert_streams", C::same_bits, "launch overlap (tested)", {}},
        {"pin_store", C::exact, "page-locked memory", {}},
        {"stream_misses", C::device_class, "which missed experts the GPU computes", {}},
        {"stream_share", C::device_class, "which missed experts the GPU computes", {}},
        {"split_misses", C::device_class, "part of an expert on the GPU", {}},
        {"prompt_admit", C::device_class, "which experts the GPU computes", {}},
        {"kv_ring", C::same_bits, "the same keys, kept in a ring (tested)", {}},
        {"kv_checkpoints", C::same_bits, "saved K/V restored, not recomputed", {}},
        {"fused_decode", C::same_bits, "fused vs one kernel per step (tested)", {}},
        {"plain_rope", C::lossy, "1: plain RoPE where the checkpoint gives no YaRN", {"1"}},
    };
    for (Setting& s : rows) {
        const auto it = std::find_if(classes.begin(), classes.end(),
                                     [&](const Class& c) { return s.key == c.key; });
        if (it == classes.end()) {
            throw std::logic_error("settings schema: \"" + s.key + "\" has no arithmetic class");
        }
        s.arithmetic = it->arithmetic;
        s.arithmetic_note = it->note;
        s.lossy_values = it->lossy;
    }
}

std::vector<Setting> make_settings() {
    using T = Type;
    using A = Applies;
    const std::vector<std::string> zero_one = {"0", "1"};
    std::vector<Setting> r;
    // The model and its CPU side.
    r.push_back(row("store", T::path, "FILE", "Expert store",
                    "read the experts from this expert store (`neural repack`)", A::both,
                    NEURAL_PATH(store)));
    r.push_back(with_choices(
        row("kernel", T::choice, "NAME", "CPU kernels",
            "auto: the fastest fused MXFP4 expert and bf16 dense kernels this CPU runs (from the "
            "store, else straight from the checkpoint); scalar, avx2, avx512 pick one; reference "
            "is the plain fp32 forward pass",
            A::both, NEURAL_TEXT(kernel)),
        {"auto", "reference", "scalar", "avx2", "avx512"}));
    r.push_back(with_choices(
        row("dense", T::choice, "auto|bf16|int8-head|int8|reference", "Dense kernels",
            "with a fast kernel on the CPU backend: bf16 runs the attention projections, router "
            "and lm_head on the bf16 dense kernels from the checkpoint's weights; int8-head "
            "quantizes the lm_head to int8 at load and int8 the attention projections too "
            "(LOSSY: both change the model's answers; faster decode, about half the dense bytes "
            "per token with int8); the router stays bf16; auto is bf16; reference runs the fp32 "
            "reference layers",
            A::cpu, NEURAL_TEXT(dense)),
        {"auto", "bf16", "int8-head", "int8", "reference"}));
    r.push_back(with_choices(
        row("lm-head-screen", T::choice, "on|off", "Screened lm_head",
            "with the bf16 dense kernels on the CPU backend: on screens the vocabulary with an "
            "int8 copy of the lm_head (about 0.62 GB more RAM on gpt-oss) and computes the exact "
            "bf16 logits only of the tokens the sampler can still pick (greedy, top-k, min-p: "
            "the same tokens, bit for bit; every logit where a request reads them all); off "
            "runs the whole bf16 lm_head every token",
            A::cpu, NEURAL_TEXT(lm_head_screen)),
        {"on", "off"}));
    r.push_back(with_choices(
        row("prompt-kernel", T::choice, "auto|bf16x2|bf16|fp32|int8|int8-vnni", "Prompt kernel",
            "with a fast kernel on the CPU backend, the experts of a prompt: bf16x2 runs them on "
            "the bf16 expert GEMM (AMX tiles, else AVX-512F, else AVX2, else its scalar "
            "reference, all the same bits) with the activations as bf16 hi + lo (16 significant "
            "bits, as the dense kernels: exact class); bf16 the same with the activations "
            "rounded once to bf16 (as on the GPU: exact class, 2x less GEMM work, farther from "
            "fp32); with either the dense projections of a prompt sum in the AMX tiles' order "
            "(tiles, else AVX-512F, else AVX2, else scalar, all the same bits); fp32 on the "
            "fused fp32 kernels like decode; auto runs a conversation's context (system, tools, "
            "the first user message: everything before the first assistant message) as bf16x2 "
            "and every later position as fp32, decided by position, so the cached replies stay "
            "reusable and a seed gives the same reply with and without the prompt cache (raw "
            "completions run fp32). Where all of a prompt's bits differ from decode's (bf16x2, "
            "bf16, int8 by name), a conversation re-runs the tokens decode computed when they "
            "join the next prompt, for the same reason. int8 quantizes the "
            "activations to int8 and runs int8 GEMMs (LOSSY: changes the answers; AMX tiles "
            "where the CPU has AMX-INT8, else AVX512_VNNI, else their scalar reference, all the "
            "same bits), int8-vnni on AVX512_VNNI even where AMX is present",
            A::cpu, NEURAL_TEXT(prompt_kernel)),
        {"auto", "bf16x2", "bf16", "fp32", "int8", "int8-vnni"}));
    r.push_back(with_default(
        with_choices(row(
                         "kernel-persistent", T::choice, "auto|0|1", "Persistent CPU team",
                         "the fused kernels' worker team: 1 the persistent team library "
                         "(spinning threads), 0 OpenMP",
                         A::both,
                         [](const LoadOptions& o) -> Value {
                             return std::string(!o.kernel_persistent   ? "auto"
                                                : *o.kernel_persistent ? "1"
                                                                       : "0");
                         },
                         [](LoadOptions& o, const Value& v) {
                             const std::string& t = as_text(v);
                             if (t == "auto")
                                 o.kernel_persistent.reset();
                             else
                                 o.kernel_persistent = t == "1";
                         }),
                     {"auto", "0", "1"}),
        "auto: 1 with --backend cuda, and on the CPU backend with 4 or more CPUs"));
    r.push_back(with_default(row("kdll", T::path, "PATH", "Team library",
                                 "the persistent team library", A::both, NEURAL_PATH(kdll)),
                             "beside the executable"));
    r.push_back(with_default(ranged(row("threads", T::integer, "N", "CPU threads",
                                        "CPU worker threads", A::both, NEURAL_INT(threads)),
                                    0, 4096),
                             "0: all cores; kernels min(cores, 8)"));
    r.push_back(ranged(row("ws-min", T::real, "GIB", "Working set minimum",
                           "keep GIB of the process resident: the Windows working-set minimum; on "
                           "Linux the dense weights are locked (mlock) up to GIB",
                           A::both, NEURAL_GIB_BYTES(ws_min_bytes)),
                       0, 65536, "GiB"));
    r.push_back(with_choices(row("prefetch", T::choice, "WHAT", "Prefetch",
                                 "start reading weights at load: the dense ones, or all (the "
                                 "experts too)",
                                 A::both, NEURAL_TEXT(prefetch)),
                             {"none", "dense", "all"}));
    // RAM residency of the expert store (docs/USER_GUIDE.md "RAM residency").
    r.push_back(with_default(
        with_auto(ranged(row("warmup-ram", T::real, "SECONDS|auto", "RAM warm-up",
                             "with --store: after loading, read the experts into RAM, hottest "
                             "first (--ranking, else learned statistics, else layer order), for "
                             "at most SECONDS in the background; auto: map the experts already in "
                             "RAM, read nothing from disk; 0 = off",
                             A::both, NEURAL_REAL(warmup_ram_seconds)),
                         0, 86400, "seconds"),
                  kWarmupRamAuto),
        "auto: map what is in RAM already"));
    r.push_back(row("warmup-sync", T::boolean, "0|1", "Wait for the warm-up",
                    "1: wait for --warmup-ram / --lock-ram before the first answer", A::both,
                    NEURAL_BOOL(warmup_sync)));
    r.push_back(ranged(row("lock-ram", T::real, "GIB", "Lock experts in RAM",
                           "with --store: lock the hottest experts in RAM up to GIB (mlock within "
                           "RLIMIT_MEMLOCK / VirtualLock); experts in VRAM are skipped",
                           A::both, NEURAL_GIB_BYTES(lock_ram_bytes)),
                       0, 65536, "GiB"));
    r.push_back(row("release-resident", T::boolean, "0|1", "Release resident RAM",
                    "with --store: give back the RAM of experts that live in VRAM for good "
                    "(static slots)",
                    A::cuda, NEURAL_BOOL(release_resident)));
    // The backend and the CUDA backend's knobs (docs/CUDA.md).
    r.push_back(with_choices(row("backend", T::choice, "NAME", "Backend",
                                 "cpu, cuda (GPU core + expert slots, the CPU computes the missed "
                                 "experts) or auto (cuda when a GPU is usable)",
                                 A::both, NEURAL_TEXT(backend)),
                             {"cpu", "cuda", "auto"}));
    r.push_back(
        with_default(ranged(row("vram-budget", T::real, "GIB", "VRAM budget",
                                "cap on all GPU memory the engine uses (emulate a smaller card)",
                                A::cuda, NEURAL_REAL(gpu.vram_budget_gib)),
                            0, 4096, "GiB"),
                     "0: free VRAM - max(0.5, 5%)"));
    r.push_back(with_default(
        with_auto(ranged(row("pool", T::real, "GIB|auto", "Expert pool",
                             "VRAM for the expert slot pool", A::cuda, NEURAL_REAL(gpu.pool_gib)),
                         0, 4096, "GiB"),
                  -1),
        "auto: what the budget leaves"));
    r.push_back(
        with_default(with_auto(ranged(row("pool-slots", T::integer, "N|auto", "Expert slots",
                                          "exact number of expert slots (overrides --pool)",
                                          A::cuda, NEURAL_INT(gpu.pool_slots)),
                                      0, 1 << 24),
                               -1),
                     "auto: as many as --pool holds"));
    r.push_back(ranged(row("static-fraction", T::real, "F", "Static share",
                           "share of the slots that are static, filled from the ranking or the "
                           "learned statistics (without either none is; with --refresh-every 0 "
                           "every slot is static)",
                           A::cuda, NEURAL_REAL(gpu.static_fraction)),
                       0, 1, "a fraction"));
    r.push_back(row("ranking", T::path, "FILE", "Expert ranking",
                    "expert ranking JSON (`neural rank`): the static slots, and the order of "
                    "--warmup-ram / --lock-ram",
                    A::both, NEURAL_PATH(gpu.ranking)));
    r.push_back(with_default(
        row("routing-stats", T::path, "FILE|auto|off", "Expert statistics",
            "learn which experts this model's use routes to, in FILE; at the next load they "
            "pick the static slots and order the RAM warm-up, unless --ranking is given",
            A::both, NEURAL_TEXT(routing_stats)),
        "auto: beside the store, else the checkpoint, else in the app's data folder"));
    r.push_back(ranged(row("refresh-every", T::integer, "N", "Refresh every",
                           "decode tokens between admission rounds; 0 freezes residency", A::cuda,
                           NEURAL_INT(gpu.refresh_every)),
                       0, 1 << 20));
    r.push_back(ranged(row("refresh-m", T::integer, "N", "Admissions per refresh",
                           "missed experts admitted into adaptive slots per round at most", A::cuda,
                           NEURAL_INT(gpu.refresh_m)),
                       0, 4096));
    r.push_back(ranged(row("prefill-weight", T::real, "F", "Prefill weight",
                           "weight of a prompt token's routing in the admission scores (decode "
                           "tokens weigh 1)",
                           A::cuda, NEURAL_REAL(gpu.prefill_weight)),
                       0, 1000, "a weight"));
    r.push_back(
        with_default(ranged(row("context", T::integer, "N", "GPU context",
                                "K/V positions kept on the GPU", A::cuda, NEURAL_INT(gpu.context)),
                            0, 1 << 30),
                     "0: up to 16384 where the VRAM plan keeps enough expert slots"));
    r.push_back(ranged(row("device", T::integer, "N", "CUDA device", "CUDA device index", A::cuda,
                           NEURAL_INT(gpu.device)),
                       0, 1024));
    // Prompts on the GPU (docs/CUDA.md "Prefill").
    r.push_back(with_choices(row("prefill-order", T::choice, "ORDER", "Prompt order",
                                 "prompts: layer (each layer over all blocks), block, or token "
                                 "(the decode path token by token, the reference)",
                                 A::cuda, NEURAL_TEXT(gpu.prefill_order)),
                             {"layer", "block", "token"}));
    r.push_back(ranged(row("prefill-block", T::integer, "N", "Prompt block",
                           "prompt tokens per block", A::cuda, NEURAL_INT(gpu.prefill_block)),
                       1, 65536));
    r.push_back(ranged(row("prompt-rows", T::integer, "N", "Prompt rows",
                           "prompt positions the GPU holds at once, longer prompts run in chunks "
                           "of N; 0: auto (the whole context, or 4096 where those rows would "
                           "take VRAM worth more as expert slots)",
                           A::cuda, NEURAL_INT(gpu.prompt_rows)),
                       0, 1 << 20));
    r.push_back(ranged(row("scratch", T::integer, "N", "Scratch slots",
                           "VRAM scratch slots that non-resident experts are staged into", A::cuda,
                           NEURAL_INT(gpu.scratch_slots)),
                       1, 64));
    r.push_back(ranged(row("staging-threads", T::integer, "N", "Staging threads",
                           "threads copying staged experts from RAM to pinned buffers", A::cuda,
                           NEURAL_INT(gpu.staging_threads)),
                       1, 64));
    r.push_back(ranged(row("prefill-cpu-tokens", T::integer, "N", "CPU prompt experts",
                           "non-resident experts with at most N prompt tokens run on the CPU "
                           "instead of being staged",
                           A::cuda, NEURAL_INT(gpu.prefill_cpu_tokens)),
                       0, 16));
    r.push_back(ranged(row("prefill-early", T::integer, "N", "Early staging",
                           "prompts of several blocks: up to N of a layer's experts are staged "
                           "from the first block's routing while the other blocks run (N records "
                           "of pinned memory); 0 = off",
                           A::cuda, NEURAL_INT(gpu.prefill_early)),
                       0, kMaxPrefillEarly));
    r.push_back(row("grouped-gemm", T::boolean, "0|1", "Grouped GEMM",
                    "prompts of one block of 1,024-4,096 tokens: a layer's GPU experts in groups "
                    "of 3 per launch (same outputs)",
                    A::cuda, NEURAL_BOOL(gpu.grouped_gemm)));
    r.push_back(row("prefill-fp16", T::boolean, "0|1", "fp16 prompt experts",
                    "1: prompts' GPU experts take fp16 operands (LOSSY: 11 bits of each "
                    "activation: faster, changes the answers); 0: bf16 hi + lo halves (~16 bits)",
                    A::cuda, NEURAL_BOOL(gpu.prefill_fp16)));
    r.push_back(ranged(row("expert-streams", T::integer, "1|2", "Expert streams",
                           "prompts: 2 runs an expert's first GPU launch beside the previous "
                           "expert's second (same outputs); 1: one after the other",
                           A::cuda, NEURAL_INT(gpu.expert_streams)),
                       1, 2));
    r.push_back(with_choices(row("pin-store", T::choice, "auto|0|1", "Pin store",
                                 "raw store: page-lock the whole store in RAM so prompts copy "
                                 "experts to the GPU straight from it (it then stays in RAM); "
                                 "auto: when it is at most half of the RAM",
                                 A::cuda, NEURAL_TEXT(gpu.pin_store)),
                             {"auto", "0", "1"}));
    r.push_back(with_default(
        with_choices(row(
                         "stream-misses", T::choice, "auto|0|1", "Stream misses over PCIe",
                         "decode with a pinned store: copy a share of each layer's missed "
                         "experts over PCIe and compute them on the GPU while the CPU computes "
                         "the rest; auto: the share measured at load to balance the two, refined "
                         "while decoding; 1: --stream-share, else half; 0: off",
                         A::cuda,
                         [](const LoadOptions& o) -> Value {
                             return std::string(o.gpu.stream_misses < 0    ? "auto"
                                                : o.gpu.stream_misses == 0 ? "0"
                                                                           : "1");
                         },
                         [](LoadOptions& o, const Value& v) {
                             const std::string& t = as_text(v);
                             o.gpu.stream_misses = t == "auto" ? -1 : t == "1" ? 1 : 0;
                         }),
                     {"auto", "0", "1"}),
        "auto: where the probes say it pays"));
    r.push_back(with_default(
        with_auto(ranged(row("stream-share", T::real, "F|auto", "Streamed share",
                             "the share of each decode layer's misses streamed (fixed: no "
                             "refinement, the same bits every run)",
                             A::cuda, NEURAL_REAL(gpu.stream_share)),
                         0, 1, "a fraction"),
                  -1),
        "auto: from the load-time probes"));
    r.push_back(row("split-misses", T::boolean, "0|1", "Split streamed misses",
                    "with --stream-misses: meet the share within each layer by computing one "
                    "miss partly on the GPU, partly on the CPU (0: whole misses only)",
                    A::cuda, NEURAL_BOOL(gpu.split_misses)));
    r.push_back(ranged(row("prompt-admit", T::integer, "N", "Admit after a prompt",
                           "after a GPU prompt its most-used experts fill the free adaptive "
                           "slots and up to N more replace colder ones, before decode starts; "
                           "0 = off",
                           A::cuda, NEURAL_INT(gpu.prompt_admit)),
                       0, 1 << 20));
    r.push_back(with_default(
        with_auto(ranged(row("kv-ring", T::integer, "N|auto", "KV ring",
                             "sliding-window layers keep only their last N positions of K/V; 0 = "
                             "every layer keeps the whole context",
                             A::cuda, NEURAL_INT(gpu.kv_ring)),
                         0, 1 << 30),
                  -1),
        "auto: window + prefill block - 1, 2175 for gpt-oss"));
    r.push_back(ranged(row("kv-checkpoints", T::real, "GIB", "KV checkpoints",
                           "host memory keeping the GPU K/V of sequences switched away from, so "
                           "they (or sequences sharing their start) are not re-processed; 0 = off",
                           A::cuda, NEURAL_REAL(gpu.kv_checkpoint_gib)),
                       0, 4096, "GiB"));
    r.push_back(row("fused-decode", T::boolean, "0|1", "Fused decode kernels",
                    "decode graphs with fused kernels (0: one kernel per step, the reference)",
                    A::cuda, NEURAL_BOOL(gpu.fused_decode)));
    r.push_back(row("plain-rope", T::boolean, "0|1", "Plain RoPE (no YaRN)",
                    "1: run a checkpoint whose config has no rope_scaling with plain RoPE instead "
                    "of refusing it (LOSSY: gpt-oss is trained with YaRN; changes the answers)",
                    A::both, NEURAL_BOOL(plain_rope)));
    classify(r);
    return r;
}

#undef NEURAL_INT
#undef NEURAL_REAL
#undef NEURAL_BOOL
#undef NEURAL_TEXT
#undef NEURAL_PATH
#undef NEURAL_GIB_BYTES

std::string join_or(const std::vector<std::string>& words) {
    std::string s;
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (i > 0) s += i + 1 == words.size() ? " or " : ", ";
        s += words[i];
    }
    return s;
}

std::string number_text(double d) { return format_real(d); }

std::string normalize(std::string_view name) {
    if (name.substr(0, 2) == "--") name.remove_prefix(2);
    std::string k(name);
    std::replace(k.begin(), k.end(), '-', '_');
    return k;
}

bool differs(const Setting& s, const LoadOptions& a, const LoadOptions& b) {
    return format(s, s.get(a)) != format(s, s.get(b));
}

}  // namespace

std::string format_real(double d) {
    if (d == 0) return "0";  // also -0
    char buf[64];
    const auto res = std::to_chars(buf, buf + sizeof buf, d);
    return std::string(buf, res.ptr);
}

std::string Setting::allowed() const {
    const std::string or_auto = auto_value ? " or auto" : "";
    switch (type) {
        case Type::integer:
            return fmt::format("an integer in [{}, {}]{}", number_text(min), number_text(max),
                               or_auto);
        case Type::real:
            return fmt::format("{} in [{}, {}]{}", unit.empty() ? "a number" : unit,
                               number_text(min), number_text(max), or_auto);
        case Type::boolean:
            return "0 or 1";
        case Type::choice:
            return join_or(choices);
        case Type::path:
            return "a path";
    }
    return {};
}

std::string Setting::default_value() const { return format(*this, get(LoadOptions{})); }

bool Setting::bare_means_one() const {
    return type == Type::boolean ||
           (type == Type::choice &&
            std::find(choices.begin(), choices.end(), "1") != choices.end());
}

bool Setting::is_lossy(std::string_view text) const {
    if (lossy_values.empty()) return false;
    // Compare in parse()'s form: "true" is "1" for a switch.
    std::string value(text);
    try {
        value = format(*this, parse(*this, text));
    } catch (const Error&) {
        return false;  // not a value of this setting at all
    }
    return std::find(lossy_values.begin(), lossy_values.end(), value) != lossy_values.end();
}

std::string arithmetic_name(Arithmetic a) {
    switch (a) {
        case Arithmetic::exact:
            return "exact";
        case Arithmetic::same_bits:
            return "same bits";
        case Arithmetic::device_class:
            return "device-class";
        case Arithmetic::lossy:
            return "lossy";
    }
    return {};
}

std::vector<std::string> lossy_settings(const Settings& values) {
    std::vector<std::string> out;
    for (const auto& [key, text] : values) {
        const Setting* s = find(key);
        if (s != nullptr && s->is_lossy(text)) out.push_back(s->flag + " " + text);
    }
    return out;
}

std::string arithmetic_table() {
    auto cell = [](std::string t) {
        std::string out;
        for (char ch : t) {
            if (ch == '|') out += '\\';
            out += ch;
        }
        return out;
    };
    std::string out = "| flag | answers | lossy values | why |\n|---|---|---|---|\n";
    for (const Setting& s : settings()) {
        std::string lossy;
        for (const std::string& v : s.lossy_values) lossy += (lossy.empty() ? "" : ", ") + v;
        out += fmt::format("| `{}` | {} | {} | {} |\n", s.flag, arithmetic_name(s.arithmetic),
                           cell(lossy), cell(s.arithmetic_note));
    }
    return out;
}

const std::vector<Setting>& settings() {
    static const std::vector<Setting> rows = make_settings();
    return rows;
}

const Setting* find(std::string_view name) {
    const std::string key = normalize(name);
    for (const Setting& s : settings()) {
        if (s.key == key) return &s;
    }
    return nullptr;
}

Value parse(const Setting& s, std::string_view text) {
    const std::string t(text);
    auto bad = [&]() -> Value { fail("{}: expected {}, got \"{}\"", s.flag, s.allowed(), t); };
    switch (s.type) {
        case Type::integer: {
            if (s.auto_value && t == "auto") return static_cast<std::int64_t>(*s.auto_value);
            std::int64_t n = 0;
            const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
            if (t.empty() || ec != std::errc() || p != t.data() + t.size()) return bad();
            if (s.auto_value && static_cast<double>(n) == *s.auto_value) return n;
            if (static_cast<double>(n) < s.min || static_cast<double>(n) > s.max) return bad();
            return n;
        }
        case Type::real: {
            if (s.auto_value && t == "auto") return *s.auto_value;
            double d = 0;
            const auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
            if (t.empty() || ec != std::errc() || p != t.data() + t.size() || !std::isfinite(d))
                return bad();
            if (s.auto_value && d == *s.auto_value) return d;
            if (!(d >= s.min && d <= s.max)) return bad();
            return d;
        }
        case Type::boolean:
            if (t == "1" || t == "true") return true;
            if (t == "0" || t == "false") return false;
            return bad();
        case Type::choice:
            if (std::find(s.choices.begin(), s.choices.end(), t) == s.choices.end()) return bad();
            return t;
        case Type::path:
            return t;
    }
    return bad();
}

std::string format(const Setting& s, const Value& v) {
    switch (s.type) {
        case Type::integer: {
            const std::int64_t n = as_int(v);
            if (s.auto_value && static_cast<double>(n) == *s.auto_value) return "auto";
            return std::to_string(n);
        }
        case Type::real: {
            const double d = as_real(v);
            if (s.auto_value && d == *s.auto_value) return "auto";
            return format_real(d);
        }
        case Type::boolean:
            return as_bool(v) ? "1" : "0";
        case Type::choice:
        case Type::path:
            return as_text(v);
    }
    return {};
}

std::string backend_refusal(const Setting& s, std::string_view backend) {
    if (s.applies == Applies::cuda) {
        return fmt::format(
            "{} needs --backend cuda (or auto): it sets the CUDA backend, and the "
            "backend is {}",
            s.flag, backend);
    }
    return fmt::format(
        "{} needs --backend cpu (or auto): it sets the CPU backend, and the "
        "backend is {}",
        s.flag, backend);
}

LoadOptions apply(const Settings& values, const LoadOptions& base) {
    LoadOptions o = base;
    std::vector<const Setting*> given;
    for (const auto& [key, text] : values) {
        const Setting* s = find(key);
        if (!s) fail("unknown setting \"{}\" (see --help for the engine settings)", key);
        s->set(o, parse(*s, text));
        given.push_back(s);
    }
    auto has = [&](const char* key) { return values.count(key) > 0; };
    const bool levers = o.warmup_ram_seconds > 0 || o.lock_ram_bytes > 0;
    for (const Setting* s : given) {
        const bool cpu = o.backend == "cpu";
        const bool refused = (s->applies == Applies::cuda && cpu) ||
                             (s->applies == Applies::cpu && o.backend == "cuda");
        if (refused) fail("{}", backend_refusal(*s, o.backend));
        // The ranking orders the RAM levers too; on the CPU backend that is all it does.
        if (s->key == "ranking" && cpu && !levers && !o.gpu.ranking.empty()) {
            fail(
                "--ranking needs --backend cuda (or auto), or --warmup-ram / --lock-ram: it picks "
                "the static slots and orders the RAM warm-up, and the backend is cpu");
        }
    }
    if ((levers || o.release_resident) && o.store.empty()) {
        fail(
            "--warmup-ram, --lock-ram and --release-resident act on the expert store: they need "
            "--store FILE (`neural repack`)");
    }
    const bool auto_warmup = o.warmup_ram_seconds == kWarmupRamAuto && !o.store.empty();
    if (has("warmup_sync") && o.warmup_sync && !levers && !auto_warmup) {
        fail(
            "--warmup-sync needs a warm-up to wait for: --store FILE with --warmup-ram auto or "
            "SECONDS, or --lock-ram GIB");
    }
    return o;
}

LoadOptions apply(const Settings& values) {
    const LoadOptions defaults;
    return apply(values, defaults);
}

std::string help_text(int column, int width) {
    std::string out;
    for (const Setting& s : settings()) {
        std::string head = "  " + s.flag + " " + s.metavar;
        std::string text = s.help;
        const std::string def = !s.default_text.empty() ? s.default_text : s.default_value();
        if (!def.empty()) text += " (default " + def + ")";
        if (s.applies == Applies::cuda) text += " [cuda]";
        // Word-wrap `text` into the column.
        std::vector<std::string> lines;
        std::string line;
        std::size_t pos = 0;
        const std::size_t room = static_cast<std::size_t>(std::max(20, width - column));
        while (pos < text.size()) {
            std::size_t next = text.find(' ', pos);
            if (next == std::string::npos) next = text.size();
            const std::string word = text.substr(pos, next - pos);
            if (!line.empty() && line.size() + 1 + word.size() > room) {
                lines.push_back(line);
                line.clear();
            }
            line += (line.empty() ? "" : " ") + word;
            pos = next + 1;
        }
        if (!line.empty()) lines.push_back(line);
        if (static_cast<int>(head.size()) + 1 > column) {
            out += head + "\n";
            head.clear();
        }
        for (const std::string& l : lines) {
            head.resize(static_cast<std::size_t>(column), ' ');
            out += head + l + "\n";
            head.clear();
        }
    }
    return out;
}

Settings to_settings(const LoadOptions& o, bool all) {
    const LoadOptions defaults;
    Settings out;
    for (const Setting& s : settings()) {
        if (!all && s.applies == Applies::cuda && o.backend == "cpu") continue;
        if (all || differs(s, o, defaults)) out[s.key] = format(s, s.get(o));
    }
    return out;
}

std::vector<std::string> to_flags(const LoadOptions& o) {
    const Settings values = to_settings(o);
    std::vector<std::string> flags;
    for (const Setting& s : settings()) {  // row order
        const auto it = values.find(s.key);
        if (it == values.end()) continue;
        flags.push_back(s.flag);
        flags.push_back(it->second);
    }
    return flags;
}

Settings take_flags(std::vector<std::string>& args) {
    Settings out;
    std::vector<std::string> rest;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a.size() <= 2 || a.rfind("--", 0) != 0) {
            rest.push_back(a);
            continue;
        }
        const auto eq = a.find('=');
        const std::string name = a.substr(0, eq);
        const Setting* s = find(name);
        if (!s || s->flag != name) {
            rest.push_back(a);
            continue;
        }
        std::string value;
        if (eq != std::string::npos) {
            value = a.substr(eq + 1);
        } else if (s->bare_means_one()) {
            // The next word is the value unless it is another flag (or there is none): then the
            // flag stands alone and means 1. So "--pin-store yes" is an error naming the flag.
            const bool next_is_value = i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0;
            value = next_is_value ? args[++i] : "1";
        } else {
            if (i + 1 >= args.size()) fail("option {} needs a value ({})", name, s->metavar);
            value = args[++i];
        }
        parse(*s, value);  // bad values fail here, naming the flag
        out[s->key] = value;
    }
    args = std::move(rest);
    return out;
}

bool persistent_team(const LoadOptions& o, bool gpu_backend) {
    // The persistent team's workers spin between the layers' jobs instead of sleeping: on the
    // CPU backend that doubled decode on the 20b shape at 8 and 16 threads (docs/BENCHMARKS.md
    // "CPU backend: the worker team"), but on a machine of 2-3 CPUs the spinning workers compete
    // with the thread that feeds them, so there the OpenMP team stays the default.
    return o.kernel_persistent.value_or(gpu_backend || available_cpus() >= kPersistentTeamMinCpus);
}

namespace {

// MXFP4 expert weights ("model.layers.N.mlp.experts.gate_up_proj_blocks" / "..._scales"): read
// only for the experts a token picks. Everything else (attention, router, norms, embeddings,
// lm_head, expert biases) is read for every token: the dense, hot part.
bool is_expert_weight(const std::string& name) {
    const auto ends_with = [&](const char* s) {
        const std::string suffix(s);
        return name.size() >= suffix.size() &&
               name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    return name.find(".mlp.experts.") != std::string::npos &&
           (ends_with("_blocks") || ends_with("_scales"));
}

}  // namespace

void apply_memory_hints(const LoadOptions& o, const Model& model) {
    if (o.ws_min_bytes == 0 && o.prefetch == "none") return;
    std::vector<MemoryRange> dense, experts;
    for (const SafetensorsFile& file : model.checkpoint().files()) {
        for (const auto& [name, t] : file.tensors()) {
            (is_expert_weight(name) ? experts : dense).push_back({t.data, t.nbytes()});
        }
    }
    if (const GgufCheckpoint* gguf = model.checkpoint().gguf(); gguf != nullptr) {
        for (const GgufFile& file : gguf->files) {
            for (const auto& [name, t] : file.tensors()) {
                const bool expert = name.find("_exps.weight") != std::string::npos;
                (expert ? experts : dense).push_back({t.data, t.nbytes});
            }
        }
    }
    if (const store::ExpertStore* s = model.store(); s != nullptr) {
        experts.clear();  // the store's records are what the experts are read from
        for (int l = 0; l < s->num_layers(); ++l) {
            for (int e = 0; e < s->num_experts(); ++e) {
                const auto record = s->record(l, e);
                experts.push_back({record.data(), record.size()});
            }
        }
    }
    if (o.prefetch != "none") {
        std::uint64_t bytes = 0;
        auto prefetch = [&](const std::vector<MemoryRange>& ranges) {
            for (const MemoryRange& m : ranges) {
                prefetch_mapped(m.p, m.n);
                bytes += m.n;
            }
        };
        prefetch(dense);
        if (o.prefetch == "all") prefetch(experts);
        spdlog::info("--prefetch {}: asked the OS to read {} bytes ahead", o.prefetch, bytes);
    }
    if (o.ws_min_bytes > 0) {
        const ResidentResult r = keep_resident(o.ws_min_bytes, dense);
        if (!r.ok) {
            spdlog::warn("--ws-min: not applied: {}", r.message);
        } else if (r.partial) {
            spdlog::warn("--ws-min: only in part: {}", r.message);
        } else {
            spdlog::info("--ws-min: {}", r.message);
        }
    }
}

}  // namespace neural::options
