// Errors the engine reports to its callers (CLI, server, GUI).
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace neural {

// Every user-facing failure: a bad file, bad input, an impossible request. The message is
// complete and names the file / tensor / field involved; callers print it as is.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
    throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace neural

namespace neural {
// A file the loaded model reads changed on disk since it was loaded (rewritten, truncated or
// replaced) or a read of it faulted: nothing computed from it can be trusted until the model is
// reloaded. The server answers 503 and /health says "degraded".
class ModelFilesChanged : public Error {
public:
    using Error::Error;
};

// Thrown when a caller cancels a running generation; the session stays usable.
class Cancelled : public Error {
public:
    Cancelled() : Error("cancelled") {}
};

// Whether a caller's cancel flag (nullptr: the caller gave none) is set.
inline bool cancel_requested(const std::atomic<bool>* flag) {
    return flag != nullptr && flag->load(std::memory_order_relaxed);
}
// Throws Cancelled when it is.
inline void throw_if_cancelled(const std::atomic<bool>* flag) {
    if (cancel_requested(flag)) throw Cancelled();
}
}  // namespace neural
