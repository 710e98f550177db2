#include "platform/mapped_file.h"

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include "platform/windows/win_error.h"

#include <atomic>
#include <cstdio>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "neural/error.h"

namespace neural {

using win::last_error_text;

namespace {

// ---- EXCEPTION_IN_PAGE_ERROR: the file is opened without write or delete sharing, so it cannot
// be changed, truncated or replaced while mapped; a page that cannot be read is a failing disk or
// network share. The pages of a view cannot be replaced by others, so the process cannot go on:
// a vectored handler names the file on stderr first (mapped_file.h).
struct GuardSlot {
    std::atomic<std::uintptr_t> begin{0};
    std::atomic<std::uintptr_t> end{0};
    char name[512] = {};
};
constexpr int kGuardSlots = 1024;
GuardSlot g_slots[kGuardSlots];
std::mutex g_guard_mutex;
bool g_guard_installed = false;

LONG CALLBACK on_exception(EXCEPTION_POINTERS* e) {
    const EXCEPTION_RECORD* r = e->ExceptionRecord;
    if (r->ExceptionCode != EXCEPTION_IN_PAGE_ERROR || r->NumberParameters < 3)
        return EXCEPTION_CONTINUE_SEARCH;
    const auto addr = static_cast<std::uintptr_t>(r->ExceptionInformation[1]);
    for (const GuardSlot& slot : g_slots) {
        const std::uintptr_t b = slot.begin.load(std::memory_order_acquire);
        if (b == 0 || addr < b || addr >= slot.end.load(std::memory_order_acquire)) continue;
        char line[768];
        const int n =
            std::snprintf(line, sizeof(line),
                          "neural: reading %s failed (EXCEPTION_IN_PAGE_ERROR, status "
                          "0x%08lx): the disk or network share holding it failed\n",
                          slot.name, static_cast<unsigned long>(r->ExceptionInformation[2]));
        DWORD written = 0;
        if (n > 0)
            WriteFile(GetStdHandle(STD_ERROR_HANDLE), line, static_cast<DWORD>(n), &written,
                      nullptr);
        break;
    }
    return EXCEPTION_CONTINUE_SEARCH;
}

int guard_register(const void* data, std::uint64_t size, const std::string& name) {
    std::lock_guard<std::mutex> lock(g_guard_mutex);
    if (!g_guard_installed) {
        AddVectoredExceptionHandler(1, on_exception);
        g_guard_installed = true;
    }
    for (int i = 0; i < kGuardSlots; ++i) {
        GuardSlot& slot = g_slots[i];
        if (slot.begin.load(std::memory_order_relaxed) != 0) continue;
        const auto b = reinterpret_cast<std::uintptr_t>(data);
        std::snprintf(slot.name, sizeof(slot.name), "%s", name.c_str());
        slot.end.store(b + size, std::memory_order_release);
        slot.begin.store(b, std::memory_order_release);
        return i;
    }
    return -1;
}

void guard_unregister(int slot) {
    if (slot < 0) return;
    std::lock_guard<std::mutex> lock(g_guard_mutex);
    g_slots[slot].begin.store(0, std::memory_order_release);
    g_slots[slot].end.store(0, std::memory_order_release);
}

bool identity_of(HANDLE h, MappedFile::Identity* id) {
    BY_HANDLE_FILE_INFORMATION info{};
    if (!GetFileInformationByHandle(h, &info)) return false;
    id->device = info.dwVolumeSerialNumber;
    id->file = (static_cast<std::uint64_t>(info.nFileIndexHigh) << 32) | info.nFileIndexLow;
    id->size = (static_cast<std::uint64_t>(info.nFileSizeHigh) << 32) | info.nFileSizeLow;
    id->mtime_ns = static_cast<std::int64_t>(
        (static_cast<std::uint64_t>(info.ftLastWriteTime.dwHighDateTime) << 32) |
        info.ftLastWriteTime.dwLowDateTime);
    return true;
}

}  // namespace

std::filesystem::path faulted_mapping() { return {}; }  // an in-page error ends the process

MappedFile MappedFile::open(const std::filesystem::path& path) {
    MappedFile file;
    file.path_ = path;
    HANDLE h = CreateFileW(path.c_str(), GENERIC_READ, FILE_SHARE_READ, nullptr, OPEN_EXISTING,
                           FILE_ATTRIBUTE_NORMAL, nullptr);
    if (h == INVALID_HANDLE_VALUE) fail("cannot open {}: {}", path.string(), last_error_text());
    LARGE_INTEGER size{};
    if (!GetFileSizeEx(h, &size)) {
        std::string err = last_error_text();
        CloseHandle(h);
        fail("cannot stat {}: {}", path.string(), err);
    }
    file.file_handle_ = h;
    file.size_ = static_cast<std::uint64_t>(size.QuadPart);
    identity_of(h, &file.identity_);
    if (file.size_ > 0) {
        // Large files: CreateFileMapping takes the full 64-bit size (0, 0 = whole file).
        HANDLE m = CreateFileMappingW(h, nullptr, PAGE_READONLY, 0, 0, nullptr);
        if (m == nullptr) {
            std::string err = last_error_text();
            file.release();
            fail("cannot map {}: {}", path.string(), err);
        }
        file.mapping_handle_ = m;
        void* p = MapViewOfFile(m, FILE_MAP_READ, 0, 0, 0);
        if (p == nullptr) {
            std::string err = last_error_text();
            file.release();
            fail("cannot map a view of {} ({} bytes): {}", path.string(), file.size_, err);
        }
        file.data_ = static_cast<const std::uint8_t*>(p);
        file.guard_slot_ = guard_register(p, file.size_, path.string());
    }
    return file;
}

MappedFile::MappedFile(MappedFile&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      path_(std::move(other.path_)),
      file_handle_(std::exchange(other.file_handle_, nullptr)),
      mapping_handle_(std::exchange(other.mapping_handle_, nullptr)),
      identity_(other.identity_),
      guard_slot_(std::exchange(other.guard_slot_, -1)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
    if (this != &other) {
        release();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        path_ = std::move(other.path_);
        file_handle_ = std::exchange(other.file_handle_, nullptr);
        mapping_handle_ = std::exchange(other.mapping_handle_, nullptr);
        identity_ = other.identity_;
        guard_slot_ = std::exchange(other.guard_slot_, -1);
    }
    return *this;
}

std::string MappedFile::changed_on_disk() const {
    // The sharing mode makes changes impossible while the file is open; compared all the same.
    if (file_handle_ == nullptr) return {};
    Identity now;
    if (!identity_of(static_cast<HANDLE>(file_handle_), &now))
        return "it cannot be examined: " + last_error_text();
    if (now.size != identity_.size)
        return fmt::format("its size changed from {} to {} bytes", identity_.size, now.size);
    if (now.mtime_ns != identity_.mtime_ns)
        return "it was written to (its modification time changed)";
    return {};
}

bool MappedFile::faulted() const { return false; }  // an in-page error ends the process

MappedFile::~MappedFile() { release(); }

void MappedFile::release() {
    guard_unregister(guard_slot_);
    guard_slot_ = -1;
    if (data_ != nullptr) UnmapViewOfFile(data_);
    if (mapping_handle_ != nullptr) CloseHandle(static_cast<HANDLE>(mapping_handle_));
    if (file_handle_ != nullptr) CloseHandle(static_cast<HANDLE>(file_handle_));
    data_ = nullptr;
    mapping_handle_ = nullptr;
    file_handle_ = nullptr;
    size_ = 0;
}

}  // namespace neural
