#include "cpu/record_checks.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace neural::cpu {

void verify_records(const store::ExpertStore& store, int layer, std::span<const int> experts,
                    WorkerTeam& team) {
    // The common case first: one atomic load per choice, no allocation.
    const auto unverified = [&](int e) {
        return e >= 0 && e < store.num_experts() && !store.record_verified(layer, e);
    };
    if (std::none_of(experts.begin(), experts.end(), unverified)) return;
    std::vector<int> todo;
    for (const int e : experts) {
        if (unverified(e) && std::find(todo.begin(), todo.end(), e) == todo.end()) {
            todo.push_back(e);
        }
    }
    struct Ctx {
        const store::ExpertStore* store;
        int layer;
        const int* experts;
    } ctx{&store, layer, todo.data()};
    TeamPhase phase;
    phase.n_tasks = static_cast<std::int64_t>(todo.size());
    phase.ctx = &ctx;
    phase.fn = [](void* p, std::int64_t task, std::int32_t) {
        const auto& c = *static_cast<const Ctx*>(p);
        try {
            c.store->verify_record(c.layer, c.experts[task]);
        } catch (...) {  // a team task must not throw; the caller's verify_record reports it
        }
    };
    team.run(phase);
}

}  // namespace neural::cpu
