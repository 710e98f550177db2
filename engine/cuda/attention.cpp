// Host entry point of attention.cu.
#include "cuda/attention.h"

#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {
const Kernel<void(const float*, const float*, const float*, int, int, int, int, int, const int*,
                  int, float*, const std::uint16_t*, float*, unsigned*)>
    k_split("attention_split_kernel");
const Kernel<void(const float*, const std::uint16_t*, int, int, float*)> k_combine(
    "attention_combine_kernel");
}  // namespace

void attention_decode(const float* q, const float* k_cache, const float* v_cache,
                      const std::uint16_t* sinks, int q_heads, int kv_heads, int head_dim,
                      int window, int ring, const int* pos, int splits, float* scratch, float* out,
                      CUstream stream, unsigned* counters) {
    k_split.launch(Dim3(static_cast<unsigned>(q_heads), static_cast<unsigned>(splits)),
                   shape::kAttentionThreads, 0, stream, q, k_cache, v_cache, q_heads, kv_heads,
                   head_dim, window, ring, pos, splits, scratch, sinks, out, counters);
    if (counters != nullptr) return;
    k_combine.launch(static_cast<unsigned>(q_heads), shape::kAttentionThreads, 0, stream, scratch,
                     sinks, head_dim, splits, out);
}

}  // namespace neural::cuda
