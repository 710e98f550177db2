// Where the CPU engine reads MXFP4 expert rows from. The default is the checkpoint's expert
// tensors (ModelWeights); an expert store (engine/store/) provides the same rows from its
// records, so the forward pass is unchanged and bit-identical whichever source is used.
#pragma once

#include <cstdint>

namespace neural {

// The two MXFP4 projections of an expert: gate_up rows 2I (interleaved gate/up) x cols H,
// down rows H x cols I.
enum class Projection : int { kGateUp = 0, kDown = 1 };

// One weight row: `blocks` = G blocks of 16 code bytes (G = cols / 32), `scales` = the row's G
// E8M0 scale bytes.
struct ExpertRow {
    const std::uint8_t* blocks = nullptr;
    const std::uint8_t* scales = nullptr;
};

class ExpertSource {
public:
    virtual ~ExpertSource() = default;

    // Called once for (layer, expert) before its rows are read, outside parallel regions: the
    // place to throw neural::Error for a damaged record (row() itself must not throw).
    virtual void prepare(int layer, int expert) const = 0;

    // Row `row` of `expert`'s projection in `layer`. `scale_buf` (G bytes, owned by the caller)
    // receives the scales when the source has to decode them; the returned pointers stay valid
    // until the next call with the same `scale_buf`.
    virtual ExpertRow row(int layer, Projection projection, int expert, std::int64_t row,
                          std::uint8_t* scale_buf) const = 0;
};

}  // namespace neural
