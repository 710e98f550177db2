// Expert store files damaged on purpose (docs/STORE_FORMAT.md "Reading and integrity"): a record
// zeroed, two records swapped. The header, metadata and index stay intact, so the store opens;
// only the records' checksums tell.
#pragma once

#include <filesystem>

namespace neural::test {

// Overwrites the payload of record (layer, expert) with zero bytes.
void zero_store_record(const std::filesystem::path& store, int layer, int expert);
// Swaps the payloads of records (layer_a, expert_a) and (layer_b, expert_b), which must have the
// same size (any two of a raw store).
void swap_store_records(const std::filesystem::path& store, int layer_a, int expert_a, int layer_b,
                        int expert_b);

}  // namespace neural::test
