#include <pthread.h>

#include <cstdio>
#include <cstdlib>

#include "platform/thread_scratch.h"

namespace neural {

ThreadExitSlot::ThreadExitSlot(Destroy destroy) {
    pthread_key_t key{};
    if (pthread_key_create(&key, destroy) != 0) {
        // Only when the process ran out of keys (PTHREAD_KEYS_MAX, at least 128): a
        // programming error, the project makes a handful.
        std::fputs("neural: pthread_key_create failed (out of thread-specific keys)\n", stderr);
        std::abort();
    }
    key_ = static_cast<unsigned long>(key);
}

void ThreadExitSlot::set(void* p) const {
    pthread_setspecific(static_cast<pthread_key_t>(key_), p);
}

}  // namespace neural
