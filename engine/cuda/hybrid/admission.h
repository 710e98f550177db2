// The expert slot pool of the hybrid backend and the admissions into it (docs/CUDA.md
// "Residency"): Residency decides which expert a slot holds; this part carries that out on the
// GPU. Copy-on-compute: a pending candidate's bytes are captured by the CPU kernel while it
// computes the miss (capture buffers, claim_capture), the victim leaves the slot table on the
// compute stream, the copy stream uploads the record into the victim's slot, and the table flips
// on the compute stream once the copy landed (poll). After a prompt, its routing counts become
// one batch of admissions (admit_prompt) whose slots join the table chunk by chunk (poll_batch).
// The decode graphs read the table; a graph never sees a half-written slot, since table updates
// are ordered on the compute stream between graphs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "cuda/driver/gpu.h"

#include "backend/backend.h"
#include "cuda/hybrid/host_buffer.h"
#include "cuda/hybrid/residency.h"

namespace neural::hybrid {

inline constexpr int kCaptureBuffers = 4;
inline constexpr std::size_t kBatchChunk = 16;  // a prompt's admissions join the table 16 at a time

// The expert slot pool in VRAM: slot s holds a raw record (the slot image) at base + s * stride;
// the table maps (layer, expert) to its slot (-1: not resident), read by the decode graphs.
struct SlotPool {
    std::uint8_t* base = nullptr;
    int* table = nullptr;  // [layers * experts]
    std::uint64_t record_bytes = 0, stride = 0;

    std::uint8_t* slot(int s) const { return base + static_cast<std::uint64_t>(s) * stride; }
};

class Admissions {
public:
    // Where a record's bytes come from: fill assembles the slot image of (layer, expert) into
    // dst; raw, where the store's records are slot images (a raw store), points at it in the
    // store's mapping (null otherwise).
    struct Records {
        std::function<void(int layer, int expert, std::uint8_t* dst)> fill;
        std::function<const std::uint8_t*(int layer, int expert)> raw;
    };

    // The pool's memory and table are allocated by the backend (its VRAM plan); residency is the
    // backend's policy; compute / copy: the streams the table flips and the uploads are ordered
    // on; counters (may be null) counts the admissions that joined the table.
    Admissions(const SlotPool& pool, Residency& residency, CUstream compute, CUstream copy,
               Records records, BackendCounters* counters);
    ~Admissions();
    Admissions(const Admissions&) = delete;
    Admissions& operator=(const Admissions&) = delete;

    const SlotPool& pool() const { return pool_; }

    // The initial placement (Residency::initial), synchronous: every record through a capture
    // buffer into its slot, then the whole table.
    void place(const std::vector<Residency::Admission>& placed);

    // A free capture buffer, now busy until its upload landed (-1: all busy), and its bytes: the
    // CPU kernel writes a pending candidate's record into it while it computes the miss.
    int claim_capture();
    std::uint8_t* capture(int buffer) const;

    // A decode layer's misses computed on the CPU: experts[j] with its capture buffer
    // captures[j] (-1: not captured). Uploads start for the pending candidates among them
    // (without a raw store a record is assembled now into a free capture buffer), and the table
    // flips for uploads that landed. Nothing when residency is frozen.
    void admit_misses(int layer, std::span<const int> experts, std::span<const int> captures);
    // Uploads that landed (and the prompt batch's chunks, poll_batch): their slots join the table.
    void poll();
    // The prompt batch's chunks whose copies landed, in order: their slots join the table.
    void poll_batch();
    // After a prompt on the GPU: its routing counts [layers * experts] become one batch of up to
    // prompt_admit evictions (Residency::prompt_admissions).
    void admit_prompt(std::span<const std::uint32_t> counts, int prompt_admit);

private:
    struct Upload {
        Residency::Admission a;
        int buffer;
    };
    int free_capture() const;
    void start_upload(const Residency::Admission& a, int buffer);
    int* table_entry(int layer, int expert) const {
        return pool_.table + static_cast<std::size_t>(layer) * residency_.experts() + expert;
    }

    SlotPool pool_;
    Residency& residency_;
    CUstream compute_, copy_;
    Records records_;
    BackendCounters* counters_;
    // Pinned capture buffers the CPU kernel writes a candidate's record into, the event of each
    // one's upload, which are busy, the event that orders a victim's eviction before its slot is
    // overwritten, the uploads in flight.
    std::vector<HostBuffer> captures_;
    std::vector<CUevent> capture_done_;
    bool capture_busy_[kCaptureBuffers] = {};
    CUevent evicted_ = nullptr;
    std::vector<Upload> uploads_;
    // After a prompt (admit_prompt): the batch uploading, an event after each chunk of
    // kBatchChunk of its copies, how many of it joined the table (poll_batch), and a pageable
    // buffer a record is assembled in (no raw store).
    std::vector<Residency::Admission> batch_;
    std::vector<CUevent> batch_chunks_;
    std::size_t batch_flipped_ = 0;
    std::vector<std::uint8_t> batch_record_;
};

}  // namespace neural::hybrid
