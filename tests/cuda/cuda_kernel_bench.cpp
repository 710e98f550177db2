// Per-kernel timings of the hybrid backend's GPU core at the real gpt-oss shapes (20b: 24 layers,
// 32 experts; 120b: 36 layers, 128 experts; both hidden 2880, 64 query / 8 KV heads of 64):
// microseconds per call and achieved GB/s for every kernel of a layer graph, the graph itself
// launched and waited for like the backend does, and the lm_head tail. Not a test (timings are
// not pass/fail): `neural_cuda_bench [20b|120b] [context]`, see docs/CUDA.md.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "cpu/kernels/expert_record.h"
#include "cuda/attention.cuh"
#include "cuda/expert_mxfp4.cuh"
#include "cuda/gemv_bf16.cuh"
#include "cuda/residual.cuh"
#include "cuda/rms_norm.cuh"
#include "cuda/rope_kv.cuh"
#include "cuda/router.cuh"

namespace {

#define CHECK(call)                                                                    \
    do {                                                                               \
        const cudaError_t e_ = (call);                                                 \
        if (e_ != cudaSuccess) {                                                       \
            std::fprintf(stderr, "%s failed: %s\n", #call, cudaGetErrorString(e_));   \
            std::exit(1);                                                              \
        }                                                                              \
    } while (0)

template <typename T>
T* dev(std::size_t n, int fill_byte = 0x3C) {
    void* p = nullptr;
    CHECK(cudaMalloc(&p, n * sizeof(T)));
    CHECK(cudaMemset(p, fill_byte, n * sizeof(T)));
    return static_cast<T*>(p);
}

cudaStream_t g_stream = nullptr;  // every launch below goes to this (non-blocking) stream

// Mean microseconds per call of `launch` over `iters` calls (after warm-up), timed with events
// on the launches' stream.
double time_us(const std::function<void()>& launch, int iters = 200) {
    for (int i = 0; i < 10; ++i) launch();
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    CHECK(cudaEventRecord(a, g_stream));
    for (int i = 0; i < iters; ++i) launch();
    CHECK(cudaEventRecord(b, g_stream));
    CHECK(cudaEventSynchronize(b));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaGetLastError());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return 1000.0 * ms / iters;
}

void row(const char* name, double us, double bytes) {
    std::printf("%-34s %9.2f us %9.1f GB/s\n", name, us, bytes > 0 ? bytes / us / 1e3 : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    const std::string shape = argc > 1 ? argv[1] : "120b";
    const int ctx = argc > 2 ? std::atoi(argv[2]) : 4096;
    const int H = 2880, I = 2880, nq = 64, nkv = 8, d = 64, K = 4, V = 201088;
    const int E = shape == "20b" ? 32 : 128, L = shape == "20b" ? 24 : 36;
    const int Q = nq * d, KV = nkv * d, splits = 16, pos = ctx - 1;
    cudaDeviceProp p{};
    CHECK(cudaGetDeviceProperties(&p, 0));
    std::printf("gpt-oss-%s shape on %s, context position %d, %d layers\n", shape.c_str(), p.name, pos, L);

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
    CHECK(cudaMemcpy(dpos, pos_h.data(), 4, cudaMemcpyHostToDevice));
    const std::uint64_t rec = neural::cpu::ExpertRecordView::raw_bytes(H, I), stride = (rec + 255) / 256 * 256;
    auto* pool = dev<std::uint8_t>(static_cast<std::size_t>(K) * stride, 0x77);
    auto* gu_bias = dev<std::uint16_t>(static_cast<std::size_t>(E) * 2 * I, 0);
    auto* down_bias = dev<std::uint16_t>(static_cast<std::size_t>(E) * H, 0);
    auto* table = dev<int>(static_cast<std::size_t>(E), 0);
    std::vector<int> sel_h = {0, 1, 2, 3}, slot_h = {0, 1, 2, 3};
    std::vector<float> gate_h = {0.4f, 0.3f, 0.2f, 0.1f};
    int* sel = dev<int>(K);
    int* slot = dev<int>(K);
    float* gate = dev<float>(K);
    CHECK(cudaMemcpy(sel, sel_h.data(), 16, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(slot, slot_h.data(), 16, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(gate, gate_h.data(), 16, cudaMemcpyHostToDevice));
    auto* act = dev<float>(static_cast<std::size_t>(K) * I, 0);
    auto* moe = dev<float>(H, 0);
    void* mapped = nullptr;
    CHECK(cudaHostAlloc(&mapped, static_cast<std::size_t>(H) * 4 + 64, cudaHostAllocMapped));
    std::memset(mapped, 0, static_cast<std::size_t>(H) * 4 + 64);
    auto* host_f = static_cast<float*>(mapped);
    int* host_route = reinterpret_cast<int*>(host_f + H - 16);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    g_stream = s;
    using namespace neural::cuda;

    const double qkv_bytes = 2.0 * (Q + 2 * KV) * H, o_bytes = 2.0 * H * Q;
    row("rms_norm (+ host mirror)", time_us([&] { rms_norm(x, norm, 1e-5f, H, h, host_f, s); }), 0);
    row("gemv QKV [5120 x 2880]", time_us([&] { gemv_bf16(qkv_w, bias, h, qkv, Q + 2 * KV, H, false, s); }), qkv_bytes);
    row("rope + K/V store", time_us([&] { rope_kv(qkv, nq, nkv, d, inv, 1.0f, dpos, kc, vc, 0, s); }), 0);
    row("attention full (split 16)", time_us([&] { attention_decode(qkv, kc, vc, norm, nq, nkv, d, 0, 0, dpos, splits, scratch, attn, s); }),
        2.0 * 4.0 * KV * (pos + 1));
    row("attention sliding 128", time_us([&] { attention_decode(qkv, kc, vc, norm, nq, nkv, d, 128, 0, dpos, splits, scratch, attn, s); }), 0);
    row("gemv output [2880 x 4096] (+= x)", time_us([&] { gemv_bf16(o_w, bias, attn, x, H, Q, true, s); }), o_bytes);
    row("gemv router", time_us([&] { gemv_bf16(router_w, bias, h, logits, E, H, false, s); }), 2.0 * E * H);
    row("router top-k + slots", time_us([&] { router_topk(logits, E, K, table, {sel, gate, slot}, {host_route, reinterpret_cast<float*>(host_route + 4), host_route + 8}, s); }), 0);
    // The router above overwrote sel/slot with table lookups (slot 0): restore 4 resident experts.
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaMemcpy(sel, sel_h.data(), 16, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(slot, slot_h.data(), 16, cudaMemcpyHostToDevice));
    const ExpertShape es{H, I, K, E, 7.0f, 1.702f};
    row("4 resident experts (MXFP4)", time_us([&] { experts_resident(pool, stride, es, sel, gate, slot, gu_bias, down_bias, h, act, moe, s); }),
        4.0 * static_cast<double>(rec));
    row("add_moe (host-mapped CPU part)", time_us([&] { add_moe(x, moe, host_f, H, s); }), 0);
    row("lm_head [201088 x 2880]", time_us([&] { gemv_bf16(lm_head, nullptr, h, logits, V, H, false, s); }, 50), 2.0 * V * H);

    // One layer as the backend captures it, launched and waited for per layer like the backend.
    cudaEvent_t routed;
    CHECK(cudaEventCreateWithFlags(&routed, cudaEventDisableTiming));
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
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
    CHECK(cudaEventRecordWithFlags(routed, s, cudaEventRecordExternal));
    experts_resident(pool, stride, es, sel, gate, slot, gu_bias, down_bias, h, act, moe, s);
    cudaGraph_t g;
    CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t ge;
    CHECK(cudaGraphInstantiate(&ge, g, 0));
    row("layer graph (GPU time)", time_us([&] { CHECK(cudaGraphLaunch(ge, s)); }), 0);
    // Host view: launch, poll the mid-graph event, then the next launch (as hybrid_backend.cpp).
    const int reps = 300;
    auto host_time = [&](const char* name, const std::function<void()>& wait) {
        CHECK(cudaStreamSynchronize(s));
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < reps; ++i) {
            CHECK(cudaGraphLaunch(ge, s));
            wait();
        }
        CHECK(cudaStreamSynchronize(s));
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / reps;
        row(name, us, 0);
        return us;
    };
    const double host_us = host_time("graph + poll event (yield)", [&] {
        while (cudaEventQuery(routed) == cudaErrorNotReady) std::this_thread::yield();
    });
    host_time("graph + poll event (spin)", [&] {
        while (cudaEventQuery(routed) == cudaErrorNotReady) {
        }
    });
    host_time("graph + stream sync", [&] { CHECK(cudaStreamSynchronize(s)); });
    std::printf("per token (%d layers + lm_head), GPU-only estimate: %.2f ms\n", L,
                (L * host_us + time_us([&] { gemv_bf16(lm_head, nullptr, h, logits, V, H, false, s); }, 20)) / 1000.0);
    return 0;
}
