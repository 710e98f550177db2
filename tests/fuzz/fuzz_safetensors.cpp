// Fuzz target: the safetensors header parser (SafetensorsFile::open) and the sharded-checkpoint
// index (Checkpoint::open with model.safetensors.index.json).
// Input: byte 0 selects the mode.
//   even: bytes [1, n) are one safetensors file.
//   odd:  bytes [1, 3) = u16 LE length L, then L bytes of model.safetensors.index.json, and the
//         rest is written as both shards "model-00001-of-00002.safetensors" and
//         "model-00002-of-00002.safetensors".
// Every tensor the parser accepts is touched at its first and last byte, so ASan catches a view
// that points outside the file.
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "model/safetensors.h"
#include "neural/error.h"

namespace {

volatile std::uint8_t g_sink;

void touch(const neural::TensorInfo& t) {
    if (t.nbytes() == 0) return;
    g_sink = static_cast<std::uint8_t>(t.data[0] ^ t.data[t.nbytes() - 1]);
    (void)t.numel();
    (void)t.shape_string();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        if ((data[0] & 1) == 0) {
            const neural::fuzz::MemFile file(in, "model.safetensors");
            const auto st = neural::SafetensorsFile::open(file.path());
            for (const auto& [name, t] : st.tensors()) touch(t);
        } else {
            if (in.size() < 2) return 0;
            const std::size_t len =
                static_cast<std::size_t>(static_cast<std::uint8_t>(in[0])) |
                (static_cast<std::size_t>(static_cast<std::uint8_t>(in[1])) << 8);
            const std::string_view rest = in.substr(2);
            const std::string_view index = rest.substr(0, len);
            const std::string_view shard = rest.substr(index.size());
            const neural::fuzz::MemDir dir;
            dir.write("model.safetensors.index.json", index);
            dir.write("model-00001-of-00002.safetensors", shard);
            dir.write("model-00002-of-00002.safetensors", shard);
            const auto ckpt = neural::Checkpoint::open(dir.path());
            for (const auto& f : ckpt.files()) {
                for (const auto& [name, t] : f.tensors()) {
                    if (const neural::TensorInfo* found = ckpt.find(name)) touch(*found);
                }
            }
            (void)ckpt.total_bytes();
        }
    } catch (const neural::Error&) {
        // A clear error is the expected outcome for malformed input.
    }
    return 0;
}
