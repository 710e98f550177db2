// Per-kernel timings of the hybrid backend's GPU core at the real gpt-oss shapes (20b: 24 layers,
// 32 experts; 120b: 36 layers, 128 experts; both hidden 2880, 64 query / 8 KV heads of 64):
// microseconds per call and achieved GB/s for every kernel of a layer graph, the graph itself
// launched and waited for like the backend does, and the lm_head tail. Not a test (timings are
// not pass/fail): `neural_cuda_bench [20b|120b] [context]`, see docs/CUDA.md.
// `neural_cuda_bench prefill [20b|120b] [tokens]`: the prefill kernels instead (one layer's
// dense GEMMs, attention, router and every expert's GEMM at the prompt's tokens per expert) and
// the GPU time they add up to for the whole prompt, with TFLOP/s of the tensor-core work.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cuda/driver/gpu.h"

#include "cpu/kernels/expert_record.h"
#include "cuda/attention.h"
#include "cuda/device.h"
#include "cuda/attention_prefill.h"
#include "cuda/expert_gemm.h"
#include "cuda/gemm_bf16_rows.h"
#include "cuda/expert_mxfp4.h"
#include "cuda/gemv_bf16.h"
#include "cuda/residual.h"
#include "cuda/rms_norm.h"
#include "cuda/rope_kv.h"
#include "cuda/router.h"

namespace {

#define CHECK(call)                                                                                \
    do {                                                                                           \
        const CUresult e_ = (call);                                                                \
        if (e_ != CUDA_SUCCESS) {                                                                  \
            std::fprintf(stderr, "%s failed: %s\n", #call, neural::cuda::result_text(e_).c_str()); \
            std::exit(1);                                                                          \
        }                                                                                          \
    } while (0)

template <typename T>
T* dev(std::size_t n, int fill_byte = 0x3C) {
    void* p = nullptr;
    CHECK(neural::cuda::drv::malloc(&p, n * sizeof(T)));
    CHECK(neural::cuda::drv::memset(p, fill_byte, n * sizeof(T)));
    return static_cast<T*>(p);
}

CUstream g_stream = nullptr;  // every launch below goes to this (non-blocking) stream

// Mean microseconds per call of `launch` over `iters` calls (after warm-up), timed with events
// on the launches' stream.
double time_us(const std::function<void()>& launch, int iters = 200) {
    for (int i = 0; i < 10; ++i) launch();
    CUevent a, b;
    CHECK(neural::cuda::drv::event_create(&a));
    CHECK(neural::cuda::drv::event_create(&b));
    CHECK(neural::cuda::drv::event_record(a, g_stream));
    for (int i = 0; i < iters; ++i) launch();
    CHECK(neural::cuda::drv::event_record(b, g_stream));
    CHECK(neural::cuda::drv::event_synchronize(b));
    float ms = 0;
    CHECK(neural::cuda::drv::event_elapsed_time(&ms, a, b));
    CHECK(neural::cuda::drv::get_last_error());
    neural::cuda::drv::event_destroy(a);
    neural::cuda::drv::event_destroy(b);
    return 1000.0 * ms / iters;
}

void row(const char* name, double us, double bytes) {
    std::printf("%-34s %9.2f us %9.1f GB/s\n", name, us, bytes > 0 ? bytes / us / 1e3 : 0.0);
}

// The GPU time of a whole layer-major prompt of `tokens` tokens (blocks of 2,048), from the
// prefill kernels timed one at a time: the dense part per block (attention at each block's
// position), then every expert over its share of the tokens (uniform routing: tokens * 4 /
// experts each, every expert from its own record so L2 holds none of them). Upper part of the
// prompt's time: the host's routing round trip, staging and the CPU's experts come on top.
int prefill_bench(const std::string& shape, int tokens) {
    using namespace neural::cuda;
    const int H = 2880, I = 2880, nq = 64, nkv = 8, d = 64, K = 4, block = 2048;
    const int E = shape == "20b" ? 32 : 128, L = shape == "20b" ? 24 : 36;
    const int Q = nq * d, KV = nkv * d, qkv_cols = Q + 2 * KV;
    const auto devices = neural::cuda::list_devices();
    const char* gpu = devices.empty() ? "?" : devices[0].name.c_str();
    std::printf(
        "prefill of %d tokens, gpt-oss-%s shape on %s, %d layers (half sliding, window 128)\n",
        tokens, shape.c_str(), gpu, L);
    CUstream s;
    CHECK(neural::cuda::drv::stream_create(&s, neural::cuda::drv::kStreamNonBlocking));
    g_stream = s;
    const std::size_t rows_max = static_cast<std::size_t>(std::min(block, tokens));
    auto* x = dev<float>(rows_max * H, 0);
    auto* hin = dev<float>(static_cast<std::size_t>(tokens) * H, 0x3C);
    auto* qkv = dev<float>(rows_max * qkv_cols, 0x3C);
    auto* attn = dev<float>(rows_max * Q, 0x3C);
    auto* logits = dev<float>(rows_max * E, 0);
    auto* kc = dev<float>(static_cast<std::size_t>(tokens) * KV, 0x3C);
    auto* vc = dev<float>(static_cast<std::size_t>(tokens) * KV, 0x3C);
    auto* qkv_w = dev<std::uint16_t>(static_cast<std::size_t>(qkv_cols) * H, 0x01);
    auto* o_w = dev<std::uint16_t>(static_cast<std::size_t>(H) * Q, 0x01);
    auto* router_w = dev<std::uint16_t>(static_cast<std::size_t>(E) * H, 0x01);
    auto* bias = dev<std::uint16_t>(static_cast<std::size_t>(qkv_cols), 0);
    auto* norm = dev<std::uint16_t>(H, 0x01);
    auto* inv = dev<float>(d / 2, 0);
    auto* sel = dev<int>(rows_max * K);
    auto* gate = dev<float>(static_cast<std::size_t>(tokens) * K, 0);
    const std::uint64_t rec = neural::cpu::ExpertRecordView::raw_bytes(H, I),
                        stride = (rec + 255) / 256 * 256;
    auto* pool = dev<std::uint8_t>(static_cast<std::size_t>(E) * stride, 0x77);
    auto* gu_bias = dev<std::uint16_t>(static_cast<std::size_t>(E) * 2 * I, 0);
    auto* down_bias = dev<std::uint16_t>(static_cast<std::size_t>(E) * H, 0);
    const int per_expert = tokens * K / E;
    auto* act = dev<float>(static_cast<std::size_t>(std::min(per_expert, block)) * I, 0);
    auto* acc = dev<float>(static_cast<std::size_t>(tokens) * H, 0);
    std::vector<int> entries_h(static_cast<std::size_t>(per_expert));
    for (int m = 0; m < per_expert; ++m)
        entries_h[static_cast<std::size_t>(m)] =
            static_cast<int>((static_cast<long long>(m) * tokens / per_expert) * K);
    int* entries = dev<int>(entries_h.size() + 1);
    CHECK(neural::cuda::drv::memcpy(entries, entries_h.data(), entries_h.size() * 4,
                                    neural::cuda::drv::kHostToDevice));
    const ExpertShape es{H, I, K, E, 7.0f, 1.702f};

    auto tflops = [](double flop, double us) { return flop / us / 1e6; };
    auto line = [&](const char* name, double us_per_call, double calls, double flop_per_call) {
        std::printf("%-40s %9.1f us x %7.0f = %7.3f s %8.1f TFLOP/s\n", name, us_per_call, calls,
                    us_per_call * calls / 1e6,
                    flop_per_call > 0 ? tflops(flop_per_call, us_per_call) : 0.0);
        return us_per_call * calls / 1e6;
    };
    double total = 0;
    const int blocks = (tokens + block - 1) / block;
    const int rows = static_cast<int>(rows_max);
    // Dense GEMMs at a full block (a shorter last block is counted as a full one).
    total += line("rms_norm_rows x2",
                  time_us([&] { rms_norm_rows(x, norm, 1e-5f, H, rows, hin, s); }, 20),
                  2.0 * L * blocks, 0);
    total += line(
        "gemm QKV [rows x 2880] x [5120]",
        time_us(
            [&] { gemm_bf16_rows(hin, rows, H, qkv_w, bias, qkv_cols, qkv, qkv_cols, false, s); },
            20),
        1.0 * L * blocks, 2.0 * rows * H * qkv_cols);
    line("  (64-wide tiles, not in the sum)",
         time_us(
             [&] {
                 gemm_bf16_rows(hin, rows, H, qkv_w, bias, qkv_cols, qkv, qkv_cols, false, s,
                                KernelPath::fast, TileWidth::n64);
             },
             20),
         1.0 * L * blocks, 2.0 * rows * H * qkv_cols);
    line("  (reference tile, not in the sum)",
         time_us(
             [&] {
                 gemm_bf16_rows(hin, rows, H, qkv_w, bias, qkv_cols, qkv, qkv_cols, false, s,
                                KernelPath::reference);
             },
             20),
         1.0 * L * blocks, 2.0 * rows * H * qkv_cols);
    total +=
        line("rope + K/V rows",
             time_us([&] { rope_kv_rows(qkv, rows, nq, nkv, d, inv, 1.0f, 0, kc, vc, 0, s); }, 20),
             1.0 * L * blocks, 0);
    double full_us = 0, sliding_us = 0, full_flop = 0, full_ref_us = 0;
    for (int b = 0; b < blocks; ++b) {
        const int r = std::min(block, tokens - b * block), pos0 = b * block;
        full_us += time_us(
            [&] {
                attention_prefill(qkv, qkv_cols, r, pos0, kc, vc, norm, nq, nkv, 0, 0, attn, s);
            },
            5);
        full_ref_us += time_us(
            [&] {
                attention_prefill(qkv, qkv_cols, r, pos0, kc, vc, norm, nq, nkv, 0, 0, attn, s,
                                  KernelPath::reference);
            },
            5);
        sliding_us += time_us(
            [&] {
                attention_prefill(qkv, qkv_cols, r, pos0, kc, vc, norm, nq, nkv, 128, 0, attn, s);
            },
            5);
        full_flop += 4.0 * nq * d * r * (pos0 + r / 2.0);
    }
    total += line("attention full (all blocks)", full_us, L / 2.0, full_flop);
    line("  (reference kernel, not in the sum)", full_ref_us, L / 2.0, full_flop);
    total += line("attention sliding 128 (all blocks)", sliding_us, L / 2.0, 0);
    total += line("gemm output [rows x 4096] x [2880]",
                  time_us([&] { gemm_bf16_rows(attn, rows, Q, o_w, bias, H, x, H, true, s); }, 20),
                  1.0 * L * blocks, 2.0 * rows * Q * H);
    line("  (64-wide tiles, not in the sum)",
         time_us(
             [&] {
                 gemm_bf16_rows(attn, rows, Q, o_w, bias, H, x, H, true, s, KernelPath::fast,
                                TileWidth::n64);
             },
             20),
         1.0 * L * blocks, 2.0 * rows * Q * H);
    total += line(
        "gemm router [rows x 2880] x [E]",
        time_us([&] { gemm_bf16_rows(hin, rows, H, router_w, bias, E, logits, E, false, s); }, 20),
        1.0 * L * blocks, 2.0 * rows * H * E);
    total += line("router top-k rows",
                  time_us([&] { router_topk_rows(logits, rows, E, K, sel, gate, s); }, 20),
                  1.0 * L * blocks, 0);
    // Every expert of a layer over its tokens, in chunks of a block like the backend.
    // The backend's operands: fp16 (a bound of the input as the backend derives it from a norm
    // weight of 1); bf16 hi + lo timed beside them.
    const ExpertShape es_half = with_half_operands(es, std::sqrt(static_cast<float>(H)));
    auto experts = [&](KernelPath path, const ExpertShape& es,
                       TileWidth width = TileWidth::automatic) {
        return time_us(
            [&] {
                for (int e = 0; e < E; ++e) {
                    const std::uint8_t* r = pool + static_cast<std::size_t>(e) * stride;
                    for (int m0 = 0; m0 < per_expert; m0 += block) {
                        expert_gemm(r, e, es, entries + m0, std::min(block, per_expert - m0), hin,
                                    gate, gu_bias, down_bias, act, acc, s, path, width);
                    }
                }
            },
            3);
    };
    char name[64];
    std::snprintf(name, sizeof name, "%d experts x %d tokens (gate_up + down)", E, per_expert);
    const double expert_flop = 2.0 * E * per_expert * (2.0 * I * H + static_cast<double>(H) * I);
    total += line(name, experts(KernelPath::fast, es_half), L, expert_flop);
    line("  (reference tile, not in the sum)", experts(KernelPath::reference, es_half), L,
         expert_flop);
    line("  (bf16 hi + lo operands, not in the sum)", experts(KernelPath::fast, es), L,
         expert_flop);
    line("  (the same, 64-wide tiles)", experts(KernelPath::fast, es, TileWidth::n64), L,
         expert_flop);
    line("  (the same, 128-wide tiles)", experts(KernelPath::fast, es, TileWidth::n128), L,
         expert_flop);
    line("  (the same, reference tile)", experts(KernelPath::reference, es), L, expert_flop);
    std::printf("GPU time of the whole prompt (sum of the above): %.3f s = %.0f tok/s\n", total,
                tokens / total);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    if (argc > 1 && std::string(argv[1]) == "prefill") {
        return prefill_bench(argc > 2 ? argv[2] : "120b", argc > 3 ? std::atoi(argv[3]) : 13000);
    }
    const std::string shape = argc > 1 ? argv[1] : "120b";
    const int ctx = argc > 2 ? std::atoi(argv[2]) : 4096;
    const int H = 2880, I = 2880, nq = 64, nkv = 8, d = 64, K = 4, V = 201088;
    const int E = shape == "20b" ? 32 : 128, L = shape == "20b" ? 24 : 36;
    const int Q = nq * d, KV = nkv * d, splits = 16, pos = ctx - 1;
    const auto devices = neural::cuda::list_devices();
    const char* gpu = devices.empty() ? "?" : devices[0].name.c_str();
    std::printf("gpt-oss-%s shape on %s, context position %d, %d layers\n", shape.c_str(), gpu, pos,
                L);

    auto* qkv_w = dev<std::uint16_t>(static_cast<std::size_t>(Q + 2 * KV) * H, 0x01);
    auto* o_w = dev<std::uint16_t>(static_cast<std::size_t>(H) * Q, 0x01);
    auto* router_w = dev<std::uint16_t>(static_cast<std::size_t>(E) * H, 0x01);
    auto* lm_head = dev<std::uint16_t>(static_cast<std::size_t>(V) * H, 0x01);
    auto* bias = dev<std::uint16_t>(static_cast<std::size_t>(V), 0);
    auto* norm = dev<std::uint16_t>(H, 0x01);
    auto* x = dev<float>(H, 0);
    auto* h = dev<float>(H, 0);
    auto* qkv = dev<float>(static_cast<std::size_t>(Q + 2 * KV), 0);
    auto* attn = dev<float>(Q, 0);
    auto* logits = dev<float>(V, 0);
    auto* kc = dev<float>(static_cast<std::size_t>(ctx) * KV, 0);
    auto* vc = dev<float>(static_cast<std::size_t>(ctx) * KV, 0);
    auto* scratch = dev<float>(static_cast<std::size_t>(nq) * splits * (d + 2), 0);
    auto* inv = dev<float>(d / 2, 0);
    std::vector<int> pos_h = {pos};
    int* dpos = dev<int>(1);
    CHECK(neural::cuda::drv::memcpy(dpos, pos_h.data(), 4, neural::cuda::drv::kHostToDevice));
    const std::uint64_t rec = neural::cpu::ExpertRecordView::raw_bytes(H, I),
                        stride = (rec + 255) / 256 * 256;
    auto* pool = dev<std::uint8_t>(static_cast<std::size_t>(K) * stride, 0x77);
    auto* gu_bias = dev<std::uint16_t>(static_cast<std::size_t>(E) * 2 * I, 0);
    auto* down_bias = dev<std::uint16_t>(static_cast<std::size_t>(E) * H, 0);
    auto* table = dev<int>(static_cast<std::size_t>(E), 0);
    std::vector<int> sel_h = {0, 1, 2, 3}, slot_h = {0, 1, 2, 3};
    std::vector<float> gate_h = {0.4f, 0.3f, 0.2f, 0.1f};
    int* sel = dev<int>(K);
    int* slot = dev<int>(K);
    float* gate = dev<float>(K);
    CHECK(neural::cuda::drv::memcpy(sel, sel_h.data(), 16, neural::cuda::drv::kHostToDevice));
    CHECK(neural::cuda::drv::memcpy(slot, slot_h.data(), 16, neural::cuda::drv::kHostToDevice));
    CHECK(neural::cuda::drv::memcpy(gate, gate_h.data(), 16, neural::cuda::drv::kHostToDevice));
    auto* act = dev<float>(static_cast<std::size_t>(K) * I, 0);
    auto* moe = dev<float>(H, 0);
    void* mapped = nullptr;
    CHECK(neural::cuda::drv::host_alloc(&mapped, static_cast<std::size_t>(H) * 4 + 64,
                                        neural::cuda::drv::kHostAllocMapped));
    std::memset(mapped, 0, static_cast<std::size_t>(H) * 4 + 64);
    auto* host_f = static_cast<float*>(mapped);
    int* host_route = reinterpret_cast<int*>(host_f + H - 16);
    CUstream s;
    CHECK(neural::cuda::drv::stream_create(&s, neural::cuda::drv::kStreamNonBlocking));
    g_stream = s;
    using namespace neural::cuda;

    const double qkv_bytes = 2.0 * (Q + 2 * KV) * H, o_bytes = 2.0 * H * Q;
    row("rms_norm (+ host mirror)", time_us([&] { rms_norm(x, norm, 1e-5f, H, h, host_f, s); }), 0);
    row("gemv QKV [5120 x 2880]",
        time_us([&] { gemv_bf16(qkv_w, bias, h, qkv, Q + 2 * KV, H, false, s); }), qkv_bytes);
    row("rope + K/V store",
        time_us([&] { rope_kv(qkv, nq, nkv, d, inv, 1.0f, dpos, kc, vc, 0, s); }), 0);
    row("attention full (split 16)", time_us([&] {
            attention_decode(qkv, kc, vc, norm, nq, nkv, d, 0, 0, dpos, splits, scratch, attn, s);
        }),
        2.0 * 4.0 * KV * (pos + 1));
    row("attention sliding 128", time_us([&] {
            attention_decode(qkv, kc, vc, norm, nq, nkv, d, 128, 0, dpos, splits, scratch, attn, s);
        }),
        0);
    row("gemv output [2880 x 4096] (+= x)",
        time_us([&] { gemv_bf16(o_w, bias, attn, x, H, Q, true, s); }), o_bytes);
    row("gemv router", time_us([&] { gemv_bf16(router_w, bias, h, logits, E, H, false, s); }),
        2.0 * E * H);
    row("router top-k + slots", time_us([&] {
            router_topk(logits, E, K, table, {sel, gate, slot},
                        {host_route, reinterpret_cast<float*>(host_route + 4), host_route + 8}, s);
        }),
        0);
    // The router above overwrote sel/slot with table lookups (slot 0): restore 4 resident experts.
    CHECK(neural::cuda::drv::stream_synchronize(s));
    CHECK(neural::cuda::drv::memcpy(sel, sel_h.data(), 16, neural::cuda::drv::kHostToDevice));
    CHECK(neural::cuda::drv::memcpy(slot, slot_h.data(), 16, neural::cuda::drv::kHostToDevice));
    const ExpertShape es{H, I, K, E, 7.0f, 1.702f};
    row("4 resident experts (MXFP4)", time_us([&] {
            experts_resident(pool, stride, es, sel, gate, slot, gu_bias, down_bias, h, act, moe, s);
        }),
        4.0 * static_cast<double>(rec));
    row("add_moe (host-mapped CPU part)", time_us([&] { add_moe(x, moe, host_f, H, s); }), 0);
    row("lm_head [201088 x 2880]",
        time_us([&] { gemv_bf16(lm_head, nullptr, h, logits, V, H, false, s); }, 50), 2.0 * V * H);

    // One layer as the backend captures it, launched and waited for per layer like the backend.
    CUevent routed;
    CHECK(neural::cuda::drv::event_create(&routed, neural::cuda::drv::kEventDisableTiming));
    CHECK(neural::cuda::drv::stream_begin_capture(s, neural::cuda::drv::kCaptureThreadLocal));
    add_moe(x, moe, host_f, H, s);
    rms_norm(x, norm, 1e-5f, H, h, nullptr, s);
    gemv_bf16(qkv_w, bias, h, qkv, Q + 2 * KV, H, false, s);
    rope_kv(qkv, nq, nkv, d, inv, 1.0f, dpos, kc, vc, 0, s);
    attention_decode(qkv, kc, vc, norm, nq, nkv, d, 0, 0, dpos, splits, scratch, attn, s);
    gemv_bf16(o_w, bias, attn, x, H, Q, true, s);
    rms_norm(x, norm, 1e-5f, H, h, host_f, s);
    gemv_bf16(router_w, bias, h, logits, E, H, false, s);
    router_topk(logits, E, K, table, {sel, gate, slot},
                {host_route, reinterpret_cast<float*>(host_route + 4), host_route + 8}, s);
    CHECK(neural::cuda::drv::event_record_with_flags(routed, s,
                                                     neural::cuda::drv::kEventRecordExternal));
    experts_resident(pool, stride, es, sel, gate, slot, gu_bias, down_bias, h, act, moe, s);
    CUgraph g;
    CHECK(neural::cuda::drv::stream_end_capture(s, &g));
    CUgraphExec ge;
    CHECK(neural::cuda::drv::graph_instantiate(&ge, g, 0));
    row("layer graph (GPU time)", time_us([&] { CHECK(neural::cuda::drv::graph_launch(ge, s)); }),
        0);
    // Host view: launch, poll the mid-graph event, then the next launch (as hybrid/decode.cpp).
    const int reps = 300;
    auto host_time = [&](const char* name, const std::function<void()>& wait) {
        CHECK(neural::cuda::drv::stream_synchronize(s));
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) {
            CHECK(neural::cuda::drv::graph_launch(ge, s));
            wait();
        }
        CHECK(neural::cuda::drv::stream_synchronize(s));
        const double us =
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                .count() /
            reps;
        row(name, us, 0);
        return us;
    };
    const double host_us = host_time("graph + poll event (yield)", [&] {
        while (neural::cuda::drv::event_query(routed) == CUDA_ERROR_NOT_READY)
            std::this_thread::yield();
    });
    host_time("graph + poll event (spin)", [&] {
        while (neural::cuda::drv::event_query(routed) == CUDA_ERROR_NOT_READY) {
        }
    });
    host_time("graph + stream sync", [&] { CHECK(neural::cuda::drv::stream_synchronize(s)); });
    std::printf("per token (%d layers + lm_head), GPU-only estimate: %.2f ms\n", L,
                (L * host_us +
                 time_us([&] { gemv_bf16(lm_head, nullptr, h, logits, V, H, false, s); }, 20)) /
                    1000.0);
    return 0;
}
