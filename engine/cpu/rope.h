// Rotary position embedding with YaRN ("NTK-by-parts") frequencies, half-split layout: pairs are
// (z[i], z[i + d/2]). cos and sin are both multiplied by the YaRN concentration m.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace neural::cpu {

class Rope {
public:
    explicit Rope(const ModelConfig& config);

    // Rotates `heads` vectors of head_dim floats in place for absolute position `pos`.
    void apply(float* x, int heads, std::int64_t pos) const;

    const std::vector<float>& inv_freq() const { return inv_freq_; }  // [d/2]
    float concentration() const { return concentration_; }

private:
    int head_dim_;
    std::vector<float> inv_freq_;
    float concentration_ = 1.0f;
};

}  // namespace neural::cpu
