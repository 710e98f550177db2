#include "cuda/transfer.h"

#include <cstdlib>
#include <cstring>

#include "cuda/driver/gpu.h"

#include <fmt/format.h>

namespace neural::cuda {

namespace {

double h2d_gbps(int index, std::size_t bytes, int passes, bool pinned, std::string* why) {
    auto failed = [&](const char* what, CUresult err) {
        if (why) *why = fmt::format("{}: {}", what, result_text(err));
        drv::get_last_error();
        return 0.0;
    };
    CUresult err = drv::set_device(index);
    if (err != CUDA_SUCCESS) return failed("cuCtxSetCurrent", err);
    void* host = nullptr;
    void* dev = nullptr;
    const auto free_host = [&] {
        if (pinned)
            drv::free_host(host);
        else
            std::free(host);
    };
    if (pinned) {
        if ((err = drv::malloc_host(&host, bytes)) != CUDA_SUCCESS)
            return failed("cuMemHostAlloc", err);
    } else {
        host = std::malloc(bytes);
        if (host == nullptr) return failed("malloc", CUDA_ERROR_OUT_OF_MEMORY);
        std::memset(host, 1, bytes);  // fault the pages in before timing
    }
    if ((err = drv::malloc(&dev, bytes)) != CUDA_SUCCESS) {
        free_host();
        return failed("cuMemAlloc", err);
    }
    CUevent start = nullptr, stop = nullptr;
    drv::event_create(&start);
    drv::event_create(&stop);
    double best = 0;
    err = drv::memcpy(dev, host, bytes, drv::kHostToDevice);  // warm-up
    for (int p = 0; err == CUDA_SUCCESS && p < (passes < 1 ? 1 : passes); ++p) {
        drv::event_record(start);
        err = drv::memcpy_async(dev, host, bytes, drv::kHostToDevice);
        drv::event_record(stop);
        drv::event_synchronize(stop);
        float ms = 0;
        drv::event_elapsed_time(&ms, start, stop);
        if (ms > 0) {
            const double gbps = static_cast<double>(bytes) / (ms / 1e3) / 1e9;
            if (gbps > best) best = gbps;
        }
    }
    drv::event_destroy(start);
    drv::event_destroy(stop);
    drv::free(dev);
    free_host();
    if (err != CUDA_SUCCESS) return failed("cuMemcpyHtoD", err);
    return best;
}

}  // namespace

double pinned_h2d_gbps(int index, std::size_t bytes, int passes, std::string* why) {
    return h2d_gbps(index, bytes, passes, true, why);
}

double pageable_h2d_gbps(int index, std::size_t bytes, int passes, std::string* why) {
    return h2d_gbps(index, bytes, passes, false, why);
}

}  // namespace neural::cuda
