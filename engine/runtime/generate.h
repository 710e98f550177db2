// The token loop shared by the CLI (and later the chat session and the server): process the new
// prompt tokens, then sample and feed one token at a time until a stop token, the token limit or
// a cancel.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "backend/kv_cache.h"
#include "runtime/model.h"
#include "runtime/sampler.h"

namespace neural {

enum class FinishReason { kStop, kLength, kCancelled };
const char* finish_reason_name(FinishReason r);

struct GenerateOptions {
    int max_tokens = 256;
    SamplingParams sampling;
    std::vector<TokenId> stop_tokens;  // generation ends after emitting one of these
    const std::atomic<bool>* cancel = nullptr;
    // The API's logprobs (-1: off): each sampled token's log-probability in the model's
    // distribution (token_logprobs(): temperature 1, before the sampling filters) and the
    // `logprobs` most likely ids, given to on_logprob before on_token sees the token.
    int logprobs = -1;
    std::function<void(TokenId, double, const std::vector<std::pair<TokenId, double>>&)> on_logprob;
};

struct GenerateResult {
    std::vector<TokenId> tokens;  // generated tokens, including a final stop token
    FinishReason finish = FinishReason::kLength;
};

// Appends `prompt` to `cache` (which may already hold earlier tokens of the same sequence) and
// generates. `on_token` is called for every generated token as soon as it is chosen; returning
// false stops generation (finish = cancelled). On cancellation the cache holds exactly the
// tokens processed so far, so the sequence can continue.
GenerateResult generate(Model& model, KvCache& cache, std::span<const TokenId> prompt,
                        const GenerateOptions& options,
                        const std::function<bool(TokenId)>& on_token = {});

}  // namespace neural
