#include "cuda/hybrid/staging_ring.h"

#include "cuda/cuda_check.h"

namespace neural::hybrid {

StagingRing::StagingRing(int device, int threads, int depth, std::size_t bytes, Fill fill)
    : device_(device), fill_(std::move(fill)) {
    for (int b = 0; b < depth; ++b) {
        buffers_.emplace_back(bytes);
        CUevent ev;
        NEURAL_CUDA(cuda::drv::event_create(&ev, cuda::drv::kEventDisableTiming));
        uploaded_.push_back(ev);
    }
    for (int w = 0; w < threads; ++w) workers_.emplace_back([this] { work(); });
}

StagingRing::~StagingRing() {
    {
        std::lock_guard<std::mutex> lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    for (auto e : uploaded_) cuda::drv::event_destroy(e);
}

void StagingRing::start(std::vector<std::pair<int, int>> jobs) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_ = std::move(jobs);
    state_.assign(jobs_.size(), 0);
    issued_.assign(jobs_.size(), false);
    next_ = 0;
    error_ = nullptr;
    cv_.notify_all();
}

const HostBuffer& StagingRing::wait(std::size_t j) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return state_[j] == 2 || error_ != nullptr; });
    if (error_ != nullptr) std::rethrow_exception(error_);
    return buffers_[j % buffers_.size()];
}

void StagingRing::issued(std::size_t j, CUstream stream) {
    NEURAL_CUDA(cuda::drv::event_record(uploaded_[j % buffers_.size()], stream));
    std::lock_guard<std::mutex> lock(mu_);
    issued_[j] = true;
    cv_.notify_all();
}

void StagingRing::abandon() {
    std::unique_lock<std::mutex> lock(mu_);
    next_ = jobs_.size();
    cv_.wait(lock, [&] { return filling_ == 0; });
    jobs_.clear();
    state_.clear();
    issued_.clear();
}

// A producer: takes the next job once its buffer's previous upload was issued, fills the buffer
// outside the lock, and marks it filled (or records the first error for wait()).
void StagingRing::work() {
    cuda::drv::set_device(device_);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] {
            if (stop_) return true;
            if (next_ >= jobs_.size() || error_ != nullptr) return false;
            return next_ < buffers_.size() || issued_[next_ - buffers_.size()];
        });
        if (stop_) return;
        const std::size_t j = next_++;
        const auto [layer, expert] = jobs_[j];
        state_[j] = 1;
        ++filling_;
        lock.unlock();
        std::exception_ptr err;
        try {
            // The buffer's previous upload (job j - depth) must have landed.
            NEURAL_CUDA(cuda::drv::event_synchronize(uploaded_[j % buffers_.size()]));
            fill_(layer, expert, buffers_[j % buffers_.size()].template host<std::uint8_t>());
        } catch (...) {
            err = std::current_exception();
        }
        lock.lock();
        --filling_;
        if (err != nullptr) {
            if (error_ == nullptr) error_ = err;
        } else if (j < state_.size()) {
            state_[j] = 2;
        }
        cv_.notify_all();
    }
}

}  // namespace neural::hybrid
