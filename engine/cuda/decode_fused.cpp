// Host entry points of decode_fused.cu.
#include "cuda/decode_fused.h"

#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {
const Kernel<void(NormQkvRope)> k_norm_qkv_rope("norm_qkv_rope_kernel");
const Kernel<void(OprojRoute)> k_oproj_norm_route("oproj_norm_route_kernel");
constexpr int kThreads = shape::kFusedThreads;
constexpr int kWarps = shape::kFusedWarps;
}  // namespace

void norm_qkv_rope(const NormQkvRope& p, CUstream stream) {
    const int pairs = (p.q_heads + 2 * p.kv_heads) * (p.head_dim / 2);
    k_norm_qkv_rope.launch(static_cast<unsigned>((pairs + kWarps - 1) / kWarps), kThreads,
                           static_cast<std::size_t>(p.hidden) * sizeof(float), stream, p);
}

void oproj_norm_route(const OprojRoute& p, CUstream stream) {
    const std::size_t smem =
        static_cast<std::size_t>(p.attn_width + p.hidden + p.experts) * sizeof(float);
    k_oproj_norm_route.launch(static_cast<unsigned>((p.hidden + kWarps - 1) / kWarps), kThreads,
                              smem, stream, p);
}

}  // namespace neural::cuda
