#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <cstdio>
#include <cstdlib>

#include "platform/thread_scratch.h"

namespace neural {

// Fiber-local storage: its callback runs when a thread ends (for threads that never became
// fibers, the thread's one fiber ends with it), from the OS's own thread-exit path rather than
// from the C runtime's TLS emulation (thread_scratch.h says why that matters).
ThreadExitSlot::ThreadExitSlot(Destroy destroy) {
    const DWORD index = FlsAlloc(reinterpret_cast<PFLS_CALLBACK_FUNCTION>(destroy));
    if (index == FLS_OUT_OF_INDEXES) {
        std::fputs("neural: FlsAlloc failed (out of fiber-local storage indexes)\n", stderr);
        std::abort();
    }
    key_ = index;
}

void ThreadExitSlot::set(void* p) const { FlsSetValue(static_cast<DWORD>(key_), p); }

}  // namespace neural
