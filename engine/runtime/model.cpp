#include "runtime/model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cpu/cpu_backend.h"
#include "cpu/parallel.h"
#include "model/gguf.h"
#include "neural/error.h"
#include "platform/mapped_file.h"
#include "platform/page_residency.h"
#include "runtime/options.h"
#include "runtime/routing_stats.h"
#include "store/ranking.h"

namespace neural {

namespace fs = std::filesystem;

// The RAM warm-up / lock of the expert store (LoadOptions::warmup_ram_seconds, lock_ram_bytes).
struct Model::RamWorker {
    std::atomic<bool> stop{false};
    std::thread thread;
    std::mutex mutex;
    std::condition_variable cv;
    bool done = false;

    ~RamWorker() {
        stop.store(true, std::memory_order_relaxed);
        if (thread.joinable()) thread.join();
    }
    void finish() {
        std::lock_guard<std::mutex> lock(mutex);
        done = true;
        cv.notify_all();
    }
    void wait() {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return done; });
    }
};

// Saves the learned statistics every kRoutingStatsSaveSeconds (when something was learned).
struct Model::StatsSaver {
    std::mutex mutex;
    std::condition_variable cv;
    bool stop = false;
    std::thread thread;

    explicit StatsSaver(const Model& m) {
        thread = std::thread([this, &m] {
            std::unique_lock<std::mutex> lock(mutex);
            while (!stop) {
                cv.wait_for(lock, std::chrono::seconds(kRoutingStatsSaveSeconds),
                            [&] { return stop; });
                if (stop) break;
                lock.unlock();
                m.save_routing_stats();
                lock.lock();
            }
        });
    }
    ~StatsSaver() {
        {
            std::lock_guard<std::mutex> lock(mutex);
            stop = true;
        }
        cv.notify_all();
        if (thread.joinable()) thread.join();
    }
};

namespace {

// The default warm-up (--warmup-ram auto): maps and checks the records already in RAM on
// `threads` threads (store.h map_cached); logs what it did.
void map_cached_records(const store::ExpertStore& store, const std::vector<store::ExpertKey>& order,
                        int threads, telemetry::RamCounters& ram) {
    ram.warmup_state.store(telemetry::RamCounters::kRunning, std::memory_order_relaxed);
    const store::CachedWarmupReport w = store.map_cached(order, threads);
    ram.warmup_records.store(w.records, std::memory_order_relaxed);
    ram.warmup_bytes.store(w.bytes, std::memory_order_relaxed);
    ram.warmup_ns.store(static_cast<std::uint64_t>(w.seconds * 1e9), std::memory_order_relaxed);
    ram.warmup_state.store(telemetry::RamCounters::kDone, std::memory_order_relaxed);
    if (!w.supported) {
        spdlog::info(
            "RAM warm-up (auto): not on this OS (it cannot say which pages are cached); "
            "--warmup-ram SECONDS reads the experts in");
    } else {
        spdlog::info(
            "RAM warm-up (auto): {} of {} experts ({:.2f} GB) were in RAM, mapped and checked "
            "in {:.2f} s on {} threads; {} not all in RAM, left for their first read{}",
            w.records, order.size(), static_cast<double>(w.bytes) / 1e9, w.seconds, w.threads,
            w.not_cached,
            w.skipped > 0 ? fmt::format(", {} skipped (in VRAM or locked)", w.skipped) : "");
    }
    if (w.damaged > 0) {
        spdlog::warn("RAM warm-up: {} damaged expert record(s); a request that reads one fails: {}",
                     w.damaged, w.damage);
    }
}

// Lock, then warm up, in `order`; logs what was done (spdlog info; what could not be done is a
// warning: the model runs either way).
void run_ram_levers(const store::ExpertStore& store, const std::vector<store::ExpertKey>& order,
                    const LoadOptions& options, telemetry::RamCounters& ram,
                    const std::atomic<bool>& stop) {
    if (options.lock_ram_bytes > 0 && store.pinned()) {
        spdlog::info(
            "--lock-ram: nothing to lock: the GPU backend keeps the whole store in RAM "
            "(--pin-store)");
    } else if (options.lock_ram_bytes > 0) {
        const LockAllowance allowance = grow_lock_allowance(options.lock_ram_bytes);
        const store::LockReport r = store.lock_experts(order, options.lock_ram_bytes, &stop);
        if (r.records == 0) {
            spdlog::warn("--lock-ram: nothing locked: {} ({})", r.message, allowance.message);
        } else if (r.limited) {
            spdlog::warn("--lock-ram: only in part: {} ({})", r.message, allowance.message);
        } else {
            spdlog::info("--lock-ram: {}", r.message);
        }
    }
    if (options.warmup_ram_seconds > 0 && !stop.load(std::memory_order_relaxed)) {
        using namespace std::chrono;
        ram.warmup_state.store(telemetry::RamCounters::kRunning, std::memory_order_relaxed);
        const auto budget =
            duration_cast<nanoseconds>(duration<double>(options.warmup_ram_seconds));
        const store::WarmupReport w = store.warm_up(
            order, budget, &stop, [&](const store::ExpertKey&, const store::WarmupReport& so_far) {
                ram.warmup_records.store(so_far.records, std::memory_order_relaxed);
                ram.warmup_bytes.store(so_far.bytes, std::memory_order_relaxed);
                ram.warmup_pages_loaded.store(so_far.pages_loaded, std::memory_order_relaxed);
                ram.warmup_ns.store(static_cast<std::uint64_t>(so_far.seconds * 1e9),
                                    std::memory_order_relaxed);
                return true;
            });
        ram.warmup_records.store(w.records, std::memory_order_relaxed);
        ram.warmup_bytes.store(w.bytes, std::memory_order_relaxed);
        ram.warmup_pages_loaded.store(w.pages_loaded, std::memory_order_relaxed);
        ram.warmup_ns.store(static_cast<std::uint64_t>(w.seconds * 1e9), std::memory_order_relaxed);
        ram.warmup_state.store(w.completed ? telemetry::RamCounters::kDone
                               : w.stopped ? telemetry::RamCounters::kStopped
                                           : telemetry::RamCounters::kTimeBound,
                               std::memory_order_relaxed);
        spdlog::info(
            "--warmup-ram: {} of {} experts ({:.2f} GB, {} pages, {} of them read from disk) in "
            "{:.1f} s{}{}",
            w.records, order.size(), static_cast<double>(w.bytes) / 1e9, w.pages, w.pages_loaded,
            w.seconds,
            w.completed ? ""
            : w.stopped ? ", stopped (unloading)"
                        : ", stopped at the time bound",
            w.skipped > 0 ? fmt::format(", {} skipped (in VRAM or locked)", w.skipped) : "");
        if (w.damaged > 0) {
            spdlog::warn(
                "--warmup-ram: {} damaged expert record(s); a request that reads one fails: {}",
                w.damaged, w.damage);
        }
    }
}

}  // namespace

std::unique_ptr<Model> Model::load(const fs::path& dir) { return load(dir, LoadOptions{}); }

std::unique_ptr<Model> Model::load(const fs::path& dir, const LoadOptions& options) {
    std::error_code ec;
    const bool gguf = is_gguf_path(dir);
    if (options.prefetch != "none" && options.prefetch != "dense" && options.prefetch != "all") {
        fail("--prefetch: expected none, dense or all, got \"{}\"", options.prefetch);
    }
    // Progress at each stage boundary; the stages' shares are rough shares of a real load's time
    // (the backend start copies the dense weights and the GPU's experts, the slowest part).
    double reported = 0;
    auto progress = [&](double fraction, const char* stage) {
        if (!options.on_progress || fraction < reported) return;
        reported = fraction;
        options.on_progress(fraction, stage);
    };
    progress(0.0, "configuration");
    std::unique_ptr<Model> m(new Model());
    m->dir_ = dir;
    m->threads_ = options.threads;
    cpu::set_threads(options.threads);
    fs::path tok = dir / "tokenizer.json";
    fs::path config_file = dir / "config.json", generation_file = dir / "generation_config.json";
    if (gguf) {
        // A GGUF file holds everything: config, generation ids and tokenizer in its metadata.
        m->checkpoint_ = Checkpoint::open(dir);
        m->config_ = checkpoint_config(m->checkpoint_);
        if (!m->config_.rope_scaling_given && !options.plain_rope) {
            fail(
                "{}: the metadata has no YaRN rope scaling (gpt-oss.rope.scaling.type \"yarn\"); "
                "the checkpoint is incomplete. Pass --plain-rope 1 to run it with plain RoPE "
                "anyway (changes the answers)",
                dir.string());
        }
        m->generation_ = checkpoint_generation(m->checkpoint_);
        m->tokenizer_ =
            std::make_unique<Tokenizer>(Tokenizer::load(m->checkpoint_.gguf()->files.front()));
        tok = config_file = generation_file = dir;
    } else {
        if (!fs::is_directory(dir, ec)) fail("model folder not found: {}", dir.string());
        m->config_ = ModelConfig::load(config_file, options.plain_rope);
        m->generation_ = GenerationConfig::load(generation_file);
        if (!fs::exists(tok, ec)) {
            fail("{}: tokenizer.json is missing (the checkpoint's tokenizer is required)",
                 dir.string());
        }
        progress(0.02, "tokenizer");
        m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(tok));
    }
    progress(0.08, "checkpoint");
    if (m->tokenizer_->vocab_size() > static_cast<std::size_t>(m->config_.vocab_size)) {
        fail("{}: tokenizer defines {} tokens but the model's vocab_size is {}", tok.string(),
             m->tokenizer_->vocab_size(), m->config_.vocab_size);
    }
    // The special ids the configs name must be tokens of this model (an id past the vocab
    // would never match, so generation would not stop).
    auto check_ids = [&](const fs::path& file, const std::vector<std::int32_t>& ids) {
        for (std::int32_t id : ids) {
            if (id >= m->config_.vocab_size) {
                fail("{}: token id {} is not a token of this model (vocab_size {})", file.string(),
                     id, m->config_.vocab_size);
            }
        }
    };
    {
        std::vector<std::int32_t> config_ids = m->config_.eos_token_ids;
        if (m->config_.pad_token_id) config_ids.push_back(*m->config_.pad_token_id);
        check_ids(config_file, config_ids);
        std::vector<std::int32_t> gen_ids = m->generation_.eos_token_ids;
        if (m->generation_.bos_token_id) gen_ids.push_back(*m->generation_.bos_token_id);
        if (m->generation_.pad_token_id) gen_ids.push_back(*m->generation_.pad_token_id);
        check_ids(generation_file, gen_ids);
    }
    if (!gguf) m->checkpoint_ = Checkpoint::open(dir);
    progress(0.15, "weights");
    m->weights_ = ModelWeights::bind(m->checkpoint_, m->config_);
    if (!options.store.empty()) {
        progress(0.25, "expert store");
        m->store_ = std::make_unique<store::ExpertStore>(store::ExpertStore::open(options.store));
        m->store_->check_matches(m->checkpoint_, m->config_);
        spdlog::debug("experts from {}: {}", options.store.string(),
                      store::describe_store(*m->store_));
        m->store_->set_ram_counters(&m->telemetry_->ram);
        m->store_->set_release_resident(options.release_resident);
    }
    const bool explicit_levers = options.warmup_ram_seconds > 0 || options.lock_ram_bytes > 0;
    if ((explicit_levers || options.release_resident) && !m->store_) {
        fail(
            "--warmup-ram, --lock-ram and --release-resident act on the expert store's records: "
            "they need --store FILE (`neural repack`)");
    }
    if (!(options.warmup_ram_seconds >= 0) && options.warmup_ram_seconds != kWarmupRamAuto) {
        fail("warm-up time must be 0 or more seconds (or auto), got {}",
             options.warmup_ram_seconds);
    }
    // The default warm-up (auto) only where there is a store to warm.
    const bool auto_warmup = m->store_ && options.warmup_ram_seconds == kWarmupRamAuto;
    const bool ram_levers = explicit_levers || auto_warmup;
    // Learned expert statistics: read (a bad file is one warning), and without --ranking they
    // order the static slots and the RAM warm-up.
    if (const fs::path stats_file = routing_stats_path(options.routing_stats, dir, options.store);
        !stats_file.empty()) {
        const int L = m->config_.num_layers, E = m->config_.num_experts;
        std::string id;
        try {
            id = routing_model_id(m->checkpoint_, m->config_);
        } catch (const Error& e) {
            spdlog::warn("expert statistics off: {}", e.what());
        }
        if (!id.empty()) {
            m->stats_ = std::make_unique<RoutingStats>(id, L, E);
            m->stats_path_ = stats_file;
            m->stats_file_seen_ = fs::exists(stats_file, ec);
            std::string why;
            if (const auto d = read_routing_stats(stats_file, id, L, E, &why)) {
                m->stats_->seed(*d);
                const bool used = options.gpu.ranking.empty() && d->tokens > 0;
                spdlog::info("expert statistics: {} tokens learned, last updated {} ({}){}",
                             d->tokens, format_utc(d->updated), stats_file.string(),
                             used            ? ""
                             : d->tokens > 0 ? "; not used: --ranking is given"
                                             : "");
                if (used) m->learned_ = d->layers;
            } else if (!why.empty()) {
                spdlog::warn("expert statistics ignored (new ones will replace the file): {}", why);
            }
            m->stats_saver_ = std::make_unique<StatsSaver>(*m);
        }
    }
    std::vector<store::ExpertKey> ram_order;
    if (ram_levers) {  // before the (slow) backend start: a bad ranking fails early
        Ranking ranking;
        if (!options.gpu.ranking.empty()) ranking = load_ranking(options.gpu.ranking);
        const Ranking* order = !options.gpu.ranking.empty() ? &ranking
                               : !m->learned_.empty()       ? &m->learned_
                                                            : nullptr;
        try {
            ram_order = hot_first(order, m->store_->num_layers(), m->store_->num_experts());
        } catch (const Error& e) {
            fail("{}: {}", options.gpu.ranking.string(), e.what());
        }
    }
    // The fused kernel is checked for every backend (the CUDA backend's misses take the same
    // name); the CPU backend runs its fast path with it, from the store or the checkpoint.
    const std::optional<cpu::KernelIsa> isa = parse_cpu_kernel(options.kernel);
    const CpuDense dense = parse_cpu_dense(options.dense, isa.value_or(cpu::KernelIsa::scalar));
    const CpuPrompt prompt_isa = parse_prompt_kernel(options.prompt_kernel, isa);
    if (options.lm_head_screen != "on" && options.lm_head_screen != "off") {
        fail("unknown --lm-head-screen \"{}\" (on, off)", options.lm_head_screen);
    }
    if (options.backend != "cpu" && options.backend != "cuda" && options.backend != "auto") {
        fail("unknown backend \"{}\" (cpu, cuda, auto)", options.backend);
    }
    progress(0.35, "backend");
    std::string why;
    if (options.backend == "cuda" || (options.backend == "auto" && cuda_backend_available(&why))) {
        GpuBackendInputs in;
        in.config = &m->config_;
        in.weights = &m->weights_;
        in.store = m->store_.get();
        in.kernel = options.kernel == "reference" ? "auto" : options.kernel;
        in.kernel_persistent = options::persistent_team(options, true);
        in.kdll = options.kdll;
        in.threads = options.threads;
        in.moe = &m->telemetry_->moe;
        in.counters = m->backend_counters_.get();
        in.learned_ranking = m->learned_;
        m->backend_ = make_cuda_backend(in, options.gpu);
        spdlog::info("backend: {}", m->backend_->describe());
    } else {
        CpuBackendInputs in;
        in.config = &m->config_;
        in.weights = &m->weights_;
        in.store = m->store_.get();
        in.kernel = isa;
        in.dense = dense;
        in.lm_head_screen = options.lm_head_screen == "on";
        in.prompt = prompt_isa;
        in.team.persistent = options::persistent_team(options, false);
        in.team.library = options.kdll;
        in.team.threads = options.threads;
        in.moe = &m->telemetry_->moe;
        m->backend_ = std::make_unique<CpuBackend>(in);
        if (options.backend == "auto") {
            m->gpu_unavailable_ = why;
            spdlog::info("backend: cpu ({})", why);
        }
    }
    spdlog::debug("loaded {}: {} layers, hidden {}, {} experts (top-{}), {} tensors, {} bytes",
                  dir.string(), m->config_.num_layers, m->config_.hidden_size,
                  m->config_.num_experts, m->config_.experts_per_token,
                  m->checkpoint_.tensor_count(), m->checkpoint_.total_bytes());
    if (m->store_ && options.release_resident && m->store_->pinned()) {
        spdlog::info(
            "--release-resident: nothing released: the GPU backend keeps the whole store "
            "in RAM for its copies (--pin-store)");
    } else if (m->store_ && options.release_resident) {
        const telemetry::RamCounters& ram = m->telemetry_->ram;
        spdlog::info(
            "--release-resident: {} experts ({:.2f} GB) moved into VRAM for good gave "
            "their RAM back",
            ram.released_records.load(std::memory_order_relaxed),
            static_cast<double>(ram.released_bytes.load(std::memory_order_relaxed)) / 1e9);
    }
    if (auto_warmup) {
        // At load, on every core: mapping 10 GB of cached records takes ~1 s on one thread
        // and hashing them ~1 s more, so a background thread would still be at it during the
        // first prompt, and slow it (docs/BENCHMARKS.md); on all cores it takes a fraction.
        progress(0.9, "RAM warm-up");
        const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
        map_cached_records(*m->store_, ram_order,
                           options.threads > 0 ? options.threads : static_cast<int>(cores),
                           m->telemetry_->ram);
    }
    if (explicit_levers) {
        if (options.warmup_sync) progress(0.9, "RAM warm-up");
        // After the backend started: the experts it moved into VRAM for good are released
        // already (release_resident) and are skipped.
        m->ram_worker_ = std::make_unique<RamWorker>();
        RamWorker& w = *m->ram_worker_;
        const store::ExpertStore& st = *m->store_;
        telemetry::RamCounters& ram = m->telemetry_->ram;
        if (options.warmup_sync) {
            run_ram_levers(st, ram_order, options, ram, w.stop);
            w.finish();
        } else {
            w.thread = std::thread([&w, &st, &ram, order = std::move(ram_order), options] {
                try {
                    run_ram_levers(st, order, options, ram, w.stop);
                } catch (const std::exception& e) {
                    spdlog::warn("RAM warm-up stopped: {}", e.what());
                }
                w.finish();
            });
        }
    }
    progress(0.97, "memory hints");
    options::apply_memory_hints(options, *m);
    progress(1.0, "ready");
    return m;
}

Model::~Model() {
    // The timer first, then the last save (the backend and the mappings are still there).
    stats_saver_.reset();
    save_routing_stats();
}

void Model::save_routing_stats() const {
    if (!stats_) return;
    std::lock_guard<std::mutex> lock(stats_save_mutex_);
    std::error_code ec;
    if (stats_file_seen_ && !fs::exists(stats_path_, ec)) {
        stats_->clear();
        stats_file_seen_ = false;
        spdlog::info("expert statistics reset ({} was removed): learning starts afresh",
                     stats_path_.string());
        return;
    }
    try {
        if (stats_->save_if_changed(stats_path_)) {
            stats_file_seen_ = true;
            spdlog::debug("expert statistics saved: {}", stats_path_.string());
        }
    } catch (const std::exception& e) {
        if (!stats_warned_.exchange(true)) {
            spdlog::warn("expert statistics not saved: {}", e.what());
        }
    }
}

void Model::wait_ram_warmup() const {
    if (ram_worker_) ram_worker_->wait();
}

std::vector<float> Model::forward(std::span<const TokenId> tokens, KvCache& cache,
                                  const ForwardOptions& options) {
    // The thread count is the process's (cpu::threads): a model loaded beside this one (the
    // bench's A/B) may have set its own. One atomic store.
    cpu::set_threads(threads_);
    // The files are checked before and after the pass (docs/RELIABILITY.md "A store changed on
    // disk"): logits computed from a store rewritten, truncated or replaced meanwhile are thrown
    // away (ModelFilesChanged), never sampled from.
    check_files();
    std::vector<float> logits;
    if (!stats_) {
        logits = backend_->forward(tokens, cache, options);
    } else {
        // The routing of every call is learned; the observer adds its counts when it goes (a
        // prompt's weigh less than decode's: routing_stats.h "Weight").
        RoutingStatsObserver learn(*stats_, options.observer,
                                   static_cast<std::int64_t>(tokens.size()));
        ForwardOptions o = options;
        o.observer = &learn;
        logits = backend_->forward(tokens, cache, o);
    }
    check_files();
    return logits;
}

void Model::check_files() const {
    if (store_) store_->check_unchanged();
    if (const fs::path faulted = faulted_mapping(); !faulted.empty()) {
        throw ModelFilesChanged(fmt::format(
            "{}: the file changed on disk since it was loaded (a read found it cut short); reload",
            faulted.string()));
    }
}

std::int64_t Model::context_length() const {
    const std::int64_t backend = backend_->context_length();
    return backend > 0 ? backend : config_.max_position_embeddings;
}

const CpuModel& Model::cpu() const {
    const auto* b = dynamic_cast<const CpuBackend*>(backend_.get());
    if (b == nullptr) fail("the loaded backend is \"{}\", not the CPU backend", backend_->name());
    return b->model();
}

std::vector<TokenId> Model::stop_tokens() const {
    std::vector<TokenId> ids =
        generation_.eos_token_ids.empty() ? config_.eos_token_ids : generation_.eos_token_ids;
    // The harmony format ends a turn at <|return|> (final answer) and <|call|> (tool call)
    // whatever the configs list (docs/CHAT_FORMAT.md): config.json alone names only the first.
    for (const char* stop : {"<|return|>", "<|call|>"}) {
        if (const auto id = tokenizer_->special_id(stop)) ids.push_back(*id);
    }
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

std::size_t Model::sampleable_vocab() const {
    return std::min<std::size_t>(tokenizer_->vocab_size(),
                                 static_cast<std::size_t>(config_.vocab_size));
}

}  // namespace neural
