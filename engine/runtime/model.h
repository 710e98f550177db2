// A loaded gpt-oss model: config, generation config, tokenizer, mapped checkpoint, validated
// weight views and the CPU backend. Loading validates everything before the first forward pass.
#pragma once

#include <filesystem>
#include <memory>
#include <vector>

#include "cpu/reference_model.h"
#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "runtime/kv_cache.h"
#include "tokenizer/tokenizer.h"

namespace neural {

class Model {
 public:
  // Reads DIR/config.json, DIR/generation_config.json (optional), DIR/tokenizer.json and the
  // safetensors weights. Throws neural::Error naming the bad file / tensor / field.
  static std::unique_ptr<Model> load(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  const GenerationConfig& generation() const { return generation_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Checkpoint& checkpoint() const { return checkpoint_; }
  const CpuModel& cpu() const { return *cpu_; }

  KvCache new_cache() const { return KvCache(config_); }
  // Ids generation stops on: generation_config eos ids, else config eos ids.
  std::vector<TokenId> stop_tokens() const;
  // Ids that may be sampled: the tokenizer's vocabulary (lm_head rows past it are never emitted).
  std::size_t sampleable_vocab() const;

 private:
  Model() = default;
  std::filesystem::path dir_;
  ModelConfig config_;
  GenerationConfig generation_;
  std::unique_ptr<Tokenizer> tokenizer_;
  Checkpoint checkpoint_;
  ModelWeights weights_;
  std::unique_ptr<CpuModel> cpu_;
};

}  // namespace neural
