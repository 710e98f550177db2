// The backend's GPU calls: thin typed wrappers over the CUDA driver API (cuda_driver.h) with the
// shapes the host code needs (typed pointers instead of CUdeviceptr, a copy direction instead of
// one function per direction). Each returns the driver's CUresult; NEURAL_CUDA (cuda_check.h)
// turns a failure into neural::Error. A thread's first call binds the device's primary context
// (device 0 unless set_device chose another), as every CUDA-using thread of the engine needs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/driver/cuda_driver.h"

namespace neural::cuda::drv {

enum class Copy { host_to_device, device_to_host, device_to_device };
inline constexpr Copy kHostToDevice = Copy::host_to_device;
inline constexpr Copy kDeviceToHost = Copy::device_to_host;
inline constexpr Copy kDeviceToDevice = Copy::device_to_device;

inline constexpr unsigned kHostAllocPortable = CU_MEMHOSTALLOC_PORTABLE;
inline constexpr unsigned kHostAllocMapped = CU_MEMHOSTALLOC_DEVICEMAP;
inline constexpr unsigned kHostRegisterPortable = CU_MEMHOSTREGISTER_PORTABLE;
inline constexpr unsigned kHostRegisterReadOnly = CU_MEMHOSTREGISTER_READ_ONLY;
inline constexpr unsigned kStreamNonBlocking = CU_STREAM_NON_BLOCKING;
inline constexpr unsigned kEventDefault = CU_EVENT_DEFAULT;
inline constexpr unsigned kEventDisableTiming = CU_EVENT_DISABLE_TIMING;
inline constexpr unsigned kEventRecordExternal = CU_EVENT_RECORD_EXTERNAL;
inline constexpr CUstreamCaptureMode kCaptureThreadLocal = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;

inline CUdeviceptr dptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// Contexts: the primary context of `device`, made current on this thread.
CUresult set_device(int device);
// Called after a thread binds `device` (kernels.cpp loads the fatbin and resolves every kernel
// there, so no module load happens later inside a stream capture).
using BindHook = void (*)(int device);
void set_bind_hook(BindHook hook);
CUresult get_device(int* device);
// Binds the thread's device (device 0 by default) if this thread has not yet: every wrapper
// calls it first.
CUresult bind();
CUresult device_count(int* count);
CUresult device_synchronize();
CUresult multiprocessor_count(int device, int* count);
CUresult host_register_read_only_supported(int device, int* supported);
CUresult mem_get_info(std::size_t* free_bytes, std::size_t* total_bytes);

// The first launch or call error since the last call on this thread (launches record theirs;
// kernel faults surface at the next synchronizing call, as with any CUDA API).
CUresult get_last_error();
void record_error(CUresult r);

CUresult malloc_bytes(void** p, std::size_t bytes);
template <typename T>
CUresult malloc(T** p, std::size_t bytes) {
    void* v = nullptr;
    const CUresult r = malloc_bytes(&v, bytes);
    *p = static_cast<T*>(v);
    return r;
}
CUresult free(const void* p);
CUresult host_alloc_bytes(void** p, std::size_t bytes, unsigned flags);
template <typename T>
CUresult host_alloc(T** p, std::size_t bytes, unsigned flags) {
    void* v = nullptr;
    const CUresult r = host_alloc_bytes(&v, bytes, flags);
    *p = static_cast<T*>(v);
    return r;
}
template <typename T>
CUresult malloc_host(T** p, std::size_t bytes) {
    return host_alloc(p, bytes, 0);
}
CUresult free_host(void* p);
CUresult host_get_device_pointer_bytes(void** device, void* host);
template <typename T>
CUresult host_get_device_pointer(T** device, void* host, unsigned /*flags: must be 0*/) {
    void* v = nullptr;
    const CUresult r = host_get_device_pointer_bytes(&v, host);
    *device = static_cast<T*>(v);
    return r;
}
CUresult host_register(void* p, std::size_t bytes, unsigned flags);
CUresult host_unregister(void* p);

CUresult memcpy(void* dst, const void* src, std::size_t bytes, Copy kind);
CUresult memcpy_async(void* dst, const void* src, std::size_t bytes, Copy kind,
                      CUstream stream = nullptr);
// A pitched host -> device (or device -> host) copy of `height` rows of `width` bytes.
CUresult memcpy_2d_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                         std::size_t width, std::size_t height, Copy kind, CUstream stream);
CUresult memset(void* p, int value, std::size_t bytes);
CUresult memset_async(void* p, int value, std::size_t bytes, CUstream stream = nullptr);

CUresult stream_create(CUstream* s, unsigned flags);
CUresult stream_destroy(CUstream s);
CUresult stream_synchronize(CUstream s);
CUresult stream_wait_event(CUstream s, CUevent e, unsigned flags = 0);
CUresult stream_begin_capture(CUstream s, CUstreamCaptureMode mode);
CUresult stream_end_capture(CUstream s, CUgraph* g);
CUresult graph_instantiate(CUgraphExec* exec, CUgraph g, unsigned long long flags);
CUresult graph_launch(CUgraphExec exec, CUstream s);
CUresult graph_exec_destroy(CUgraphExec exec);
CUresult graph_destroy(CUgraph g);

CUresult event_create(CUevent* e, unsigned flags = kEventDefault);
CUresult event_record(CUevent e, CUstream s = nullptr);
CUresult event_record_with_flags(CUevent e, CUstream s, unsigned flags);
CUresult event_query(CUevent e);
CUresult event_synchronize(CUevent e);
CUresult event_elapsed_time(float* ms, CUevent start, CUevent stop);
CUresult event_destroy(CUevent e);

}  // namespace neural::cuda::drv
