#include "runtime/generate.h"

#include <algorithm>
#include <optional>

#include "neural/error.h"

namespace neural {

const char* finish_reason_name(FinishReason r) {
    switch (r) {
        case FinishReason::kStop:
            return "stop";
        case FinishReason::kLength:
            return "length";
        case FinishReason::kCancelled:
            return "cancelled";
    }
    return "?";
}

GenerateResult generate(Model& model, KvCache& cache, std::span<const TokenId> prompt,
                        const GenerateOptions& options,
                        const std::function<bool(TokenId)>& on_token) {
    if (options.max_tokens < 0) fail("max_tokens must be >= 0, got {}", options.max_tokens);
    if (prompt.empty() && cache.size() == 0) fail("the prompt is empty");
    Sampler sampler(options.sampling);
    GenerateResult result;
    ForwardOptions fo;
    fo.cancel = options.cancel;
    const std::size_t vocab = model.sampleable_vocab();
    // The sampler's draw may skip the logits of tokens it cannot pick (ForwardOptions::screen);
    // logprobs read every logit.
    const std::optional<LogitsScreen> screen =
        options.logprobs >= 0 ? std::nullopt : logits_screen_for(options.sampling, vocab, nullptr);
    fo.screen = screen ? &*screen : nullptr;
    std::vector<std::pair<TokenId, double>> top;
    try {
        if (prompt.empty()) fail("generate: no new tokens to process");
        std::vector<float> logits = model.forward(prompt, cache, fo);
        while (static_cast<int>(result.tokens.size()) < options.max_tokens) {
            const TokenId next = sampler.sample(logits, vocab);
            result.tokens.push_back(next);
            if (options.logprobs >= 0 && options.on_logprob) {
                top.clear();
                const double lp = token_logprobs(logits, vocab, next, options.logprobs, top);
                options.on_logprob(next, lp, top);
            }
            const bool keep_going = !on_token || on_token(next);
            if (std::find(options.stop_tokens.begin(), options.stop_tokens.end(), next) !=
                options.stop_tokens.end()) {
                result.finish = FinishReason::kStop;
                return result;
            }
            if (!keep_going) {
                result.finish = FinishReason::kCancelled;
                return result;
            }
            if (static_cast<int>(result.tokens.size()) == options.max_tokens) break;
            logits = model.forward(std::span<const TokenId>(&next, 1), cache, fo);
        }
        result.finish = FinishReason::kLength;
    } catch (const Cancelled&) {
        result.finish = FinishReason::kCancelled;
    }
    return result;
}

}  // namespace neural
