#include "cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace neural::cpu {

Rope::Rope(const ModelConfig& c) : head_dim_(c.head_dim) {
    const int half = c.head_dim / 2;
    const float base = static_cast<float>(c.rope_theta);
    const float d = static_cast<float>(c.head_dim);
    inv_freq_.resize(static_cast<size_t>(half));
    // fp32 throughout, op for op like the references (transformers' _compute_yarn_parameters).
    std::vector<float> pos_freq(static_cast<size_t>(half));
    for (int i = 0; i < half; ++i) {
        pos_freq[static_cast<size_t>(i)] = std::pow(base, static_cast<float>(2 * i) / d);
    }
    if (c.rope.type != "yarn") {
        for (int i = 0; i < half; ++i)
            inv_freq_[static_cast<size_t>(i)] = 1.0f / pos_freq[static_cast<size_t>(i)];
        concentration_ = 1.0f;
        return;
    }
    const double factor = c.rope.factor;
    auto correction_dim = [&](double rotations) {
        return (c.head_dim * std::log(c.rope.original_max_position_embeddings /
                                      (rotations * 2.0 * std::numbers::pi))) /
               (2.0 * std::log(c.rope_theta));
    };
    double lo = correction_dim(c.rope.beta_fast);
    double hi = correction_dim(c.rope.beta_slow);
    if (c.rope.truncate) {
        lo = std::floor(lo);
        hi = std::ceil(hi);
    }
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(c.head_dim - 1));
    if (lo == hi) hi += 0.001;  // avoid a division by zero, as the references do
    for (int i = 0; i < half; ++i) {
        const float ramp = std::clamp(static_cast<float>((i - lo) / (hi - lo)), 0.0f, 1.0f);
        const float extrap = 1.0f / pos_freq[static_cast<size_t>(i)];
        const float interp = 1.0f / (static_cast<float>(factor) * pos_freq[static_cast<size_t>(i)]);
        const float extrap_factor = 1.0f - ramp;
        inv_freq_[static_cast<size_t>(i)] =
            interp * (1.0f - extrap_factor) + extrap * extrap_factor;
    }
    if (c.rope.attention_factor) {
        concentration_ = static_cast<float>(*c.rope.attention_factor);
    } else {
        concentration_ = factor > 1.0 ? static_cast<float>(0.1 * std::log(factor) + 1.0) : 1.0f;
    }
}

void Rope::apply(float* x, int heads, std::int64_t pos) const {
    const int half = head_dim_ / 2;
    // The angles' cos and sin, in scratch kept per thread (prompt blocks call this from every
    // team thread at once: no allocation per call).
    thread_local std::vector<float> cs_buf, sn_buf;
    cs_buf.resize(static_cast<size_t>(half));
    sn_buf.resize(static_cast<size_t>(half));
    float* cs = cs_buf.data();
    float* sn = sn_buf.data();
    const float p = static_cast<float>(pos);
    for (int i = 0; i < half; ++i) {
        const float angle = p * inv_freq_[static_cast<size_t>(i)];
        cs[i] = std::cos(angle) * concentration_;
        sn[i] = std::sin(angle) * concentration_;
    }
    for (int h = 0; h < heads; ++h) {
        float* z = x + static_cast<std::ptrdiff_t>(h) * head_dim_;
        for (int i = 0; i < half; ++i) {
            const float a = z[i], b = z[i + half];
            z[i] = a * cs[i] - b * sn[i];
            z[i + half] = b * cs[i] + a * sn[i];
        }
    }
}

}  // namespace neural::cpu
