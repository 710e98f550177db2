// A loaded gpt-oss model: config, generation config, tokenizer, mapped checkpoint, validated
// weight views and the forward-pass backend (CPU or CUDA). Loading validates everything before the
// first forward pass.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/forward.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "backend/kv_cache.h"
#include "runtime/routing_stats.h"
#include "store/store.h"
#include "telemetry/telemetry.h"
#include "tokenizer/tokenizer.h"

namespace neural {

class CpuModel;

// Seconds between saves of the learned expert statistics while tokens are being learned.
inline constexpr int kRoutingStatsSaveSeconds = 300;

// LoadOptions::warmup_ram_seconds for the default warm-up (--warmup-ram auto).
inline constexpr double kWarmupRamAuto = -1;

struct LoadOptions {
    // Expert store (`neural repack`) to read the MXFP4 experts from instead of the checkpoint's
    // expert tensors; empty = none. Checked against the checkpoint at load (shape, expert tensor
    // names and sizes, sample hash); results are bit-identical to the checkpoint path.
    std::filesystem::path store;
    // How the CPU backend computes: "auto" (the fast path: fused MXFP4 expert kernels, from the
    // store or the checkpoint's expert tensors, and bf16 dense kernels, the fastest variant this
    // CPU runs; $NEURAL_KERNEL overrides), "scalar" / "avx2" / "avx512" (the fast path with that
    // variant), or "reference" (the plain fp32 forward pass the fast path is checked against).
    std::string kernel = "auto";
    // With a fast-path kernel: "bf16" (the bf16 dense kernels for attention projections, router
    // and lm_head), "int8-head" (the lm_head quantized to int8 at load and run on the int8
    // kernels), "int8" (the attention projections too; the router stays bf16), "auto"
    // (bf16: the int8 paths change the answers and are opt-in) or "reference" (the fp32 reference dense layers beside the fused expert kernels:
    // isolates the expert kernels, e.g. to compare them with the reference bit for bit).
    std::string dense = "auto";
    // With the bf16 dense kernels on the CPU backend: "on" screens the vocabulary with an int8
    // copy of the lm_head (~0.62 GB of RAM at gpt-oss's shapes) and computes the exact bf16
    // logits of only the tokens the sampler can pick (the same bits: docs/KERNELS.md "Screened
    // lm_head"); "off" runs the whole bf16 lm_head for every token.
    std::string lm_head_screen = "on";
    // With a fast-path kernel, the experts of a prompt (more than one token per pass): "bf16x2"
    // (cpu/kernels/prompt_bf16.h: the bf16 expert GEMM on hi + lo bf16 activations; exact
    // class), "bf16" (the same on activations rounded once to bf16, as on the GPU), "fp32" (the
    // fused fp32 expert kernels, as decode: a token gives the same bits inside a prompt and
    // alone), "auto" (fp32: parse_prompt_kernel), "int8"
    // (the int8 path of cpu/kernels/prompt_kernel.h, activations quantized to int8: lossy,
    // opt-in; its scalar reference where the CPU has no AVX512_VNNI) or "int8-vnni".
    std::string prompt_kernel = "auto";
    // Worker team for the fused kernels: the persistent team DLL (`--kernel-persistent 1`, at
    // `kdll` or beside the executable) or OpenMP (0). Unset (auto): the persistent team on the
    // CUDA backend, and on the CPU backend from 4 CPUs on (options::persistent_team; OpenMP wakes
    // its workers for every job: docs/BENCHMARKS.md "CPU backend: the worker team"). A missing
    // library falls back to OpenMP with a warning.
    std::optional<bool> kernel_persistent;
    std::filesystem::path kdll;
    // CPU worker threads: the fused kernels' team and the reference path (0: the default, all
    // cores; kernels min(cores, 8)). Model::load and Model::forward apply it (cpu::set_threads),
    // so no front end sets the thread count itself.
    int threads = 0;
    // Forward-pass backend: "cpu" (the fp32 reference + the kernels above), "cuda" (the hybrid
    // GPU backend: an error when it cannot start) or "auto" (cuda when a GPU is usable, else cpu).
    std::string backend = "cpu";
    GpuOptions gpu;  // the CUDA backend's knobs

    // RAM residency of the expert store (docs/USER_GUIDE.md "RAM residency"); each needs `store`.
    // The order is the ranking's (gpu.ranking: hottest first), else layer order.
    // Seconds to spend faulting store records into RAM after loading, hottest first (0 = off).
    // A time bound runs on a background thread while the model answers, unless warmup_sync.
    // kWarmupRamAuto (the default): map and check only the records already in RAM, reading
    // nothing from disk (store::ExpertStore::map_cached), during the load on `threads` threads,
    // so the first prompt after a load does not fault them in.
    double warmup_ram_seconds = kWarmupRamAuto;
    // Model::load returns only after the warm-up (at most warmup_ram_seconds, plus the lock).
    bool warmup_sync = false;
    // Locks the hottest records in RAM up to this many bytes (mlock within RLIMIT_MEMLOCK, raised
    // as far as allowed; Windows: VirtualLock after raising the working-set minimum); 0 = off.
    // Done on the warm-up thread, before the warm-up; experts released to VRAM are skipped.
    std::uint64_t lock_ram_bytes = 0;
    // Gives back the RAM of experts that live in VRAM for good (the CUDA backend's static slots
    // call ExpertStore::note_resident_in_vram), so the page cache keeps what the CPU reads.
    bool release_resident = false;

    // Memory hints, applied to the loaded model's mappings at the end of Model::load
    // (options::apply_memory_hints; what cannot be done is a warning). ws_min_bytes: keep this
    // much of the process resident (Windows: the working-set minimum; POSIX: mlock of the dense
    // weights up to it); 0: the OS default. prefetch: start reading "dense" (non-expert) weights
    // or "all" (the store's records too) at load; "none": do not.
    std::uint64_t ws_min_bytes = 0;
    std::string prefetch = "none";

    // Learned expert statistics (runtime/routing_stats.h): "auto" (the file beside the store or
    // checkpoint, routing_stats_path), a file, or "off". When on, every forward pass is learned
    // and, without gpu.ranking, the statistics order the static slots and the RAM warm-up.
    std::string routing_stats = "auto";

    // Runs a checkpoint whose config gives no rope_scaling with plain RoPE instead of refusing
    // it (ModelConfig::load). gpt-oss is trained with YaRN: this changes the answers, so it is
    // only ever the user's explicit choice.
    bool plain_rope = false;

    // Called on the loading thread as Model::load moves on: `fraction` in [0, 1], never
    // decreasing, ending at exactly 1 when the model is ready; `stage` names the step under way
    // in a word or two ("tokenizer", "weights", "expert store", "backend", "RAM warm-up", and
    // "ready" with 1). For a front end's progress display (the desktop app's "Loading NAME...
    // 42%"); it must not throw.
    std::function<void(double fraction, const std::string& stage)> on_progress;
};

class Model {
public:
    // Reads DIR/config.json, DIR/generation_config.json (optional), DIR/tokenizer.json and the
    // safetensors weights (and the expert store, if given); or, when DIR is a gpt-oss GGUF file
    // (model/gguf.h), all of them from it. Throws neural::Error naming the bad file / tensor /
    // field.
    static std::unique_ptr<Model> load(const std::filesystem::path& dir,
                                       const LoadOptions& options);
    // The same with the default LoadOptions (built inside the library: a default argument
    // constructed at every call site trips GCC 12's -Wmaybe-uninitialized).
    static std::unique_ptr<Model> load(const std::filesystem::path& dir);
    // Stops the RAM warm-up thread (within about a MiB of reading) before anything is unmapped.
    ~Model();

    const std::filesystem::path& dir() const { return dir_; }
    const ModelConfig& config() const { return config_; }
    const GenerationConfig& generation() const { return generation_; }
    const Tokenizer& tokenizer() const { return *tokenizer_; }
    const Checkpoint& checkpoint() const { return checkpoint_; }
    // The CPU backend's reference model (its store_moe(), or a forward pass on it without the
    // backend interface); throws neural::Error when the loaded backend is another one.
    const CpuModel& cpu() const;
    // The expert store the experts are read from, or nullptr (checkpoint tensors).
    const store::ExpertStore* store() const { return store_.get(); }
    // Per-token / per-request records of this model's sessions: written by the one engine thread
    // that runs its sessions (single producer), readable from any thread.
    telemetry::Telemetry& telemetry() const { return *telemetry_; }

    KvCache new_cache() const { return KvCache(config_); }

    // The forward pass on the loaded backend (CpuModel::forward's contract): the session, the
    // CLI, the server and the GUI call this, never a backend directly. Not const: the backend's
    // state moves (the GPU's K/V and slots, the CPU team's buffers, the learned routing), so
    // one caller at a time (the host's engine thread).
    std::vector<float> forward(std::span<const TokenId> tokens, KvCache& cache,
                               const ForwardOptions& options = {});
    const char* backend_name() const { return backend_->name(); }
    std::string describe_backend() const { return backend_->describe(); }
    // Backend::prompt_matches_decode.
    bool prompt_matches_decode() const { return backend_->prompt_matches_decode(); }
    // Why `--backend auto` runs on the CPU ("no NVIDIA driver found (...)", "no NVIDIA GPU
    // found", ...); empty when the GPU backend runs or the CPU was asked for.
    const std::string& gpu_unavailable_reason() const { return gpu_unavailable_; }
    // How the CPU computes experts (Backend::experts).
    std::string describe_experts() const { return backend_->experts(); }
    // Whether the GPU backend pinned the expert store at load (--pin-store), and how long it took.
    StorePin store_pin() const { return backend_->store_pin(); }
    // What the backend allocated on the device, by its plan's rows (Backend::device_allocations).
    std::vector<DeviceAllocation> device_allocations() const {
        return backend_->device_allocations();
    }
    // Positions one sequence may hold: the GPU backend's K/V cache (--context), else the model's
    // maximum. What the server reports as context_length and checks prompts against.
    std::int64_t context_length() const;
    // Throws neural::ModelFilesChanged when the store changed on disk since the load or a read
    // of a mapped file (store or checkpoint) faulted; forward() runs it before and after every
    // pass, the server before every request.
    void check_files() const;
    // GPU phases and hit/admission counts of the hybrid backend (zero on the CPU backend).
    BackendCounters& backend_counters() const { return *backend_counters_; }
    // Ids generation stops on: generation_config eos ids, else config eos ids.
    std::vector<TokenId> stop_tokens() const;
    // Ids that may be sampled: the tokenizer's vocabulary (lm_head rows past it are never emitted).
    std::size_t sampleable_vocab() const;
    // Waits until the RAM warm-up / lock thread (LoadOptions::warmup_ram_seconds, lock_ram_bytes)
    // has finished; returns at once when there is none. Progress: telemetry().ram.
    void wait_ram_warmup() const;

    // The learned expert statistics (LoadOptions::routing_stats): nullptr when off. Saved at
    // unload and every kRoutingStatsSaveSeconds while tokens are being learned.
    const RoutingStats* routing_stats() const { return stats_.get(); }
    // Their file (empty when off).
    const std::filesystem::path& routing_stats_file() const { return stats_path_; }
    // The ranking this load filled the static slots and ordered the RAM warm-up from: the
    // learned statistics' weights when no --ranking was given and they were read (empty when
    // none were, or --ranking gave the order).
    const Ranking& learned_ranking() const { return learned_; }
    // Saves them now when something was learned since the last save; a write error is one
    // warning (per model), not an exception. Thread-safe. When the file existed (read at load,
    // or saved since) and is gone now, it was reset (the desktop's Reset, or deleted by hand):
    // what this model learned is forgotten too, and learning starts afresh.
    void save_routing_stats() const;

private:
    Model() = default;
    std::filesystem::path dir_;
    ModelConfig config_;
    GenerationConfig generation_;
    std::unique_ptr<Tokenizer> tokenizer_;
    Checkpoint checkpoint_;
    ModelWeights weights_;
    std::unique_ptr<store::ExpertStore> store_;
    std::unique_ptr<telemetry::Telemetry> telemetry_ = std::make_unique<telemetry::Telemetry>();
    std::unique_ptr<BackendCounters> backend_counters_ = std::make_unique<BackendCounters>();
    // The forward pass (CpuBackend or the CUDA backend); after the telemetry and the counters, so
    // it is destroyed before them.
    std::unique_ptr<Backend> backend_;
    std::string gpu_unavailable_;
    int threads_ = 0;  // LoadOptions::threads, applied before every forward pass
    std::unique_ptr<RoutingStats> stats_;
    std::filesystem::path stats_path_;
    Ranking learned_;
    mutable std::atomic<bool> stats_warned_{false};
    mutable std::mutex stats_save_mutex_;
    mutable bool stats_file_seen_ = false;  // the file existed after the last read or save
    // The save timer of the statistics (stopped first in ~Model).
    struct StatsSaver;
    std::unique_ptr<StatsSaver> stats_saver_;
    // The warm-up / lock thread; last, so it is stopped before anything it reads goes away.
    struct RamWorker;
    std::unique_ptr<RamWorker> ram_worker_;
};

}  // namespace neural
