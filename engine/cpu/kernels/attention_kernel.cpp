#include "cpu/kernels/attention_kernel.h"

#include "cpu/kernels/attention_reference.h"
#include "platform/cpu_features.h"

namespace neural::cpu {

const char* attention_isa_name(AttentionIsa isa) {
    switch (isa) {
        case AttentionIsa::avx512:
            return "avx512";
        case AttentionIsa::avx2:
            return "avx2";
        case AttentionIsa::reference:
            break;
    }
    return "reference";
}

bool attention_isa_available(AttentionIsa isa) {
    if (isa == AttentionIsa::reference) return true;
#ifdef NEURAL_KERNELS_X86
    return isa == AttentionIsa::avx512 ? cpu_features().has_avx512()
                                       : cpu_features().has_avx2_fma();
#else
    return false;
#endif
}

void attend_group(AttentionIsa isa, const float* q, int heads, const float* k, const float* v,
                  std::int64_t stride, std::int64_t n, int d, const float* sinks, float scale,
                  float* out) {
#ifdef NEURAL_KERNELS_X86
    if (isa == AttentionIsa::avx512 &&
        detail::attend_group_avx512(q, heads, k, v, stride, n, d, sinks, scale, out))
        return;
    if (isa == AttentionIsa::avx2 &&
        detail::attend_group_avx2(q, heads, k, v, stride, n, d, sinks, scale, out))
        return;
#endif
    for (int h = 0; h < heads; ++h) {
        attend_with_sink(q + static_cast<std::ptrdiff_t>(h) * d, k, v, stride, n, d, sinks[h],
                         scale, out + static_cast<std::ptrdiff_t>(h) * d);
    }
}

}  // namespace neural::cpu
