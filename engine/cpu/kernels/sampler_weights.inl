// The sampler's weights for one vector ISA (sampler_weights.h), included by its variant's file
// with V: the ISA's float vector operations on W lanes, and dzero / dadd / dsum for the double
// accumulators. The operations and their order are exp_element's (sampler_weights_impl.h), so
// every variant writes the same weights as the scalar one. Each lane sums 16 weights in float,
// then the chunk goes into the double accumulators.
#include <algorithm>

namespace neural::cpu::sampler_detail {

template <class V>
WeightSums weights_simd(const float* v, float* w, std::size_t n, float top, float inv_t,
                        float min_p) {
    WeightSums out;
    const auto vtop = V::set1(top), vinv = V::set1(inv_t), vmin = V::set1(min_p);
    const auto low = V::set1(kLow), log2e = V::set1(kLog2e), round = V::set1(kRound);
    auto kept_d = V::dzero(), raw_d = V::dzero();
    std::size_t i = 0;
    while (i + V::W <= n) {
        const std::size_t end =
            i + std::min<std::size_t>(std::size_t{16} * V::W, (n - i) / V::W * V::W);
        auto kept = V::zero(), raw = V::zero();
        for (; i < end; i += V::W) {
            const auto x = V::mul(V::sub(V::load(v + i), vtop), vinv);
            const auto t = V::mul(V::max(x, low), log2e);  // NaN -> low (masked below)
            const auto r = V::sub(V::add(t, round), round);
            const auto f = V::sub(t, r);
            auto p = V::set1(kExp2[0]);
            for (int c = 1; c < 7; ++c) p = V::add(V::mul(p, f), V::set1(kExp2[c]));
            const auto wr = V::keep_ge(x, low, V::scale2(p, r));
            const auto wk = V::keep_ge(wr, vmin, wr);
            V::store(w + i, wk);
            kept = V::add(kept, wk);
            raw = V::add(raw, wr);
        }
        kept_d = V::dadd(kept_d, kept);
        raw_d = V::dadd(raw_d, raw);
    }
    out.kept = V::dsum(kept_d);
    out.raw = V::dsum(raw_d);
    weights_tail(v, w, i, n, top, inv_t, min_p, out);
    return out;
}

}  // namespace neural::cpu::sampler_detail
