#include "test_experts.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <random>

#include "cpu/kernels/exp_poly.h"
#include "cpu/ops.h"
#include "model/bf16.h"
#include "model/mxfp4.h"
#include "store/format.h"

namespace neural::test {

void AlignedBytes::Free::operator()(std::uint8_t* p) const {
    ::operator delete[](p, std::align_val_t(64));
}

AlignedBytes::AlignedBytes(std::size_t n)
    : p_(static_cast<std::uint8_t*>(::operator new[](n == 0 ? 1 : n, std::align_val_t(64)))),
      n_(n) {
    std::memset(p_.get(), 0, n);
}

namespace {

void fill_scales(std::mt19937_64& rng, std::uint8_t* scales, std::int64_t rows, int g, int lo,
                 int hi, int wide_rows) {
    std::uniform_int_distribution<int> d(lo, hi);
    for (std::int64_t i = 0; i < rows * g; ++i) scales[i] = static_cast<std::uint8_t>(d(rng));
    // Rows whose scales span more than 15 steps (needs G >= 2): escaped in the packed record.
    if (g < 2) return;
    std::uniform_int_distribution<std::int64_t> pick(0, rows - 1);
    for (int w = 0; w < wide_rows; ++w) {
        std::uint8_t* row = scales + pick(rng) * g;
        row[0] = static_cast<std::uint8_t>(lo - 12);
        row[g - 1] = static_cast<std::uint8_t>(hi + 12);
    }
}

std::vector<std::uint8_t> random_bf16(std::mt19937_64& rng, std::int64_t n, float range) {
    std::uniform_real_distribution<float> d(-range, range);
    std::vector<std::uint8_t> out(static_cast<size_t>(2 * n));
    for (std::int64_t i = 0; i < n; ++i) {
        const std::uint16_t v = float_to_bf16(d(rng));
        std::memcpy(out.data() + 2 * i, &v, 2);
    }
    return out;
}

void set_bf16(std::vector<std::uint8_t>& b, std::int64_t i, float f) {
    const std::uint16_t v = float_to_bf16(f);
    std::memcpy(b.data() + 2 * i, &v, 2);
}

}  // namespace

void pack_record(const std::uint8_t* raw, int hidden, int intermediate, AlignedBytes* packed,
                 std::uint32_t* escaped_gate_up, std::uint32_t* escaped_down) {
    const cpu::ExpertRecordView rv =
        cpu::ExpertRecordView::make(raw, hidden, intermediate, cpu::RecordKind::raw);
    // Count the escapes first: they decide the record size.
    std::uint32_t esc[2] = {0, 0};
    for (int p = 0; p < 2; ++p) {
        const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
        const int g = rv.blocks_per_row(proj);
        for (std::int64_t r = 0; r < rv.rows(proj); ++r) {
            esc[p] += store::needs_escape(rv.data() + rv.scales_offset(proj) + r * g, g) ? 1 : 0;
        }
    }
    const std::uint64_t bytes =
        cpu::ExpertRecordView::packed_bytes(hidden, intermediate, esc[0], esc[1]);
    *packed = AlignedBytes(bytes);
    std::uint8_t* out = packed->data();
    const cpu::ExpertRecordView pv =
        cpu::ExpertRecordView::make(out, hidden, intermediate, cpu::RecordKind::packed, bytes);
    std::uint64_t escape_at = pv.fixed_bytes();
    for (int p = 0; p < 2; ++p) {
        const Projection proj = p == 0 ? Projection::kGateUp : Projection::kDown;
        const int g = rv.blocks_per_row(proj);
        const std::int64_t rows = rv.rows(proj);
        std::memcpy(out + pv.codes_offset(proj), raw + rv.codes_offset(proj),
                    static_cast<size_t>(rows * g * 16));
        for (std::int64_t r = 0; r < rows; ++r) {
            const std::uint8_t* s = raw + rv.scales_offset(proj) + r * g;
            std::uint8_t* slot = out + pv.scales_offset(proj) + r * pv.scale_row_bytes(proj);
            if (store::needs_escape(s, g)) {
                store::pack_escape(static_cast<std::uint32_t>(escape_at), g, slot);
                std::memcpy(out + escape_at, s, static_cast<size_t>(g));
                escape_at += static_cast<std::uint64_t>(g);
            } else {
                store::pack_scales(s, g, slot);
            }
        }
    }
    *escaped_gate_up = esc[0];
    *escaped_down = esc[1];
}

TestExpert make_test_expert(const ExpertSpec& spec) {
    TestExpert e;
    e.hidden = spec.hidden;
    e.intermediate = spec.intermediate;
    const int H = spec.hidden, I = spec.intermediate;
    e.raw = AlignedBytes(cpu::ExpertRecordView::raw_bytes(H, I));
    std::mt19937_64 rng(spec.seed);
    // Random code bytes: every E2M1 code, both signs.
    for (std::size_t i = 0; i < e.raw.size(); i += 8) {
        const std::uint64_t v = rng();
        std::memcpy(e.raw.data() + i, &v, std::min<std::size_t>(8, e.raw.size() - i));
    }
    const cpu::ExpertRecordView rv =
        cpu::ExpertRecordView::make(e.raw.data(), H, I, cpu::RecordKind::raw);
    fill_scales(rng, e.raw.data() + rv.scales_offset(Projection::kGateUp), 2 * I, H / 32,
                spec.gate_up_scale_lo, spec.gate_up_scale_hi, spec.wide_rows);
    fill_scales(rng, e.raw.data() + rv.scales_offset(Projection::kDown), H, I / 32,
                spec.down_scale_lo, spec.down_scale_hi, spec.wide_rows);
    e.gate_up_bias = random_bf16(rng, 2 * I, spec.bias_range);
    e.down_bias = random_bf16(rng, H, spec.bias_range);
    std::uniform_int_distribution<int> pick(0, I - 1);
    for (int c = 0; c < spec.clamp_rows; ++c) {
        const int i = pick(rng);
        set_bf16(e.gate_up_bias, 2 * i, (c & 1) ? 20.0f : -20.0f);
        set_bf16(e.gate_up_bias, 2 * i + 1, (c & 2) ? 20.0f : -20.0f);
    }
    pack_record(e.raw.data(), H, I, &e.packed, &e.escaped_gate_up, &e.escaped_down);
    return e;
}

cpu::ExpertRecordView TestExpert::view(bool packed_record) const {
    return packed_record ? cpu::ExpertRecordView::make(packed.data(), hidden, intermediate,
                                                       cpu::RecordKind::packed, packed.size())
                         : cpu::ExpertRecordView::make(raw.data(), hidden, intermediate,
                                                       cpu::RecordKind::raw, raw.size());
}

cpu::ExpertInput TestExpert::input(bool packed_record, float weight) const {
    cpu::ExpertInput in;
    in.record = view(packed_record);
    in.gate_up_bias = gate_up_bias.data();
    in.down_bias = down_bias.data();
    in.weight = weight;
    return in;
}

// Row r of a projection of the raw record, decoded like the reference model does.
std::vector<float> decode_raw_row(const TestExpert& e, Projection p, std::int64_t r) {
    const cpu::ExpertRecordView v = e.view(false);
    const int g = v.blocks_per_row(p);
    std::vector<float> row(static_cast<size_t>(g) * 32);
    mxfp4::decode_row(v.data() + v.codes_offset(p) + r * g * 16,
                      v.data() + v.scales_offset(p) + r * g, g, row.data());
    return row;
}

void reference_decode(const std::vector<const TestExpert*>& experts,
                      const std::vector<float>& weights, const float* x, float* out, float limit,
                      float alpha, const std::function<float(float)>& round_act) {
    const std::int64_t H = experts[0]->hidden, I = experts[0]->intermediate;
    std::vector<std::vector<float>> y(experts.size(), std::vector<float>(static_cast<size_t>(H)));
    for (size_t k = 0; k < experts.size(); ++k) {
        const TestExpert& e = *experts[k];
        std::vector<float> act(static_cast<size_t>(I));
        for (std::int64_t i = 0; i < I; ++i) {
            const std::vector<float> g_row = decode_raw_row(e, Projection::kGateUp, 2 * i);
            const std::vector<float> u_row = decode_raw_row(e, Projection::kGateUp, 2 * i + 1);
            float g = cpu::dot(g_row.data(), x, H) + load_bf16(e.gate_up_bias.data(), 2 * i);
            float u = cpu::dot(u_row.data(), x, H) + load_bf16(e.gate_up_bias.data(), 2 * i + 1);
            g = std::min(g, limit);
            u = std::clamp(u, -limit, limit);
            const float glu = g / (1.0f + std::exp(-alpha * g));
            act[static_cast<size_t>(i)] = glu * (u + 1.0f);
            if (round_act) act[static_cast<size_t>(i)] = round_act(act[static_cast<size_t>(i)]);
        }
        for (std::int64_t r = 0; r < H; ++r) {
            const std::vector<float> d_row = decode_raw_row(e, Projection::kDown, r);
            y[k][static_cast<size_t>(r)] =
                cpu::dot(d_row.data(), act.data(), I) + load_bf16(e.down_bias.data(), r);
        }
    }
    for (size_t k = 0; k < experts.size(); ++k) {
        for (std::int64_t i = 0; i < H; ++i) out[i] += weights[k] * y[k][static_cast<size_t>(i)];
    }
}

namespace {

// The lane order of lane_reference_decode for one row of n (a multiple of 32) values.
float lane_dot(const float* w, const float* x, std::int64_t n) {
    float e[16] = {}, o[16] = {};
    for (std::int64_t b = 0; b < n; b += 32) {
        for (int j = 0; j < 16; ++j) {
            e[j] = fma_exact(w[b + 2 * j], x[b + 2 * j], e[j]);
            o[j] = fma_exact(w[b + 2 * j + 1], x[b + 2 * j + 1], o[j]);
        }
    }
    float v[16];
    for (int j = 0; j < 16; ++j) v[j] = e[j] + o[j];
    for (int half = 8; half >= 1; half /= 2) {
        for (int j = 0; j < half; ++j) v[j] = v[j] + v[j + half];
    }
    return v[0];
}

}  // namespace

float fma_exact(float a, float b, float c) {
    const double p = static_cast<double>(a) * b;  // exact: 48 significant bits at most
    const double cd = c;
    const double s = p + cd;
    if (!std::isfinite(s)) return static_cast<float>(s);
    const double bb = s - p;
    const double err = (p - (s - bb)) + (cd - bb);  // p + c = s + err exactly (TwoSum)
    float r = static_cast<float>(s);
    if (err != 0.0 && static_cast<double>(r) != s) {
        // s is a double rounding of p + c: where it lies exactly halfway between two floats,
        // the sign of err decides (a plain conversion would round the tie to even).
        const float other = std::nextafter(r, s > r ? std::numeric_limits<float>::infinity()
                                                    : -std::numeric_limits<float>::infinity());
        if ((static_cast<double>(r) + static_cast<double>(other)) / 2 == s) {
            const bool up = err > 0;  // the exact value is above s
            const float hi = r > other ? r : other, lo = r > other ? other : r;
            r = up ? hi : lo;
        }
    }
    return r;
}

void lane_reference_decode(const std::vector<const TestExpert*>& experts,
                           const std::vector<float>& weights, const float* x, float* out,
                           float limit, float alpha) {
    const std::int64_t H = experts[0]->hidden, I = experts[0]->intermediate;
    std::vector<std::vector<float>> y(experts.size(), std::vector<float>(static_cast<size_t>(H)));
    for (size_t k = 0; k < experts.size(); ++k) {
        const TestExpert& e = *experts[k];
        std::vector<float> act(static_cast<size_t>(I));
        for (std::int64_t i = 0; i < I; ++i) {
            const std::vector<float> g_row = decode_raw_row(e, Projection::kGateUp, 2 * i);
            const std::vector<float> u_row = decode_raw_row(e, Projection::kGateUp, 2 * i + 1);
            float g = lane_dot(g_row.data(), x, H) + load_bf16(e.gate_up_bias.data(), 2 * i);
            float u = lane_dot(u_row.data(), x, H) + load_bf16(e.gate_up_bias.data(), 2 * i + 1);
            g = std::min(g, limit);
            u = std::clamp(u, -limit, limit);
            const float glu = g / (1.0f + cpu::exp_poly(-alpha * g));
            act[static_cast<size_t>(i)] = glu * (u + 1.0f);
        }
        for (std::int64_t r = 0; r < H; ++r) {
            const std::vector<float> d_row = decode_raw_row(e, Projection::kDown, r);
            y[k][static_cast<size_t>(r)] =
                lane_dot(d_row.data(), act.data(), I) + load_bf16(e.down_bias.data(), r);
        }
    }
    for (size_t k = 0; k < experts.size(); ++k) {
        for (std::int64_t i = 0; i < H; ++i) out[i] += weights[k] * y[k][static_cast<size_t>(i)];
    }
}

void reference_decode_f64(const std::vector<const TestExpert*>& experts,
                          const std::vector<float>& weights, const float* x, double* out,
                          float limit, float alpha) {
    const std::int64_t H = experts[0]->hidden, I = experts[0]->intermediate;
    for (size_t k = 0; k < experts.size(); ++k) {
        const TestExpert& e = *experts[k];
        std::vector<double> act(static_cast<size_t>(I));
        for (std::int64_t i = 0; i < I; ++i) {
            const std::vector<float> g_row = decode_raw_row(e, Projection::kGateUp, 2 * i);
            const std::vector<float> u_row = decode_raw_row(e, Projection::kGateUp, 2 * i + 1);
            double g = load_bf16(e.gate_up_bias.data(), 2 * i),
                   u = load_bf16(e.gate_up_bias.data(), 2 * i + 1);
            for (std::int64_t c = 0; c < H; ++c) {
                g += static_cast<double>(g_row[static_cast<size_t>(c)]) * x[c];
                u += static_cast<double>(u_row[static_cast<size_t>(c)]) * x[c];
            }
            g = std::min<double>(g, limit);
            u = std::clamp<double>(u, -limit, limit);
            act[static_cast<size_t>(i)] =
                g / (1.0 + std::exp(-static_cast<double>(alpha) * g)) * (u + 1.0);
        }
        for (std::int64_t r = 0; r < H; ++r) {
            const std::vector<float> d_row = decode_raw_row(e, Projection::kDown, r);
            double y = load_bf16(e.down_bias.data(), r);
            for (std::int64_t c = 0; c < I; ++c)
                y += static_cast<double>(d_row[static_cast<size_t>(c)]) *
                     act[static_cast<size_t>(c)];
            out[r] += static_cast<double>(weights[k]) * y;
        }
    }
}

std::vector<float> random_vector(std::size_t n, std::uint64_t seed, float stddev) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, stddev);
    std::vector<float> v(n);
    for (float& f : v) f = d(rng);
    return v;
}

}  // namespace neural::test
