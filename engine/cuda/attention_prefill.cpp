// Host entry point of attention_prefill.cu.
#include "cuda/attention_prefill.h"

#include <mutex>
#include <vector>

#include "cuda/cuda_check.h"
#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {

using PrefillKernel = Kernel<void(const float*, int, int, int, const float*, const float*,
                                  const std::uint16_t*, int, int, int, int, float*)>;
const PrefillKernel k_fast("attention_prefill_fast_kernel");
const PrefillKernel k_reference("attention_prefill_reference_kernel");

// The opt-in to more than 48 KiB of dynamic shared memory is a property of the kernel on one
// device: it is set once for every device a launch runs on (set once per process, a second GPU
// -- or a process whose first launch ran on another device -- got "invalid argument").
void allow_large_shared_memory() {
    int device = 0;
    NEURAL_CUDA(drv::get_device(&device));
    static std::mutex mu;
    static std::vector<bool> configured;
    const std::lock_guard<std::mutex> lock(mu);
    const auto d = static_cast<std::size_t>(device);
    if (d < configured.size() && configured[d]) return;
    CUfunction f = nullptr;
    NEURAL_CUDA(k_reference.ref().function(&f));
    NEURAL_CUDA(api().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                         static_cast<int>(shape::kPrefillReferenceSmemBytes)));
    if (d >= configured.size()) configured.resize(d + 1, false);
    configured[d] = true;
}

}  // namespace

void attention_prefill(const float* q, int q_stride, int rows, int pos0, const float* k_cache,
                       const float* v_cache, const std::uint16_t* sinks, int q_heads, int kv_heads,
                       int window, int ring, float* out, CUstream stream, KernelPath path) {
    if (rows <= 0) return;
    const Dim3 grid(static_cast<unsigned>(q_heads),
                    static_cast<unsigned>((rows + shape::kPrefillTile - 1) / shape::kPrefillTile));
    if (path == KernelPath::fast) {
        k_fast.launch(grid, shape::kPrefillThreads, 0, stream, q, q_stride, rows, pos0, k_cache,
                      v_cache, sinks, q_heads, kv_heads, window, ring, out);
        return;
    }
    allow_large_shared_memory();
    k_reference.launch(grid, shape::kPrefillThreads, shape::kPrefillReferenceSmemBytes, stream, q,
                       q_stride, rows, pos0, k_cache, v_cache, sinks, q_heads, kv_heads, window,
                       ring, out);
}

}  // namespace neural::cuda
