// The first read of an expert-store record checks it (ExpertStore::verify_record: the XXH3-64 of
// its whole payload, which on a mapped store also faults its pages in). Done on the calling
// thread, one record after another, that check is what a model's first answer after load waits
// for: a 512-token prompt reads all 768 records (12 GB) of gpt-oss-20b. verify_records() checks
// a call's not yet verified records on the worker team instead, one record per task, before
// the kernel job that reads them (docs/STORE_FORMAT.md "Reading and integrity").
#pragma once

#include <span>

#include "cpu/team/worker_team.h"
#include "store/store.h"

namespace neural::cpu {

// Checks the records of `experts` (indices into `layer`, duplicates allowed) that are not
// verified yet, in parallel on `team`. Never throws for a damaged record: it stays unverified,
// so the caller's own verify_record() (ExpertStore::prepare, before it reads the record) throws
// the error naming it, as it would without this call. Does nothing (no team job) when every
// record is verified already, which is the case after a model's first few calls.
void verify_records(const store::ExpertStore& store, int layer, std::span<const int> experts,
                    WorkerTeam& team);

}  // namespace neural::cpu
