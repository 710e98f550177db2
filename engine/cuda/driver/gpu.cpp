#include "cuda/driver/gpu.h"

#include <array>
#include <atomic>
#include <mutex>

namespace neural::cuda::drv {

namespace {

constexpr int kMaxDevices = 64;

// The primary context of each device, retained once per process (never released: the
// backend's objects live as long as the process, as with the runtime API's implicit contexts).
CUresult primary_context(int device, CUcontext* ctx) {
    static std::mutex mu;
    static std::array<CUcontext, kMaxDevices> contexts{};
    if (device < 0 || device >= kMaxDevices) return CUDA_ERROR_INVALID_DEVICE;
    const DriverApi* a = driver_api();
    if (a == nullptr) return CUDA_ERROR_NOT_INITIALIZED;
    const std::lock_guard<std::mutex> lock(mu);
    if (contexts[static_cast<std::size_t>(device)] == nullptr) {
        CUdevice dev = 0;
        CUresult r = a->cuDeviceGet(&dev, device);
        if (r != CUDA_SUCCESS) return r;
        CUcontext c = nullptr;
        r = a->cuDevicePrimaryCtxRetain(&c, dev);
        if (r != CUDA_SUCCESS) return r;
        contexts[static_cast<std::size_t>(device)] = c;
    }
    *ctx = contexts[static_cast<std::size_t>(device)];
    return CUDA_SUCCESS;
}

std::atomic<BindHook> g_bind_hook{nullptr};
thread_local int t_device = -1;  // the device whose context is current on this thread
thread_local CUresult t_error = CUDA_SUCCESS;

const DriverApi& a() { return *driver_api(); }

// Every wrapper: the driver present and this thread's context bound, else that failure.
#define NEURAL_DRV_BIND()                     \
    do {                                      \
        const CUresult bind_result_ = bind(); \
        if (bind_result_ != CUDA_SUCCESS) {   \
            record_error(bind_result_);       \
            return bind_result_;              \
        }                                     \
    } while (0)

CUresult noted(CUresult r) {
    record_error(r);
    return r;
}

}  // namespace

CUresult set_device(int device) {
    CUcontext ctx = nullptr;
    CUresult r = primary_context(device, &ctx);
    if (r == CUDA_SUCCESS) r = a().cuCtxSetCurrent(ctx);
    if (r == CUDA_SUCCESS) {
        t_device = device;
        if (const BindHook hook = g_bind_hook.load(); hook != nullptr) hook(device);
    }
    return noted(r);
}

void set_bind_hook(BindHook hook) { g_bind_hook.store(hook); }

CUresult bind() {
    if (t_device >= 0) return CUDA_SUCCESS;
    if (driver_api() == nullptr) return CUDA_ERROR_NO_DEVICE;
    return set_device(0);
}

CUresult get_device(int* device) {
    NEURAL_DRV_BIND();
    *device = t_device;
    return CUDA_SUCCESS;
}

CUresult device_count(int* count) {
    *count = 0;
    const DriverApi* d = driver_api();
    if (d == nullptr) return CUDA_ERROR_NO_DEVICE;
    return d->cuDeviceGetCount(count);
}

CUresult device_synchronize() {
    NEURAL_DRV_BIND();
    return noted(a().cuCtxSynchronize());
}

CUresult multiprocessor_count(int device, int* count) {
    const DriverApi* d = driver_api();
    if (d == nullptr) return CUDA_ERROR_NO_DEVICE;
    CUdevice dev = 0;
    CUresult r = d->cuDeviceGet(&dev, device);
    if (r == CUDA_SUCCESS)
        r = d->cuDeviceGetAttribute(count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
    return r;
}

CUresult host_register_read_only_supported(int device, int* supported) {
    const DriverApi* d = driver_api();
    if (d == nullptr) return CUDA_ERROR_NO_DEVICE;
    CUdevice dev = 0;
    CUresult r = d->cuDeviceGet(&dev, device);
    if (r == CUDA_SUCCESS)
        r = d->cuDeviceGetAttribute(supported,
                                    CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, dev);
    return r;
}

CUresult mem_get_info(std::size_t* free_bytes, std::size_t* total_bytes) {
    NEURAL_DRV_BIND();
    return noted(a().cuMemGetInfo(free_bytes, total_bytes));
}

CUresult get_last_error() {
    const CUresult r = t_error;
    t_error = CUDA_SUCCESS;
    return r;
}

void record_error(CUresult r) {
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY && t_error == CUDA_SUCCESS) t_error = r;
}

CUresult malloc_bytes(void** p, std::size_t bytes) {
    *p = nullptr;
    NEURAL_DRV_BIND();
    CUdeviceptr d = 0;
    const CUresult r = a().cuMemAlloc(&d, bytes);
    if (r == CUDA_SUCCESS) *p = reinterpret_cast<void*>(d);
    return r;
}

CUresult free(const void* p) {
    if (p == nullptr) return CUDA_SUCCESS;
    NEURAL_DRV_BIND();
    return a().cuMemFree(dptr(p));
}

CUresult host_alloc_bytes(void** p, std::size_t bytes, unsigned flags) {
    *p = nullptr;
    NEURAL_DRV_BIND();
    return a().cuMemHostAlloc(p, bytes, flags);
}

CUresult free_host(void* p) {
    if (p == nullptr) return CUDA_SUCCESS;
    NEURAL_DRV_BIND();
    return a().cuMemFreeHost(p);
}

CUresult host_get_device_pointer_bytes(void** device, void* host) {
    *device = nullptr;
    NEURAL_DRV_BIND();
    CUdeviceptr d = 0;
    const CUresult r = a().cuMemHostGetDevicePointer(&d, host, 0);
    if (r == CUDA_SUCCESS) *device = reinterpret_cast<void*>(d);
    return r;
}

CUresult host_register(void* p, std::size_t bytes, unsigned flags) {
    NEURAL_DRV_BIND();
    return a().cuMemHostRegister(p, bytes, flags);
}

CUresult host_unregister(void* p) {
    NEURAL_DRV_BIND();
    return a().cuMemHostUnregister(p);
}

CUresult memcpy(void* dst, const void* src, std::size_t bytes, Copy kind) {
    NEURAL_DRV_BIND();
    switch (kind) {
        case Copy::host_to_device:
            return a().cuMemcpyHtoD(dptr(dst), src, bytes);
        case Copy::device_to_host:
            return a().cuMemcpyDtoH(dst, dptr(src), bytes);
        case Copy::device_to_device:
            return a().cuMemcpyDtoD(dptr(dst), dptr(src), bytes);
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult memcpy_async(void* dst, const void* src, std::size_t bytes, Copy kind, CUstream stream) {
    NEURAL_DRV_BIND();
    switch (kind) {
        case Copy::host_to_device:
            return noted(a().cuMemcpyHtoDAsync(dptr(dst), src, bytes, stream));
        case Copy::device_to_host:
            return noted(a().cuMemcpyDtoHAsync(dst, dptr(src), bytes, stream));
        case Copy::device_to_device:
            return noted(a().cuMemcpyDtoDAsync(dptr(dst), dptr(src), bytes, stream));
    }
    return CUDA_ERROR_INVALID_VALUE;
}

CUresult memcpy_2d_async(void* dst, std::size_t dst_pitch, const void* src, std::size_t src_pitch,
                         std::size_t width, std::size_t height, Copy kind, CUstream stream) {
    NEURAL_DRV_BIND();
    CUDA_MEMCPY2D c{};
    const bool src_host = kind == Copy::host_to_device;
    const bool dst_host = kind == Copy::device_to_host;
    c.srcMemoryType = src_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (src_host)
        c.srcHost = src;
    else
        c.srcDevice = dptr(src);
    c.srcPitch = src_pitch;
    c.dstMemoryType = dst_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    if (dst_host)
        c.dstHost = dst;
    else
        c.dstDevice = dptr(dst);
    c.dstPitch = dst_pitch;
    c.WidthInBytes = width;
    c.Height = height;
    return noted(a().cuMemcpy2DAsync(&c, stream));
}

CUresult memset(void* p, int value, std::size_t bytes) {
    NEURAL_DRV_BIND();
    return a().cuMemsetD8(dptr(p), static_cast<unsigned char>(value), bytes);
}

CUresult memset_async(void* p, int value, std::size_t bytes, CUstream stream) {
    NEURAL_DRV_BIND();
    return noted(a().cuMemsetD8Async(dptr(p), static_cast<unsigned char>(value), bytes, stream));
}

CUresult stream_create(CUstream* s, unsigned flags) {
    NEURAL_DRV_BIND();
    return a().cuStreamCreate(s, flags);
}
CUresult stream_destroy(CUstream s) {
    NEURAL_DRV_BIND();
    return a().cuStreamDestroy(s);
}
CUresult stream_synchronize(CUstream s) {
    NEURAL_DRV_BIND();
    return a().cuStreamSynchronize(s);
}
CUresult stream_wait_event(CUstream s, CUevent e, unsigned flags) {
    NEURAL_DRV_BIND();
    return noted(a().cuStreamWaitEvent(s, e, flags));
}
CUresult stream_begin_capture(CUstream s, CUstreamCaptureMode mode) {
    NEURAL_DRV_BIND();
    return a().cuStreamBeginCapture(s, mode);
}
CUresult stream_end_capture(CUstream s, CUgraph* g) {
    NEURAL_DRV_BIND();
    return a().cuStreamEndCapture(s, g);
}
CUresult graph_instantiate(CUgraphExec* exec, CUgraph g, unsigned long long flags) {
    NEURAL_DRV_BIND();
    return a().cuGraphInstantiateWithFlags(exec, g, flags);
}
CUresult graph_launch(CUgraphExec exec, CUstream s) {
    NEURAL_DRV_BIND();
    return noted(a().cuGraphLaunch(exec, s));
}
CUresult graph_exec_destroy(CUgraphExec exec) {
    NEURAL_DRV_BIND();
    return a().cuGraphExecDestroy(exec);
}
CUresult graph_destroy(CUgraph g) {
    NEURAL_DRV_BIND();
    return a().cuGraphDestroy(g);
}

CUresult event_create(CUevent* e, unsigned flags) {
    NEURAL_DRV_BIND();
    return a().cuEventCreate(e, flags);
}
CUresult event_record(CUevent e, CUstream s) {
    NEURAL_DRV_BIND();
    return noted(a().cuEventRecord(e, s));
}
CUresult event_record_with_flags(CUevent e, CUstream s, unsigned flags) {
    NEURAL_DRV_BIND();
    return noted(a().cuEventRecordWithFlags(e, s, flags));
}
CUresult event_query(CUevent e) {
    NEURAL_DRV_BIND();
    return a().cuEventQuery(e);
}
CUresult event_synchronize(CUevent e) {
    NEURAL_DRV_BIND();
    return a().cuEventSynchronize(e);
}
CUresult event_elapsed_time(float* ms, CUevent start, CUevent stop) {
    NEURAL_DRV_BIND();
    return a().cuEventElapsedTime(ms, start, stop);
}
CUresult event_destroy(CUevent e) {
    NEURAL_DRV_BIND();
    return a().cuEventDestroy(e);
}

}  // namespace neural::cuda::drv
