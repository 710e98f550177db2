// The sampler's weights for one vector ISA (sampler_weights.h), included by its variant's file
// with V: the ISA's float vector operations on W lanes (W = 4, 8 or 16), and dzero / dadd / dsum
// for the double accumulators. The operations and their order are exp_element's
// (sampler_weights_impl.h), so every variant writes the same weights as the scalar one.
//
// The sums have one order for every variant too (the draw compares against them, so they must
// not depend on the CPU): element i goes to lane i mod 16 of 16 float lanes (16 / W vectors),
// which sum up to 16 weights each; then double lane j (of 8) adds f_j + f_{j+8}; at the end the
// 8 double lanes are summed 4 + 4, 2 + 2, 1 + 1. Elements past the last multiple of 16 are the
// scalar tail, added in order.
#include <algorithm>

namespace neural::cpu::sampler_detail {

template <class V>
WeightSums weights_simd(const float* v, float* w, std::size_t n, float top, float inv_t,
                        float min_p) {
    using F = decltype(V::zero());
    constexpr std::size_t P = 16 / V::W;  // vectors per 16 lanes
    WeightSums out;
    const auto vtop = V::set1(top), vinv = V::set1(inv_t), vmin = V::set1(min_p);
    const auto low = V::set1(kLow), log2e = V::set1(kLog2e), round = V::set1(kRound);
    auto kept_d = V::dzero(), raw_d = V::dzero();
    std::size_t i = 0;
    while (i + 16 <= n) {
        const std::size_t end = i + std::min<std::size_t>(256, (n - i) / 16 * 16);
        F kept[P], raw[P];
        for (std::size_t q = 0; q < P; ++q) kept[q] = raw[q] = V::zero();
        for (; i < end; i += 16) {
            for (std::size_t q = 0; q < P; ++q) {
                const std::size_t at = i + q * V::W;
                const auto x = V::mul(V::sub(V::load(v + at), vtop), vinv);
                const auto t = V::mul(V::max(x, low), log2e);  // NaN -> low (masked below)
                const auto r = V::sub(V::add(t, round), round);
                const auto f = V::sub(t, r);
                auto p = V::set1(kExp2[0]);
                for (int c = 1; c < 7; ++c) p = V::add(V::mul(p, f), V::set1(kExp2[c]));
                const auto wr = V::keep_ge(x, low, V::scale2(p, r));
                const auto wk = V::keep_ge(wr, vmin, wr);
                V::store(w + at, wk);
                kept[q] = V::add(kept[q], wk);
                raw[q] = V::add(raw[q], wr);
            }
        }
        V::dadd(kept_d, kept);
        V::dadd(raw_d, raw);
    }
    out.kept = V::dsum(kept_d);
    out.raw = V::dsum(raw_d);
    weights_tail(v, w, i, n, top, inv_t, min_p, out);
    return out;
}

}  // namespace neural::cpu::sampler_detail
