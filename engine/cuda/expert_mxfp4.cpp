// Host entry point of expert_mxfp4.cu.
#include "cuda/expert_mxfp4.h"

#include "cuda/driver/kernels.h"
#include "cuda/launch_shapes.h"

namespace neural::cuda {

namespace {
const Kernel<void(const std::uint8_t*, std::uint64_t, ExpertShape, const int*, const int*,
                  const std::uint16_t*, const float*, float*, const int*)>
    k_gate_up("gate_up_kernel");
const Kernel<void(const std::uint8_t*, std::uint64_t, ExpertShape, const int*, const float*,
                  const int*, const std::uint16_t*, const float*, float*, bool, const int*)>
    k_down("down_kernel");
}  // namespace

void experts_resident(const std::uint8_t* pool, std::uint64_t slot_stride, const ExpertShape& shape,
                      const int* sel, const float* gate, const int* slot,
                      const std::uint16_t* gate_up_bias, const std::uint16_t* down_bias,
                      const float* x, float* act, float* out, CUstream stream, bool accumulate,
                      const int* part) {
    constexpr int kWarps = shape::kExpertWarps;
    const Dim3 gu_grid(static_cast<unsigned>((shape.intermediate + kWarps - 1) / kWarps),
                       static_cast<unsigned>(shape.k));
    k_gate_up.launch(gu_grid, kWarps * 32,
                     static_cast<std::size_t>(padded_floats(shape.hidden)) * sizeof(float), stream,
                     pool, slot_stride, shape, sel, slot, gate_up_bias, x, act, part);
    k_down.launch(
        static_cast<unsigned>((shape.hidden + kWarps - 1) / kWarps), kWarps * 32,
        static_cast<std::size_t>(shape.k) * padded_floats(shape.intermediate) * sizeof(float),
        stream, pool, slot_stride, shape, sel, gate, slot, down_bias, act, out, accumulate, part);
}

}  // namespace neural::cuda
