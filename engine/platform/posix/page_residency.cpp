#include "platform/page_residency.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <vector>

namespace neural {

namespace {

struct PageSpan {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;  // exclusive, page-aligned
};

PageSpan widen(const void* p, std::size_t n) {
    const std::uintptr_t page = page_size();
    const auto a = reinterpret_cast<std::uintptr_t>(p);
    return {a & ~(page - 1), (a + n + page - 1) & ~(page - 1)};
}

}  // namespace

std::size_t page_size() {
    static const std::size_t page = [] {
        const long v = ::sysconf(_SC_PAGESIZE);
        return v > 0 ? static_cast<std::size_t>(v) : std::size_t{4096};
    }();
    return page;
}

std::optional<std::uint64_t> resident_pages(const void* p, std::size_t n) {
    if (p == nullptr || n == 0) return 0;
    const PageSpan s = widen(p, n);
    const std::size_t pages = (s.end - s.begin) / page_size();
    std::vector<unsigned char> vec(pages);
    if (::mincore(reinterpret_cast<void*>(s.begin), s.end - s.begin, vec.data()) != 0) {
        return std::nullopt;
    }
    std::uint64_t resident = 0;
    for (unsigned char v : vec) resident += v & 1u;
    return resident;
}

std::optional<CachedMapping> map_cached_pages(const void* p, std::size_t n) {
    CachedMapping m;
    if (p == nullptr || n == 0) return m;
    const std::size_t page = page_size();
    const PageSpan s = widen(p, n);
    m.pages = (s.end - s.begin) / page;
    std::vector<unsigned char> vec(m.pages);
    if (::mincore(reinterpret_cast<void*>(s.begin), s.end - s.begin, vec.data()) != 0) {
        return std::nullopt;
    }
// MADV_POPULATE_READ is Linux 5.14's; glibc headers older than that lack the name.
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
    static std::atomic<bool> populate_works{true};
    for (std::size_t i = 0; i < vec.size();) {
        if ((vec[i] & 1u) == 0) {
            ++i;
            continue;
        }
        std::size_t j = i;
        while (j < vec.size() && (vec[j] & 1u) != 0) ++j;
        auto* run = reinterpret_cast<void*>(s.begin + i * page);
        const std::size_t len = (j - i) * page;
        if (!populate_works.load(std::memory_order_relaxed) ||
            ::madvise(run, len, MADV_POPULATE_READ) != 0) {
            // EINVAL: a kernel without it. Anything else (EFAULT, ENOMEM) also falls back: the
            // reads below fault the same pages in, only one page fault per few pages.
            if (errno == EINVAL) populate_works.store(false, std::memory_order_relaxed);
            (void)touch_pages(run, len);
        }
        m.cached += j - i;
        i = j;
    }
    return m;
}

PageRelease release_mapped_pages(const MappedFile& file, std::uint64_t offset, std::uint64_t n) {
    PageRelease r;
    if (file.data() == nullptr || offset >= file.size() || n == 0) {
        r.ok = true;
        r.message = "nothing to release";
        return r;
    }
    n = std::min(n, file.size() - offset);
    const PageSpan s = widen(file.data() + offset, static_cast<std::size_t>(n));
    void* begin = reinterpret_cast<void*>(s.begin);
    const std::size_t len = s.end - s.begin;
    ::munlock(begin, len);  // locked pages cannot be dropped (MADV_DONTNEED fails with EINVAL)
    if (::madvise(begin, len, MADV_DONTNEED) == 0) {
        r.mapping_released = true;
    } else {
        r.message = std::string("madvise(MADV_DONTNEED): ") + std::strerror(errno);
    }
    const auto file_begin =
        static_cast<off_t>(s.begin - reinterpret_cast<std::uintptr_t>(file.data()));
    const int err = file.native_file() >= 0
                        ? ::posix_fadvise(file.native_file(), file_begin, static_cast<off_t>(len),
                                          POSIX_FADV_DONTNEED)
                        : EBADF;
    if (err == 0) {
        r.cache_released = true;
    } else {
        if (!r.message.empty()) r.message += "; ";
        r.message += std::string("posix_fadvise(POSIX_FADV_DONTNEED): ") + std::strerror(err);
    }
    r.ok = r.mapping_released && r.cache_released;
    if (r.ok) r.message = "madvise(MADV_DONTNEED) + posix_fadvise(POSIX_FADV_DONTNEED)";
    r.pages_left = resident_pages(begin, len).value_or(0);
    return r;
}

LockAllowance grow_lock_allowance(std::uint64_t extra) {
    LockAllowance a;
    rlimit lim{};
    if (::getrlimit(RLIMIT_MEMLOCK, &lim) != 0) {
        a.message = std::string("getrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno);
        return a;
    }
    if (lim.rlim_cur == RLIM_INFINITY) {
        a.ok = true;
        a.message = "RLIMIT_MEMLOCK is unlimited";
        return a;
    }
    const std::uint64_t cur = lim.rlim_cur;
    std::uint64_t want = cur + extra < cur ? UINT64_MAX : cur + extra;  // saturate
    if (lim.rlim_max != RLIM_INFINITY) want = std::min<std::uint64_t>(want, lim.rlim_max);
    if (want > cur) {
        lim.rlim_cur = static_cast<rlim_t>(want);
        if (::setrlimit(RLIMIT_MEMLOCK, &lim) != 0) {
            a.message = std::string("setrlimit(RLIMIT_MEMLOCK): ") + std::strerror(errno);
            return a;
        }
    }
    a.ok = want - cur >= extra;
    a.message =
        "RLIMIT_MEMLOCK soft limit " + std::to_string(want) + " bytes (hard limit " +
        (lim.rlim_max == RLIM_INFINITY ? std::string("unlimited") : std::to_string(lim.rlim_max)) +
        ")";
    if (!a.ok) {
        a.message +=
            ": the hard limit leaves room for less than asked; root or CAP_IPC_LOCK is "
            "not limited (see ulimit -l, LimitMEMLOCK= in systemd, --ulimit memlock in "
            "docker)";
    }
    return a;
}

}  // namespace neural
