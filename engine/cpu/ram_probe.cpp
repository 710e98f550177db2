#include "cpu/ram_probe.h"

#include <algorithm>
#include <chrono>

namespace neural::bench {

struct ReadProbe::Ctx {
    const std::uint64_t* words = nullptr;
    std::int64_t n_words = 0;
    std::int64_t words_per_task = (1 << 20) / 8;  // 1 MiB per task
    std::uint64_t sums[256 * 8] = {};             // per worker, 64 bytes apart
};

namespace {

void probe_task(void* c, std::int64_t task, std::int32_t worker) {
    auto& x = *static_cast<ReadProbe::Ctx*>(c);
    const std::int64_t b = task * x.words_per_task;
    const std::int64_t e = std::min(b + x.words_per_task, x.n_words);
    std::uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (std::int64_t i = b; i + 4 <= e; i += 4) {
        a0 += x.words[i];
        a1 += x.words[i + 1];
        a2 += x.words[i + 2];
        a3 += x.words[i + 3];
    }
    x.sums[static_cast<std::size_t>(worker % 256) * 8] += a0 + a1 + a2 + a3;
}

}  // namespace

ReadProbe::ReadProbe(std::size_t bytes) : words_(bytes / 32 * 4), ctx_(std::make_unique<Ctx>()) {
    std::uint64_t s = 0x9E3779B97F4A7C15ull;
    for (auto& w : words_) {  // xorshift64: cheap, and never all-equal pages
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        w = s;
    }
    ctx_->words = words_.data();
    ctx_->n_words = static_cast<std::int64_t>(words_.size());
}

ReadProbe::~ReadProbe() = default;

void ReadProbe::run(cpu::WorkerTeam& team) {
    const cpu::TeamPhase phase{(ctx_->n_words + ctx_->words_per_task - 1) / ctx_->words_per_task,
                               &probe_task, ctx_.get()};
    team.run(phase);
}

std::uint64_t ReadProbe::checksum() const {
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < 256; ++i) s += ctx_->sums[i * 8];
    return s;
}

ReadBandwidth measure_read_bandwidth(cpu::WorkerTeam& team, std::size_t bytes, int passes) {
    ReadProbe probe(bytes);
    return measure_read_bandwidth(team, probe, passes);
}

ReadBandwidth measure_read_bandwidth(cpu::WorkerTeam& team, ReadProbe& probe, int passes) {
    probe.run(team);  // warm: TLB, team start-up
    double best = 0;
    for (int p = 0; p < std::max(1, passes); ++p) {
        const auto t0 = std::chrono::steady_clock::now();
        probe.run(team);
        const double s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s > 0) best = std::max(best, static_cast<double>(probe.bytes()) / s / 1e9);
    }
    volatile std::uint64_t sink = probe.checksum();  // keep the reads
    (void)sink;
    return {best, team.size(), probe.bytes(), std::max(1, passes)};
}

std::vector<ThreadBandwidth> read_bandwidth_by_threads(const std::vector<int>& threads,
                                                       std::size_t bytes, int passes) {
    ReadProbe probe(bytes);
    std::vector<ThreadBandwidth> out;
    for (const int t : threads) {
        cpu::ReferenceTeam team(t);
        const ReadBandwidth b = measure_read_bandwidth(team, probe, passes);
        out.push_back({team.size(), b.gb_per_s});
    }
    return out;
}

}  // namespace neural::bench
