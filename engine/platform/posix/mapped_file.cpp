#include "platform/mapped_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "neural/error.h"

namespace neural {

namespace {

// ---- The SIGBUS guard: mappings register their address range; a fault inside one is answered
// with a zero page and a flag instead of killing the process. The table is fixed and lock-free
// for the handler (only registration takes the mutex).
struct GuardSlot {
    std::atomic<std::uintptr_t> begin{0};
    std::atomic<std::uintptr_t> end{0};
    std::atomic<bool> faulted{false};
    char name[512] = {};
};
constexpr int kGuardSlots = 1024;
GuardSlot g_slots[kGuardSlots];
std::mutex g_guard_mutex;
bool g_guard_installed = false;
std::atomic<bool> g_any_fault{false};
std::uintptr_t g_page = 4096;
struct sigaction g_previous_bus {};

extern "C" void on_sigbus(int sig, siginfo_t* info, void* context) {
    // Async-signal-safe: atomics, mmap (a system call) and sigaction/raise.
    const auto addr = reinterpret_cast<std::uintptr_t>(info->si_addr);
    for (GuardSlot& slot : g_slots) {
        const std::uintptr_t b = slot.begin.load(std::memory_order_acquire);
        if (b == 0 || addr < b || addr >= slot.end.load(std::memory_order_acquire)) continue;
        void* page = reinterpret_cast<void*>(addr & ~(g_page - 1));
        if (::mmap(page, g_page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) !=
            MAP_FAILED) {
            slot.faulted.store(true, std::memory_order_release);
            g_any_fault.store(true, std::memory_order_release);
            return;  // the faulting read runs again and sees zeros
        }
        break;
    }
    // Not a guarded mapping: what would have happened without this handler.
    if ((g_previous_bus.sa_flags & SA_SIGINFO) != 0 && g_previous_bus.sa_sigaction != nullptr) {
        g_previous_bus.sa_sigaction(sig, info, context);
        return;
    }
    if (g_previous_bus.sa_handler != SIG_DFL && g_previous_bus.sa_handler != SIG_IGN) {
        g_previous_bus.sa_handler(sig);
        return;
    }
    ::signal(SIGBUS, SIG_DFL);
    ::raise(SIGBUS);
}

int guard_register(const void* data, std::uint64_t size, const std::string& name) {
    std::lock_guard<std::mutex> lock(g_guard_mutex);
    if (!g_guard_installed) {
        g_page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
        struct sigaction sa {};
        sa.sa_sigaction = on_sigbus;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        ::sigaction(SIGBUS, &sa, &g_previous_bus);
        g_guard_installed = true;
    }
    for (int i = 0; i < kGuardSlots; ++i) {
        GuardSlot& slot = g_slots[i];
        if (slot.begin.load(std::memory_order_relaxed) != 0) continue;
        const auto b = reinterpret_cast<std::uintptr_t>(data);
        slot.faulted.store(false, std::memory_order_relaxed);
        std::snprintf(slot.name, sizeof(slot.name), "%s", name.c_str());
        slot.end.store(b + size, std::memory_order_release);
        slot.begin.store(b, std::memory_order_release);
        return i;
    }
    return -1;  // more mappings than slots: this one is unguarded
}

void guard_unregister(int slot) {
    if (slot < 0) return;
    std::lock_guard<std::mutex> lock(g_guard_mutex);
    g_slots[slot].begin.store(0, std::memory_order_release);
    g_slots[slot].end.store(0, std::memory_order_release);
}

std::int64_t mtime_ns(const struct stat& st) {
    return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

std::filesystem::path faulted_mapping() {
    if (!g_any_fault.load(std::memory_order_acquire)) return {};
    std::lock_guard<std::mutex> lock(g_guard_mutex);
    for (const GuardSlot& slot : g_slots) {
        if (slot.begin.load(std::memory_order_acquire) != 0 &&
            slot.faulted.load(std::memory_order_acquire))
            return slot.name;
    }
    return {};
}

MappedFile MappedFile::open(const std::filesystem::path& path) {
    MappedFile file;
    file.path_ = path;
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot open {}: {}", path.string(), std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
        int err = errno;
        ::close(fd);
        fail("cannot stat {}: {}", path.string(), std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        fail("{} is not a regular file", path.string());
    }
    file.size_ = static_cast<std::uint64_t>(st.st_size);
    file.identity_ = {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
                      file.size_, mtime_ns(st)};
    if (file.size_ > 0) {
        void* p = ::mmap(nullptr, file.size_, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            int err = errno;
            ::close(fd);
            fail("cannot map {} ({} bytes): {}", path.string(), file.size_, std::strerror(err));
        }
        file.data_ = static_cast<const std::uint8_t*>(p);
        file.fd_ = fd;  // kept: page-cache hints need the file (release_mapped_pages)
        file.guard_slot_ = guard_register(p, file.size_, path.string());
    } else {
        ::close(fd);
    }
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)),
      fd_(std::exchange(other.fd_, -1)),
      identity_(other.identity_),
      guard_slot_(std::exchange(other.guard_slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
        fd_ = std::exchange(other.fd_, -1);
        identity_ = other.identity_;
        guard_slot_ = std::exchange(other.guard_slot_, -1);
    }
    return *this;
}

std::string MappedFile::changed_on_disk() const {
    if (fd_ < 0) return {};
    struct stat now {};
    if (::fstat(fd_, &now) != 0)
        return fmt::format("it cannot be examined: {}", std::strerror(errno));
    const auto size = static_cast<std::uint64_t>(now.st_size);
    if (size != identity_.size)
        return fmt::format("its size changed from {} to {} bytes", identity_.size, size);
    if (mtime_ns(now) != identity_.mtime_ns)
        return "it was written to (its modification time changed)";
    struct stat at_path {};
    if (::stat(path_.c_str(), &at_path) != 0) return "it was removed";
    if (static_cast<std::uint64_t>(at_path.st_dev) != identity_.device ||
        static_cast<std::uint64_t>(at_path.st_ino) != identity_.file)
        return "another file replaced it";
    return {};
}

bool MappedFile::faulted() const {
    return guard_slot_ >= 0 && g_slots[guard_slot_].faulted.load(std::memory_order_acquire);
}

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
    guard_unregister(std::exchange(guard_slot_, -1));
    if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    data_ = nullptr;
    size_ = 0;
}

}  // namespace neural
