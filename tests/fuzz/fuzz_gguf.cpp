// Fuzz target: the GGUF reader (GgufFile::open), the gpt-oss reading on top of it
// (GgufCheckpoint::open: config from the metadata, tensor mapping, expert conversion), the
// tokenizer from its metadata, and split GGUFs (Checkpoint::open on the first of two parts).
// Input: byte 0 selects the mode.
//   even: bytes [1, n) are one GGUF file.
//   odd:  bytes [1, 3) = u16 LE length L, then L bytes of part 1 "m-00001-of-00002.gguf"; the
//         rest is part 2.
// Every tensor the parser accepts is touched at its first and last byte, and every converted
// expert tensor is read at both ends, so ASan catches a view that points outside the file.
#include <algorithm>
#include <cstdint>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "model/gguf.h"
#include "model/safetensors.h"
#include "neural/error.h"
#include "tokenizer/tokenizer.h"

namespace {

volatile std::uint8_t g_sink;

void touch(const std::uint8_t* data, std::uint64_t n) {
    if (n == 0) return;
    g_sink = static_cast<std::uint8_t>(data[0] ^ data[n - 1]);
}

void touch_file(const neural::GgufFile& f) {
    for (const auto& [name, t] : f.tensors()) touch(t.data, t.nbytes);
    for (const auto& [key, v] : f.metadata()) {
        if (v.type != neural::GgufValueType::kArray) continue;
        try {
            if (v.elem_type == neural::GgufValueType::kString) {
                for (std::string_view s : f.get_strings(key)) {
                    touch(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
                }
            } else {
                (void)f.get_ints(key);
            }
        } catch (const neural::Error&) {
        }
    }
}

// A checkpoint-named tensor: mapped bytes, or an expert tensor converted from ggml blocks.
void touch_tensor(const neural::TensorInfo* t) {
    const std::string& name = t->name;
    if (t->ggml == nullptr) {
        touch(t->data, t->nbytes());
        return;
    }
    const bool scales = name.size() > 7 && name.compare(name.size() - 7, 7, "_scales") == 0;
    const std::uint64_t n = std::min<std::uint64_t>(t->nbytes(), 64);
    std::vector<std::uint8_t> buf(n);
    t->ggml->read(scales, 0, n, buf.data());
    t->ggml->read(scales, t->nbytes() - n, n, buf.data());
    touch(buf.data(), n);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
    try {
        if ((data[0] & 1) == 0) {
            const neural::fuzz::MemFile file(in, "model.gguf");
            const neural::GgufFile f = neural::GgufFile::open(file.path());
            touch_file(f);
            try {
                const neural::Tokenizer tok = neural::Tokenizer::load(f);
                (void)tok.encode("Hello <|start|> world", true);
            } catch (const neural::Error&) {
            }
            const auto ck = neural::GgufCheckpoint::open(file.path());
            for (const auto& t : ck->tensors) touch_tensor(t.get());
        } else {
            if (in.size() < 2) return 0;
            const std::size_t len =
                static_cast<std::size_t>(static_cast<std::uint8_t>(in[0])) |
                (static_cast<std::size_t>(static_cast<std::uint8_t>(in[1])) << 8);
            const std::string_view rest = in.substr(2);
            const std::string_view first = rest.substr(0, len);
            const std::string_view second = rest.substr(first.size());
            const neural::fuzz::MemDir dir;
            dir.write("m-00001-of-00002.gguf", first);
            dir.write("m-00002-of-00002.gguf", second);
            const neural::Checkpoint ck =
                neural::Checkpoint::open(dir.path() / "m-00001-of-00002.gguf");
            for (const std::string& name : ck.tensor_names()) touch_tensor(ck.find(name));
        }
    } catch (const neural::Error&) {
        // A clear error is the expected outcome for malformed input.
    }
    return 0;
}
