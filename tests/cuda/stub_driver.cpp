// A stand-in for the NVIDIA driver (libcuda.so.1 / nvcuda.dll) for the loader's tests: it exports
// every entry point of engine/cuda/driver/driver_functions.inc by name, so the loader resolves a
// full table, and answers the start-up calls as a machine without a usable GPU would:
//   NEURAL_STUB_CUDA_VERSION  what cuDriverGetVersion reports (default 13000 = CUDA 13.0)
//   NEURAL_STUB_CUDA_MODE     no_device: cuInit says CUDA_ERROR_NO_DEVICE; zero (default):
//                             cuInit succeeds and there are zero devices
// Every other entry point returns CUDA_ERROR_UNKNOWN; the loader never calls one on these paths.
#include <cstdlib>
#include <cstring>

#include <cuda.h>

#ifdef _WIN32
#define NEURAL_STUB_EXPORT extern "C" __declspec(dllexport)
#else
#define NEURAL_STUB_EXPORT extern "C" __attribute__((visibility("default")))
#endif

namespace {
bool mode_is(const char* m) {
    const char* v = std::getenv("NEURAL_STUB_CUDA_MODE");
    return v != nullptr && std::strcmp(v, m) == 0;
}
}  // namespace

NEURAL_STUB_EXPORT CUresult CUDAAPI cuDriverGetVersion(int* version) {
    const char* v = std::getenv("NEURAL_STUB_CUDA_VERSION");
    *version = v != nullptr ? std::atoi(v) : 13000;
    return CUDA_SUCCESS;
}

NEURAL_STUB_EXPORT CUresult CUDAAPI cuInit(unsigned int) {
    return mode_is("no_device") ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

NEURAL_STUB_EXPORT CUresult CUDAAPI cuDeviceGetCount(int* count) {
    *count = 0;
    return CUDA_SUCCESS;
}

NEURAL_STUB_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult, const char** name) {
    *name = "CUDA_ERROR_STUB";
    return CUDA_SUCCESS;
}

NEURAL_STUB_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult, const char** text) {
    *text = "stub driver";
    return CUDA_SUCCESS;
}

// The other entry points: a global symbol each (the name cuda.h maps the API name to) returning
// 999 (CUDA_ERROR_UNKNOWN).
#define NEURAL_STUB_STR2(x) #x
#define NEURAL_STUB_STR(x) NEURAL_STUB_STR2(x)
#ifdef _WIN32
#define NEURAL_CU_FN(name) \
    asm(".text\n.globl " NEURAL_STUB_STR(name) "\n" NEURAL_STUB_STR(name) ":\n" \
        "movl $999, %eax\nret\n"                                                  \
        ".section .drectve\n.ascii \" -export:" NEURAL_STUB_STR(name) "\"\n.text\n");
#else
#define NEURAL_CU_FN(name) \
    asm(".text\n.globl " NEURAL_STUB_STR(name) "\n.type " NEURAL_STUB_STR(name)          \
        ", @function\n" NEURAL_STUB_STR(name) ":\nmovl $999, %eax\nret\n.size " NEURAL_STUB_STR( \
            name) ", .-" NEURAL_STUB_STR(name) "\n");
#endif
#define NEURAL_CU_CORE(name)
#include "cuda/driver/driver_functions.inc"
