// The CUDA driver, loaded at run time: libcuda.so.1 (dlopen) on Linux, nvcuda.dll (LoadLibrary)
// on Windows, into one table of entry points resolved by name. Nothing links against a CUDA
// library, so the same binary starts on a machine without NVIDIA hardware: there the table is
// absent and `why` says which of "no NVIDIA driver found", "driver too old", "no NVIDIA GPU
// found" applies (docs/CUDA.md "Driver API and fatbin").
#pragma once

#include <string>

#include <cuda.h>  // types and prototypes only; every call goes through DriverApi

namespace neural::cuda {

struct DriverApi {
#define NEURAL_CU_FN(name) decltype(&::name) name = nullptr;
#include "cuda/driver/driver_functions.inc"
#undef NEURAL_CU_FN
    int version = 0;  // cuDriverGetVersion: 1000 * major + 10 * minor
};

// The oldest driver the embedded fatbin runs on: the CUDA major version nvcc built it with (a
// CUDA 13 fatbin needs a CUDA 13 driver, any minor version).
inline constexpr int kMinDriverVersion = CUDA_VERSION / 1000 * 1000;

// The driver library loaded by default ("libcuda.so.1", "nvcuda.dll"); NEURAL_CUDA_DRIVER (a
// path) overrides it for tests with a stub driver.
const char* driver_library_name();

// The loaded and initialised driver with at least one device, or null with the one-line reason
// in *why. Loaded once per process; later calls return the same answer.
const DriverApi* driver_api(std::string* why = nullptr);

// driver_api() for code that needs the GPU: throws neural::Error with the reason instead.
const DriverApi& api();

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for a result code (through the driver when loaded).
std::string result_text(CUresult r);

}  // namespace neural::cuda
