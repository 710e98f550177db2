// --pin-store (GpuOptions::pin_store, docs/CUDA.md "Pinned store"): the raw store's mapping
// registered with CUDA, so prompts copy staged experts by DMA straight from it.
#include <span>
#include <string>

#include "cuda/driver/gpu.h"
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "backend/autotune.h"
#include "cuda/hybrid/hybrid_backend.h"
#include "platform/system_info.h"
#include "store/store.h"

namespace neural::hybrid {

// --pin-store (GpuOptions::pin_store): registers the raw store's whole mapping with CUDA,
// page-locked and read-only, so a prompt's staged experts are copied by DMA straight from it
// instead of through the staging threads' host memcpy into pinned buffers (docs/CUDA.md
// "Pinned store"). Sets pinned_store_.note for the description either way; a registration that
// fails only warns: the staging threads do the copies then.
void HybridBackend::pin_store() {
    const std::string& mode = opt_.pin_store;
    if (!is_pin_store(mode)) fail("--pin-store \"{}\": expected auto, 0 or 1", mode);
    const auto not_pinned = [&](const std::string& why) {
        pinned_store_.note = "store not pinned: " + why;
    };
    if (mode == "0") return not_pinned("--pin-store 0");
    if (in_.store == nullptr) return not_pinned("no expert store");
    if (!raw_store_) return not_pinned("a packed store (its records are not slot images)");
    if (!prompt_) return not_pinned("prompts run token by token");
    const std::span<const std::uint8_t> map = in_.store->mapping();
    const double gb = static_cast<double>(map.size()) / 1e9;
    if (mode == "auto") {
        // At most half the RAM, and pinned copies materially faster than pageable ones
        // (backend/autotune.h; probe_copies measured both).
        autotune::PinInputs pin;
        pin.store_bytes = map.size();
        pin.ram_bytes = system_memory().total_bytes;
        pin.pinned_gb_s = probes_.pinned_gb_s;
        pin.pageable_gb_s = probes_.pageable_gb_s;
        const autotune::PinChoice c = autotune::choose_pin(pin);
        spdlog::info("{} (--pin-store auto)", c.line);
        if (!c.pin) {
            pinned_store_.note = c.line;
            return;
        }
    }
    const std::string asked = mode == "1" ? " (--pin-store 1 asked for it)" : "";
    // The mapping is read-only: registering it needs the read-only flag, which not every
    // device and driver has.
    int read_only = 0;
    if (cuda::drv::host_register_read_only_supported(opt_.device, &read_only) != CUDA_SUCCESS) {
        cuda::drv::get_last_error();
        read_only = 0;
    }
    if (read_only == 0) {
        spdlog::warn(
            "--pin-store: this GPU or driver cannot register read-only host memory (the store "
            "mapping); prompts stage experts through the staging threads");
        return not_pinned("the device cannot register read-only memory" + asked);
    }
    const auto t0 = Clock::now();
    const CUresult e = cuda::drv::host_register(
        const_cast<std::uint8_t*>(map.data()), map.size(),
        cuda::drv::kHostRegisterReadOnly | cuda::drv::kHostRegisterPortable);
    pinned_store_.seconds = static_cast<double>(ns_since(t0)) / 1e9;
    if (e != CUDA_SUCCESS) {
        cuda::drv::
            get_last_error();  // registration errors are not sticky: clear it for later checks
        spdlog::warn(
            "--pin-store: registering {} ({:.1f} GB) with CUDA failed after {:.2f} s: {}; prompts "
            "stage experts through the staging threads",
            in_.store->path().string(), gb, pinned_store_.seconds, cuda::result_text(e));
        return not_pinned(fmt::format("registration failed: {}{}", cuda::result_text(e), asked));
    }
    pinned_store_.mapping = map.data();
    in_.store->set_pinned(true);
    pinned_store_.note =
        fmt::format("store pinned ({:.1f} GB in {:.2f} s)", gb, pinned_store_.seconds);
}

}  // namespace neural::hybrid
