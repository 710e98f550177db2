#include "cuda/hybrid/residency.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "neural/error.h"

namespace neural {

Residency::Residency(int layers, int experts, int slots, const ResidencyOptions& options)
    : layers_(layers), experts_(experts), options_(options) {
    if (layers <= 0 || experts <= 0 || slots < 0) fail("residency: bad shape");
    const auto n = static_cast<std::size_t>(layers) * static_cast<std::size_t>(experts);
    slots = std::min<int>(slots, static_cast<int>(n));
    // A frozen pool (refresh_every = 0) has no adaptive part: adaptive slots would start empty
    // without a ranking and never fill, so every slot is static (filled at load, ranking order,
    // else index order). An adaptive pool without a ranking has no static slots (initial()).
    const double fraction =
        options.refresh_every == 0 ? 1.0 : std::clamp(options.static_fraction, 0.0, 1.0);
    static_slots_ = static_cast<int>(std::floor(slots * fraction));
    score_.assign(n, 0.0);
    where_.assign(n, -1);
    held_.assign(n, -1);
    owner_.assign(static_cast<std::size_t>(slots), -1);
    loading_.assign(static_cast<std::size_t>(slots), 0);
    placeholder_.assign(static_cast<std::size_t>(slots), 0);
}

std::vector<Residency::Admission> Residency::initial(
    const std::vector<std::vector<double>>& ranking) {
    const std::size_t n = score_.size();
    std::vector<double> hot(n, 0.0);
    if (!ranking.empty()) {
        check_ranking(ranking);
        for (int l = 0; l < layers_; ++l) {
            for (int e = 0; e < experts_; ++e)
                hot[index(l, e)] =
                    ranking[static_cast<std::size_t>(l)][static_cast<std::size_t>(e)];
        }
    }
    std::vector<int> order(n);
    // Without a ranking (a fresh install) nothing is known to be hot: no static slot, and every
    // slot takes a placeholder, round-robin over the layers (so each layer gets the same share,
    // its experts in index order), which the first prompt and the first misses replace as they
    // fill free slots. A frozen pool keeps index order: it never replaces anything.
    const bool placeholders = ranking.empty() && !frozen();
    if (placeholders) {
        static_slots_ = 0;
        const auto L = static_cast<std::size_t>(layers_);
        for (std::size_t s = 0; s < n; ++s)
            order[s] = static_cast<int>((s % L) * static_cast<std::size_t>(experts_) + s / L);
    } else {
        std::iota(order.begin(), order.end(), 0);
        // Hottest first; ties in index order, so the placement is deterministic.
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
            return hot[static_cast<std::size_t>(a)] > hot[static_cast<std::size_t>(b)];
        });
    }
    // Every slot is filled at load. Scores start at 0 (prior() seeds them from the ranking).
    std::vector<Admission> out;
    for (int s = 0; s < slots(); ++s) {
        const int idx = order[static_cast<std::size_t>(s)];
        owner_[static_cast<std::size_t>(s)] = idx;
        where_[static_cast<std::size_t>(idx)] = s;
        held_[static_cast<std::size_t>(idx)] = s;
        if (placeholders) {
            placeholder_[static_cast<std::size_t>(s)] = 1;
            ++placeholders_;
        }
        out.push_back({idx / experts_, idx % experts_, s, -1, -1});
    }
    return out;
}

void Residency::check_ranking(const std::vector<std::vector<double>>& ranking) const {
    if (ranking.size() != static_cast<std::size_t>(layers_)) {
        fail("ranking has {} layers, the model {}", ranking.size(), layers_);
    }
    for (int l = 0; l < layers_; ++l) {
        const auto& row = ranking[static_cast<std::size_t>(l)];
        if (row.size() != static_cast<std::size_t>(experts_)) {
            fail("ranking layer {} has {} experts, the model {}", l, row.size(), experts_);
        }
        for (int e = 0; e < experts_; ++e) {
            const double v = row[static_cast<std::size_t>(e)];
            if (!std::isfinite(v) || v < 0)
                fail("ranking layer {} expert {}: bad count {}", l, e, v);
        }
    }
}

void Residency::prior(const std::vector<std::vector<double>>& ranking, int choices_per_token) {
    if (ranking.empty() || frozen()) return;
    check_ranking(ranking);
    if (choices_per_token <= 0)
        fail("residency: a prior of {} choices per token", choices_per_token);
    // The steady state of s = s * decay + refresh_every * p, taken after the round's decay.
    const double d = std::clamp(options_.decay, 0.0, 0.99);
    const double steady = options_.refresh_every * d / (1.0 - d);
    for (int l = 0; l < layers_; ++l) {
        const auto& row = ranking[static_cast<std::size_t>(l)];
        double sum = 0;
        for (const double v : row) sum += v;
        if (sum <= 0) continue;
        for (int e = 0; e < experts_; ++e) {
            const double p = choices_per_token * row[static_cast<std::size_t>(e)] / sum;
            score_[index(l, e)] = steady * p;
        }
    }
}

bool Residency::reserved(int s) const {
    return std::any_of(pending_.begin(), pending_.end(),
                       [&](const Admission& p) { return p.slot == s; });
}

int Residency::resident_count() const {
    return static_cast<int>(
        std::count_if(where_.begin(), where_.end(), [](int s) { return s >= 0; }));
}

void Residency::observe(int layer, std::span<const int> experts, bool prompt) {
    const double w = prompt ? options_.prefill_weight : 1.0;
    for (int e : experts) score_[index(layer, e)] += w;
}

void Residency::end_token() {
    if (frozen()) return;
    if (++tokens_ % options_.refresh_every == 0) refresh();
}

void Residency::refresh() {
    // Candidates not started since the last round are re-planned from the new scores; slots they
    // had reserved may be free again.
    pending_.clear();
    free_hint_ = placeholder_hint_ = 0;
    std::vector<int> victims;  // adaptive slots, coldest first; free slots before all others
    for (int s = static_slots_; s < slots(); ++s) {
        if (!loading_[static_cast<std::size_t>(s)]) victims.push_back(s);
    }
    auto slot_score = [&](int s) {
        const int o = owner_[static_cast<std::size_t>(s)];
        return o < 0 ? -1.0 : score_[static_cast<std::size_t>(o)];
    };
    std::stable_sort(victims.begin(), victims.end(),
                     [&](int a, int b) { return slot_score(a) < slot_score(b); });
    std::vector<int> cands;
    for (std::size_t i = 0; i < score_.size(); ++i) {
        if (held_[i] < 0 && score_[i] > 0) {
            cands.push_back(static_cast<int>(i));
        }
    }
    std::stable_sort(cands.begin(), cands.end(), [&](int a, int b) {
        return score_[static_cast<std::size_t>(a)] > score_[static_cast<std::size_t>(b)];
    });
    const std::size_t m =
        std::min({static_cast<std::size_t>(options_.refresh_m), cands.size(), victims.size()});
    for (std::size_t i = 0; i < m; ++i) {
        const int c = cands[i], v = victims[i];
        const double vs = slot_score(v);
        if (vs >= 0 && score_[static_cast<std::size_t>(c)] <= vs * options_.hysteresis) break;
        const int o = owner_[static_cast<std::size_t>(v)];
        pending_.push_back(
            {c / experts_, c % experts_, v, o < 0 ? -1 : o / experts_, o < 0 ? -1 : o % experts_});
    }
    for (double& s : score_) s *= options_.decay;
}

std::optional<Residency::Admission> Residency::pending(int layer, int expert) const {
    for (const Admission& a : pending_) {
        if (a.layer == layer && a.expert == expert) return a;
    }
    return std::nullopt;
}

std::optional<Residency::Admission> Residency::admission_for(int layer, int expert) {
    if (auto a = pending(layer, expert)) return a;
    if (frozen() || where_[index(layer, expert)] >= 0) return std::nullopt;
    const int idx = static_cast<int>(index(layer, expert));
    if (held_[static_cast<std::size_t>(idx)] >= 0) return std::nullopt;  // being loaded
    for (int s = std::max(free_hint_, static_slots_); s < slots(); ++s) {
        if (free_slot(s) && !reserved(s)) {
            free_hint_ = s;
            pending_.push_back({layer, expert, s, -1, -1});
            return pending_.back();
        }
    }
    free_hint_ = slots();
    // Then a placeholder no routing has chosen since load (one that was routed to is kept: it
    // may be hot; a refresh round or a prompt replaces it if it is not). It is the victim.
    if (placeholders_ > 0) {
        for (int s = std::max(placeholder_hint_, static_slots_); s < slots(); ++s) {
            if (vacant_placeholder(s) && !reserved(s)) {
                placeholder_hint_ = s;
                const int o = owner_[static_cast<std::size_t>(s)];
                pending_.push_back({layer, expert, s, o / experts_, o % experts_});
                return pending_.back();
            }
        }
        placeholder_hint_ = slots();
    }
    return std::nullopt;
}

std::vector<Residency::Admission> Residency::prompt_admissions(
    std::span<const std::uint32_t> counts, int max_free, int max_evictions) {
    std::vector<Admission> out;
    if (frozen()) return out;
    if (counts.size() != score_.size())
        fail("residency: {} prompt counts for {} experts", counts.size(), score_.size());
    const auto is_pending = [&](int idx) {
        return std::any_of(pending_.begin(), pending_.end(), [&](const Admission& p) {
            return static_cast<int>(index(p.layer, p.expert)) == idx;
        });
    };
    std::vector<int> cands;
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (counts[i] > 0 && held_[i] < 0 && !is_pending(static_cast<int>(i)))
            cands.push_back(static_cast<int>(i));
    }
    // Most-used first; ties in index order, so the batch is deterministic.
    std::stable_sort(cands.begin(), cands.end(), [&](int a, int b) {
        return counts[static_cast<std::size_t>(a)] > counts[static_cast<std::size_t>(b)];
    });
    std::size_t next = 0;
    std::vector<int> victims, holders;  // adaptive experts; placeholders
    for (int s = static_slots_; s < slots(); ++s) {
        const auto su = static_cast<std::size_t>(s);
        if (loading_[su] || reserved(s)) continue;
        if (placeholder_[su]) {
            holders.push_back(s);
        } else if (owner_[su] >= 0) {
            victims.push_back(s);
        } else if (next < cands.size() && static_cast<int>(out.size()) < max_free) {
            const int c = cands[next++];
            out.push_back({c / experts_, c % experts_, s, -1, -1});
        }
    }
    // Placeholders count as free slots: the next most-used experts take them, coldest first
    // (the ones no routing chose since load, in slot order), without the hysteresis test; one the
    // conversation has routed to goes only to an expert that scores higher.
    const auto owner_score = [&](int s) {
        return score_[static_cast<std::size_t>(owner_[static_cast<std::size_t>(s)])];
    };
    std::stable_sort(holders.begin(), holders.end(),
                     [&](int a, int b) { return owner_score(a) < owner_score(b); });
    for (const int s : holders) {
        if (next >= cands.size() || static_cast<int>(out.size()) >= max_free) break;
        const int c = cands[next];
        const double held = owner_score(s);
        if (held > 0 && score_[static_cast<std::size_t>(c)] <= held) break;
        ++next;
        const int o = owner_[static_cast<std::size_t>(s)];
        out.push_back({c / experts_, c % experts_, s, o / experts_, o % experts_});
    }
    // The rest replace colder adaptive experts: candidates by score (the prompt's routing is in
    // it), victims coldest first.
    std::vector<int> rest(cands.begin() + static_cast<std::ptrdiff_t>(next), cands.end());
    std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) {
        return score_[static_cast<std::size_t>(a)] > score_[static_cast<std::size_t>(b)];
    });
    std::stable_sort(victims.begin(), victims.end(), [&](int a, int b) {
        return score_[static_cast<std::size_t>(owner_[static_cast<std::size_t>(a)])] <
               score_[static_cast<std::size_t>(owner_[static_cast<std::size_t>(b)])];
    });
    const std::size_t m = std::min(
        {static_cast<std::size_t>(std::max(max_evictions, 0)), rest.size(), victims.size()});
    for (std::size_t i = 0; i < m; ++i) {
        const int c = rest[i], v = victims[i];
        const int o = owner_[static_cast<std::size_t>(v)];
        if (score_[static_cast<std::size_t>(c)] <=
            score_[static_cast<std::size_t>(o)] * options_.hysteresis)
            break;
        out.push_back({c / experts_, c % experts_, v, o / experts_, o % experts_});
    }
    pending_.insert(pending_.end(), out.begin(), out.end());
    return out;
}

void Residency::begin(const Admission& a) {
    auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Admission& p) {
        return p.layer == a.layer && p.expert == a.expert;
    });
    if (it == pending_.end()) fail("residency: begin() of an admission that is not pending");
    pending_.erase(it);
    const auto s = static_cast<std::size_t>(a.slot);
    if (placeholder_[s]) {
        placeholder_[s] = 0;
        --placeholders_;
    }
    if (owner_[s] >= 0) {
        where_[static_cast<std::size_t>(owner_[s])] = -1;
        held_[static_cast<std::size_t>(owner_[s])] = -1;
    }
    owner_[s] = static_cast<int>(index(a.layer, a.expert));
    held_[index(a.layer, a.expert)] = a.slot;
    loading_[s] = 1;
}

void Residency::complete(const Admission& a) {
    const auto s = static_cast<std::size_t>(a.slot);
    loading_[s] = 0;
    where_[index(a.layer, a.expert)] = a.slot;
}

}  // namespace neural
