// Small element-wise steps of the per-layer graphs (host entry points only):
//  - copy_vector: x = in (the token's embedding row, staged by the host in mapped memory)
//  - add_moe: x += gpu_part + cpu_part (the resident experts' sum and the CPU's misses, the
//    latter read zero-copy from host-mapped memory); one fixed order for every element
//  - add_moe_rows: the prefill form of add_moe over many token rows
//  - set_int: one slot-table entry, ordered on the compute stream between graphs.
#pragma once

#include <cuda.h>

namespace neural::cuda {

void copy_vector(const float* in, float* x, int n, CUstream stream);
void add_moe(float* x, const float* gpu_part, const float* cpu_part, int n, CUstream stream);
void set_int(int* where, int value, CUstream stream);
// Prefill, `rows` rows of n: x[t] += gpu_part[t] + the CPU's rows cpu_start[t] .. cpu_start[t+1]
// of cpu_rows (host-mapped; cpu_start may be null: none), then gpu_part[t] = 0.
void add_moe_rows(float* x, float* gpu_part, int n, int rows, const int* cpu_start,
                  const float* cpu_rows, CUstream stream);

}  // namespace neural::cuda
