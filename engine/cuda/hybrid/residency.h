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
// Without a ranking (a fresh install: no --ranking, nothing learned yet) nothing is known to be
// hot: there are no static slots, and every slot starts with a placeholder (the same share of
// every layer) that the first prompt and the first misses replace as if the slot were free.
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
    // Before initial() the static_fraction share (all slots when frozen); initial() without a
    // ranking makes it 0 unless frozen.
    int static_slots() const { return static_slots_; }
    bool frozen() const { return options_.refresh_every == 0; }

    // The initial placement, one admission per slot (victims -1; the placement is already
    // committed). With a ranking [layers][experts] (higher = hotter) static slots take the
    // hottest (layer, expert) pairs, adaptive slots the next ones. Without one (empty): frozen,
    // every slot is static and takes experts in index order; else there are no static slots and
    // every slot takes a placeholder: round-robin over the layers (slot s: layer s % layers, the
    // layer's experts in index order), so each layer gets the same share. A placeholder is an
    // adaptive expert (score 0 at first) that prompt_admissions and admission_for replace as they
    // fill a free slot, refresh rounds as the coldest adaptive expert it is; once the router
    // chose it, only a hotter expert replaces it (see below). It stays one until an admission
    // takes its slot (begin).
    std::vector<Admission> initial(const std::vector<std::vector<double>>& ranking);
    // Scores from a ranking (the learned statistics of earlier conversations, or --ranking), so
    // that the first refresh rounds and the first prompt weigh new routing against what is known
    // instead of against 0: each (layer, expert) starts at the score a conversation that routes
    // like the ranking reaches just after a refresh round, refresh_every * p * decay / (1 - decay),
    // p = choices_per_token * its share of its layer's counts (the chance that a token routes to
    // it). Without the prior, every ranked adaptive expert scores 0 and any expert the first
    // tokens route to once replaces it. The prior decays with the scores (to a tenth after 64
    // decode tokens at the defaults). No-op when frozen or the ranking is empty; shape as initial().
    void prior(const std::vector<std::vector<double>>& ranking, int choices_per_token);

    int slot_of(int layer, int expert) const { return where_[index(layer, expert)]; }
    // The (layer, expert) a slot holds or is loading, as layer * experts + expert; -1 free.
    int owner(int slot) const { return owner_[static_cast<std::size_t>(slot)]; }
    int resident_count() const;
    // Whether the slot holds a placeholder of the initial placement (see initial()).
    bool placeholder(int slot) const { return placeholder_[static_cast<std::size_t>(slot)] != 0; }
    int placeholder_count() const { return placeholders_; }

    // One token's routing at one layer.
    void observe(int layer, std::span<const int> experts, bool prompt);
    // After every decoded token: a refresh round every refresh_every tokens.
    void end_token();

    // The pending admission for (layer, expert), if it is a candidate whose upload has not begun.
    std::optional<Admission> pending(int layer, int expert) const;
    // pending(), or, while an adaptive slot is still free or holds a placeholder nobody has
    // routed to since load (and residency is not frozen), a new admission of the missed expert
    // into it (free slots first, then placeholders, each in slot order; a placeholder is the
    // admission's victim): they fill from the first misses, without waiting for a refresh round,
    // since nothing of value is evicted.
    std::optional<Admission> admission_for(int layer, int expert);
    // After a prompt: admissions from its routing counts ([layers * experts]: how many of the
    // prompt's rows chose each expert). The most-used experts that no slot holds fill the free
    // adaptive slots, then the placeholders (coldest first; a placeholder the conversation has
    // routed to only for an expert of a higher score), at most max_free in all, without the
    // hysteresis test; then up to max_evictions more, by score, replace the coldest adaptive
    // experts that are not placeholders and that they beat by the hysteresis margin (as a refresh
    // round would). The admissions become pending (begin() them); none when frozen.
    std::vector<Admission> prompt_admissions(std::span<const std::uint32_t> counts, int max_free,
                                             int max_evictions);
    // The upload of `a` starts: its victim leaves the table (misses from now on); the slot is no
    // placeholder any more.
    void begin(const Admission& a);
    // The upload landed: (layer, expert) is resident in a.slot.
    void complete(const Admission& a);
    std::size_t pending_count() const { return pending_.size(); }
    double score(int layer, int expert) const { return score_[index(layer, expert)]; }

private:
    // Tests only (residency_test.cpp): empties a slot, a state no placement leaves behind.
    friend struct ResidencyTestAccess;

    std::size_t index(int layer, int expert) const {
        return static_cast<std::size_t>(layer) * static_cast<std::size_t>(experts_) +
               static_cast<std::size_t>(expert);
    }
    void refresh();
    // Throws neural::Error naming what is wrong when a ranking is not [layers][experts] of finite
    // counts >= 0 (initial() and prior() take the same rankings).
    void check_ranking(const std::vector<std::vector<double>>& ranking) const;
    // A slot that holds or loads nothing / a placeholder no routing has chosen since load.
    bool free_slot(int s) const { return owner_[static_cast<std::size_t>(s)] < 0; }
    bool vacant_placeholder(int s) const {
        const auto su = static_cast<std::size_t>(s);
        return placeholder_[su] != 0 && score_[static_cast<std::size_t>(owner_[su])] == 0;
    }
    bool reserved(int s) const;  // a pending admission's slot

    int layers_, experts_, static_slots_;
    ResidencyOptions options_;
    std::vector<double> score_;      // [layers * experts]
    std::vector<int> where_;         // [layers * experts] resident slot or -1
    std::vector<int> owner_;         // [slots] index held or being loaded, or -1
    std::vector<int> held_;          // [layers * experts] slot holding or loading it, or -1
    std::vector<char> loading_;      // [slots] upload in flight
    std::vector<char> placeholder_;  // [slots] holds a placeholder of the initial placement
    int placeholders_ = 0;           // slots marked in placeholder_
    std::vector<Admission> pending_;
    // Adaptive slots below them are known to be taken (by an admission since the last refresh
    // round, which resets them): not free / not an unrouted placeholder.
    int free_hint_ = 0, placeholder_hint_ = 0;
    std::int64_t tokens_ = 0;
};

}  // namespace neural
