#include "runtime/model.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "neural/error.h"

namespace neural {

namespace fs = std::filesystem;

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
    m->checkpoint_ = Checkpoint::open(dir);
    m->weights_ = ModelWeights::bind(m->checkpoint_, m->config_);
    if (!options.store.empty()) {
        m->store_ = std::make_unique<store::ExpertStore>(store::ExpertStore::open(options.store));
        m->store_->check_matches(m->checkpoint_, m->config_);
        spdlog::debug("experts from {}: {}", options.store.string(),
                      store::describe_store(*m->store_));
    }
    m->cpu_ = std::make_unique<CpuModel>(m->config_, m->weights_, m->store_.get());
    m->cpu_->set_counters(&m->telemetry_->moe);
    if (m->store_ && options.kernel != "reference") {
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
        auto moe = std::make_unique<cpu::StoreMoe>(m->config_, m->weights_, *m->store_, isa,
                                                   cpu::make_worker_team(team, &fallback));
        if (!fallback.empty()) spdlog::warn("persistent CPU team unavailable: {}", fallback);
        spdlog::debug("experts: {}", moe->describe());
        m->cpu_->set_store_moe(std::move(moe));
    }
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
    return m;
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
