// Every CUDA kernel of the hybrid backend against its CPU reference (cpu/ops.h, cpu/rope.h,
// the reference router and expert math). Skips with the reason where no GPU is usable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include <cuda_runtime.h>

#include "../kernels/test_experts.h"
#include "cpu/ops.h"
#include "cpu/rope.h"
#include "cuda/attention.cuh"
#include "cuda/device.cuh"
#include "cuda/expert_mxfp4.cuh"
#include "cuda/gemv_bf16.cuh"
#include "cuda/residual.cuh"
#include "cuda/rms_norm.cuh"
#include "cuda/rope_kv.cuh"
#include "cuda/router.cuh"
#include "model/bf16.h"
#include "model/config.h"
#include "support/fixtures.h"

namespace neural {
namespace {

#define SKIP_WITHOUT_GPU()                                               \
    do {                                                                 \
        std::string why_;                                                \
        if (cuda::list_devices(&why_).empty()) GTEST_SKIP() << "no GPU: " << why_; \
    } while (0)

// A device copy of a host vector, freed with the object.
template <typename T>
class Dev {
 public:
    explicit Dev(const std::vector<T>& host) : n_(host.size()) {
        EXPECT_EQ(cudaMalloc(&p_, std::max<std::size_t>(1, n_) * sizeof(T)), cudaSuccess);
        if (n_ > 0) {
            EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
        }
    }
    explicit Dev(std::size_t n) : Dev(std::vector<T>(n)) {}
    ~Dev() { cudaFree(p_); }
    T* get() const { return p_; }
    std::vector<T> host() const {
        std::vector<T> out(n_);
        EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(cudaMemcpy(out.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
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
                      vc.get(), nullptr);
        expect_close(dqkv.host(), want, 2e-5f);
        const auto k = kc.host(), v = vc.host();
        for (int i = 0; i < kv; ++i) {
            ASSERT_NEAR(k[static_cast<std::size_t>(pos) * kv + i], want[static_cast<std::size_t>(nq * d + i)], 2e-5f);
            ASSERT_EQ(v[static_cast<std::size_t>(pos) * kv + i], qkv[static_cast<std::size_t>((nq + nkv) * d + i)]);
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
                SCOPED_TRACE(testing::Message() << "window " << window << " pos " << pos << " splits " << splits);
                const auto q = test::random_vector(static_cast<std::size_t>(nq) * d, 10 + pos);
                const int first = window > 0 ? std::max(0, pos - window + 1) : 0;
                std::vector<float> want(static_cast<std::size_t>(nq) * d);
                for (int h = 0; h < nq; ++h) {
                    const int hk = h / (nq / nkv);
                    cpu::attend_with_sink(q.data() + h * d, k.data() + static_cast<std::size_t>(first) * kv + hk * d,
                                          v.data() + static_cast<std::size_t>(first) * kv + hk * d, kv,
                                          pos - first + 1, d, bf16_to_float(sinks[static_cast<std::size_t>(h)]),
                                          1.0f / std::sqrt(static_cast<float>(d)), want.data() + h * d);
                }
                Dev<float> dq(q), out(want.size()),
                    scratch(static_cast<std::size_t>(nq) * splits * (d + 2));
                Dev<int> dpos(std::vector<int>{pos});
                cuda::attention_decode(dq.get(), dk.get(), dv.get(), ds.get(), nq, nkv, d, window,
                                       dpos.get(), splits, scratch.get(), out.get(), nullptr);
                expect_close(out.host(), want, 1e-4f);
            }
        }
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
    ASSERT_EQ(cudaHostAlloc(&host, K * 12, cudaHostAllocMapped), cudaSuccess);
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
    cudaFreeHost(host);
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
    const std::uint64_t bytes = cpu::ExpertRecordView::raw_bytes(H, I), stride = (bytes + 255) / 256 * 256;
    ASSERT_GE(experts[0].raw.size(), bytes);
    // Slots hold experts 2, 0, 3 (slots 0, 1, 2); expert 1 is a miss.
    const int slot_of[E] = {1, -1, 0, 2};
    std::vector<std::uint8_t> pool(3 * stride);
    for (int e = 0; e < E; ++e) {
        if (slot_of[e] >= 0) std::memcpy(pool.data() + slot_of[e] * stride, experts[static_cast<std::size_t>(e)].raw.data(), bytes);
    }
    std::vector<std::uint16_t> gu_bias(static_cast<std::size_t>(E) * 2 * I), down_bias(static_cast<std::size_t>(E) * H);
    for (int e = 0; e < E; ++e) {
        std::memcpy(gu_bias.data() + e * 2 * I, experts[static_cast<std::size_t>(e)].gate_up_bias.data(), 4 * I);
        std::memcpy(down_bias.data() + e * H, experts[static_cast<std::size_t>(e)].down_bias.data(), 2 * H);
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
    const auto x = test::random_vector(n, 13), g = test::random_vector(n, 14), c = test::random_vector(n, 15);
    void* host = nullptr;
    ASSERT_EQ(cudaHostAlloc(&host, n * 4, cudaHostAllocMapped), cudaSuccess);
    std::memcpy(host, c.data(), n * 4);
    Dev<float> dx(x), dg(g);
    cuda::add_moe(dx.get(), dg.get(), static_cast<float*>(host), n, nullptr);
    const auto got = dx.host();
    for (int i = 0; i < n; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], x[static_cast<std::size_t>(i)] + (g[static_cast<std::size_t>(i)] + c[static_cast<std::size_t>(i)]));
    cudaFreeHost(host);
}

}  // namespace
}  // namespace neural
