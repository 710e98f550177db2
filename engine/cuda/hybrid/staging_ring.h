// Prefill's staging ring: producer threads copy expert records from RAM (the store mapping, or
// assembled from a packed store / the checkpoint) into pinned host buffers, running ahead of the
// main thread, which uploads each buffer into a scratch slot. Job j uses buffer j % depth; its
// producer first waits until job j - depth's upload was issued and has completed. Not made for a
// pinned store (--pin-store): its records are uploaded straight from the mapping.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "cuda/driver/gpu.h"

#include "cuda/hybrid/host_buffer.h"

namespace neural::hybrid {

class StagingRing {
public:
    using Fill = std::function<void(int layer, int expert, std::uint8_t* dst)>;

    // `threads` producers fill `depth` pinned buffers of `bytes`; job j uses buffer j % depth.
    StagingRing(int device, int threads, int depth, std::size_t bytes, Fill fill);
    ~StagingRing();
    int depth() const { return static_cast<int>(buffers_.size()); }

    // A new batch of records to stage, in the order the main thread will take them.
    void start(std::vector<std::pair<int, int>> jobs);
    // Waits until job j's buffer is filled (rethrows a producer's error); returns the buffer.
    const HostBuffer& wait(std::size_t j);
    // The upload of job j's buffer was enqueued on `stream`: the buffer is free once it ran.
    void issued(std::size_t j, CUstream stream);
    // Stops handing out jobs of the current batch (after an error on the main thread) and waits
    // for producers still filling.
    void abandon();

private:
    void work();

    int device_ = 0;
    Fill fill_;
    std::vector<HostBuffer> buffers_;
    std::vector<CUevent> uploaded_;
    std::vector<std::thread> workers_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<std::pair<int, int>> jobs_;
    std::vector<int> state_;  // 0 waiting, 1 filling, 2 filled
    std::vector<bool> issued_;
    std::size_t next_ = 0;
    int filling_ = 0;
    std::exception_ptr error_;
    bool stop_ = false;
};

}  // namespace neural::hybrid
