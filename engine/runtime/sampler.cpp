#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
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

    // Candidates sorted by logit (descending, ties by id) so every filter is order-stable.
    std::vector<std::int32_t> ids(n);
    std::iota(ids.begin(), ids.end(), 0);
    auto by_logit = [&](std::int32_t a, std::int32_t b) {
        return view[a] > view[b] || (view[a] == view[b] && a < b);
    };
    std::size_t keep = n;
    if (params_.top_k > 0 && static_cast<std::size_t>(params_.top_k) < n) {
        keep = static_cast<std::size_t>(params_.top_k);
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), by_logit);
    } else {
        std::sort(ids.begin(), ids.end(), by_logit);
    }
    ids.resize(keep);

    const double inv_t = 1.0 / params_.temperature;
    const double top = view[ids[0]];
    std::vector<double> p(keep);
    double sum = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        p[i] = std::exp((view[ids[i]] - top) * inv_t);
        sum += p[i];
    }
    for (auto& x : p) x /= sum;

    if (params_.min_p > 0.0f) {
        const double floor = params_.min_p * p[0];
        std::size_t k = 1;
        while (k < keep && p[k] >= floor) ++k;
        keep = k;
    }
    if (params_.top_p < 1.0f) {
        double cum = 0.0;
        std::size_t k = 0;
        while (k < keep) {
            cum += p[k++];
            if (cum >= params_.top_p) break;
        }
        keep = std::max<std::size_t>(k, 1);
    }
    double total = 0.0;
    for (std::size_t i = 0; i < keep; ++i) total += p[i];
    // A uniform draw from the 53-bit mantissa is reproducible across platforms, unlike
    // std::uniform_real_distribution whose algorithm is implementation-defined.
    const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53 * total;
    double acc = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        acc += p[i];
        if (u < acc) return ids[i];
    }
    return ids[keep - 1];
}

}  // namespace neural
