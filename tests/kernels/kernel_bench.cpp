// neural_kernel_bench: the figures of docs/KERNELS.md "Benchmarks".
//  - ReadBandwidth: a STREAM-like read of a buffer far larger than the caches (sum of 64-bit
//    words, split in 1 MiB tasks over the team): the RAM ceiling.
//  - Decode: one "token" = 36 decode() calls of 4 experts each, every expert a different
//    record of the gpt-oss-120b size (13.2 MB raw / 12.8 MB packed): 1.9 GB per token, ~60x
//    a 32 MB L3, so every byte comes from RAM. Reported as GB/s of records read.
//  - Dense: one token through an lm_head-sized dense matrix (NEURAL_BENCH_DENSE_ROWS, default
//    201,088, x NEURAL_BENCH_DIM; 1.16 GB of bf16) on the bf16 kernel and on its int8 copy
//    (0.62 GB): GB/s of weight bytes read and ms per token.
//  - Multi: the prompt path's fp32 kernel, 16 tokens through one cache-resident expert record:
//    its arithmetic rate in GMAC/s (a core's AVX-512 peak is 32 MACs per cycle).
//  - Bf16Gemm: the bf16 expert GEMM (cpu/kernels/expert_bf16.h; avx2, avx512, amx-bf16) on one
//    thread, both projections of the same record for 16 or 64 tokens, per variant: GMAC/s of one
//    core, to compare with Multi at threads:1 (the fp32 kernel it replaces for prompts; the
//    default bf16x2 prompt operand runs it on twice the rows).
//  - DensePrompt: one prompt block (32, 64, 256 tokens) through a bf16 matrix of 2880 or 4096
//    rows x NEURAL_BENCH_DIM on one thread, per dense prompt variant (the lane tree's avx2,
//    avx512, avx512bf16; the tile order's tile-avx2, tile-avx512, amx-bf16): GMAC/s.
//  - TeamOverhead: per-call cost of an empty two-phase job (the shape of one decode() call),
//    36 calls per token, back to back and with a 200 us host gap between calls.
// Environment: NEURAL_BENCH_PROBE_MB (2048), NEURAL_BENCH_LAYERS (36), NEURAL_BENCH_EXPERTS (4),
// NEURAL_BENCH_THREADS (comma list, default "1,2"), NEURAL_BENCH_DIM (2880), NEURAL_BENCH_ITERS
// (5 tokens per decode benchmark; raise it for small, cache-resident NEURAL_BENCH_DIM runs).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/kernels/attention_kernel.h"
#include "cpu/kernels/dense_int8.h"
#include "cpu/kernels/dense_kernel.h"
#include "cpu/kernels/expert_bf16.h"
#include "cpu/kernels/expert_kernel.h"
#include "cpu/ram_probe.h"
#include "cpu/team/worker_team.h"
#include "platform/cpu_features.h"
#include "test_experts.h"

namespace neural {
namespace {

long env_long(const char* name, long def) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::strtol(v, nullptr, 10) : def;
}

std::vector<int> env_threads() {
    const char* v = std::getenv("NEURAL_BENCH_THREADS");
    std::vector<int> out;
    std::stringstream ss(v != nullptr && *v != '\0' ? v : "1,2");
    std::string item;
    while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
    return out;
}

std::unique_ptr<cpu::WorkerTeam> make_team(bool persistent, int threads) {
    cpu::TeamOptions o;
    o.persistent = persistent;
    o.threads = threads;
    o.library = NEURAL_KDLL_TEST_PATH;
    if (persistent) return cpu::PersistentTeam::load(o);
    return std::make_unique<cpu::ReferenceTeam>(threads);
}

void fill_random(std::uint8_t* p, std::size_t n, std::uint64_t seed) {
    std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        std::memcpy(p + i, &s, 8);
    }
    for (; i < n; ++i) p[i] = static_cast<std::uint8_t>(i);
}

// --- read bandwidth probe (engine/cpu/ram_probe.h, shared with `neural bench`) ------------

void BM_ReadBandwidth(benchmark::State& state, bool persistent, int threads) {
    const std::size_t bytes = static_cast<std::size_t>(env_long("NEURAL_BENCH_PROBE_MB", 2048))
                              << 20;
    bench::ReadProbe probe(bytes);
    auto team = make_team(persistent, threads);
    probe.run(*team);  // warm: page faults, TLB
    for (auto _ : state) probe.run(*team);
    benchmark::DoNotOptimize(probe.checksum());
    state.counters["GB/s"] = benchmark::Counter(
        static_cast<double>(probe.bytes()) * static_cast<double>(state.iterations()),
        benchmark::Counter::kIsRate);
    state.counters["threads"] = threads;
}

// --- decode kernel GB/s -------------------------------------------------------------------------

struct Dataset {
    bool packed = false;
    int layers = 0, experts = 0, dim = 0;
    std::uint64_t record_bytes = 0, stride = 0;
    test::AlignedBytes data;
    std::vector<std::uint8_t> gate_up_bias, down_bias;

    std::uint8_t* record(int layer, int k) {
        return data.data() +
               (static_cast<std::uint64_t>(layer) * static_cast<std::uint64_t>(experts) +
                static_cast<std::uint64_t>(k)) *
                   stride;
    }
};

std::unique_ptr<Dataset> g_dataset;

// Records like a store's: 4 KiB-aligned, random codes, realistic scales (E8M0 114..124);
// packed records come from the raw ones through the store's scale codec (no escapes).
Dataset& dataset(bool packed) {
    if (g_dataset && g_dataset->packed == packed) return *g_dataset;
    g_dataset.reset();
    auto d = std::make_unique<Dataset>();
    d->packed = packed;
    d->layers = static_cast<int>(env_long("NEURAL_BENCH_LAYERS", 36));
    d->experts = static_cast<int>(env_long("NEURAL_BENCH_EXPERTS", 4));
    d->dim = static_cast<int>(env_long("NEURAL_BENCH_DIM", 2880));
    const int H = d->dim, I = d->dim;
    const std::uint64_t raw_bytes = cpu::ExpertRecordView::raw_bytes(H, I);
    d->record_bytes = packed ? cpu::ExpertRecordView::packed_bytes(H, I) : raw_bytes;
    d->stride = (d->record_bytes + 4095) / 4096 * 4096;
    d->data = test::AlignedBytes(d->stride * static_cast<std::uint64_t>(d->layers * d->experts));
    test::AlignedBytes raw(raw_bytes);
    std::mt19937 rng(3);
    std::uniform_int_distribution<int> scale(114, 124);
    for (int l = 0; l < d->layers; ++l) {
        for (int k = 0; k < d->experts; ++k) {
            fill_random(raw.data(), raw_bytes, static_cast<std::uint64_t>(l * 131 + k + 1));
            const auto v = cpu::ExpertRecordView::make(raw.data(), H, I, cpu::RecordKind::raw);
            for (Projection p : {Projection::kGateUp, Projection::kDown}) {
                std::uint8_t* s = raw.data() + v.scales_offset(p);
                const std::uint64_t n = static_cast<std::uint64_t>(v.rows(p)) *
                                        static_cast<std::uint64_t>(v.blocks_per_row(p));
                for (std::uint64_t i = 0; i < n; ++i) s[i] = static_cast<std::uint8_t>(scale(rng));
            }
            if (packed) {
                test::AlignedBytes pk;
                std::uint32_t eg = 0, ed = 0;
                test::pack_record(raw.data(), H, I, &pk, &eg, &ed);
                std::memcpy(d->record(l, k), pk.data(), pk.size());
            } else {
                std::memcpy(d->record(l, k), raw.data(), raw_bytes);
            }
        }
    }
    std::vector<float> b(static_cast<size_t>(2 * I));
    d->gate_up_bias.assign(static_cast<size_t>(4 * I), 0);
    d->down_bias.assign(static_cast<size_t>(2 * H), 0);
    g_dataset = std::move(d);
    return *g_dataset;
}

void BM_Decode(benchmark::State& state, cpu::KernelIsa isa, bool packed, bool persistent,
               int threads) {
    Dataset& d = dataset(packed);
    auto team = make_team(persistent, threads);
    cpu::ExpertKernel kernel(isa);
    const int H = d.dim, I = d.dim;
    const auto x = test::random_vector(static_cast<size_t>(H), 5);
    std::vector<float> out(static_cast<size_t>(H), 0.0f);
    std::vector<cpu::ExpertInput> in(static_cast<size_t>(d.experts));
    const auto kind = packed ? cpu::RecordKind::packed : cpu::RecordKind::raw;
    auto token = [&] {
        for (int l = 0; l < d.layers; ++l) {
            for (int k = 0; k < d.experts; ++k) {
                cpu::ExpertInput& e = in[static_cast<size_t>(k)];
                e.record = cpu::ExpertRecordView::make(d.record(l, k), H, I, kind, d.record_bytes);
                e.gate_up_bias = d.gate_up_bias.data();
                e.down_bias = d.down_bias.data();
                e.weight = 0.25f;
            }
            kernel.decode(*team, in, x.data(), out.data());
        }
    };
    token();  // warm: page faults
    for (auto _ : state) token();
    benchmark::DoNotOptimize(out.data());
    const double bytes = static_cast<double>(d.record_bytes) * d.layers * d.experts;
    state.counters["GB/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
    state.counters["ms/token"] =
        benchmark::Counter(1e3 * static_cast<double>(state.iterations()),
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["threads"] = threads;
}

// The prompt path's fp32 kernel: one expert record of the dataset's size, 16 tokens per multi()
// call (the most one call takes). Cache-resident after the first call, so this is the kernel's
// arithmetic rate: GMAC/s of weight x token products (H x 2I + I x H per token).
void BM_Multi(benchmark::State& state, cpu::KernelIsa isa, int threads) {
    Dataset& d = dataset(false);
    auto team = make_team(true, threads);
    cpu::ExpertKernel kernel(isa);
    const int H = d.dim, I = d.dim, T = cpu::ExpertKernel::kMaxTokens;
    std::vector<std::vector<float>> xs, outs;
    std::vector<const float*> x;
    std::vector<float*> out;
    for (int t = 0; t < T; ++t) {
        xs.push_back(test::random_vector(static_cast<size_t>(H), 11 + static_cast<unsigned>(t)));
        outs.emplace_back(static_cast<size_t>(H), 0.0f);
    }
    for (int t = 0; t < T; ++t) {
        x.push_back(xs[static_cast<size_t>(t)].data());
        out.push_back(outs[static_cast<size_t>(t)].data());
    }
    const std::vector<float> w(static_cast<size_t>(T), 1.0f);
    cpu::ExpertInput e;
    e.record =
        cpu::ExpertRecordView::make(d.record(0, 0), H, I, cpu::RecordKind::raw, d.record_bytes);
    e.gate_up_bias = d.gate_up_bias.data();
    e.down_bias = d.down_bias.data();
    kernel.multi(*team, e, x, w, out);  // warm: page faults, caches
    for (auto _ : state) kernel.multi(*team, e, x, w, out);
    benchmark::DoNotOptimize(outs[0].data());
    const double macs = (2.0 * H * I + static_cast<double>(I) * H) * T;
    state.counters["GMAC/s"] = benchmark::Counter(
        macs * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["threads"] = threads;
}

// The bf16 expert GEMM on the calling thread: gate_up (2I rows) and down (H rows) of one
// cache-resident record for `tokens` tokens, activations already bf16, scratch preallocated.
void BM_Bf16Gemm(benchmark::State& state, cpu::Bf16ExpertIsa isa, int tokens) {
    Dataset& d = dataset(false);
    const int H = d.dim, I = d.dim;
    const cpu::ExpertRecordView rec =
        cpu::ExpertRecordView::make(d.record(0, 0), H, I, cpu::RecordKind::raw, d.record_bytes);
    const std::vector<float> xf =
        test::random_vector(static_cast<size_t>(tokens) * static_cast<size_t>(H), 21);
    std::vector<std::uint16_t> x(xf.size());
    cpu::bf16_round_activations(xf.data(), static_cast<std::int64_t>(xf.size()), x.data());
    std::vector<float> gu(static_cast<size_t>(tokens) * 2 * static_cast<size_t>(I));
    std::vector<float> down(static_cast<size_t>(tokens) * static_cast<size_t>(H));
    const std::size_t bytes = cpu::bf16_expert_scratch_bytes(std::max(H, I), tokens);
    test::AlignedBytes scratch(bytes);
    const auto run = [&] {
        cpu::bf16_expert_gemm(isa, rec, 0, 0, 2 * I, x.data(), H, tokens, gu.data(), 2 * I,
                              scratch.data());
        // The down projection's operands: the first I activations of each token (bf16).
        cpu::bf16_expert_gemm(isa, rec, 1, 0, H, x.data(), H, tokens, down.data(), H,
                              scratch.data());
    };
    run();  // warm: page faults, caches
    for (auto _ : state) run();
    benchmark::DoNotOptimize(gu.data());
    benchmark::DoNotOptimize(down.data());
    const double macs = (2.0 * H * I + static_cast<double>(I) * H) * tokens;
    state.counters["GMAC/s"] = benchmark::Counter(
        macs * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// --- dense ------------------------------------------------------------------------------------

struct DenseData {
    std::vector<std::uint16_t> bits;
    Bf16View view;
    cpu::Int8Matrix int8;
};
std::unique_ptr<DenseData> g_dense;

DenseData& dense_data() {
    if (g_dense) return *g_dense;
    auto d = std::make_unique<DenseData>();
    const std::int64_t rows = env_long("NEURAL_BENCH_DENSE_ROWS", 201088);
    const std::int64_t cols = env_long("NEURAL_BENCH_DIM", 2880);
    d->bits.resize(static_cast<size_t>(rows * cols));
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    for (std::size_t i = 0; i < 4096; ++i) {
        float v = nd(rng);
        std::uint32_t u;
        std::memcpy(&u, &v, 4);
        d->bits[i] = static_cast<std::uint16_t>(u >> 16);
    }
    for (std::size_t i = 4096; i < d->bits.size(); ++i) d->bits[i] = d->bits[(i * 7919) % 4096];
    d->view = Bf16View{reinterpret_cast<const std::uint8_t*>(d->bits.data()), rows, cols};
    cpu::ReferenceTeam team(0);
    const Bf16View* in[1] = {&d->view};
    cpu::Int8Matrix* out[1] = {&d->int8};
    cpu::quantize_on_team(team, in, out);
    g_dense = std::move(d);
    return *g_dense;
}

void BM_Dense(benchmark::State& state, bool int8, bool persistent, int threads) {
    DenseData& d = dense_data();
    auto team = make_team(persistent, threads);
    const auto x = test::random_vector(static_cast<size_t>(d.view.cols), 9);
    std::vector<float> y(static_cast<size_t>(d.view.rows));
    const cpu::DenseKernel bf16;
    const cpu::Int8DenseKernel q8(cpu::int8_isa_for(cpu::KernelIsa::avx512));
    auto token = [&] {
        if (int8) {
            q8.run(*team, cpu::Int8Output{&d.int8, nullptr, y.data(), 0}, x.data(), 1, d.view.cols);
        } else {
            bf16.run(*team, cpu::DenseOutput{&d.view, nullptr, y.data(), 0}, x.data(), 1,
                     d.view.cols);
        }
    };
    token();
    for (auto _ : state) token();
    benchmark::DoNotOptimize(y.data());
    const double bytes =
        int8 ? static_cast<double>(d.int8.bytes()) : 2.0 * d.view.rows * d.view.cols;
    state.counters["GB/s"] = benchmark::Counter(bytes * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
    state.counters["ms/token"] =
        benchmark::Counter(1e3 * static_cast<double>(state.iterations()),
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["threads"] = threads;
}

// A prompt block through one bf16 matrix of `rows` x NEURAL_BENCH_DIM on the calling thread: the
// dense kernel's prompt variant `isa` (the lane tree's multi-token path, or a tile-order
// variant of the bf16 prompt path). GMAC/s = weights x tokens per second (each MAC is two
// products: the operand's high and low parts).
void BM_DensePrompt(benchmark::State& state, cpu::DenseIsa isa, std::int64_t rows,
                    std::int64_t tokens) {
    const std::int64_t cols = env_long("NEURAL_BENCH_DIM", 2880);
    std::vector<std::uint16_t> bits(static_cast<size_t>(rows * cols));
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 0.02f);
    for (auto& b : bits) {
        float v = nd(rng);
        std::uint32_t u;
        std::memcpy(&u, &v, 4);
        b = static_cast<std::uint16_t>(u >> 16);
    }
    const Bf16View w{reinterpret_cast<const std::uint8_t*>(bits.data()), rows, cols};
    const auto x = test::random_vector(static_cast<size_t>(tokens * cols), 12);
    std::vector<float> y(static_cast<size_t>(tokens * rows));
    cpu::ReferenceTeam team(1);
    const cpu::DenseKernel kernel(cpu::best_dense_isa(), isa, cpu::DensePrompts::passes);
    auto call = [&] {
        kernel.run(team, cpu::DenseOutput{&w, nullptr, y.data(), 0}, x.data(), tokens, cols, true);
    };
    call();
    for (auto _ : state) call();
    benchmark::DoNotOptimize(y.data());
    state.counters["GMAC/s"] = benchmark::Counter(
        1e-9 * static_cast<double>(rows * cols * tokens) * static_cast<double>(state.iterations()),
        benchmark::Counter::kIsRate);
}

// --- team overhead ------------------------------------------------------------------------------

// One GQA group of gpt-oss (8 query heads, d = 64) against n cached keys and values, one thread:
// the attention kernel's variants side by side (docs/KERNELS.md "Attention").
void BM_Attention(benchmark::State& state, cpu::AttentionIsa isa, std::int64_t n) {
    constexpr int kHeads = 8, kDim = 64;
    const std::int64_t stride = 8 * kDim;  // a K/V row holds the 8 KV heads
    const auto q = test::random_vector(kHeads * kDim, 1);
    const auto k = test::random_vector(static_cast<std::size_t>(n * stride), 2);
    const auto v = test::random_vector(static_cast<std::size_t>(n * stride), 3);
    const auto sinks = test::random_vector(kHeads, 4);
    std::vector<float> out(kHeads * kDim);
    for (auto _ : state) {
        cpu::attend_group(isa, q.data(), kHeads, k.data(), v.data(), stride, n, kDim, sinks.data(),
                          0.125f, out.data());
        benchmark::DoNotOptimize(out.data());
    }
}

void noop_task(void*, std::int64_t, std::int32_t) {}

void BM_TeamOverhead(benchmark::State& state, bool persistent, int threads, int gap_us) {
    auto team = make_team(persistent, threads);
    const cpu::TeamPhase phases[2] = {{threads, &noop_task, nullptr},
                                      {threads, &noop_task, nullptr}};
    using Clock = std::chrono::steady_clock;
    for (int i = 0; i < 100; ++i) team->run(phases);
    for (auto _ : state) {
        double seconds = 0;
        for (int call = 0; call < 36; ++call) {
            if (gap_us > 0) {
                const auto until = Clock::now() + std::chrono::microseconds(gap_us);
                while (Clock::now() < until) {
                }
            }
            const auto t0 = Clock::now();
            team->run(phases);
            seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        }
        state.SetIterationTime(seconds);
    }
    // Seconds per call (printed with an SI suffix: "12.3u" = 12.3 us).
    state.counters["s/call"] =
        benchmark::Counter(static_cast<double>(state.iterations()) * 36.0,
                           benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    state.counters["threads"] = threads;
    state.counters["fallbacks"] = static_cast<double>(team->counters().fallbacks);
}

}  // namespace
}  // namespace neural

int main(int argc, char** argv) {
    using namespace neural;
    const std::vector<int> threads = env_threads();
    const long iters = env_long("NEURAL_BENCH_ITERS", 5);
    std::printf("CPU: %s; features: %s; kernel variants:", cpu_features().brand.c_str(),
                cpu_features().summary().c_str());
    std::vector<cpu::KernelIsa> isas;
    for (cpu::KernelIsa isa :
         {cpu::KernelIsa::scalar, cpu::KernelIsa::avx2, cpu::KernelIsa::avx512}) {
        if (cpu::kernel_isa_available(isa)) {
            isas.push_back(isa);
            std::printf(" %s", cpu::kernel_isa_name(isa));
        }
    }
    std::printf("\n");
    for (int t : threads) {
        benchmark::RegisterBenchmark(
            ("ReadBandwidth/reference/threads:" + std::to_string(t)).c_str(), BM_ReadBandwidth,
            false, t)
            ->Unit(benchmark::kMillisecond)
            ->Iterations(5)
            ->UseRealTime();
    }
    for (bool packed : {false, true}) {
        for (cpu::KernelIsa isa : isas) {
            for (bool persistent : {false, true}) {
                for (int t : threads) {
                    const std::string name =
                        std::string("Decode/") + (packed ? "packed/" : "raw/") +
                        cpu::kernel_isa_name(isa) + "/" +
                        (persistent ? "persistent" : "reference") + "/threads:" + std::to_string(t);
                    benchmark::RegisterBenchmark(name.c_str(), BM_Decode, isa, packed, persistent,
                                                 t)
                        ->Unit(benchmark::kMillisecond)
                        ->Iterations(isa == cpu::KernelIsa::scalar ? 1 : iters)
                        ->UseRealTime();
                }
            }
        }
    }
    for (cpu::KernelIsa isa : isas) {
        if (isa == cpu::KernelIsa::scalar) continue;
        for (int t : threads) {
            const std::string name = std::string("Multi/") + cpu::kernel_isa_name(isa) +
                                     "/tokens:16/threads:" + std::to_string(t);
            benchmark::RegisterBenchmark(name.c_str(), BM_Multi, isa, t)
                ->Unit(benchmark::kMillisecond)
                ->Iterations(iters * 4)
                ->UseRealTime();
        }
    }
    for (cpu::Bf16ExpertIsa isa :
         {cpu::Bf16ExpertIsa::avx2, cpu::Bf16ExpertIsa::avx512, cpu::Bf16ExpertIsa::amx_bf16}) {
        if (!cpu::bf16_expert_isa_available(isa)) continue;
        for (int tokens : {16, 64}) {
            const std::string name = std::string("Bf16Gemm/") + cpu::bf16_expert_isa_name(isa) +
                                     "/tokens:" + std::to_string(tokens) + "/threads:1";
            benchmark::RegisterBenchmark(name.c_str(), BM_Bf16Gemm, isa, tokens)
                ->Unit(benchmark::kMillisecond)
                ->Iterations(iters * 4)
                ->UseRealTime();
        }
    }
    for (cpu::DenseIsa isa :
         {cpu::DenseIsa::avx2, cpu::DenseIsa::avx512, cpu::DenseIsa::avx512bf16,
          cpu::DenseIsa::tile_avx2, cpu::DenseIsa::tile_avx512, cpu::DenseIsa::amx_bf16}) {
        if (!cpu::dense_isa_available(isa)) continue;
        for (std::int64_t rows : {std::int64_t{2880}, std::int64_t{4096}}) {
            for (std::int64_t tokens : {std::int64_t{32}, std::int64_t{64}, std::int64_t{256}}) {
                const std::string name = std::string("DensePrompt/") + cpu::dense_isa_name(isa) +
                                         "/rows:" + std::to_string(rows) +
                                         "/tokens:" + std::to_string(tokens) + "/threads:1";
                benchmark::RegisterBenchmark(name.c_str(), BM_DensePrompt, isa, rows, tokens)
                    ->Unit(benchmark::kMillisecond)
                    ->UseRealTime();
            }
        }
    }
    for (bool int8 : {false, true}) {
        for (int t : threads) {
            const std::string name =
                std::string("Dense/") +
                (int8 ? cpu::int8_isa_name(cpu::int8_isa_for(cpu::KernelIsa::avx512))
                      : cpu::dense_isa_name(cpu::best_dense_isa())) +
                "/persistent/threads:" + std::to_string(t);
            benchmark::RegisterBenchmark(name.c_str(), BM_Dense, int8, true, t)
                ->Unit(benchmark::kMillisecond)
                ->Iterations(iters * 4)
                ->UseRealTime();
        }
    }
    for (std::int64_t n : {std::int64_t{128}, std::int64_t{4096}}) {
        for (cpu::AttentionIsa isa :
             {cpu::AttentionIsa::reference, cpu::AttentionIsa::avx2, cpu::AttentionIsa::avx512}) {
            if (!cpu::attention_isa_available(isa)) continue;
            const std::string name = std::string("Attention/") + cpu::attention_isa_name(isa) +
                                     "/keys:" + std::to_string(n);
            benchmark::RegisterBenchmark(name.c_str(), BM_Attention, isa, n)
                ->Unit(benchmark::kMicrosecond);
        }
    }
    for (int gap : {0, 200}) {
        for (bool persistent : {false, true}) {
            for (int t : threads) {
                const std::string name =
                    std::string("TeamOverhead/") + (persistent ? "persistent" : "reference") +
                    "/gap_us:" + std::to_string(gap) + "/threads:" + std::to_string(t);
                // Fixed iterations: with manual time only the run() calls count, so the
                // default "run until 0.5 s measured" would take minutes of host gaps.
                benchmark::RegisterBenchmark(name.c_str(), BM_TeamOverhead, persistent, t, gap)
                    ->Unit(benchmark::kMicrosecond)
                    ->UseManualTime()
                    ->Iterations(gap > 0 ? 100 : 2000);
            }
        }
    }
    benchmark::Initialize(&argc, argv);
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
