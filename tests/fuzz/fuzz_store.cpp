// Fuzz target: the expert store reader (store::ExpertStore::open) and the per-record accessors
// the engine uses after it (record checksums, check_escapes = ExpertSource::prepare, row()).
// Input: byte 0 = options, then the store file. With bit 0 set the target first rewrites the
// header checksum to match the (mutated) header, metadata and index, so mutations get past the
// checksum into the validation behind it; without it the bytes are taken as they are.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "fuzz_support.h"
#include "neural/error.h"
#include "store/format.h"
#include "store/hash.h"
#include "store/store.h"

namespace {

volatile std::uint8_t g_sink;

// Recomputes the header checksum when every area it covers lies inside the file.
void fix_checksum(std::string& bytes) {
    using namespace neural::store;
    if (bytes.size() < kHeaderBytes) return;
    auto* base = reinterpret_cast<std::uint8_t*>(bytes.data());
    const FixedHeader h = FixedHeader::decode(base);
    const std::uint64_t size = bytes.size();
    if (h.meta_offset > size || h.meta_bytes > size - h.meta_offset) return;
    if (h.record_count > size / kIndexEntryBytes) return;
    const std::uint64_t index_bytes = h.record_count * kIndexEntryBytes;
    if (h.index_offset > size || index_bytes > size - h.index_offset) return;
    Xxh3 hh;
    hh.update(base, FixedHeader::kChecksumOffset);
    hh.update(base + h.meta_offset, h.meta_bytes);
    hh.update(base + h.index_offset, index_bytes);
    put_u64(base + FixedHeader::kChecksumOffset, hh.digest());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace neural;
    using namespace neural::store;
    if (size < 1) return 0;
    std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
    if (data[0] & 1) fix_checksum(bytes);
    const fuzz::MemFile file(bytes, "experts.nstore");
    try {
        const ExpertStore s = ExpertStore::open(file.path());
        if (std::getenv("NEURAL_FUZZ_DEBUG") != nullptr)
            std::fprintf(stderr, "opened: %s\n", describe_store(s).c_str());
        std::uint8_t scale_buf[4096];
        for (int l = 0; l < s.num_layers(); ++l) {
            for (int e = 0; e < s.num_experts(); ++e) {
                (void)s.record_checksum_ok(l, e);
                try {
                    s.prepare(l, e);
                } catch (const Error&) {
                    continue;  // damaged record: the engine stops here too
                }
                for (Projection p : {Projection::kGateUp, Projection::kDown}) {
                    const ProjectionLayout& pl = s.layout()[p];
                    if (pl.groups > static_cast<std::int64_t>(sizeof scale_buf)) continue;
                    for (std::int64_t r = 0; r < pl.rows; ++r) {
                        const ExpertRow row = s.row(l, p, e, r, scale_buf);
                        g_sink = static_cast<std::uint8_t>(
                            row.blocks[0] ^ row.blocks[pl.groups * 16 - 1] ^ row.scales[0] ^
                            row.scales[pl.groups - 1]);
                    }
                }
            }
        }
    } catch (const Error& e) {
        if (std::getenv("NEURAL_FUZZ_DEBUG") != nullptr) std::fprintf(stderr, "%s\n", e.what());
    }
    return 0;
}
