#include "cli/gpu_options.h"

#include "neural/error.h"

namespace neural::cli {

const char* const kGpuFlagsHelp =
    R"(  --backend NAME           cpu (default), cuda (GPU core + expert slots, CPU computes the
                           missed experts) or auto (cuda when a GPU is usable)
  --vram-budget GIB        cap on all GPU memory the engine uses (default: free VRAM - 0.5)
  --pool GIB               expert slot pool (default: what the budget leaves)
  --pool-slots N           exact number of expert slots (overrides --pool)
  --static-fraction F      share of slots that are static, from the ranking (default 0.5;
                           with --refresh-every 0 every slot is static)
  --ranking FILE           warm-up ranking JSON {"layers": [[count per expert], ...]}
  --refresh-every N        decode tokens between admission rounds; 0 freezes residency (8)
  --refresh-m N            admissions per round at most (4)
  --prefill-weight F       weight of a prompt token's routing in admission scores (0.25)
  --context N              K/V positions kept on the GPU (default min(model max, 8192))
  --device N               CUDA device index (0)
  --prefill-order ORDER    prompts: layer (each layer over all blocks; default), block, or
                           token (the decode path token by token, the reference)
  --prefill-block N        prompt tokens per block (2048)
  --scratch N              VRAM scratch slots that non-resident experts are staged into (4)
  --staging-threads N      threads copying staged experts from RAM to pinned buffers (8)
  --prefill-cpu-tokens N   non-resident experts with at most N prompt tokens run on the CPU
                           instead of being staged; 0-16 (6)
  --prefill-early N        prompts of several blocks: up to N of a layer's experts are staged
                           from the first block's routing while the other blocks run; N
                           records of pinned memory; 0 = off (32)
  --grouped-gemm 0|1       prompts of one block of 1,024-4,096 tokens: a layer's GPU experts
                           in groups of 3 per launch (same outputs; 0 = off, the default)
  --prefill-fp16 0|1       1: prompts' GPU experts take fp16 operands (11 bits of each
                           activation: faster, less exact); 0 (default): bf16 hi + lo halves
                           (~16 bits)
  --expert-streams 1|2     prompts: 2 (default) runs an expert's first GPU launch beside the
                           previous expert's second (same outputs); 1: one after the other
  --pin-store auto|0|1     raw store: page-lock the whole store in RAM for the GPU, so prompts
                           copy non-resident experts straight from it (no staging threads); the
                           store then stays in RAM while loaded. auto (default): when it is at
                           most half of the RAM; 1: always try; 0: never
  --stream-misses 0|1      decode with a pinned store: 1 copies half of each layer's missed
                           experts over PCIe and computes them on the GPU while the CPU
                           computes the rest (pays with a PCIe 5.0 x16 link); 0 (default): the
                           CPU computes every miss
  --kv-ring N|auto         sliding-window layers keep only their last N positions of K/V;
                           auto (default) = the smallest, window + prefill block - 1 (2175
                           for gpt-oss); 0 = every layer keeps the whole context
  --kv-checkpoints GIB     host memory keeping the GPU K/V of sequences switched away from, so
                           they (or sequences sharing their start) are not re-processed
                           (0 = off, the default); with the K/V ring, a sequence sharing only
                           an early part of another is re-processed
)";

void add_gpu_flags(std::set<std::string>& flags) {
    flags.insert({"--backend", "--vram-budget", "--pool", "--pool-slots", "--static-fraction",
                  "--ranking", "--refresh-every", "--refresh-m", "--prefill-weight", "--context",
                  "--device", "--prefill-order", "--prefill-block", "--scratch", "--staging-threads",
                  "--prefill-cpu-tokens", "--prefill-early", "--grouped-gemm", "--prefill-fp16", "--expert-streams", "--pin-store", "--kv-ring",
                  "--kv-checkpoints", "--stream-misses"});
}

void apply_gpu_flags(const Args& args, LoadOptions& o) {
    o.backend = args.get_or("--backend", "cpu");
    if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "auto") {
        fail("--backend must be cpu, cuda or auto, got \"{}\"", o.backend);
    }
    GpuOptions& g = o.gpu;
    g.vram_budget_gib = args.get_double("--vram-budget", 0.0, 0, 4096, "GiB");
    g.pool_gib = args.has("--pool") ? args.get_double("--pool", 0.0, 0, 4096, "GiB") : -1;
    g.pool_slots = static_cast<int>(args.get_int("--pool-slots", -1, 0, 1 << 24));
    g.static_fraction = args.get_double("--static-fraction", 0.5, 0, 1, "a fraction");
    g.ranking = args.get_or("--ranking", "");
    g.refresh_every = static_cast<int>(args.get_int("--refresh-every", g.refresh_every, 0, 1 << 20));
    g.refresh_m = static_cast<int>(args.get_int("--refresh-m", g.refresh_m, 0, 4096));
    g.prefill_weight = args.get_double("--prefill-weight", g.prefill_weight, 0, 1000, "a weight");
    g.context = args.get_int("--context", 0, 0, std::int64_t{1} << 31);
    g.device = static_cast<int>(args.get_int("--device", 0, 0, 1024));
    g.prefill_order = args.get_or("--prefill-order", g.prefill_order);
    if (!is_prefill_order(g.prefill_order)) {
        fail("--prefill-order must be layer, block or token, got \"{}\"", g.prefill_order);
    }
    g.prefill_block = static_cast<int>(args.get_int("--prefill-block", g.prefill_block, 1, 65536));
    g.scratch_slots = static_cast<int>(args.get_int("--scratch", g.scratch_slots, 1, 64));
    g.staging_threads = static_cast<int>(args.get_int("--staging-threads", g.staging_threads, 1, 64));
    g.prefill_cpu_tokens = static_cast<int>(args.get_int("--prefill-cpu-tokens", g.prefill_cpu_tokens, 0, 16));
    g.prefill_early = static_cast<int>(args.get_int("--prefill-early", g.prefill_early, 0, kMaxPrefillEarly));
    g.grouped_gemm = args.get_int("--grouped-gemm", g.grouped_gemm ? 1 : 0, 0, 1) == 1;
    g.prefill_fp16 = args.get_int("--prefill-fp16", g.prefill_fp16 ? 1 : 0, 0, 1) == 1;
    g.expert_streams = static_cast<int>(args.get_int("--expert-streams", g.expert_streams, 1, 2));
    g.pin_store = args.get_or("--pin-store", g.pin_store);
    if (!is_pin_store(g.pin_store)) fail("--pin-store must be auto, 0 or 1, got \"{}\"", g.pin_store);
    g.stream_misses = static_cast<int>(args.get_int("--stream-misses", g.stream_misses, 0, 1));
    if (args.get_or("--kv-ring", "auto") != "auto") g.kv_ring = static_cast<int>(args.get_int("--kv-ring", 0, 0, 1 << 30));
    g.kv_checkpoint_gib = args.get_double("--kv-checkpoints", g.kv_checkpoint_gib, 0, 4096, "GiB");
    // An explicit --kernel-persistent (0 or 1) decides for the GPU backend too.
    if (args.has("--kernel-persistent")) g.prefer_persistent_team = false;
    if (o.backend == "cpu") {
        for (const char* f : {"--vram-budget", "--pool", "--pool-slots", "--ranking", "--context",
                              "--prefill-order", "--prefill-block", "--scratch", "--staging-threads",
                              "--prefill-cpu-tokens", "--prefill-early", "--grouped-gemm", "--prefill-fp16", "--expert-streams", "--pin-store",
                              "--kv-ring", "--kv-checkpoints", "--stream-misses"}) {
            // --ranking also orders the RAM warm-up and --lock-ram (engine_options.cpp).
            if (std::string(f) == "--ranking" && (args.has("--warmup-ram") || args.has("--lock-ram"))) {
                continue;
            }
            if (args.has(f)) fail("{} needs --backend cuda (or auto)", f);
        }
    }
}

}  // namespace neural::cli
