#include "runtime/model.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "neural/error.h"
#include "platform/page_residency.h"
#include "runtime/ranking.h"

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

namespace {

// Lock, then warm up, in `order`; logs what was done (spdlog info; what could not be done is a
// warning: the model runs either way).
void run_ram_levers(const store::ExpertStore& store, const std::vector<store::ExpertKey>& order,
                    const LoadOptions& options, telemetry::RamCounters& ram,
                    const std::atomic<bool>& stop) {
    if (options.lock_ram_bytes > 0 && store.pinned()) {
        spdlog::info("--lock-ram: nothing to lock: the GPU backend keeps the whole store in RAM "
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
        const auto budget = duration_cast<nanoseconds>(duration<double>(options.warmup_ram_seconds));
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
            w.completed ? "" : w.stopped ? ", stopped (unloading)" : ", stopped at the time bound",
            w.skipped > 0 ? fmt::format(", {} skipped (in VRAM or locked)", w.skipped) : "");
        if (w.damaged > 0) {
            spdlog::warn("--warmup-ram: {} damaged expert record(s); a request that reads one fails: {}",
                         w.damaged, w.damage);
        }
    }
}

}  // namespace

std::unique_ptr<Model> Model::load(const fs::path& dir, const LoadOptions& options) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) fail("model folder not found: {}", dir.string());
    std::unique_ptr<Model> m(new Model());
    m->dir_ = dir;
    m->config_ = ModelConfig::load(dir / "config.json");
    m->generation_ = GenerationConfig::load(dir / "generation_config.json");
    const fs::path tok = dir / "tokenizer.json";
    if (!fs::exists(tok, ec)) {
        fail("{}: tokenizer.json is missing (the checkpoint's tokenizer is required)", dir.string());
    }
    m->tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::load(tok));
    if (m->tokenizer_->vocab_size() > static_cast<std::size_t>(m->config_.vocab_size)) {
        fail("{}: tokenizer defines {} tokens but the model's vocab_size is {}", tok.string(),
             m->tokenizer_->vocab_size(), m->config_.vocab_size);
    }
    // The special ids the configs name must be tokens of this model (an id past the vocab
    // would never match, so generation would not stop).
    auto check_ids = [&](const fs::path& file, const std::vector<std::int32_t>& ids) {
        for (std::int32_t id : ids) {
            if (id >= m->config_.vocab_size) {
                fail("{}: token id {} is not a token of this model (vocab_size {})",
                     file.string(), id, m->config_.vocab_size);
            }
        }
    };
    {
        std::vector<std::int32_t> config_ids = m->config_.eos_token_ids;
        if (m->config_.pad_token_id) config_ids.push_back(*m->config_.pad_token_id);
        check_ids(dir / "config.json", config_ids);
        std::vector<std::int32_t> gen_ids = m->generation_.eos_token_ids;
        if (m->generation_.bos_token_id) gen_ids.push_back(*m->generation_.bos_token_id);
        if (m->generation_.pad_token_id) gen_ids.push_back(*m->generation_.pad_token_id);
        check_ids(dir / "generation_config.json", gen_ids);
    }
    m->checkpoint_ = Checkpoint::open(dir);
    m->weights_ = ModelWeights::bind(m->checkpoint_, m->config_);
    if (!options.store.empty()) {
        m->store_ = std::make_unique<store::ExpertStore>(store::ExpertStore::open(options.store));
        m->store_->check_matches(m->checkpoint_, m->config_);
        spdlog::debug("experts from {}: {}", options.store.string(),
                      store::describe_store(*m->store_));
        m->store_->set_ram_counters(&m->telemetry_->ram);
        m->store_->set_release_resident(options.release_resident);
    }
    const bool ram_levers = options.warmup_ram_seconds > 0 || options.lock_ram_bytes > 0;
    if ((ram_levers || options.release_resident) && !m->store_) {
        fail("--warmup-ram, --lock-ram and --release-resident act on the expert store's records: "
             "they need --store FILE (`neural repack`)");
    }
    if (!(options.warmup_ram_seconds >= 0)) {
        fail("warm-up time must be 0 or more seconds, got {}", options.warmup_ram_seconds);
    }
    std::vector<store::ExpertKey> ram_order;
    if (ram_levers) {  // before the (slow) backend start: a bad ranking fails early
        Ranking ranking;
        if (!options.gpu.ranking.empty()) ranking = load_ranking(options.gpu.ranking);
        try {
            ram_order = hot_first(options.gpu.ranking.empty() ? nullptr : &ranking,
                                  m->store_->num_layers(), m->store_->num_experts());
        } catch (const Error& e) {
            fail("{}: {}", options.gpu.ranking.string(), e.what());
        }
    }
    m->cpu_ = std::make_unique<CpuModel>(m->config_, m->weights_, m->store_.get());
    m->cpu_->set_counters(&m->telemetry_->moe);
    if (options.backend != "cpu" && options.backend != "cuda" && options.backend != "auto") {
        fail("unknown backend \"{}\" (cpu, cuda, auto)", options.backend);
    }
    std::string why;
    if (options.backend == "cuda" || (options.backend == "auto" && cuda_backend_available(&why))) {
        GpuBackendInputs in;
        in.config = &m->config_;
        in.weights = &m->weights_;
        in.store = m->store_.get();
        in.kernel = options.kernel == "reference" ? "auto" : options.kernel;
        in.kernel_persistent = options.kernel_persistent || options.gpu.prefer_persistent_team;
        in.kdll = options.kdll;
        in.threads = options.threads;
        in.moe = &m->telemetry_->moe;
        in.counters = m->backend_counters_.get();
        m->gpu_ = make_cuda_backend(in, options.gpu);
        spdlog::info("backend: {}", m->gpu_->describe());
    } else if (options.backend == "auto") {
        spdlog::info("backend: cpu ({})", why);
    }
    spdlog::debug("loaded {}: {} layers, hidden {}, {} experts (top-{}), {} tensors, {} bytes",
                  dir.string(), m->config_.num_layers, m->config_.hidden_size,
                  m->config_.num_experts, m->config_.experts_per_token,
                  m->checkpoint_.tensor_count(), m->checkpoint_.total_bytes());
    if (!m->gpu_ && options.kernel != "reference") {
        // The CPU backend's fast path: the fused MXFP4 expert kernels (from the store, else
        // straight from the checkpoint's expert tensors) and the bf16 dense kernels, on one
        // worker team. (The GPU backend starts its own team for its CPU experts: one per process.)
        cpu::KernelIsa isa;
        if (options.kernel == "auto") {
            isa = cpu::select_kernel_isa();
        } else if (options.kernel == "scalar" || options.kernel == "avx2" || options.kernel == "avx512") {
            isa = options.kernel == "scalar" ? cpu::KernelIsa::scalar
                  : options.kernel == "avx2" ? cpu::KernelIsa::avx2 : cpu::KernelIsa::avx512;
            if (!cpu::kernel_isa_available(isa)) {
                fail("kernel \"{}\" cannot run on this CPU or build (available: {})", options.kernel,
                     cpu::kernel_isa_name(cpu::best_kernel_isa()));
            }
        } else {
            fail("unknown kernel \"{}\" (reference, auto, scalar, avx2, avx512)", options.kernel);
        }
        cpu::TeamOptions team;
        team.persistent = options.kernel_persistent;
        team.library = options.kdll;
        team.threads = options.threads;
        std::string fallback;
        auto worker_team = cpu::make_worker_team(team, &fallback);
        auto moe = m->store_ ? std::make_unique<cpu::StoreMoe>(m->config_, m->weights_, *m->store_,
                                                               isa, std::move(worker_team))
                             : std::make_unique<cpu::StoreMoe>(m->config_, m->weights_, isa,
                                                               std::move(worker_team));
        if (!fallback.empty()) spdlog::warn("persistent CPU team unavailable: {}", fallback);
        const cpu::DenseIsa dense = cpu::dense_isa_for(isa);
        spdlog::debug("experts: {}; dense: {} kernel", moe->describe(), cpu::dense_isa_name(dense));
        m->cpu_->set_store_moe(std::move(moe));
        if (options.dense == "auto") {
            m->cpu_->set_dense_kernel(std::make_unique<cpu::DenseKernel>(dense));
        } else if (options.dense != "reference") {
            fail("unknown dense path \"{}\" (auto, reference)", options.dense);
        }
    }
    if (m->store_ && options.release_resident && m->store_->pinned()) {
        spdlog::info("--release-resident: nothing released: the GPU backend keeps the whole store "
                     "in RAM for its copies (--pin-store)");
    } else if (m->store_ && options.release_resident) {
        const telemetry::RamCounters& ram = m->telemetry_->ram;
        spdlog::info("--release-resident: {} experts ({:.2f} GB) moved into VRAM for good gave "
                     "their RAM back",
                     ram.released_records.load(std::memory_order_relaxed),
                     static_cast<double>(ram.released_bytes.load(std::memory_order_relaxed)) / 1e9);
    }
    if (ram_levers) {
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
    return m;
}

Model::~Model() = default;

void Model::wait_ram_warmup() const {
    if (ram_worker_) ram_worker_->wait();
}

std::vector<float> Model::forward(std::span<const TokenId> tokens, KvCache& cache,
                                  const ForwardOptions& options) const {
    return gpu_ ? gpu_->forward(tokens, cache, options) : cpu_->forward(tokens, cache, options);
}

std::string Model::describe_backend() const {
    if (gpu_) return gpu_->describe();
    if (const auto* moe = cpu_->store_moe()) return "cpu (" + moe->describe() + ")";
    return "cpu (fp32 reference)";
}

std::vector<TokenId> Model::stop_tokens() const {
    std::vector<TokenId> ids =
        generation_.eos_token_ids.empty() ? config_.eos_token_ids : generation_.eos_token_ids;
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    return ids;
}

std::size_t Model::sampleable_vocab() const {
    return std::min<std::size_t>(tokenizer_->vocab_size(),
                                 static_cast<std::size_t>(config_.vocab_size));
}

}  // namespace neural
