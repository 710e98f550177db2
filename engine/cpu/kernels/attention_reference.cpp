#include "cpu/kernels/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace neural::cpu {

float dot(const float* a, const float* b, std::int64_t n) {
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
    }
    for (; i < n; ++i) acc[i % 8] += a[i] * b[i];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void attend_with_sink(const float* q, const float* k, const float* v, std::int64_t stride,
                      std::int64_t n, int d, float sink, float scale, float* out) {
    std::vector<float> s(static_cast<size_t>(n));
    float m = sink;
    for (std::int64_t j = 0; j < n; ++j) {
        s[static_cast<size_t>(j)] = dot(q, k + j * stride, d) * scale;
        m = std::max(m, s[static_cast<size_t>(j)]);
    }
    float denom = std::exp(sink - m);
    for (std::int64_t j = 0; j < n; ++j) {
        s[static_cast<size_t>(j)] = std::exp(s[static_cast<size_t>(j)] - m);
        denom += s[static_cast<size_t>(j)];
    }
    std::fill_n(out, d, 0.0f);
    for (std::int64_t j = 0; j < n; ++j) {
        const float p = s[static_cast<size_t>(j)] / denom;
        const float* vj = v + j * stride;
        for (int i = 0; i < d; ++i) out[i] += p * vj[i];
    }
}

}  // namespace neural::cpu
