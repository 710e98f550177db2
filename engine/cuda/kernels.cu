// The whole fatbin as one translation unit: nvcc compiles it into SASS for every listed
// architecture plus PTX (engine/cuda/CMakeLists.txt). Each kernel file keeps its helpers in a
// namespace of its own, so the files stay independent; the kernels are `extern "C"` entry points
// the host looks up by name (driver/kernels.h).
#include "cuda/abi_probe.cu"
#include "cuda/attention.cu"
#include "cuda/attention_prefill.cu"
#include "cuda/decode_fused.cu"
#include "cuda/device.cu"
#include "cuda/expert_gemm.cu"
#include "cuda/expert_mxfp4.cu"
#include "cuda/gemm_bf16_rows.cu"
#include "cuda/gemv_bf16.cu"
#include "cuda/residual.cu"
#include "cuda/rms_norm.cu"
#include "cuda/rope_kv.cu"
#include "cuda/router.cu"
