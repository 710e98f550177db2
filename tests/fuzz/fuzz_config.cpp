// Fuzz target: config.json and generation_config.json loading (ModelConfig::load,
// GenerationConfig::load) on arbitrary bytes. The derived sizes are used the way the engine
// uses them, so a config that passes validation but produces overflowing products shows up
// under UBSan.
#include <cstdint>
#include <string_view>

#include "fuzz_support.h"
#include "model/config.h"
#include "neural/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const neural::fuzz::MemFile file(in, "config.json");
    try {
        const neural::ModelConfig c = neural::ModelConfig::load(file.path());
        volatile int q = c.q_dim();
        volatile int kv = c.kv_dim();
        (void)q;
        (void)kv;
    } catch (const neural::Error&) {
    }
    try {
        (void)neural::GenerationConfig::load(file.path());
    } catch (const neural::Error&) {
    }
    return 0;
}
