// The floating-point control state a worker team reproduces from its caller. On x86 that is
// MXCSR: rounding mode (bits 13-14), flush-to-zero (bit 15), denormals-are-zero (bit 6) and the
// exception masks (bits 7-12); the status flags (bits 0-5) are not part of it. Worker threads do
// not inherit later changes of the caller's MXCSR, so a team installs it for every job, which is
// what makes FTZ/DAZ or a directed rounding mode give the same bits on any thread.
// Header-only, beside the persistent-team library's C ABI: both that library and the engine's
// teams (cpu/team/) compile it.
#pragma once

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__) || defined(_M_X64) || defined(_M_IX86)
#include <xmmintrin.h>
#define NEURAL_FP_CONTROL_X86 1
#else
#define NEURAL_FP_CONTROL_X86 0
#endif

namespace neural::cpu {

constexpr std::uint32_t kFpStatusBits = 0x3F;        // sticky exception flags
constexpr std::uint32_t kFpExceptionMasks = 0x1F80;  // all six exceptions masked
constexpr std::uint32_t kFpFlushToZero = 0x8000;
constexpr std::uint32_t kFpDenormalsAreZero = 0x0040;
constexpr std::uint32_t kFpRoundingBits = 0x6000;

// The calling thread's control state (status flags cleared); 0 on non-x86 builds.
inline std::uint32_t read_fp_control() {
#if NEURAL_FP_CONTROL_X86
    return _mm_getcsr() & ~kFpStatusBits;
#else
    return 0;
#endif
}

inline void write_fp_control(std::uint32_t control) {
#if NEURAL_FP_CONTROL_X86
    _mm_setcsr(control & ~kFpStatusBits);
#else
    (void)control;
#endif
}

// Teams run jobs only with every exception masked: an unmasked exception would trap in a worker
// thread, where the caller could not handle it. Other values (any rounding mode, FTZ, DAZ) are
// reproduced exactly.
inline bool fp_control_supported(std::uint32_t control) {
#if NEURAL_FP_CONTROL_X86
    return (control & kFpExceptionMasks) == kFpExceptionMasks;
#else
    return control == 0;
#endif
}

// Installs `control` for a scope and restores the previous state afterwards.
class FpControlScope {
public:
    explicit FpControlScope(std::uint32_t control) : saved_(read_fp_control()) {
        if (saved_ != control) write_fp_control(control);
        changed_ = saved_ != control;
    }
    ~FpControlScope() {
        if (changed_) write_fp_control(saved_);
    }
    FpControlScope(const FpControlScope&) = delete;
    FpControlScope& operator=(const FpControlScope&) = delete;

private:
    std::uint32_t saved_;
    bool changed_ = false;
};

}  // namespace neural::cpu
