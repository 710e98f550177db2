// Host entry points of residual.cu.
#include "cuda/residual.h"

#include "cuda/driver/kernels.h"

namespace neural::cuda {

namespace {
const Kernel<void(const float*, float*, int)> k_copy("copy_kernel");
const Kernel<void(float*, const float*, const float*, int)> k_add_moe("add_moe_kernel");
const Kernel<void(float*, float*, int, const int*, const float*)> k_add_moe_rows(
    "add_moe_rows_kernel");
const Kernel<void(int*, int)> k_set_int("set_int_kernel");

unsigned blocks_of(int n) { return static_cast<unsigned>((n + 255) / 256); }
}  // namespace

void copy_vector(const float* in, float* x, int n, CUstream stream) {
    k_copy.launch(blocks_of(n), 256, 0, stream, in, x, n);
}

void add_moe(float* x, const float* gpu_part, const float* cpu_part, int n, CUstream stream) {
    k_add_moe.launch(blocks_of(n), 256, 0, stream, x, gpu_part, cpu_part, n);
}

void add_moe_rows(float* x, float* gpu_part, int n, int rows, const int* cpu_start,
                  const float* cpu_rows, CUstream stream) {
    if (rows <= 0) return;
    k_add_moe_rows.launch(static_cast<unsigned>(rows), 256, 0, stream, x, gpu_part, n, cpu_start,
                          cpu_rows);
}

void set_int(int* where, int value, CUstream stream) {
    k_set_int.launch(1, 1, 0, stream, where, value);
}

}  // namespace neural::cuda
