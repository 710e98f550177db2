// Every CUDA kernel of the hybrid backend against its CPU reference (cpu/ops.h, cpu/rope.h,
// the reference router and expert math). Skips with the reason where no GPU is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

#include "cuda/driver/gpu.h"

#include "../kernels/test_experts.h"
#include "cpu/ops.h"
#include "cpu/rope.h"
#include "cuda/attention.h"
#include "cuda/attention_prefill.h"
#include "cuda/decode_fused.h"
#include "cuda/device.h"
#include "cuda/expert_gemm.h"
#include "cuda/expert_mxfp4.h"
#include "cuda/gemm_bf16_rows.h"
#include "cuda/gemv_bf16.h"
#include "cuda/residual.h"
#include "cuda/rms_norm.h"
#include "cuda/rope_kv.h"
#include "cuda/router.h"
#include "model/bf16.h"
#include "model/config.h"
#include "support/fixtures.h"

namespace neural {
namespace {

#define SKIP_WITHOUT_GPU()                                                         \
    do {                                                                           \
        std::string why_;                                                          \
        if (cuda::list_devices(&why_).empty()) GTEST_SKIP() << "no GPU: " << why_; \
    } while (0)

// A device copy of a host vector, freed with the object.
template <typename T>
class Dev {
public:
    explicit Dev(const std::vector<T>& host) : n_(host.size()) {
        EXPECT_EQ(cuda::drv::malloc(&p_, std::max<std::size_t>(1, n_) * sizeof(T)), CUDA_SUCCESS);
        if (n_ > 0) {
            EXPECT_EQ(cuda::drv::memcpy(p_, host.data(), n_ * sizeof(T), cuda::drv::kHostToDevice),
                      CUDA_SUCCESS);
        }
    }
    explicit Dev(std::size_t n) : Dev(std::vector<T>(n)) {}
    ~Dev() { cuda::drv::free(p_); }
    T* get() const { return p_; }
    void zero() {
        EXPECT_EQ(cuda::drv::memset(p_, 0, std::max<std::size_t>(1, n_) * sizeof(T)), CUDA_SUCCESS);
    }
    std::vector<T> host() const {
        std::vector<T> out(n_);
        EXPECT_EQ(cuda::drv::device_synchronize(), CUDA_SUCCESS);
        EXPECT_EQ(cuda::drv::memcpy(out.data(), p_, n_ * sizeof(T), cuda::drv::kDeviceToHost),
                  CUDA_SUCCESS);
        return out;
    }

private:
    T* p_ = nullptr;
    std::size_t n_;
};

std::vector<std::uint16_t> random_bf16(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> d(0.0f, scale);
    std::vector<std::uint16_t> out(n);
    for (auto& v : out) v = float_to_bf16(d(rng));
    return out;
}

Bf16View view(const std::vector<std::uint16_t>& v, std::int64_t rows, std::int64_t cols) {
    return Bf16View{reinterpret_cast<const std::uint8_t*>(v.data()), rows, cols};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::fabs(want[i]))) << "at " << i;
    }
}

// x rounded to fp16 (nearest even, subnormals included) after scaling by 2^e, scaled back: what
// the expert GEMM's fp16 operands carry of an activation (gemm_tile.cuh Operands::half).
float fp16_operand(float x, int e) {
    const float s = std::ldexp(x, e);
    if (s == 0.0f || !std::isfinite(s)) return x;
    int ex = 0;
    (void)std::frexp(s, &ex);
    const int q = std::max(ex - 11, -24);  // the ulp: 11 significant bits, or the subnormals' 2^-24
    return std::ldexp(std::nearbyint(std::ldexp(s, -q)), q - e);
}

float max_abs(const std::vector<float>& v) {
    float m = 0.0f;
    for (float x : v) m = std::max(m, std::fabs(x));
    return m;
}

TEST(CudaKernels, GemvBf16MatchesTheCpuMatmul) {
    SKIP_WITHOUT_GPU();
    for (const auto& [rows, cols] : {std::pair{37, 64}, std::pair{8, 2880}, std::pair{300, 256}}) {
        SCOPED_TRACE(testing::Message() << rows << "x" << cols);
        const auto w = random_bf16(static_cast<std::size_t>(rows) * cols, 1, 0.05f);
        const auto b = random_bf16(static_cast<std::size_t>(rows), 2);
        const auto x = test::random_vector(static_cast<std::size_t>(cols), 3);
        const Bf16View wv = view(w, rows, cols), bv = view(b, 1, rows);
        std::vector<float> want(static_cast<std::size_t>(rows));
        cpu::matmul_bf16(wv, &bv, x.data(), 1, want.data());
        Dev<std::uint16_t> dw(w), db(b);
        Dev<float> dx(x), dy(static_cast<std::size_t>(rows));
        cuda::gemv_bf16(dw.get(), db.get(), dx.get(), dy.get(), rows, cols, false, nullptr);
        expect_close(dy.host(), want, 1e-4f);
        // accumulate: y += W x + b
        cuda::gemv_bf16(dw.get(), db.get(), dx.get(), dy.get(), rows, cols, true, nullptr);
        std::vector<float> twice = want;
        for (auto& v : twice) v *= 2;
        expect_close(dy.host(), twice, 1e-4f);
    }
}

TEST(CudaKernels, RmsNormMatchesTheCpuReferenceAndMirrors) {
    SKIP_WITHOUT_GPU();
    const int n = 2880;
    const auto w = random_bf16(n, 4);
    const auto x = test::random_vector(n, 5, 3.0f);
    std::vector<float> want(n);
    cpu::rms_norm(x.data(), view(w, 1, n), 1e-5f, 1, want.data());
    Dev<std::uint16_t> dw(w);
    Dev<float> dx(x), dy(n), dm(n);
    cuda::rms_norm(dx.get(), dw.get(), 1e-5f, n, dy.get(), dm.get(), nullptr);
    expect_close(dy.host(), want, 1e-5f);
    expect_close(dm.host(), want, 1e-5f);
}

TEST(CudaKernels, RopeAndKvStoreMatchTheCpuRope) {
    SKIP_WITHOUT_GPU();
    const ModelConfig c = ModelConfig::load(test::tiny_model_dir() / "config.json");
    const cpu::Rope rope(c);
    const int nq = c.num_heads, nkv = c.num_kv_heads, d = c.head_dim, ctx = 2048;
    const int kv = nkv * d;
    for (int pos : {0, 5, 1000, 2047}) {
        SCOPED_TRACE(pos);
        const auto qkv = test::random_vector(static_cast<std::size_t>((nq + 2 * nkv) * d), 6 + pos);
        std::vector<float> want = qkv;
        rope.apply(want.data(), nq, pos);
        rope.apply(want.data() + nq * d, nkv, pos);
        Dev<float> dqkv(qkv), inv(rope.inv_freq()), kc(static_cast<std::size_t>(ctx) * kv),
            vc(static_cast<std::size_t>(ctx) * kv);
        Dev<int> dpos(std::vector<int>{pos});
        cuda::rope_kv(dqkv.get(), nq, nkv, d, inv.get(), rope.concentration(), dpos.get(), kc.get(),
                      vc.get(), 0, nullptr);
        expect_close(dqkv.host(), want, 2e-5f);
        const auto k = kc.host(), v = vc.host();
        for (int i = 0; i < kv; ++i) {
            ASSERT_NEAR(k[static_cast<std::size_t>(pos) * kv + i],
                        want[static_cast<std::size_t>(nq * d + i)], 2e-5f);
            ASSERT_EQ(v[static_cast<std::size_t>(pos) * kv + i],
                      qkv[static_cast<std::size_t>((nq + nkv) * d + i)]);
        }
    }
}

TEST(CudaKernels, SplitKAttentionWithSinksMatchesTheCpuReference) {
    SKIP_WITHOUT_GPU();
    const int nq = 8, nkv = 2, d = 64, ctx = 700, kv = nkv * d;
    const auto k = test::random_vector(static_cast<std::size_t>(ctx) * kv, 7);
    const auto v = test::random_vector(static_cast<std::size_t>(ctx) * kv, 8);
    const auto sinks = random_bf16(nq, 9);
    Dev<float> dk(k), dv(v);
    Dev<std::uint16_t> ds(sinks);
    for (int window : {0, 16, 128}) {
        for (int pos : {0, 1, 15, 16, 300, 699}) {
            for (int splits : {1, 3, 16}) {
                SCOPED_TRACE(testing::Message()
                             << "window " << window << " pos " << pos << " splits " << splits);
                const auto q = test::random_vector(static_cast<std::size_t>(nq) * d, 10 + pos);
                const int first = window > 0 ? std::max(0, pos - window + 1) : 0;
                std::vector<float> want(static_cast<std::size_t>(nq) * d);
                for (int h = 0; h < nq; ++h) {
                    const int hk = h / (nq / nkv);
                    cpu::attend_with_sink(
                        q.data() + h * d, k.data() + static_cast<std::size_t>(first) * kv + hk * d,
                        v.data() + static_cast<std::size_t>(first) * kv + hk * d, kv,
                        pos - first + 1, d, bf16_to_float(sinks[static_cast<std::size_t>(h)]),
                        1.0f / std::sqrt(static_cast<float>(d)), want.data() + h * d);
                }
                Dev<float> dq(q), out(want.size()),
                    scratch(static_cast<std::size_t>(nq) * splits * (d + 2));
                Dev<int> dpos(std::vector<int>{pos});
                cuda::attention_decode(dq.get(), dk.get(), dv.get(), ds.get(), nq, nkv, d, window,
                                       0, dpos.get(), splits, scratch.get(), out.get(), nullptr);
                expect_close(out.host(), want, 1e-4f);
            }
        }
    }
}

// A sliding layer's K/V ring (--kv-ring): position p lives in row p % ring. The writes land
// there, and decode and prefill attention over a ring give the same bits as over the whole cache
// (the ring holds the window; the prefill block and its window fit in it).
std::vector<float> ring_of(const std::vector<float>& full, int kv, int ring, int upto) {
    std::vector<float> r(static_cast<std::size_t>(ring) * kv, 0.0f);
    for (int p = 0; p < upto; ++p) {
        std::copy_n(full.begin() + static_cast<std::ptrdiff_t>(p) * kv, kv,
                    r.begin() + static_cast<std::ptrdiff_t>(p % ring) * kv);
    }
    return r;
}

TEST(CudaKernels, KvRingWritesAndAttentionAreTheSameBitsAsTheWholeCache) {
    SKIP_WITHOUT_GPU();
    const int nq = 8, nkv = 2, d = 64, kv = nkv * d, window = 16, cols = (nq + 2 * nkv) * d;
    const ModelConfig c = ModelConfig::load(test::tiny_model_dir() / "config.json");
    const cpu::Rope rope(c);
    Dev<float> inv(rope.inv_freq());
    // RoPE + K/V: the same row values at p % ring.
    {
        const int rows = 40, pos0 = 90, ring = 50, ctx = pos0 + rows;
        const auto qkv = test::random_vector(static_cast<std::size_t>(rows) * cols, 71);
        Dev<float> a(qkv), b(qkv), kf(static_cast<std::size_t>(ctx) * kv),
            vf(static_cast<std::size_t>(ctx) * kv), kr(static_cast<std::size_t>(ring) * kv),
            vr(static_cast<std::size_t>(ring) * kv);
        cuda::rope_kv_rows(a.get(), rows, nq, nkv, d, inv.get(), rope.concentration(), pos0,
                           kf.get(), vf.get(), 0, nullptr);
        cuda::rope_kv_rows(b.get(), rows, nq, nkv, d, inv.get(), rope.concentration(), pos0,
                           kr.get(), vr.get(), ring, nullptr);
        const auto k1 = kf.host(), k2 = kr.host(), v1 = vf.host(), v2 = vr.host();
        for (int p = pos0; p < ctx; ++p) {
            ASSERT_EQ(std::memcmp(&k1[static_cast<std::size_t>(p) * kv],
                                  &k2[static_cast<std::size_t>(p % ring) * kv], kv * 4),
                      0)
                << p;
            ASSERT_EQ(std::memcmp(&v1[static_cast<std::size_t>(p) * kv],
                                  &v2[static_cast<std::size_t>(p % ring) * kv], kv * 4),
                      0)
                << p;
        }
        Dev<int> dpos(std::vector<int>{pos0 + 7});
        Dev<float> one(std::vector<float>(qkv.begin(), qkv.begin() + cols)),
            kr1(static_cast<std::size_t>(ring) * kv), vr1(static_cast<std::size_t>(ring) * kv);
        cuda::rope_kv(one.get(), nq, nkv, d, inv.get(), rope.concentration(), dpos.get(), kr1.get(),
                      vr1.get(), ring, nullptr);
        const auto k3 = kr1.host();
        bool any = false;
        for (int i = 0; i < kv; ++i)
            any = any || k3[static_cast<std::size_t>((pos0 + 7) % ring) * kv + i] != 0.0f;
        EXPECT_TRUE(any) << "the decode write goes to row pos % ring";
    }
    const int ctx = 300;
    const auto k = test::random_vector(static_cast<std::size_t>(ctx) * kv, 72);
    const auto v = test::random_vector(static_cast<std::size_t>(ctx) * kv, 73);
    const auto sinks = random_bf16(nq, 74);
    Dev<float> dk(k), dv(v);
    Dev<std::uint16_t> ds(sinks);
    // Decode: a ring of `window` rows holding the last positions up to pos.
    for (int pos : {3, 15, 16, 200, 299}) {
        SCOPED_TRACE(testing::Message() << "decode pos " << pos);
        const int ring = window;
        Dev<float> rk(ring_of(k, kv, ring, pos + 1)), rv(ring_of(v, kv, ring, pos + 1));
        const auto q = test::random_vector(static_cast<std::size_t>(nq) * d, 75 + pos);
        Dev<float> dq(q), o1(static_cast<std::size_t>(nq) * d),
            o2(static_cast<std::size_t>(nq) * d),
            scratch(static_cast<std::size_t>(nq) * 3 * (d + 2));
        Dev<int> dpos(std::vector<int>{pos});
        cuda::attention_decode(dq.get(), dk.get(), dv.get(), ds.get(), nq, nkv, d, window, 0,
                               dpos.get(), 3, scratch.get(), o1.get(), nullptr);
        cuda::attention_decode(dq.get(), rk.get(), rv.get(), ds.get(), nq, nkv, d, window, ring,
                               dpos.get(), 3, scratch.get(), o2.get(), nullptr);
        const auto a = o1.host(), b = o2.host();
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
    }
    // Prefill: a block of `rows` queries at pos0; the ring holds positions up to pos0 + rows - 1
    // in rows p % ring, ring = rows + window - 1 (the smallest the backend allows).
    for (int pos0 : {0, 10, 100, 201}) {
        const int rows = 70, ring = rows + window - 1;
        if (pos0 + rows > ctx) continue;
        SCOPED_TRACE(testing::Message() << "prefill pos0 " << pos0);
        const auto q = test::random_vector(static_cast<std::size_t>(rows) * cols, 76 + pos0);
        Dev<float> dq(q), o1(static_cast<std::size_t>(rows) * nq * d),
            o2(static_cast<std::size_t>(rows) * nq * d);
        Dev<float> rk(ring_of(k, kv, ring, pos0 + rows)), rv(ring_of(v, kv, ring, pos0 + rows));
        cuda::attention_prefill(dq.get(), cols, rows, pos0, dk.get(), dv.get(), ds.get(), nq, nkv,
                                window, 0, o1.get(), nullptr);
        cuda::attention_prefill(dq.get(), cols, rows, pos0, rk.get(), rv.get(), ds.get(), nq, nkv,
                                window, ring, o2.get(), nullptr);
        const auto a = o1.host(), b = o2.host();
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
    }
}

TEST(CudaKernels, RouterPicksTheCpuTopKWithTiesToTheLowerIndexAndLooksUpSlots) {
    SKIP_WITHOUT_GPU();
    const int E = 128, K = 4;
    std::vector<float> logits = test::random_vector(E, 11);
    logits[7] = logits[90] = 5.0f;  // a tie at the top: 7 before 90
    logits[3] = 4.0f;
    std::vector<int> table(E, -1);
    table[90] = 12;
    table[3] = 0;
    std::vector<int> order(E);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int a, int b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    float sum = 0, g[K];
    for (int k = 0; k < K; ++k) sum += g[k] = std::exp(logits[order[k]] - logits[order[0]]);
    Dev<float> dl(logits);
    Dev<int> dt(table), sel(K), slot(K);
    Dev<float> gate(K);
    void* host = nullptr;
    ASSERT_EQ(cuda::drv::host_alloc(&host, K * 12, cuda::drv::kHostAllocMapped), CUDA_SUCCESS);
    int* hi = static_cast<int*>(host);
    cuda::router_topk(dl.get(), E, K, dt.get(), {sel.get(), gate.get(), slot.get()},
                      {hi, reinterpret_cast<float*>(hi + K), hi + 2 * K}, nullptr);
    const auto s = sel.host(), sl = slot.host();
    const auto gt = gate.host();
    for (int k = 0; k < K; ++k) {
        EXPECT_EQ(s[k], order[k]);
        EXPECT_EQ(hi[k], order[k]);
        EXPECT_FLOAT_EQ(gt[k], g[k] / sum);
        EXPECT_EQ(sl[k], table[order[k]]);
        EXPECT_EQ(hi[2 * K + k], table[order[k]]);
    }
    EXPECT_EQ(s[0], 7);
    EXPECT_EQ(s[1], 90);
    cuda::drv::free_host(host);
}

TEST(CudaKernels, ResidentExpertsMatchTheReferenceExpertMathAndSkipMisses) {
    SKIP_WITHOUT_GPU();
    const int H = 64, I = 96, K = 4, E = 4;
    std::vector<test::TestExpert> experts;
    for (int e = 0; e < E; ++e) {
        test::ExpertSpec spec;
        spec.hidden = H;
        spec.intermediate = I;
        spec.seed = 100 + static_cast<std::uint64_t>(e);
        experts.push_back(test::make_test_expert(spec));
    }
    const std::uint64_t bytes = cpu::ExpertRecordView::raw_bytes(H, I),
                        stride = (bytes + 255) / 256 * 256;
    ASSERT_GE(experts[0].raw.size(), bytes);
    // Slots hold experts 2, 0, 3 (slots 0, 1, 2); expert 1 is a miss.
    const int slot_of[E] = {1, -1, 0, 2};
    std::vector<std::uint8_t> pool(3 * stride);
    for (int e = 0; e < E; ++e) {
        if (slot_of[e] >= 0)
            std::memcpy(pool.data() + slot_of[e] * stride,
                        experts[static_cast<std::size_t>(e)].raw.data(), bytes);
    }
    std::vector<std::uint16_t> gu_bias(static_cast<std::size_t>(E) * 2 * I),
        down_bias(static_cast<std::size_t>(E) * H);
    for (int e = 0; e < E; ++e) {
        std::memcpy(gu_bias.data() + e * 2 * I,
                    experts[static_cast<std::size_t>(e)].gate_up_bias.data(), 4 * I);
        std::memcpy(down_bias.data() + e * H, experts[static_cast<std::size_t>(e)].down_bias.data(),
                    2 * H);
    }
    const std::vector<int> sel = {2, 1, 0, 3};
    const std::vector<float> gate = {0.4f, 0.3f, 0.2f, 0.1f};
    std::vector<int> slots;
    for (int e : sel) slots.push_back(slot_of[e]);
    const auto x = test::random_vector(H, 12);
    // Reference: the resident choices only, in k order.
    std::vector<const test::TestExpert*> resident;
    std::vector<float> weights;
    for (int k = 0; k < K; ++k) {
        if (slots[static_cast<std::size_t>(k)] < 0) continue;
        resident.push_back(&experts[static_cast<std::size_t>(sel[static_cast<std::size_t>(k)])]);
        weights.push_back(gate[static_cast<std::size_t>(k)]);
    }
    std::vector<float> want(H, 0.0f);
    test::reference_decode(resident, weights, x.data(), want.data());
    Dev<std::uint8_t> dpool(pool);
    Dev<std::uint16_t> dgu(gu_bias), ddown(down_bias);
    Dev<int> dsel(sel), dslot(slots);
    Dev<float> dgate(gate), dx(x), act(static_cast<std::size_t>(K) * I), out(H);
    cuda::experts_resident(dpool.get(), stride, cuda::ExpertShape{H, I, K, E, 7.0f, 1.702f},
                           dsel.get(), dgate.get(), dslot.get(), dgu.get(), ddown.get(), dx.get(),
                           act.get(), out.get(), nullptr);
    expect_close(out.host(), want, 1e-4f);
}

TEST(CudaKernels, AddMoeAddsBothPartsReadingHostMappedMemory) {
    SKIP_WITHOUT_GPU();
    const int n = 1000;
    const auto x = test::random_vector(n, 13), g = test::random_vector(n, 14),
               c = test::random_vector(n, 15);
    void* host = nullptr;
    ASSERT_EQ(cuda::drv::host_alloc(&host, n * 4, cuda::drv::kHostAllocMapped), CUDA_SUCCESS);
    std::memcpy(host, c.data(), n * 4);
    Dev<float> dx(x), dg(g);
    cuda::add_moe(dx.get(), dg.get(), static_cast<float*>(host), n, nullptr);
    const auto got = dx.host();
    for (int i = 0; i < n; ++i)
        ASSERT_EQ(got[static_cast<std::size_t>(i)],
                  x[static_cast<std::size_t>(i)] +
                      (g[static_cast<std::size_t>(i)] + c[static_cast<std::size_t>(i)]));
    cuda::drv::free_host(host);
}

// ---- fused decode kernels (decode_fused.h) against the one-step kernels ------------------

// Host-mapped memory (the decode graphs' exchange buffers), zeroed, freed with the object.
class Mapped {
public:
    explicit Mapped(std::size_t bytes) {
        EXPECT_EQ(cuda::drv::host_alloc(&p_, bytes, cuda::drv::kHostAllocMapped), CUDA_SUCCESS);
        std::memset(p_, 0, bytes);
    }
    ~Mapped() { cuda::drv::free_host(p_); }
    template <typename T>
    T* as() const {
        return static_cast<T*>(p_);
    }

private:
    void* p_ = nullptr;
};

// Prints whether two results are the same bits (the fused kernels use the one-step kernels'
// device functions, so they should be; the tests allow fp32 rounding).
void report_bits(const char* what, const std::vector<float>& a, const std::vector<float>& b) {
    float worst = 0.0f;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        worst = std::max(worst, std::fabs(a[i] - b[i]));
    std::printf("%s: %s (max |difference| %.3g)\n", what,
                a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0
                    ? "the same bits"
                    : "different bits",
                static_cast<double>(worst));
}

// norm_qkv_rope = rms_norm + gemv_bf16 (QKV) + rope_kv at gpt-oss's shapes (H 2880, 64 query and
// 8 K/V heads of 64: 5120 QKV rows), with and without a K/V ring; twice the same bits.
TEST(CudaFusedDecode, NormQkvRopeIsTheOneStepKernels) {
    SKIP_WITHOUT_GPU();
    const ModelConfig c = ModelConfig::load(test::tiny_model_dir() / "config.json");
    const cpu::Rope rope(c);
    const int H = 2880, nq = 64, nkv = 8, d = 64, kv = nkv * d, rows = (nq + 2 * nkv) * d;
    ASSERT_EQ(c.head_dim, d);
    const float eps = 1e-5f;
    const auto x = test::random_vector(H, 201, 2.0f);
    const auto norm_w = random_bf16(H, 202, 0.3f);
    const auto w = random_bf16(static_cast<std::size_t>(rows) * H, 203, 0.02f);
    const auto b = random_bf16(rows, 204, 0.1f);
    Dev<float> dx(x), inv(rope.inv_freq());
    Dev<std::uint16_t> dn(norm_w), dw(w), db(b);
    for (const auto& [pos, ring] : {std::pair{37, 0}, std::pair{37, 16}, std::pair{0, 0}}) {
        SCOPED_TRACE(testing::Message() << "pos " << pos << " ring " << ring);
        const std::size_t cache = static_cast<std::size_t>(ring > 0 ? ring : 64) * kv;
        Dev<int> dpos(std::vector<int>{pos});
        // Reference: the three one-step kernels.
        Dev<float> h(H), qkv(rows), kc(cache), vc(cache);
        cuda::rms_norm(dx.get(), dn.get(), eps, H, h.get(), nullptr, nullptr);
        cuda::gemv_bf16(dw.get(), db.get(), h.get(), qkv.get(), rows, H, false, nullptr);
        cuda::rope_kv(qkv.get(), nq, nkv, d, inv.get(), rope.concentration(), dpos.get(), kc.get(),
                      vc.get(), ring, nullptr);
        const auto want_q = qkv.host(), want_k = kc.host(), want_v = vc.host();
        std::vector<float> first_q;
        for (int run = 0; run < 2; ++run) {
            Dev<float> fq(rows), fk(cache), fv(cache);
            cuda::NormQkvRope p;
            p.x = dx.get();
            p.norm_w = dn.get();
            p.eps = eps;
            p.hidden = H;
            p.qkv_w = dw.get();
            p.qkv_b = db.get();
            p.q_heads = nq;
            p.kv_heads = nkv;
            p.head_dim = d;
            p.inv_freq = inv.get();
            p.concentration = rope.concentration();
            p.pos = dpos.get();
            p.k_cache = fk.get();
            p.v_cache = fv.get();
            p.ring = ring;
            p.qkv = fq.get();
            cuda::norm_qkv_rope(p, nullptr);
            ASSERT_EQ(cuda::drv::get_last_error(), CUDA_SUCCESS);
            const auto q = fq.host();
            expect_close(q, want_q, 1e-5f);
            expect_close(fk.host(), want_k, 1e-5f);
            expect_close(fv.host(), want_v, 1e-5f);
            if (run == 0) {
                report_bits("norm_qkv_rope qkv", q, want_q);
                first_q = q;
            } else {
                ASSERT_EQ(std::memcmp(q.data(), first_q.data(), q.size() * 4), 0);
            }
        }
        EXPECT_EQ(dx.host(), x) << "x is read only";
    }
}

// oproj_norm_route = gemv_bf16 (output projection, += x) + rms_norm (mirrored) + gemv_bf16
// (router) + router_topk at gpt-oss's shapes (H 2880, attention 4096, 32 and 128 experts, k 4):
// x, h, its host mirror, the logits and the routing (device and host-mapped); replayed from a
// graph twice (the last block sets its counter back to zero): the same bits both times.
TEST(CudaFusedDecode, OprojNormRouteIsTheOneStepKernels) {
    SKIP_WITHOUT_GPU();
    const int H = 2880, A = 4096, K = 4;
    const float eps = 1e-5f;
    for (const int E : {32, 128}) {
        SCOPED_TRACE(testing::Message() << E << " experts");
        const auto x = test::random_vector(H, 301, 2.0f);
        const auto attn = test::random_vector(A, 302);
        const auto o_w = random_bf16(static_cast<std::size_t>(H) * A, 303, 0.02f);
        const auto o_b = random_bf16(H, 304, 0.1f);
        const auto norm_w = random_bf16(H, 305, 0.3f);
        const auto r_w = random_bf16(static_cast<std::size_t>(E) * H, 306, 0.05f);
        const auto r_b = random_bf16(E, 307, 0.1f);
        std::vector<int> table(E);
        for (int e = 0; e < E; ++e) table[static_cast<std::size_t>(e)] = e % 3 == 0 ? -1 : 100 + e;
        Dev<float> dattn(attn);
        Dev<std::uint16_t> dow(o_w), dob(o_b), dn(norm_w), drw(r_w), drb(r_b);
        Dev<int> dt(table);
        // Reference: the four one-step kernels.
        Dev<float> rx(x), rh(H), rl(E), rgate(K);
        Dev<int> rsel(K), rslot(K);
        Mapped rmirror(static_cast<std::size_t>(H) * 4), rroute(static_cast<std::size_t>(K) * 12);
        int* rr = rroute.as<int>();
        cuda::gemv_bf16(dow.get(), dob.get(), dattn.get(), rx.get(), H, A, true, nullptr);
        cuda::rms_norm(rx.get(), dn.get(), eps, H, rh.get(), rmirror.as<float>(), nullptr);
        cuda::gemv_bf16(drw.get(), drb.get(), rh.get(), rl.get(), E, H, false, nullptr);
        cuda::router_topk(rl.get(), E, K, dt.get(), {rsel.get(), rgate.get(), rslot.get()},
                          {rr, reinterpret_cast<float*>(rr + K), rr + 2 * K}, nullptr);
        const auto want_x = rx.host(), want_h = rh.host(), want_l = rl.host();
        const auto want_gate = rgate.host();
        const auto want_sel = rsel.host(), want_slot = rslot.host();
        // Fused, captured once and replayed.
        Dev<float> fx(x), fh(H), fl(E), fgate(K);
        Dev<int> fsel(K), fslot(K);
        Dev<unsigned> counter(1);
        counter.zero();
        Mapped mirror(static_cast<std::size_t>(H) * 4), route(static_cast<std::size_t>(K) * 12);
        int* hr = route.as<int>();
        cuda::OprojRoute p;
        p.o_w = dow.get();
        p.o_b = dob.get();
        p.attn = dattn.get();
        p.attn_width = A;
        p.x = fx.get();
        p.hidden = H;
        p.norm_w = dn.get();
        p.eps = eps;
        p.h = fh.get();
        p.h_mirror = mirror.as<float>();
        p.router_w = drw.get();
        p.router_b = drb.get();
        p.experts = E;
        p.k = K;
        p.router_logits = fl.get();
        p.slot_table = dt.get();
        p.device_out = {fsel.get(), fgate.get(), fslot.get()};
        p.host_out = {hr, reinterpret_cast<float*>(hr + K), hr + 2 * K};
        p.counter = counter.get();
        CUstream stream = nullptr;
        ASSERT_EQ(cuda::drv::stream_create(&stream, cuda::drv::kStreamNonBlocking), CUDA_SUCCESS);
        ASSERT_EQ(cuda::drv::stream_begin_capture(stream, cuda::drv::kCaptureThreadLocal),
                  CUDA_SUCCESS);
        cuda::oproj_norm_route(p, stream);
        CUgraph g = nullptr;
        ASSERT_EQ(cuda::drv::stream_end_capture(stream, &g), CUDA_SUCCESS);
        CUgraphExec exec = nullptr;
        ASSERT_EQ(cuda::drv::graph_instantiate(&exec, g, 0), CUDA_SUCCESS);
        ASSERT_EQ(cuda::drv::device_synchronize(),
                  CUDA_SUCCESS);  // the counter's zero, the uploads
        std::vector<float> first_x, first_h, first_l;
        for (int run = 0; run < 2; ++run) {
            SCOPED_TRACE(testing::Message() << "replay " << run);
            ASSERT_EQ(cuda::drv::memcpy_async(fx.get(), x.data(), x.size() * 4,
                                              cuda::drv::kHostToDevice, stream),
                      CUDA_SUCCESS);
            std::memset(mirror.as<float>(), 0, static_cast<std::size_t>(H) * 4);
            std::memset(hr, 0xFF, static_cast<std::size_t>(K) * 12);
            ASSERT_EQ(cuda::drv::graph_launch(exec, stream), CUDA_SUCCESS);
            ASSERT_EQ(cuda::drv::stream_synchronize(stream), CUDA_SUCCESS);
            const auto gx = fx.host(), gh = fh.host(), gl = fl.host();
            expect_close(gx, want_x, 1e-5f);
            expect_close(gh, want_h, 1e-5f);
            expect_close(gl, want_l, 1e-5f);
            const std::vector<float> gm(mirror.as<float>(), mirror.as<float>() + H);
            ASSERT_EQ(std::memcmp(gm.data(), gh.data(), gh.size() * 4), 0) << "mirror != h";
            const auto gs = fsel.host(), gsl = fslot.host();
            const auto gg = fgate.host();
            for (int k = 0; k < K; ++k) {
                const auto i = static_cast<std::size_t>(k);
                EXPECT_EQ(gs[i], want_sel[i]) << k;
                EXPECT_EQ(gsl[i], want_slot[i]) << k;
                EXPECT_NEAR(gg[i], want_gate[i], 1e-5f * (1.0f + std::fabs(want_gate[i]))) << k;
                EXPECT_EQ(hr[k], gs[i]) << k;
                EXPECT_EQ(std::memcmp(reinterpret_cast<float*>(hr + K) + k, &gg[i], 4), 0) << k;
                EXPECT_EQ(hr[2 * K + k], gsl[i]) << k;
            }
            EXPECT_EQ(counter.host()[0], 0u) << "the last block sets the counter back to zero";
            if (run == 0) {
                report_bits("oproj_norm_route x", gx, want_x);
                report_bits("oproj_norm_route h", gh, want_h);
                report_bits("oproj_norm_route logits", gl, want_l);
                first_x = gx;
                first_h = gh;
                first_l = gl;
            } else {
                ASSERT_EQ(std::memcmp(gx.data(), first_x.data(), gx.size() * 4), 0);
                ASSERT_EQ(std::memcmp(gh.data(), first_h.data(), gh.size() * 4), 0);
                ASSERT_EQ(std::memcmp(gl.data(), first_l.data(), gl.size() * 4), 0);
            }
        }
        cuda::drv::graph_exec_destroy(exec);
        cuda::drv::graph_destroy(g);
        cuda::drv::stream_destroy(stream);
    }
}

// attention_decode with counters (one launch: the last split block of a head combines it) is the
// same bits as with the combine kernel, and leaves its counters at zero for the next launch.
TEST(CudaFusedDecode, OneLaunchAttentionIsTheSameBitsAsSplitPlusCombine) {
    SKIP_WITHOUT_GPU();
    const int nq = 64, nkv = 8, d = 64, ctx = 2100, kv = nkv * d;
    const auto k = test::random_vector(static_cast<std::size_t>(ctx) * kv, 401);
    const auto v = test::random_vector(static_cast<std::size_t>(ctx) * kv, 402);
    const auto sinks = random_bf16(nq, 403);
    Dev<float> dk(k), dv(v);
    Dev<std::uint16_t> ds(sinks);
    Dev<unsigned> counters(static_cast<std::size_t>(nq));
    counters.zero();
    for (int window : {0, 128}) {
        for (int pos : {0, 5, 700, 2099}) {
            for (int splits : {1, 4, 16}) {
                SCOPED_TRACE(testing::Message()
                             << "window " << window << " pos " << pos << " splits " << splits);
                const auto q = test::random_vector(static_cast<std::size_t>(nq) * d, 404 + pos);
                const std::size_t scratch_n = static_cast<std::size_t>(nq) * splits * (d + 2);
                Dev<float> dq(q), o1(static_cast<std::size_t>(nq) * d),
                    o2(static_cast<std::size_t>(nq) * d), s1(scratch_n), s2(scratch_n);
                Dev<int> dpos(std::vector<int>{pos});
                cuda::attention_decode(dq.get(), dk.get(), dv.get(), ds.get(), nq, nkv, d, window,
                                       0, dpos.get(), splits, s1.get(), o1.get(), nullptr);
                const auto want = o1.host();
                for (int run = 0; run < 2; ++run) {
                    cuda::attention_decode(dq.get(), dk.get(), dv.get(), ds.get(), nq, nkv, d,
                                           window, 0, dpos.get(), splits, s2.get(), o2.get(),
                                           nullptr, counters.get());
                    const auto got = o2.host();
                    ASSERT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0) << run;
                    const auto c = counters.host();
                    ASSERT_EQ(std::count(c.begin(), c.end(), 0u), std::ptrdiff_t{nq})
                        << "counters back to zero";
                }
            }
        }
    }
}

// ---- prefill kernels -----------------------------------------------------------------------

TEST(CudaPrefillKernels, GemmBf16RowsMatchesADoubleReferenceAndRowsDoNotDependOnTheirTile) {
    SKIP_WITHOUT_GPU();
    const int M = 70, K = 96, N = 80;
    const auto x = test::random_vector(static_cast<std::size_t>(M) * K, 31);
    const auto w = random_bf16(static_cast<std::size_t>(N) * K, 32);
    const auto bias = random_bf16(N, 33);
    const auto y0 = test::random_vector(static_cast<std::size_t>(M) * N, 34);
    for (bool accumulate : {false, true}) {
        SCOPED_TRACE(accumulate);
        Dev<float> dx(x), dy(y0);
        Dev<std::uint16_t> dw(w), db(bias);
        cuda::gemm_bf16_rows(dx.get(), M, K, dw.get(), db.get(), N, dy.get(), N, accumulate,
                             nullptr);
        const auto got = dy.host();
        std::vector<float> want(got.size());
        for (int m = 0; m < M; ++m) {
            for (int n = 0; n < N; ++n) {
                double a = bf16_to_float(bias[static_cast<std::size_t>(n)]);
                for (int k = 0; k < K; ++k) {
                    a += static_cast<double>(x[static_cast<std::size_t>(m) * K + k]) *
                         bf16_to_float(w[static_cast<std::size_t>(n) * K + k]);
                }
                want[static_cast<std::size_t>(m) * N + n] = static_cast<float>(
                    a + (accumulate ? y0[static_cast<std::size_t>(m) * N + n] : 0.0));
            }
        }
        // fp32 activations as two bf16 halves: ~16 bits of each product.
        expect_close(got, want, 2e-4f);
        // Row 45 alone (its own tile, at row 0) gives the same bits as inside the 70-row call.
        Dev<float> d1(std::vector<float>(x.begin() + 45 * K, x.begin() + 46 * K));
        Dev<float> y1(std::vector<float>(y0.begin() + 45 * N, y0.begin() + 46 * N));
        cuda::gemm_bf16_rows(d1.get(), 1, K, dw.get(), db.get(), N, y1.get(), N, accumulate,
                             nullptr);
        const auto r1 = y1.host();
        ASSERT_EQ(std::memcmp(r1.data(), got.data() + 45 * N, N * 4), 0);
    }
}

// The pipelined GEMM tile (the default) and the plain reference tile: the same bits, for bf16
// weights (shapes with partial tiles in M and N, both epilogues) and for MXFP4 expert records
// of random codes with scales from the subnormal 2^-127 up (every decode case).
TEST(CudaPrefillKernels, FastTileIsTheReferenceTileBitForBit) {
    SKIP_WITHOUT_GPU();
    {
        const int M = 150, K = 320, N = 200;
        auto x = test::random_vector(static_cast<std::size_t>(M) * K, 41);
        for (std::size_t i = 0; i < x.size(); i += 7)
            x[i] *= 1e-4f;  // values below bf16's reach of the hi half
        for (std::size_t i = 3; i < x.size(); i += 11) x[i] *= 3e3f;
        const auto w = random_bf16(static_cast<std::size_t>(N) * K, 42);
        const auto bias = random_bf16(N, 43);
        const auto y0 = test::random_vector(static_cast<std::size_t>(M) * N, 44);
        for (bool accumulate : {false, true}) {
            SCOPED_TRACE(accumulate);
            Dev<float> dx(x), ref(y0);
            Dev<std::uint16_t> dw(w), db(bias);
            cuda::gemm_bf16_rows(dx.get(), M, K, dw.get(), db.get(), N, ref.get(), N, accumulate,
                                 nullptr, cuda::KernelPath::reference, cuda::TileWidth::n64);
            const auto b = ref.host();
            // Both paths at both tile widths: the same bits as the 64-wide reference.
            for (const auto path : {cuda::KernelPath::fast, cuda::KernelPath::reference}) {
                for (const auto width :
                     {cuda::TileWidth::n64, cuda::TileWidth::n128, cuda::TileWidth::automatic}) {
                    SCOPED_TRACE(static_cast<int>(path) * 10 + static_cast<int>(width));
                    Dev<float> out(y0);
                    cuda::gemm_bf16_rows(dx.get(), M, K, dw.get(), db.get(), N, out.get(), N,
                                         accumulate, nullptr, path, width);
                    const auto a = out.host();
                    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
                }
            }
        }
    }
    const int H = 160, I = 96, K = 4, E = 2, T = 150;
    const std::uint64_t bytes = cpu::ExpertRecordView::raw_bytes(H, I);
    std::mt19937_64 rng(45);
    // Scale bytes up to 128 take the fast tile's bf16x2 decode in one multiply, above it in two;
    // variant 2 adds 200 and 254 (values up to 6 * 2^127: infinity in bf16 on both routes).
    const std::uint8_t scales[] = {0, 1, 2, 100, 115, 120, 127, 128, 129, 130, 140, 150, 200, 254};
    for (int variant = 0; variant < 3; ++variant) {
        const int n_scales = variant == 2 ? 14 : 12;
        SCOPED_TRACE(variant);
        std::vector<std::uint8_t> raw(bytes);
        if (variant == 0) {
            test::ExpertSpec spec;
            spec.hidden = H;
            spec.intermediate = I;
            spec.seed = 46;
            const auto ex = test::make_test_expert(spec);
            std::memcpy(raw.data(), ex.raw.data(), bytes);
        } else {
            // Random codes; scales: the code bytes' areas first, then the scale areas of both matrices.
            for (auto& b : raw) b = static_cast<std::uint8_t>(rng());
            const std::uint64_t gu_codes = static_cast<std::uint64_t>(2 * I) * (H / 32) * 16;
            const std::uint64_t gu_scales = static_cast<std::uint64_t>(2 * I) * (H / 32);
            const std::uint64_t dn_codes = static_cast<std::uint64_t>(H) * (I / 32) * 16;
            for (std::uint64_t i = gu_codes; i < gu_codes + gu_scales; ++i)
                raw[i] = scales[rng() % n_scales];
            for (std::uint64_t i = gu_codes + gu_scales + dn_codes; i < bytes; ++i)
                raw[i] = scales[rng() % n_scales];
        }
        const auto hf = test::random_vector(static_cast<std::size_t>(T) * H, 47);
        const auto gate = test::random_vector(static_cast<std::size_t>(T) * K, 48);
        const auto gu_bias = random_bf16(static_cast<std::size_t>(E) * 2 * I, 49);
        const auto down_bias = random_bf16(static_cast<std::size_t>(E) * H, 50);
        std::vector<int> entries;
        for (int t = 0; t < T; t += (t % 5 == 0 ? 2 : 1)) entries.push_back(t * K + t % K);
        Dev<std::uint8_t> rec(raw);
        Dev<std::uint16_t> dgu(gu_bias), ddown(down_bias);
        Dev<float> dh(hf), dgate(gate);
        Dev<int> de(entries);
        Dev<float> act_f(static_cast<std::size_t>(T) * I), act_r(static_cast<std::size_t>(T) * I);
        Dev<float> acc_f(static_cast<std::size_t>(T) * H), acc_r(static_cast<std::size_t>(T) * H);
        const cuda::ExpertShape split{H, I, K, E, 7.0f, 1.702f};
        for (const cuda::ExpertShape& shape :
             {split, cuda::with_half_operands(split, max_abs(hf))}) {
            SCOPED_TRACE(shape.half_operands ? "fp16 operands" : "bf16 hi + lo operands");
            act_r.zero();
            acc_r.zero();
            cuda::expert_gemm(rec.get(), 1, shape, de.get(), static_cast<int>(entries.size()),
                              dh.get(), dgate.get(), dgu.get(), ddown.get(), act_r.get(),
                              acc_r.get(), nullptr, cuda::KernelPath::reference,
                              cuda::TileWidth::n64);
            const auto ar = act_r.host(), cr = acc_r.host();
            // Both paths at both tile widths (64 and 128 columns per block): the same bits.
            std::vector<float> af, cf;
            for (const auto path : {cuda::KernelPath::fast, cuda::KernelPath::reference}) {
                for (const auto width : {cuda::TileWidth::n64, cuda::TileWidth::n128}) {
                    SCOPED_TRACE(static_cast<int>(path) * 10 + static_cast<int>(width));
                    act_f.zero();
                    acc_f.zero();
                    cuda::expert_gemm(rec.get(), 1, shape, de.get(),
                                      static_cast<int>(entries.size()), dh.get(), dgate.get(),
                                      dgu.get(), ddown.get(), act_f.get(), acc_f.get(), nullptr,
                                      path, width);
                    af = act_f.host();
                    cf = acc_f.host();
                    ASSERT_EQ(std::memcmp(af.data(), ar.data(), af.size() * 4), 0);
                    ASSERT_EQ(std::memcmp(cf.data(), cr.data(), cf.size() * 4), 0);
                }
            }
            // Not all zeros: the comparison compares something. fp16 operands: no infinity or NaN
            // either where the true values are finite (the random scales span 150 binades: each
            // row is decoded relative to its largest, the small blocks round, nothing overflows).
            EXPECT_GT(std::count_if(cf.begin(), cf.end(), [](float v) { return v != 0.0f; }),
                      T * H / 2);
            if (shape.half_operands && variant != 2) {
                EXPECT_EQ(
                    std::count_if(cf.begin(), cf.end(), [](float v) { return !std::isfinite(v); }),
                    0);
            }
        }
    }
}

// Grouped expert GEMM (--grouped-gemm): three experts' jobs (50, 75 and 150 rows: one, two and
// three row tiles) in one launch each for gate_up and down, then the combine in expert order:
// acc is the same bits as three expert_gemm calls in that order, whether the three go as one
// group or as groups of two and one.
TEST(CudaPrefillKernels, GroupedExpertGemmIsTheUngroupedBitForBit) {
    SKIP_WITHOUT_GPU();
    const int H = 96, I = 128, K = 4, E = 4, T = 150;
    const std::uint64_t bytes = cpu::ExpertRecordView::raw_bytes(H, I);
    std::vector<std::uint8_t> raw;
    for (int e = 0; e < 3; ++e) {
        test::ExpertSpec spec;
        spec.hidden = H;
        spec.intermediate = I;
        spec.seed = 70 + static_cast<std::uint64_t>(e);
        const auto ex = test::make_test_expert(spec);
        raw.insert(raw.end(), ex.raw.data(), ex.raw.data() + bytes);
    }
    std::vector<int> entries, first = {0}, counts;
    for (int e = 0; e < 3; ++e) {
        const int step = e == 0 ? 3 : (e == 1 ? 2 : 1);
        for (int t = 0; t < T; t += step) entries.push_back(t * K + e);
        counts.push_back(static_cast<int>(entries.size()) - first.back());
        first.push_back(static_cast<int>(entries.size()));
    }
    ASSERT_EQ(counts, (std::vector<int>{50, 75, 150}));
    const auto hf = test::random_vector(static_cast<std::size_t>(T) * H, 71);
    const auto gate = test::random_vector(static_cast<std::size_t>(T) * K, 72);
    const auto gu_bias = random_bf16(static_cast<std::size_t>(E) * 2 * I, 73);
    const auto down_bias = random_bf16(static_cast<std::size_t>(E) * H, 74);
    const auto acc0 = test::random_vector(static_cast<std::size_t>(T) * H, 75);
    Dev<std::uint8_t> rec(raw);
    Dev<std::uint16_t> dgu(gu_bias), ddown(down_bias);
    Dev<float> dh(hf), dgate(gate);
    Dev<int> de(entries);
    const auto record = [&](int e) { return rec.get() + static_cast<std::size_t>(e) * bytes; };
    const int rows = static_cast<int>(entries.size());
    Dev<float> act(static_cast<std::size_t>(rows) * I), y(static_cast<std::size_t>(rows) * H);
    const cuda::ExpertShape hi_lo{H, I, K, E, 7.0f, 1.702f};
    for (const cuda::ExpertShape& shape : {hi_lo, cuda::with_half_operands(hi_lo, max_abs(hf))}) {
        SCOPED_TRACE(shape.half_operands ? "fp16 operands" : "bf16 hi + lo operands");
        Dev<float> want(acc0);
        for (int e = 0; e < 3; ++e) {
            cuda::expert_gemm(record(e), e + 1, shape,
                              de.get() + first[static_cast<std::size_t>(e)],
                              counts[static_cast<std::size_t>(e)], dh.get(), dgate.get(), dgu.get(),
                              ddown.get(), act.get(), want.get(), nullptr);
        }
        const auto w = want.host();
        std::vector<cuda::ExpertJob> jobs;
        for (int e = 0; e < 3; ++e) {
            jobs.push_back(cuda::ExpertJob{record(e), e + 1, first[static_cast<std::size_t>(e)],
                                           counts[static_cast<std::size_t>(e)],
                                           first[static_cast<std::size_t>(e)]});
        }
        for (const int split : {3, 2, 1}) {
            for (const auto width : {cuda::TileWidth::n64, cuda::TileWidth::n128}) {
                SCOPED_TRACE(testing::Message() << "first group of " << split << ", width "
                                                << static_cast<int>(width));
                Dev<float> got(acc0);
                cuda::expert_gemm_grouped(jobs.data(), split, shape, de.get(), dh.get(),
                                          dgate.get(), dgu.get(), ddown.get(), act.get(), y.get(),
                                          got.get(), nullptr, width);
                cuda::expert_gemm_grouped(jobs.data() + split, 3 - split, shape, de.get(), dh.get(),
                                          dgate.get(), dgu.get(), ddown.get(), act.get(), y.get(),
                                          got.get(), nullptr, width);
                const auto g = got.host();
                ASSERT_EQ(std::memcmp(g.data(), w.data(), g.size() * 4), 0);
            }
        }
        EXPECT_THROW(cuda::expert_gemm_grouped(jobs.data(), 4, shape, de.get(), dh.get(),
                                               dgate.get(), dgu.get(), ddown.get(), act.get(),
                                               y.get(), want.get(), nullptr),
                     std::invalid_argument);
    }
}

TEST(CudaPrefillKernels, RowKernelsMatchTheirDecodeKernelsBitForBit) {
    SKIP_WITHOUT_GPU();
    // rms_norm_rows = rms_norm per row; rope_kv_rows = rope_kv per position;
    // router_topk_rows = router_topk per row.
    const int H = 96, rows = 5, nq = 4, nkv = 2, d = 64, E = 32, K = 4;
    const auto x = test::random_vector(static_cast<std::size_t>(rows) * H, 41);
    const auto w = random_bf16(H, 42);
    Dev<float> dx(x), hb(static_cast<std::size_t>(rows) * H);
    Dev<std::uint16_t> dw(w);
    cuda::rms_norm_rows(dx.get(), dw.get(), 1e-5f, H, rows, hb.get(), nullptr);
    const auto got = hb.host();
    for (int r = 0; r < rows; ++r) {
        Dev<float> xr(std::vector<float>(x.begin() + r * H, x.begin() + (r + 1) * H)), y(H);
        cuda::rms_norm(xr.get(), dw.get(), 1e-5f, H, y.get(), nullptr, nullptr);
        const auto yr = y.host();
        ASSERT_EQ(std::memcmp(got.data() + static_cast<std::size_t>(r) * H, yr.data(), H * 4), 0)
            << r;
    }

    const ModelConfig c = ModelConfig::load(test::tiny_model_dir() / "config.json");
    ASSERT_EQ(c.head_dim, d);
    const cpu::Rope rope(c);
    Dev<float> inv(rope.inv_freq());
    const int cols = (nq + 2 * nkv) * d, kv = nkv * d, pos0 = 37, ctx = 64;
    const auto qkv = test::random_vector(static_cast<std::size_t>(rows) * cols, 43);
    Dev<float> dq(qkv), kc(static_cast<std::size_t>(ctx) * kv),
        vc(static_cast<std::size_t>(ctx) * kv);
    cuda::rope_kv_rows(dq.get(), rows, nq, nkv, d, inv.get(), rope.concentration(), pos0, kc.get(),
                       vc.get(), 0, nullptr);
    const auto q_rows = dq.host(), k_rows = kc.host(), v_rows = vc.host();
    Dev<float> kc1(static_cast<std::size_t>(ctx) * kv), vc1(static_cast<std::size_t>(ctx) * kv);
    for (int r = 0; r < rows; ++r) {
        Dev<float> one(std::vector<float>(qkv.begin() + r * cols, qkv.begin() + (r + 1) * cols));
        Dev<int> pos(std::vector<int>{pos0 + r});
        cuda::rope_kv(one.get(), nq, nkv, d, inv.get(), rope.concentration(), pos.get(), kc1.get(),
                      vc1.get(), 0, nullptr);
        const auto o = one.host();
        ASSERT_EQ(
            std::memcmp(o.data(), q_rows.data() + r * cols, static_cast<std::size_t>(cols) * 4), 0)
            << r;
    }
    const auto k1 = kc1.host(), v1 = vc1.host();
    ASSERT_EQ(std::memcmp(k1.data(), k_rows.data(), k1.size() * 4), 0);
    ASSERT_EQ(std::memcmp(v1.data(), v_rows.data(), v1.size() * 4), 0);

    auto logits = test::random_vector(static_cast<std::size_t>(rows) * E, 44);
    logits[2 * E + 5] = logits[2 * E + 9] = 9.0f;  // a tie in row 2
    Dev<float> dl(logits), gate(static_cast<std::size_t>(rows) * K);
    Dev<int> sel(static_cast<std::size_t>(rows) * K);
    cuda::router_topk_rows(dl.get(), rows, E, K, sel.get(), gate.get(), nullptr);
    const auto s_rows = sel.host();
    const auto g_rows = gate.host();
    EXPECT_EQ(s_rows[2 * K], 5);
    EXPECT_EQ(s_rows[2 * K + 1], 9);
    std::vector<int> table(E, -1);
    Dev<int> dt(table);
    for (int r = 0; r < rows; ++r) {
        Dev<float> one(std::vector<float>(logits.begin() + r * E, logits.begin() + (r + 1) * E));
        Dev<int> s1(K), sl(K);
        Dev<float> g1(K);
        void* host = nullptr;
        ASSERT_EQ(cuda::drv::host_alloc(&host, K * 12, cuda::drv::kHostAllocMapped), CUDA_SUCCESS);
        int* hi = static_cast<int*>(host);
        cuda::router_topk(one.get(), E, K, dt.get(), {s1.get(), g1.get(), sl.get()},
                          {hi, reinterpret_cast<float*>(hi + K), hi + 2 * K}, nullptr);
        const auto a = s1.host();
        const auto b = g1.host();
        for (int k = 0; k < K; ++k) {
            EXPECT_EQ(a[k], s_rows[static_cast<std::size_t>(r) * K + k]);
            EXPECT_EQ(std::memcmp(&b[k], &g_rows[static_cast<std::size_t>(r) * K + k], 4), 0);
        }
        cuda::drv::free_host(host);
    }
}

TEST(CudaPrefillKernels, PrefillAttentionMatchesTheCpuReferenceAndDoesNotDependOnTheBlocks) {
    SKIP_WITHOUT_GPU();
    const int nq = 8, nkv = 2, d = cuda::kPrefillHeadDim, kv = nkv * d, cols = (nq + 2 * nkv) * d;
    const int pos0 = 100, rows = 90, ctx = pos0 + rows;
    const auto k = test::random_vector(static_cast<std::size_t>(ctx) * kv, 51);
    const auto v = test::random_vector(static_cast<std::size_t>(ctx) * kv, 52);
    const auto q = test::random_vector(static_cast<std::size_t>(rows) * cols, 53);
    const auto sinks = random_bf16(nq, 54);
    Dev<float> dk(k), dv(v), dq(q);
    Dev<std::uint16_t> ds(sinks);
    for (int window : {0, 16, 128}) {
        SCOPED_TRACE(testing::Message() << "window " << window);
        Dev<float> out(static_cast<std::size_t>(rows) * nq * d);
        cuda::attention_prefill(dq.get(), cols, rows, pos0, dk.get(), dv.get(), ds.get(), nq, nkv,
                                window, 0, out.get(), nullptr);
        const auto got = out.host();
        std::vector<float> want(got.size());
        for (int r = 0; r < rows; ++r) {
            const int pos = pos0 + r, first = window > 0 ? std::max(0, pos - window + 1) : 0;
            for (int h = 0; h < nq; ++h) {
                const int hk = h / (nq / nkv);
                cpu::attend_with_sink(q.data() + static_cast<std::size_t>(r) * cols + h * d,
                                      k.data() + static_cast<std::size_t>(first) * kv + hk * d,
                                      v.data() + static_cast<std::size_t>(first) * kv + hk * d, kv,
                                      pos - first + 1, d,
                                      bf16_to_float(sinks[static_cast<std::size_t>(h)]),
                                      1.0f / std::sqrt(static_cast<float>(d)),
                                      want.data() + (static_cast<std::size_t>(r) * nq + h) * d);
            }
        }
        // Every operand as bf16 hi/lo halves: ~16 bits.
        expect_close(got, want, 2e-4f);
        // The reference kernel (S, P, O through shared memory): the same within rounding.
        Dev<float> ref(static_cast<std::size_t>(rows) * nq * d);
        cuda::attention_prefill(dq.get(), cols, rows, pos0, dk.get(), dv.get(), ds.get(), nq, nkv,
                                window, 0, ref.get(), nullptr, cuda::KernelPath::reference);
        const auto r = ref.host();
        expect_close(r, want, 2e-4f);
        expect_close(got, r, 2e-5f);
        // The same rows computed as two blocks (37 + 53 rows): the same bits.
        Dev<float> split(static_cast<std::size_t>(rows) * nq * d);
        cuda::attention_prefill(dq.get(), cols, 37, pos0, dk.get(), dv.get(), ds.get(), nq, nkv,
                                window, 0, split.get(), nullptr);
        cuda::attention_prefill(dq.get() + 37 * cols, cols, rows - 37, pos0 + 37, dk.get(),
                                dv.get(), ds.get(), nq, nkv, window, 0, split.get() + 37 * nq * d,
                                nullptr);
        const auto a = out.host(), b = split.host();
        ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
    }
}

// Kernel attributes (the prefill attention's >48 KiB of shared memory) belong to one device: a
// launch on any GPU works whichever device ran first, with the same bits, and listing the devices
// does not change the caller's current one. (Found on a 2-GPU machine: list_devices left GPU 1
// current, the attribute was set there once, and every later prefill on GPU 0 failed.)
TEST(CudaPrefillKernels, PrefillAttentionRunsOnEveryDeviceAndListingKeepsTheCurrentDevice) {
    SKIP_WITHOUT_GPU();
    int count = 0;
    ASSERT_EQ(cuda::drv::device_count(&count), CUDA_SUCCESS);
    ASSERT_EQ(cuda::drv::set_device(0), CUDA_SUCCESS);
    std::string why;
    ASSERT_FALSE(cuda::list_devices(&why).empty());
    int current = -1;
    ASSERT_EQ(cuda::drv::get_device(&current), CUDA_SUCCESS);
    EXPECT_EQ(current, 0);
    if (count < 2) std::printf("[   NOTE   ] one GPU: the launch runs on device 0 only\n");
    const int nq = 4, nkv = 2, d = cuda::kPrefillHeadDim, kv = nkv * d, cols = (nq + 2 * nkv) * d;
    const int pos0 = 5, rows = 70, ctx = pos0 + rows;
    const auto k = test::random_vector(static_cast<std::size_t>(ctx) * kv, 61);
    const auto v = test::random_vector(static_cast<std::size_t>(ctx) * kv, 62);
    const auto q = test::random_vector(static_cast<std::size_t>(rows) * cols, 63);
    const auto sinks = random_bf16(nq, 64);
    std::vector<std::vector<float>> results;
    for (int dev = count - 1; dev >= 0;
         --dev) {  // the last device first: device 0 is not the first launch
        SCOPED_TRACE(testing::Message() << "device " << dev);
        ASSERT_EQ(cuda::drv::set_device(dev), CUDA_SUCCESS);
        Dev<float> dk(k), dv(v), dq(q), out(static_cast<std::size_t>(rows) * nq * d);
        Dev<std::uint16_t> ds(sinks);
        cuda::attention_prefill(dq.get(), cols, rows, pos0, dk.get(), dv.get(), ds.get(), nq, nkv,
                                0, 0, out.get(), nullptr);
        ASSERT_EQ(cuda::drv::get_last_error(), CUDA_SUCCESS);
        results.push_back(out.host());
    }
    ASSERT_EQ(cuda::drv::set_device(0), CUDA_SUCCESS);
    for (const auto& r : results)
        ASSERT_EQ(std::memcmp(r.data(), results.front().data(), r.size() * 4), 0);
}

// fp16 operands' scales: powers of two that keep a bound below 2^15 with the largest such
// exponent; gpt-oss's clamp (7, alpha 1.702) bounds the SwiGLU output by 7 * 8 = 56; without a
// finite bound the shape keeps bf16 hi + lo. Host code only: runs without a GPU.
TEST(CudaPrefillKernels, HalfOperandScalesKeepTheBoundsBelowTwoToThe15) {
    EXPECT_EQ(cuda::half_operand_exponent(1.0f), 14);
    EXPECT_EQ(cuda::half_operand_exponent(0.99f), 15);
    EXPECT_EQ(cuda::half_operand_exponent(56.0f), 9);  // 56 * 512 = 28,672
    EXPECT_EQ(cuda::half_operand_exponent(-3000.0f), 3);
    EXPECT_EQ(cuda::half_operand_exponent(0.0f), 15);
    EXPECT_EQ(cuda::half_operand_exponent(1e-38f), 100);
    EXPECT_EQ(cuda::half_operand_exponent(std::numeric_limits<float>::infinity()), std::nullopt);
    EXPECT_EQ(cuda::half_operand_exponent(std::numeric_limits<float>::quiet_NaN()), std::nullopt);
    for (float b : {0.3f, 1.0f, 53.7f, 1000.0f, 65504.0f, 1e20f}) {
        const int e = *cuda::half_operand_exponent(b);
        EXPECT_LT(std::ldexp(b, e), 32768.0f) << b;
        EXPECT_GE(std::ldexp(b, e + 1), 32768.0f) << b;
    }
    const cuda::ExpertShape gptoss{2880, 2880, 4, 32, 7.0f, 1.702f};
    const cuda::ExpertShape h = cuda::with_half_operands(gptoss, std::sqrt(2880.0f) * 2.5f);
    EXPECT_TRUE(h.half_operands);
    EXPECT_EQ(h.in_exp, 7);  // 134 < 2^8
    EXPECT_EQ(h.act_exp, 9);
    cuda::ExpertShape unclamped = gptoss;
    unclamped.limit = std::numeric_limits<float>::infinity();
    EXPECT_FALSE(cuda::with_half_operands(unclamped, 1.0f).half_operands);
    EXPECT_FALSE(
        cuda::with_half_operands(gptoss, std::numeric_limits<float>::infinity()).half_operands);
    cuda::ExpertShape negative_alpha = gptoss;
    negative_alpha.alpha = -1.0f;  // g * sigmoid(alpha g) is then unbounded below
    EXPECT_FALSE(cuda::with_half_operands(negative_alpha, 1.0f).half_operands);
}

TEST(CudaPrefillKernels, ExpertGemmMatchesTheReferenceExpertMathAndTheAddSumsInOrder) {
    SKIP_WITHOUT_GPU();
    const int H = 64, I = 96, K = 4, E = 3, T = 70;
    std::vector<test::TestExpert> experts;
    for (int e = 0; e < E; ++e) {
        test::ExpertSpec spec;
        spec.hidden = H;
        spec.intermediate = I;
        spec.seed = 200 + static_cast<std::uint64_t>(e);
        experts.push_back(test::make_test_expert(spec));
    }
    const std::uint64_t bytes = cpu::ExpertRecordView::raw_bytes(H, I);
    std::vector<std::uint16_t> gu_bias(static_cast<std::size_t>(E) * 2 * I),
        down_bias(static_cast<std::size_t>(E) * H);
    for (int e = 0; e < E; ++e) {
        std::memcpy(gu_bias.data() + e * 2 * I,
                    experts[static_cast<std::size_t>(e)].gate_up_bias.data(), 4 * I);
        std::memcpy(down_bias.data() + e * H, experts[static_cast<std::size_t>(e)].down_bias.data(),
                    2 * H);
    }
    const auto hf = test::random_vector(static_cast<std::size_t>(T) * H, 61);
    const auto gate = test::random_vector(static_cast<std::size_t>(T) * K, 62);
    // Expert e takes the tokens t with t % E == e... and every token's choice k = e.
    std::vector<float> want(static_cast<std::size_t>(T) * H, 0.0f);
    Dev<std::uint16_t> dgu(gu_bias), ddown(down_bias);
    Dev<float> dh(hf), act(static_cast<std::size_t>(T) * I), dgate(gate),
        acc(static_cast<std::size_t>(T) * H);
    Dev<float> acc_half(static_cast<std::size_t>(T) * H);
    const cuda::ExpertShape split{H, I, K, E, 7.0f, 1.702f},
        half = cuda::with_half_operands(split, max_abs(hf));
    ASSERT_TRUE(half.half_operands);
    // The fp16 operands' reference: the same math on the operands rounded as the kernel rounds them.
    std::vector<float> want_half(want.size(), 0.0f), hf_half(hf);
    for (float& v : hf_half) v = fp16_operand(v, half.in_exp);
    const auto act_half = [&](float a) { return fp16_operand(a, half.act_exp); };
    for (int e = 0; e < E; ++e) {
        std::vector<int> entries;
        for (int t = e; t < T; t += E) entries.push_back(t * K + e);
        for (int t = e; t < T; t += E) {
            std::vector<const test::TestExpert*> one = {&experts[static_cast<std::size_t>(e)]};
            std::vector<float> w = {gate[static_cast<std::size_t>(t) * K + e]};
            test::reference_decode(one, w, hf.data() + static_cast<std::size_t>(t) * H,
                                   want.data() + static_cast<std::size_t>(t) * H);
            test::reference_decode(one, w, hf_half.data() + static_cast<std::size_t>(t) * H,
                                   want_half.data() + static_cast<std::size_t>(t) * H, 7.0f, 1.702f,
                                   act_half);
        }
        Dev<std::uint8_t> rec(
            std::vector<std::uint8_t>(experts[static_cast<std::size_t>(e)].raw.data(),
                                      experts[static_cast<std::size_t>(e)].raw.data() + bytes));
        Dev<int> de(entries);
        cuda::expert_gemm(rec.get(), e, split, de.get(), static_cast<int>(entries.size()), dh.get(),
                          dgate.get(), dgu.get(), ddown.get(), act.get(), acc.get(), nullptr);
        cuda::expert_gemm(rec.get(), e, half, de.get(), static_cast<int>(entries.size()), dh.get(),
                          dgate.get(), dgu.get(), ddown.get(), act.get(), acc_half.get(), nullptr);
        ASSERT_EQ(cuda::drv::device_synchronize(), CUDA_SUCCESS);
    }
    // Activations as bf16 hi + lo halves: ~16 bits per product. As fp16 (11 bits), against the
    // same math on fp16-rounded operands: what remains is the order of the fp32 sums and an
    // activation whose rounding the fp32 order flips (one fp16 step of one term).
    expect_close(acc.host(), want, 1e-3f);
    expect_close(acc_half.host(), want_half, 1e-3f);
    // Against the unrounded math: the fp16 operands' own error, amplified where an element's
    // products cancel (printed for docs/CUDA.md).
    const auto got_half = acc_half.host();
    double worst = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(got_half[i]) - want[i]) /
                                    (1.0 + std::fabs(want[i])));
    }
    std::printf("fp16 operands against the unrounded math: worst error %.3g x (1 + |want|)\n",
                worst);
    expect_close(got_half, want, 0.1f);

    // add_moe_rows: x += gpu + the CPU rows of each token (CSR), gpu cleared.
    const int rows = 3, n = 8;
    std::vector<float> x(rows * n, 1.0f), gpu(rows * n, 2.0f);
    Dev<float> dx(x), dg(gpu);
    void* host = nullptr;
    ASSERT_EQ(cuda::drv::host_alloc(&host, 4 * (rows + 1) + 4 * 3 * n, cuda::drv::kHostAllocMapped),
              CUDA_SUCCESS);
    int* start = static_cast<int*>(host);
    float* cpu_rows = reinterpret_cast<float*>(start + rows + 1);
    start[0] = 0, start[1] = 2, start[2] = 2, start[3] = 3;  // token 0: rows 0, 1; token 2: row 2
    for (int i = 0; i < 3 * n; ++i) cpu_rows[i] = static_cast<float>(10 * (i / n + 1));
    int* dstart = nullptr;
    float* drows = nullptr;
    ASSERT_EQ(cuda::drv::host_get_device_pointer(reinterpret_cast<void**>(&dstart), start, 0),
              CUDA_SUCCESS);
    ASSERT_EQ(cuda::drv::host_get_device_pointer(reinterpret_cast<void**>(&drows), cpu_rows, 0),
              CUDA_SUCCESS);
    cuda::add_moe_rows(dx.get(), dg.get(), n, rows, dstart, drows, nullptr);
    const auto xs = dx.host(), gs = dg.host();
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(xs[i], 1.0f + 2.0f + 10.0f + 20.0f);
        EXPECT_EQ(xs[n + i], 3.0f);
        EXPECT_EQ(xs[2 * n + i], 1.0f + 2.0f + 30.0f);
    }
    for (float g : gs) EXPECT_EQ(g, 0.0f);
    cuda::drv::free_host(host);
}

}  // namespace
}  // namespace neural
