#include "telemetry/telemetry.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/model.h"
#include "runtime/session.h"
#include "support/fixtures.h"

namespace neural::telemetry {
namespace {

// Every field derived from the index: a torn record (words of two different records) shows.
TokenRecord make(std::uint64_t i) {
    TokenRecord r;
    r.request = i;
    r.index = i * 3 + 1;
    r.wall_ns = i * 7 + 2;
    r.cpu_kernel_ns = i * 11 + 3;
    r.gpu_wait_ns = i ^ 0x5555;
    r.graph_submit_ns = i * 13;
    r.admission_ns = i + 17;
    r.sampling_ns = i * 43 + 5;
    r.other_ns = ~i;
    r.experts_hit = i * 19;
    r.experts_missed = i * 23;
    r.admissions = i * 29;
    r.cpu_bytes = i * 31;
    r.page_faults = i * 37;
    r.major_page_faults = i * 41;
    return r;
}

bool consistent(const TokenRecord& r, std::uint64_t i) {
    const TokenRecord w = make(i);
    return r.request == w.request && r.index == w.index && r.wall_ns == w.wall_ns &&
           r.cpu_kernel_ns == w.cpu_kernel_ns && r.gpu_wait_ns == w.gpu_wait_ns &&
           r.graph_submit_ns == w.graph_submit_ns && r.admission_ns == w.admission_ns &&
           r.sampling_ns == w.sampling_ns && r.other_ns == w.other_ns &&
           r.experts_hit == w.experts_hit && r.experts_missed == w.experts_missed &&
           r.admissions == w.admissions && r.cpu_bytes == w.cpu_bytes &&
           r.page_faults == w.page_faults && r.major_page_faults == w.major_page_faults;
}

TEST(TelemetryRing, ReadsBackInOrderAndDropsOverwritten) {
    Ring<TokenRecord> ring(8);
    EXPECT_EQ(ring.capacity(), 8u);
    EXPECT_FALSE(ring.read(0).has_value());
    for (std::uint64_t i = 0; i < 20; ++i) ring.push(make(i));
    EXPECT_EQ(ring.published(), 20u);
    EXPECT_FALSE(ring.read(11).has_value());  // overwritten by 19
    ASSERT_TRUE(ring.read(12).has_value());
    EXPECT_TRUE(consistent(*ring.read(12), 12));
    EXPECT_FALSE(ring.read(20).has_value());  // not written yet
    std::uint64_t next = 0;
    const auto all = ring.since(0, &next);
    ASSERT_EQ(all.size(), 8u);
    for (std::size_t k = 0; k < all.size(); ++k) EXPECT_TRUE(consistent(all[k], 12 + k));
    EXPECT_EQ(next, 20u);
    EXPECT_TRUE(ring.since(next).empty());
}

TEST(TelemetryRing, ConcurrentReadersNeverSeeTornRecords) {
    Ring<TokenRecord> ring(16);  // small: the writer laps the readers constantly
    constexpr std::uint64_t kRecords = 300000;
    std::atomic<bool> done{false};
    std::atomic<std::uint64_t> torn{0}, good{0};
    auto reader = [&] {
        while (!done.load()) {
            const std::uint64_t end = ring.published();
            for (std::uint64_t i = end > 16 ? end - 16 : 0; i < end; ++i) {
                if (auto r = ring.read(i)) {
                    if (consistent(*r, i)) {
                        good.fetch_add(1, std::memory_order_relaxed);
                    } else {
                        torn.fetch_add(1, std::memory_order_relaxed);
                    }
                }
            }
        }
    };
    std::thread r1(reader), r2(reader);
    // On shared cores the readers may start late: keep writing until they have read something.
    std::uint64_t pushed = 0;
    while (pushed < kRecords || (good.load() < 100 && pushed < 100 * kRecords)) {
        ring.push(make(pushed++));
    }
    done.store(true);
    r1.join();
    r2.join();
    EXPECT_EQ(torn.load(), 0u);
    EXPECT_GT(good.load(), 0u);
    for (const auto& r : ring.since(0)) EXPECT_GE(r.request, pushed - 16);
}

TEST(TelemetryFaults, CountersAreMonotonicAndMajorIsAPartOfTheTotal) {
    const FaultCounts a = fault_counts();
    EXPECT_LE(a.major, a.total);
    std::vector<std::uint8_t> fresh(16u << 20);  // new anonymous pages: soft faults
    for (std::size_t i = 0; i < fresh.size(); i += 4096) fresh[i] = 1;
    const FaultCounts b = fault_counts();
    if (b.total == 0) GTEST_SKIP() << "this OS counts no page faults (Wine: PageFaultCount is 0)";
    EXPECT_GT(b.total, a.total);
    EXPECT_GE(b.major, a.major);
    EXPECT_LE(b.major, b.total);
}

TEST(TelemetryFaults, MajorFaultsPerTokenIsTheMean) {
    EXPECT_EQ(major_faults_per_token({}), 0.0);
    std::vector<TokenRecord> records(4);
    records[0].major_page_faults = 10;
    records[1].major_page_faults = 0;
    records[2].major_page_faults = 5;
    records[3].major_page_faults = 1;
    EXPECT_DOUBLE_EQ(major_faults_per_token(records), 4.0);
}

TEST(TelemetryRam, CountersStartOff) {
    Telemetry t;
    EXPECT_EQ(t.ram.warmup_state.load(), RamCounters::kOff);
    EXPECT_EQ(t.ram.warmup_records.load(), 0u);
    EXPECT_EQ(t.ram.released_bytes.load(), 0u);
    EXPECT_EQ(t.ram.locked_bytes.load(), 0u);
}

TEST(TelemetryPhases, OtherIsWallMinusTheNamedPhases) {
    TokenRecord r;
    r.wall_ns = 1000;
    r.cpu_kernel_ns = 600;
    r.gpu_wait_ns = 100;
    r.graph_submit_ns = 50;
    r.admission_ns = 25;
    r.sampling_ns = 20;
    finish_phases(r);
    EXPECT_EQ(r.other_ns, 205u);
    r.wall_ns = 10;  // a coarse clock: the named phases never exceed the wall
    finish_phases(r);
    EXPECT_EQ(r.wall_ns, 795u);
    EXPECT_EQ(r.other_ns, 0u);
}

class SessionTelemetry : public ::testing::Test {
protected:
    static void SetUpTestSuite() { model_ = Model::load(test::tiny_model_dir()).release(); }
    static void TearDownTestSuite() {
        delete model_;
        model_ = nullptr;
    }
    static TurnResult turn(const std::string& text, int max_tokens) {
        ChatSession s(*model_);
        s.system().conversation_start_date = "2026-01-01";
        s.add_user(text);
        TurnOptions o;
        o.max_tokens = max_tokens;
        o.sampling.temperature = 0;
        return s.respond(o);
    }
    static Model* model_;
};
Model* SessionTelemetry::model_ = nullptr;

TEST_F(SessionTelemetry, RecordsEveryDecodeTokenAndTheRequest) {
    Telemetry& tel = model_->telemetry();
    tel.set_enabled(true);
    const std::uint64_t tokens0 = tel.tokens().published(), requests0 = tel.requests().published();
    const TurnResult r = turn("Count to ten.", 12);
    ASSERT_GT(r.stats.generated_tokens, 1);
    // The first token comes from the prompt pass; every later one has a record.
    const auto tokens = tel.tokens().since(tokens0);
    ASSERT_EQ(static_cast<std::int64_t>(tokens.size()), r.stats.generated_tokens - 1);
    const ModelConfig& c = model_->config();
    const std::uint64_t per_expert =
        static_cast<std::uint64_t>(3 * c.hidden_size * c.intermediate_size / 32 * 17);
    std::uint64_t wall = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        const TokenRecord& t = tokens[i];
        EXPECT_EQ(t.index, i + 2);
        EXPECT_EQ(t.cpu_kernel_ns + t.gpu_wait_ns + t.graph_submit_ns + t.admission_ns +
                      t.sampling_ns + t.other_ns,
                  t.wall_ns);
        EXPECT_GT(t.sampling_ns, 0u);  // the sampler ran (and was timed) for every token
        EXPECT_GT(t.cpu_kernel_ns, 0u);
        // One token: experts_per_token distinct experts per layer, all computed on the CPU.
        const auto experts = static_cast<std::uint64_t>(c.num_layers * c.experts_per_token);
        EXPECT_EQ(t.experts_missed, experts);
        EXPECT_EQ(t.experts_hit, 0u);
        EXPECT_EQ(t.admissions, 0u);
        EXPECT_EQ(t.cpu_bytes, experts * per_expert);
        wall += t.wall_ns;
    }
    EXPECT_LE(static_cast<double>(wall) / 1e9, r.stats.decode_seconds + 1e-3);
    const auto requests = tel.requests().since(requests0);
    ASSERT_EQ(requests.size(), 1u);
    const RequestRecord& q = requests[0];
    EXPECT_EQ(tokens.front().request, q.id);
    EXPECT_EQ(q.prompt_tokens, r.stats.prompt_tokens);
    EXPECT_EQ(q.cached_tokens, r.stats.cached_tokens);
    EXPECT_EQ(q.decode_tokens, r.stats.generated_tokens);
    EXPECT_DOUBLE_EQ(q.prompt_seconds, r.stats.prompt_seconds);
    EXPECT_DOUBLE_EQ(q.ttft_seconds, r.stats.first_token_seconds);
    EXPECT_DOUBLE_EQ(q.decode_seconds, r.stats.decode_seconds);
    EXPECT_GT(q.prompt_cpu_kernel_ns, 0u);
    EXPECT_GT(q.prompt_cpu_bytes, 0u);
    EXPECT_FALSE(q.cancelled);
}

TEST_F(SessionTelemetry, DisabledRecordsNothingAndChangesNoResult) {
    Telemetry& tel = model_->telemetry();
    tel.set_enabled(true);
    const TurnResult on = turn("Name three colors.", 10);
    tel.set_enabled(false);
    const std::uint64_t tokens0 = tel.tokens().published(), requests0 = tel.requests().published();
    const TurnResult off = turn("Name three colors.", 10);
    tel.set_enabled(true);
    EXPECT_EQ(tel.tokens().published(), tokens0);
    EXPECT_EQ(tel.requests().published(), requests0);
    EXPECT_EQ(on.content, off.content);
    EXPECT_EQ(on.reasoning, off.reasoning);
    EXPECT_EQ(on.stats.generated_tokens, off.stats.generated_tokens);
}

}  // namespace
}  // namespace neural::telemetry
