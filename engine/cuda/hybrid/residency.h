// Which expert each VRAM slot of the hybrid backend holds, and which to admit next: the policy
// of docs/CUDA.md "Residency" with no CUDA in it, so it is unit-tested on any machine. The CUDA
// backend executes what it decides (uploads into slots, slot-table flips).
//
// Static slots are filled once from a warm-up ranking (hot first) and never evicted. Adaptive
// slots follow the conversation: every routing adds to its (layer, expert) score (decode tokens
// weigh 1, prompt tokens prefill_weight); every refresh_every decode tokens the scores decay and
// up to refresh_m missed experts whose score beats the coldest adaptive slot's (by a hysteresis
// margin) become pending admissions. A pending admission is carried out copy-on-compute: the
// next time the CPU computes that expert it captures the bytes, the victim leaves the table
// (begin), the copy lands in the victim's slot, and the table flips (complete).
// refresh_every = 0 freezes residency after the initial placement; then every slot is static
// (static_fraction is ignored: a frozen pool has no adaptive part).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace neural {

struct ResidencyOptions {
    double static_fraction = 0.5;
    int refresh_every = 8;
    int refresh_m = 4;
    double prefill_weight = 0.25;
    double decay = 0.75;       // scores *= decay after every refresh round
    double hysteresis = 1.25;  // a candidate must score this many times the victim's score
};

class Residency {
public:
    struct Admission {
        int layer = -1, expert = -1, slot = -1;
        int victim_layer = -1, victim_expert = -1;  // -1: the slot was free
    };

    Residency(int layers, int experts, int slots, const ResidencyOptions& options);

    int layers() const { return layers_; }
    int experts() const { return experts_; }
    int slots() const { return static_cast<int>(owner_.size()); }
    int static_slots() const { return static_slots_; }
    bool frozen() const { return options_.refresh_every == 0; }

    // The initial placement: ranking [layers][experts] (higher = hotter; empty = index order).
    // Static slots take the hottest (layer, expert) pairs, adaptive slots the next ones. Returns
    // one admission per filled slot (victims -1); the placement is already committed.
    std::vector<Admission> initial(const std::vector<std::vector<double>>& ranking);

    int slot_of(int layer, int expert) const { return where_[index(layer, expert)]; }
    // The (layer, expert) a slot holds or is loading, as layer * experts + expert; -1 free.
    int owner(int slot) const { return owner_[static_cast<std::size_t>(slot)]; }
    int resident_count() const;

    // One token's routing at one layer.
    void observe(int layer, std::span<const int> experts, bool prompt);
    // After every decoded token: a refresh round every refresh_every tokens.
    void end_token();

    // The pending admission for (layer, expert), if it is a candidate whose upload has not begun.
    std::optional<Admission> pending(int layer, int expert) const;
    // pending(), or, while an adaptive slot is still free (and residency is not frozen), a new
    // admission of the missed expert into it: free slots fill from the first misses, without
    // waiting for a refresh round, since nothing is evicted.
    std::optional<Admission> admission_for(int layer, int expert);
    // After a prompt: admissions from its routing counts ([layers * experts]: how many of the
    // prompt's rows chose each expert). The most-used experts that no slot holds fill the free
    // adaptive slots (at most max_free), then up to max_evictions more, by score, replace the
    // coldest adaptive experts they beat by the hysteresis margin (as a refresh round would).
    // The admissions become pending (begin() them); none when frozen.
    std::vector<Admission> prompt_admissions(std::span<const std::uint32_t> counts, int max_free,
                                             int max_evictions);
    // The upload of `a` starts: its victim leaves the table (misses from now on).
    void begin(const Admission& a);
    // The upload landed: (layer, expert) is resident in a.slot.
    void complete(const Admission& a);
    std::size_t pending_count() const { return pending_.size(); }
    double score(int layer, int expert) const { return score_[index(layer, expert)]; }

private:
    std::size_t index(int layer, int expert) const {
        return static_cast<std::size_t>(layer) * static_cast<std::size_t>(experts_) +
               static_cast<std::size_t>(expert);
    }
    void refresh();

    int layers_, experts_, static_slots_;
    ResidencyOptions options_;
    std::vector<double> score_;  // [layers * experts]
    std::vector<int> where_;     // [layers * experts] resident slot or -1
    std::vector<int> owner_;     // [slots] index held or being loaded, or -1
    std::vector<int> held_;      // [layers * experts] slot holding or loading it, or -1
    std::vector<char> loading_;  // [slots] upload in flight
    std::vector<Admission> pending_;
    int free_hint_ = 0;  // adaptive slots below it are known to be taken
    std::int64_t tokens_ = 0;
};

}  // namespace neural
