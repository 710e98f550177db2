#include "cpu/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "platform/thread_scratch.h"

namespace neural::cpu {

namespace {

// sin and cos of a float angle (|x| < 2^20 radians: positions below a million) in double
// arithmetic alone, rounded to float: the C library's sinf / cosf differ between runtimes (glibc
// even picks an FMA or a plain build by CPU, the Windows runtime has its own), and RoPE runs on
// every token, so its bits must be the same everywhere (docs/KERNELS.md "Every variant the same
// bits"). x = k pi/2 + r with pi/2 in three parts (fdlibm's: k * part is exact), |r| <= pi/4,
// then fdlibm's kernel polynomials (error below 1 ulp of double), so the float result is the
// correctly rounded one except within 1e-16 of a rounding tie. Baseline x86-64 has no fused
// multiply-add to contract into: the same bits on every CPU and compiler setting.
void sincos_portable(float angle, float* s, float* c) {
    const double x = angle;
    const double shift = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
    const double k = (x * 6.36619772367581382433e-01 + shift) - shift;
    double r = x - k * 1.57079632673412561417e+00;
    r = r - k * 6.07710050630396597660e-11;
    r = r - k * 2.02226624871116645580e-21;
    const double z = r * r;
    const double sr =
        r +
        r * z *
            (-1.66666666666666324348e-01 +
             z * (8.33333333332248946124e-03 +
                  z * (-1.98412698298579493134e-04 +
                       z * (2.75573137070700676789e-06 +
                            z * (-2.50507602534068634195e-08 + z * 1.58969099521155010221e-10)))));
    const double cr =
        1.0 - 0.5 * z +
        z * z *
            (4.16666666666666019037e-02 +
             z * (-1.38888888888741095749e-03 +
                  z * (2.48015872894767294178e-05 +
                       z * (-2.75573143513906633035e-07 +
                            z * (2.08757232129817482790e-09 + z * -1.13596475577881948265e-11)))));
    switch (static_cast<long long>(k) & 3) {
        case 0:
            *s = static_cast<float>(sr), *c = static_cast<float>(cr);
            break;
        case 1:
            *s = static_cast<float>(cr), *c = static_cast<float>(-sr);
            break;
        case 2:
            *s = static_cast<float>(-sr), *c = static_cast<float>(-cr);
            break;
        default:
            *s = static_cast<float>(-cr), *c = static_cast<float>(sr);
            break;
    }
}

}  // namespace

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
    auto& cs_buf = thread_scratch<std::vector<float>, struct RopeCos>();
    auto& sn_buf = thread_scratch<std::vector<float>, struct RopeSin>();
    cs_buf.resize(static_cast<size_t>(half));
    sn_buf.resize(static_cast<size_t>(half));
    float* cs = cs_buf.data();
    float* sn = sn_buf.data();
    const float p = static_cast<float>(pos);
    for (int i = 0; i < half; ++i) {
        const float angle = p * inv_freq_[static_cast<size_t>(i)];
        float sa, ca;
        sincos_portable(angle, &sa, &ca);
        cs[i] = ca * concentration_;
        sn[i] = sa * concentration_;
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
