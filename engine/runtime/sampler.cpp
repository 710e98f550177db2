#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "neural/error.h"

namespace neural {

void SamplingParams::validate() const {
    if (!(temperature >= 0.0f) || !std::isfinite(temperature)) {
        fail("temperature must be a finite number >= 0, got {}", temperature);
    }
    if (top_k < 0) fail("top_k must be >= 0, got {}", top_k);
    if (!(top_p > 0.0f && top_p <= 1.0f)) fail("top_p must be in (0, 1], got {}", top_p);
    if (!(min_p >= 0.0f && min_p <= 1.0f)) fail("min_p must be in [0, 1], got {}", min_p);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
    params_.validate();
}

std::int32_t argmax(std::span<const float> values) {
    std::int32_t best = 0;
    for (std::size_t i = 1; i < values.size(); ++i) {
        if (values[i] > values[static_cast<size_t>(best)]) best = static_cast<std::int32_t>(i);
    }
    return best;
}

std::int32_t Sampler::sample(std::span<const float> logits, std::size_t valid) {
    const std::size_t n = std::min(valid, logits.size());
    if (n == 0) fail("cannot sample from an empty distribution");
    const auto view = logits.first(n);
    if (params_.temperature == 0.0f || params_.top_k == 1) return argmax(view);

    // Sorting the whole vocabulary (200k ids) every token costs more than the rest of sampling;
    // only top-k and top-p need an order, and top-p only for the head of the distribution.
    struct Cand {
        std::int32_t id;
        double p;  // unnormalized until the filters below
    };
    auto before = [&](const Cand& a, const Cand& b) {
        return view[a.id] > view[b.id] || (view[a.id] == view[b.id] && a.id < b.id);
    };
    std::vector<Cand> c;
    std::size_t sorted = 0;  // c[0, sorted) is in final order
    if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < n) {
        c.resize(n);
        for (std::size_t i = 0; i < n; ++i) c[i] = {static_cast<std::int32_t>(i), 0.0};
        sorted = static_cast<std::size_t>(params_.top_k);
        std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(sorted), c.end(),
                          before);
        c.resize(sorted);
    } else {
        c.resize(n);
        for (std::size_t i = 0; i < n; ++i) c[i] = {static_cast<std::int32_t>(i), 0.0};
    }

    const double inv_t = 1.0 / params_.temperature;
    float top = view[c[0].id];
    for (const Cand& x : c) top = std::max(top, view[x.id]);
    double sum = 0.0;
    for (Cand& x : c) {
        x.p = std::exp((static_cast<double>(view[x.id]) - top) * inv_t);
        sum += x.p;
    }
    for (Cand& x : c) x.p /= sum;

    if (params_.min_p > 0.0f) {
        // p_max = exp(0) / sum; keep p >= min_p * p_max (order preserved; the max always stays).
        const double floor = params_.min_p * (1.0 / sum);
        std::size_t k = 0;
        for (std::size_t i = 0; i < c.size(); ++i) {
            if (c[i].p >= floor) c[k++] = c[i];
        }
        c.resize(k);
        sorted = std::min(sorted, k);
    }
    std::size_t keep = c.size();
    if (params_.top_p < 1.0f) {
        // Grow the sorted head until it holds top_p of the mass.
        std::size_t head = std::min<std::size_t>(c.size(), 256);
        double cum = 0.0;
        std::size_t k = 0;
        while (true) {
            if (head > sorted) {
                std::partial_sort(c.begin() + static_cast<std::ptrdiff_t>(sorted),
                                  c.begin() + static_cast<std::ptrdiff_t>(head), c.end(), before);
                sorted = head;
            }
            while (k < head && cum < params_.top_p) cum += c[k++].p;
            if (cum >= params_.top_p || head == c.size()) break;
            head = std::min(c.size(), head * 8);
        }
        keep = std::max<std::size_t>(k, 1);
    }
    double total = 0.0;
    for (std::size_t i = 0; i < keep; ++i) total += c[i].p;
    // A uniform draw from the 53-bit mantissa is reproducible across platforms, unlike
    // std::uniform_real_distribution whose algorithm is implementation-defined.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
    double acc = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        acc += c[i].p;
        if (u < acc) return c[i].id;
    }
    return c[keep - 1].id;
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

}  // namespace neural
