// Per-thread scratch objects (a kernel's operand buffer, a tokenizer's piece list) that are freed
// when their thread ends.
//
// Not `thread_local std::vector<...>`: in the Windows build (mingw-w64) the storage of a
// thread_local object is emulated (emutls) and can be freed before the object's destructor runs
// at thread exit, so the destructor frees memory a second time and corrupts the heap; the desktop
// app crashed that way after every thread that had run a forward pass ended (docs/WINDOWS.md
// "thread_local"). Here the thread_local is a plain pointer, which has no destructor; the object
// is owned by a thread-exit slot (pthread key / Windows fiber-local storage), whose clean-up
// receives the pointer itself. Every `thread_local` in the project is trivially destructible.
// POSIX: engine/platform/posix/thread_exit.cpp; Windows: windows/thread_exit.cpp.
#pragma once

#include <memory>

namespace neural {

// One pointer per thread; `destroy` runs with a thread's pointer when that thread ends (not for
// a null pointer, and not for the main thread at process exit, whose objects go with the
// process). Slots are never freed: make them function-local statics.
class ThreadExitSlot {
public:
    using Destroy = void (*)(void*);
    explicit ThreadExitSlot(Destroy destroy);
    // Hands `p` to the slot for the calling thread (replacing nothing: call once per thread).
    void set(void* p) const;

private:
    unsigned long key_ = 0;
};

// The calling thread's T, default-constructed on first use and destroyed when the thread ends.
// `Tag` tells apart two scratch objects of the same type (each pair <T, Tag> is one object per
// thread).
template <class T, class Tag = T>
T& thread_scratch() {
    static const ThreadExitSlot slot([](void* p) { delete static_cast<T*>(p); });
    thread_local T* mine = nullptr;
    if (mine == nullptr) {
        auto owned = std::make_unique<T>();
        slot.set(owned.get());
        mine = owned.release();
    }
    return *mine;
}

}  // namespace neural
