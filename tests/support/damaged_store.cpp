#include "support/damaged_store.h"

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>

#include "store/store.h"

namespace neural::test {

namespace {

struct Span {
    std::uint64_t offset = 0, bytes = 0;
};

// Read while the store is open; the file is written after it is closed (Windows refuses to
// write a mapped file).
Span record_span(const std::filesystem::path& path, int layer, int expert) {
    const store::ExpertStore s = store::ExpertStore::open(path);
    return {s.entry(layer, expert).offset, s.entry(layer, expert).payload_bytes};
}

std::string read_at(const std::filesystem::path& path, const Span& at) {
    std::ifstream f(path, std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at.offset));
    std::string b(static_cast<std::size_t>(at.bytes), '\0');
    f.read(b.data(), static_cast<std::streamsize>(b.size()));
    if (!f) throw std::runtime_error("cannot read " + path.string());
    return b;
}

void write_at(const std::filesystem::path& path, std::uint64_t offset, const std::string& bytes) {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f) throw std::runtime_error("cannot patch " + path.string());
}

}  // namespace

void zero_store_record(const std::filesystem::path& store, int layer, int expert) {
    const Span at = record_span(store, layer, expert);
    write_at(store, at.offset, std::string(static_cast<std::size_t>(at.bytes), '\0'));
}

void swap_store_records(const std::filesystem::path& store, int layer_a, int expert_a, int layer_b,
                        int expert_b) {
    const Span a = record_span(store, layer_a, expert_a), b = record_span(store, layer_b, expert_b);
    if (a.bytes != b.bytes)
        throw std::runtime_error("records of different sizes cannot be swapped");
    const std::string bytes_a = read_at(store, a), bytes_b = read_at(store, b);
    write_at(store, a.offset, bytes_b);
    write_at(store, b.offset, bytes_a);
}

}  // namespace neural::test
