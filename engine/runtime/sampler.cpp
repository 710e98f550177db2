#include "runtime/sampler.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/kernels/sampler_weights.h"
#include "neural/error.h"

namespace neural {

void SamplingParams::validate() const {
    if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
        fail("temperature must be a finite number >= 0, got {}", temperature);
    }
    if (top_k < 0) fail("top_k must be >= 0, got {}", top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got {}", top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got {}", min_p);
    if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
        fail("presence_penalty must be in [-2, 2], got {}", presence_penalty);
    if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
        fail("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
    if (!(repetition_penalty > 0.0f && repetition_penalty <= 10.0f))
        fail("repetition_penalty must be in (0, 10], got {}", repetition_penalty);
}

namespace {

// One token's penalised logit; the one formula both paths use.
float penalised(float logit, std::int32_t count, float presence, float frequency,
                float repetition) {
    if (count <= 0) return logit;
    if (repetition != 1.0f) logit = logit > 0.0f ? logit / repetition : logit * repetition;
    return logit - presence - frequency * static_cast<float>(count);
}

}  // namespace

TokenPenalties::TokenPenalties(const SamplingParams& params)
    : presence_(params.presence_penalty),
      frequency_(params.frequency_penalty),
      repetition_(params.repetition_penalty),
      active_(params.penalised()) {}

void TokenPenalties::add(std::int32_t id) {
    if (active_) ++counts_[id];
}

void TokenPenalties::apply(std::span<float> logits) const {
    for (const auto& [id, count] : counts_) {
        if (id < 0 || static_cast<std::size_t>(id) >= logits.size()) continue;
        float& l = logits[static_cast<std::size_t>(id)];
        l = penalised(l, count, presence_, frequency_, repetition_);
    }
}

std::vector<std::int32_t> TokenPenalties::ids() const {
    std::vector<std::int32_t> out;
    out.reserve(counts_.size());
    for (const auto& [id, count] : counts_) out.push_back(id);
    std::sort(out.begin(), out.end());
    return out;
}

float TokenPenalties::apply_one(std::int32_t id, float logit) const {
    const auto it = counts_.find(id);
    return it == counts_.end() ? logit
                               : penalised(logit, it->second, presence_, frequency_, repetition_);
}

void apply_penalties_reference(const SamplingParams& params,
                               std::span<const std::int32_t> generated, std::span<float> logits) {
    for (std::size_t id = 0; id < logits.size(); ++id) {
        const auto count = static_cast<std::int32_t>(
            std::count(generated.begin(), generated.end(), static_cast<std::int32_t>(id)));
        logits[id] = penalised(logits[id], count, params.presence_penalty, params.frequency_penalty,
                               params.repetition_penalty);
    }
}

Sampler::Sampler(const SamplingParams& params)
    : params_(params), rng_(params.seed), isa_(cpu::best_kernel_isa()) {
    params_.validate();
}

namespace {

// Ranks a before b: the larger logit, then the lower id (a total order on ids).
struct Before {
    std::span<const float> view;
    bool operator()(std::int32_t a, std::int32_t b) const {
        const float va = view[static_cast<std::size_t>(a)], vb = view[static_cast<std::size_t>(b)];
        return va > vb || (va == vb && a < b);
    }
    bool operator()(const SampleCandidate& a, const SampleCandidate& b) const {
        return (*this)(a.id, b.id);
    }
};

// The exponent field of a weight in [0, 1] (0 for 0 and denormals, 127 for 1).
int exponent_field(float w) {
    std::uint32_t bits;
    std::memcpy(&bits, &w, 4);
    return static_cast<int>(bits >> 23);
}

// The filters after top-k on a candidate list (c[0, sorted) in final order, the rest in id
// order), in double: softmax at the temperature, min-p, top-p (growing the sorted head until it
// holds top_p of the mass), then the draw u in [0, 1) over what is kept, in list order.
std::int32_t pick_candidates(const SamplingParams& params, std::span<const float> view,
                             std::vector<SampleCandidate>& c, std::size_t sorted, double u) {
    const Before rank{view};
    const double inv_t = 1.0 / params.temperature;
    float top = view[static_cast<std::size_t>(c[0].id)];
    for (const SampleCandidate& x : c) top = std::max(top, view[static_cast<std::size_t>(x.id)]);
    double sum = 0.0;
    for (SampleCandidate& x : c) {
        x.p = std::exp((static_cast<double>(view[static_cast<std::size_t>(x.id)]) - top) * inv_t);
        sum += x.p;
    }
    for (SampleCandidate& x : c) x.p /= sum;

    if (params.min_p > 0.0f) {
        // p_max = exp(0) / sum; keep p >= min_p * p_max (order preserved; the max always stays).
        const double floor = params.min_p * (1.0 / sum);
        std::size_t k = 0;
        for (std::size_t i = 0; i < c.size(); ++i) {
            if (c[i].p >= floor) c[k++] = c[i];
        }
        c.resize(k);
        sorted = std::min(sorted, k);
    }
    std::size_t keep = c.size();
    if (params.top_p < 1.0f) {
        std::size_t head = std::min<std::size_t>(c.size(), 256);
        double cum = 0.0;
        std::size_t k = 0;
        while (true) {
            if (head > sorted) {
                std::partial_sort(c.begin() + static_cast<std::ptrdiff_t>(sorted),
                                  c.begin() + static_cast<std::ptrdiff_t>(head), c.end(), rank);
                sorted = head;
            }
            while (k < head && cum < params.top_p) cum += c[k++].p;
            if (cum >= params.top_p || head == c.size()) break;
            head = std::min(c.size(), head * 8);
        }
        keep = std::max<std::size_t>(k, 1);
    }
    double total = 0.0;
    for (std::size_t i = 0; i < keep; ++i) total += c[i].p;
    const double target = u * total;
    double acc = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        acc += c[i].p;
        if (target < acc) return c[i].id;
    }
    return c[keep - 1].id;
}

constexpr std::size_t kBlock = 2048;  // ids per block sum (the draw walks blocks, then ids)

}  // namespace

std::optional<LogitsScreen> logits_screen_for(const SamplingParams& params, std::size_t valid,
                                              const TokenPenalties* penalties) {
    LogitsScreen s;
    s.valid = valid;
    s.penalties = penalties != nullptr && penalties->active() ? penalties : nullptr;
    // Greedy: argmax() takes the largest value and its lowest id, both among the ids that can
    // reach the largest value.
    if (params.temperature == 0.0f || params.top_k == 1) return s;
    // Top-k: pick() and pick_candidates read the values of the k best ids (by value, then id: a
    // total order) and nothing else; every one of them can rank among the k largest.
    if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < valid) {
        s.top_k = params.top_k;
        return s;
    }
    // Min-p alone: pick_full weighs id i exp((v_i - top) / T) (sampler_weights: float
    // arithmetic, relative error < 1e-5 after the two roundings of (v - top) * inv_t) and keeps
    // it only when it is >= min_p; -infinity weighs 0. An id with v_i <= top - T (0.01 - ln
    // min_p) has weight <= min_p e^-0.01 (1 + 3e-5) < min_p: 0 in both, so the same weights,
    // the same block sums and the same walk for the same draw. Top-p reads the raw sum of every
    // weight, so only without it.
    if (params.min_p > 0.0f && params.top_p >= 1.0f) {
        s.top_k = 1;
        s.window = static_cast<double>(params.temperature) *
                   (0.01 - std::log(static_cast<double>(params.min_p)));
        return s;
    }
    return std::nullopt;
}

// Two passes, the largest value (vectorized), then its first index: one pass that carries the
// best index compares every value with a load through that index, a dependency chain of a load
// per value (0.8 ms per token over gpt-oss's 201,088 logits on a Xeon).
std::int32_t argmax(std::span<const float> values) {
    if (values.empty()) return 0;
    const float top = cpu::max_value(values.data(), values.size());
    if (top != top) return 0;  // the first value is NaN: nothing compares greater
    const std::size_t at = cpu::first_equal(values.data(), values.size(), top);
    return at < values.size() ? static_cast<std::int32_t>(at) : 0;
}

std::int32_t sample_reference(const SamplingParams& params, std::span<const float> logits,
                              std::size_t valid, double u) {
    params.validate();
    const std::size_t n = std::min(valid, logits.size());
    if (n == 0) fail("cannot sample from an empty distribution");
    const auto view = logits.first(n);
    if (params.temperature == 0.0f || params.top_k == 1) return argmax(view);
    std::vector<SampleCandidate> c(n);
    for (std::size_t i = 0; i < n; ++i) c[i] = {static_cast<std::int32_t>(i), 0.0};
    std::size_t sorted = 0;  // c[0, sorted) is in final order
    if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < n) {
        sorted = static_cast<std::size_t>(params.top_k);
        std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(sorted), c.end(),
                          Before{view});
        c.resize(sorted);
    }
    return pick_candidates(params, view, c, sorted, u);
}

std::int32_t Sampler::sample(std::span<const float> logits, std::size_t valid) {
    // A uniform draw from the 53-bit mantissa is reproducible across platforms, unlike
    // std::uniform_real_distribution whose algorithm is implementation-defined. Greedy draws
    // nothing.
    if (params_.temperature == 0.0f || params_.top_k == 1) return pick(logits, valid, 0.0);
    return pick(logits, valid, static_cast<double>(rng_() >> 11) * 0x1.0p-53);
}

std::int32_t Sampler::pick(std::span<const float> logits, std::size_t valid, double u) {
    const std::size_t n = std::min(valid, logits.size());
    if (n == 0) fail("cannot sample from an empty distribution");
    const auto view = logits.first(n);
    if (params_.temperature == 0.0f || params_.top_k == 1) return argmax(view);
    if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < n) {
        // The k best ids in one pass: a heap of k whose front is the worst kept (most ids only
        // meet one comparison with it), then sorted; the rest is the reference path's.
        const Before before{view};
        const auto k = static_cast<std::size_t>(params_.top_k);
        order_.clear();
        for (std::size_t i = 0; i < n; ++i) {
            const auto id = static_cast<std::int32_t>(i);
            if (order_.size() < k) {
                order_.push_back(id);
                std::push_heap(order_.begin(), order_.end(), before);
            } else if (before(id, order_.front())) {
                std::pop_heap(order_.begin(), order_.end(), before);
                order_.back() = id;
                std::push_heap(order_.begin(), order_.end(), before);
            }
        }
        std::sort_heap(order_.begin(), order_.end(), before);
        candidates_.resize(k);
        for (std::size_t i = 0; i < k; ++i) candidates_[i] = {order_[i], 0.0};
        return pick_candidates(params_, view, candidates_, k, u);
    }
    return pick_full(view, u);
}

// The whole vocabulary: weights exp((logit - max) / T) in float, min-p as weight >= min_p (the
// largest weighs exactly 1), sums per block of ids; the draw walks the blocks, then the ids of
// one, in id order as the reference does. Top-p goes on in pick_top_p.
std::int32_t Sampler::pick_full(std::span<const float> view, double u) {
    const std::size_t n = view.size();
    const float top = cpu::max_value(view.data(), n);
    const auto inv_t = static_cast<float>(1.0 / params_.temperature);
    weights_.resize(n);
    const std::size_t blocks = (n + kBlock - 1) / kBlock;
    block_sums_.resize(blocks);
    double total = 0.0, total_raw = 0.0;
    for (std::size_t b = 0; b < blocks; ++b) {
        const std::size_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
        const cpu::WeightSums sums = cpu::sampler_weights(
            isa_, view.data() + lo, weights_.data() + lo, hi - lo, top, inv_t, params_.min_p);
        block_sums_[b] = sums.kept;
        total += sums.kept;
        total_raw += sums.raw;
    }
    if (params_.top_p < 1.0f) return pick_top_p(view, total_raw, u);
    const double target = u * total;
    double acc = 0.0;
    std::size_t b = 0;
    while (b + 1 < blocks && acc + block_sums_[b] <= target) acc += block_sums_[b++];
    std::int32_t last = -1;  // the last id of weight > 0 seen (rounding may leave the target)
    for (; b < blocks; ++b) {
        const std::size_t lo = b * kBlock, hi = std::min(n, lo + kBlock);
        for (std::size_t i = lo; i < hi; ++i) {
            if (weights_[i] <= 0.0f) continue;
            acc += weights_[i];
            last = static_cast<std::int32_t>(i);
            if (target < acc) return last;
        }
    }
    return last >= 0 ? last : argmax(view);
}

// Top-p over the whole vocabulary: the smallest head, in logit order, whose weight reaches
// top_p of all weights (before min-p, as the reference). The head is found without sorting the
// vocabulary: weights summed per binary exponent (a weight in (0, 1] has one of 127), the
// exponents walked from the largest until top_p of the mass is reached; only ids of that
// exponent and above (and the one below, for rounding) are sorted.
std::int32_t Sampler::pick_top_p(std::span<const float> view, double total_raw, double u) {
    const std::size_t n = view.size();
    std::array<double, 256> mass{};
    for (std::size_t i = 0; i < n; ++i)
        mass[static_cast<std::size_t>(exponent_field(weights_[i]))] += weights_[i];
    const double want = static_cast<double>(params_.top_p) * total_raw;
    int lowest = 0;  // the smallest exponent field of the head
    double cum = 0.0;
    for (int e = 255; e > 0; --e) {
        cum += mass[static_cast<std::size_t>(e)];
        if (cum >= want) {
            lowest = e;
            break;
        }
    }
    lowest = std::max(lowest - 1, 1);  // one exponent more: ids that rounding put below
    order_.clear();
    for (std::size_t i = 0; i < n; ++i) {
        if (exponent_field(weights_[i]) >= lowest) order_.push_back(static_cast<std::int32_t>(i));
    }
    std::sort(order_.begin(), order_.end(), Before{view});
    std::size_t keep = 0;
    double head = 0.0;
    while (keep < order_.size() && head < want)
        head += weights_[static_cast<std::size_t>(order_[keep++])];
    keep = std::max<std::size_t>(keep, 1);
    if (order_.empty()) return argmax(view);
    const double target = u * head;
    double acc = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        acc += weights_[static_cast<std::size_t>(order_[i])];
        if (target < acc) return order_[i];
    }
    return order_[keep - 1];
}

std::int32_t Sampler::sample_constrained(std::span<const float> logits, std::size_t valid,
                                         const std::function<bool(std::int32_t)>& allowed,
                                         const std::function<void(std::vector<float>&)>& mask,
                                         int tries, bool* masked) {
    const std::size_t n = std::min(valid, logits.size());
    if (n == 0) fail("cannot sample from an empty distribution");
    work_.assign(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(n));
    constexpr float kNone = -std::numeric_limits<float>::infinity();
    if (masked) *masked = false;
    for (int t = 0; t < tries; ++t) {
        const std::int32_t id = sample(work_, n);
        if (work_[static_cast<std::size_t>(id)] == kNone) break;  // nothing finite left
        if (allowed(id)) return id;
        work_[static_cast<std::size_t>(id)] = kNone;
    }
    mask(work_);
    if (masked) *masked = true;
    if (std::none_of(work_.begin(), work_.end(), [&](float v) { return v != kNone; })) {
        fail("no token can continue the constrained output");
    }
    return sample(work_, n);
}

double token_logprobs(std::span<const float> logits, std::size_t valid, std::int32_t chosen,
                      int top_n, std::vector<std::pair<std::int32_t, double>>& top) {
    const std::size_t n = std::min(valid, logits.size());
    double max = -std::numeric_limits<double>::infinity();
    for (std::size_t i = 0; i < n; ++i) max = std::max(max, static_cast<double>(logits[i]));
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
    const double log_z = max + std::log(sum);
    top.clear();
    const auto k = std::min(static_cast<std::size_t>(std::max(top_n, 0)), n);
    if (k > 0) {
        std::vector<std::int32_t> ids(n);
        for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::int32_t>(i);
        auto better = [&](std::int32_t a, std::int32_t b) {
            const float la = logits[static_cast<std::size_t>(a)];
            const float lb = logits[static_cast<std::size_t>(b)];
            return la > lb || (la == lb && a < b);
        };
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                          better);
        for (std::size_t i = 0; i < k; ++i)
            top.emplace_back(ids[i],
                             static_cast<double>(logits[static_cast<std::size_t>(ids[i])]) - log_z);
    }
    if (chosen < 0 || static_cast<std::size_t>(chosen) >= n)
        return -std::numeric_limits<double>::infinity();
    return static_cast<double>(logits[static_cast<std::size_t>(chosen)]) - log_z;
}

std::vector<double> log_softmax_reference(std::span<const float> logits, std::size_t valid) {
    const std::size_t n = std::min(valid, logits.size());
    std::vector<double> out(n);
    if (n == 0) return out;
    const double max =
        *std::max_element(logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(n));
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - max);
    for (std::size_t i = 0; i < n; ++i)
        out[i] = std::log(std::exp(static_cast<double>(logits[i]) - max) / sum);
    return out;
}

}  // namespace neural
