// Stores of the tiny fixture: bit-identical logits from raw and packed stores, escapes, verify,
// and every kind of bad store file (damaged record, truncation, future version, unknown or wrong
// kind, damaged header, foreign file, a store of another model or checkpoint).
#include <atomic>
#ifndef _WIN32
#include <sys/stat.h>
#endif
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cpu/reference_model.h"
#include "model/safetensors.h"
#include "runtime/model.h"
#include "store/format.h"
#include "cpu/kernels/expert_kernel.h"
#include "cpu/record_checks.h"
#include "cpu/team/worker_team.h"
#include "store/repack.h"
#include "store/store.h"
#include "store/store_support.h"
#include "runtime/session.h"
#include "store/verify.h"
#include "support/damaged_store.h"
#include "support/fixtures.h"

namespace neural::store {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using ::testing::HasSubstr;

fs::path make_store(const fs::path& checkpoint, const fs::path& out, StoreKind kind) {
    RepackOptions o;
    o.checkpoint = checkpoint;
    o.out = out;
    o.kind = kind;
    o.threads = 2;
    repack(o);
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class FixtureStore : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        tmp_ = new test::TempDir();
        wide_dir_ = *tmp_ / "wide";
        test::copy_fixture_with_wide_scales(wide_dir_);
        raw_ = make_store(test::tiny_model_dir(), *tmp_ / "raw.nstore", StoreKind::kRaw);
        packed_ = make_store(test::tiny_model_dir(), *tmp_ / "packed.nstore", StoreKind::kPacked);
        wide_raw_ = make_store(wide_dir_, *tmp_ / "wide-raw.nstore", StoreKind::kRaw);
        wide_packed_ = make_store(wide_dir_, *tmp_ / "wide-packed.nstore", StoreKind::kPacked);
    }
    static void TearDownTestSuite() { delete tmp_; }

    // A copy of `store` in this test's own folder, for surgery.
    fs::path copy_of(const fs::path& store) {
        const fs::path p = own_ / store.filename().string();
        fs::copy_file(store, p);
        return p;
    }

    static test::TempDir* tmp_;
    static fs::path wide_dir_, raw_, packed_, wide_raw_, wide_packed_;
    test::TempDir own_;
};
test::TempDir* FixtureStore::tmp_ = nullptr;
fs::path FixtureStore::wide_dir_, FixtureStore::raw_, FixtureStore::packed_,
    FixtureStore::wide_raw_, FixtureStore::wide_packed_;

TEST_F(FixtureStore, RawAndPackedGiveBitIdenticalLogits) {
    const auto ref = test::golden_logits(*Model::load(test::tiny_model_dir()));
    for (const fs::path& s : {raw_, packed_}) {
        SCOPED_TRACE(s.filename().string());
        auto m = Model::load(test::tiny_model_dir(), LoadOptions{.store = s});
        ASSERT_NE(m->store(), nullptr);
        EXPECT_TRUE(same_bits(test::golden_logits(*m), ref));
    }
    EXPECT_EQ(ExpertStore::open(raw_).kind(), StoreKind::kRaw);
    EXPECT_EQ(ExpertStore::open(packed_).kind(), StoreKind::kPacked);
}

// The fused kernels (cpu/store_moe.h) from a store. The scalar kernel reproduces the reference
// path bit for bit; every kernel gives identical bits for raw and packed records and for the
// OpenMP and the persistent team.
std::vector<std::string> runnable_kernels() {
    std::vector<std::string> kernels = {"scalar"};
    if (cpu::kernel_isa_available(cpu::KernelIsa::avx2)) kernels.push_back("avx2");
    if (cpu::kernel_isa_available(cpu::KernelIsa::avx512)) kernels.push_back("avx512");
    return kernels;
}

// The expert kernels beside the reference dense layers (dense = "reference"), prompts on the
// fused fp32 kernels too (prompt_kernel = "fp32"), so the scalar kernel can be compared with the
// reference path bit for bit.
std::vector<float> kernel_logits(const fs::path& store, const std::string& kernel,
                                 bool persistent) {
    LoadOptions o{.store = store,
                  .kernel = kernel,
                  .dense = "reference",
                  .prompt_kernel = "fp32",
                  .kernel_persistent = persistent,
                  .kdll = NEURAL_KDLL_TEST_PATH,
                  .threads = 3};
    auto m = Model::load(test::tiny_model_dir(), o);
    EXPECT_NE(m->cpu().store_moe(), nullptr);
    EXPECT_STREQ(m->cpu().store_moe()->team().name(), persistent ? "persistent" : "reference");
    return test::golden_logits(*m);
}

TEST_F(FixtureStore, FusedKernelPathMatchesTheReference) {
    const auto ref = test::golden_logits(
        *Model::load(test::tiny_model_dir(), LoadOptions{.kernel = "reference"}));
    for (const std::string& kernel : runnable_kernels()) {
        SCOPED_TRACE(kernel);
        const auto raw = kernel_logits(raw_, kernel, false);
        const auto packed = kernel_logits(packed_, kernel, false);
        ASSERT_EQ(raw.size(), ref.size());
        EXPECT_TRUE(same_bits(raw, packed));
        if (kernel == "scalar") {
            EXPECT_TRUE(same_bits(raw, ref));
        } else {
            float worst = 0;
            for (std::size_t i = 0; i < ref.size(); ++i)
                worst = std::max(worst, std::abs(raw[i] - ref[i]));
            EXPECT_LT(worst, 1e-4f);
        }
    }
}

// Both teams in one process, in both orders (a model on one team after a model on the other).
TEST_F(FixtureStore, PersistentTeamGivesTheSameBitsAsOpenMp) {
    for (const std::string& kernel : runnable_kernels()) {
        SCOPED_TRACE(kernel);
        const auto omp = kernel_logits(packed_, kernel, false);
        EXPECT_TRUE(same_bits(kernel_logits(packed_, kernel, true), omp));
        EXPECT_TRUE(same_bits(kernel_logits(packed_, kernel, false), omp));
    }
}

// On the fp32 prompt path a prompt and the same tokens one at a time (decode) give the same
// bits; the default prompt path (int8 where the CPU has AVX512_VNNI) stays within the int8
// kernel's tolerance of that (docs/KERNELS.md "Prompt path").
TEST_F(FixtureStore, FusedKernelPrefillEqualsTokenByToken) {
    const auto ids =
        test::read_json(test::tiny_model_dir() / "golden.json")["prompts"]["code"]["ids"]
            .get<std::vector<TokenId>>();
    auto m = Model::load(test::tiny_model_dir(),
                         LoadOptions{.store = packed_, .kernel = "auto", .prompt_kernel = "fp32"});
    KvCache a = m->new_cache();
    const std::vector<float> batch = m->cpu().forward(ids, a);
    KvCache b = m->new_cache();
    std::vector<float> last;
    for (TokenId t : ids) last = m->cpu().forward(std::span<const TokenId>(&t, 1), b);
    EXPECT_TRUE(same_bits(batch, last));

    auto q = Model::load(test::tiny_model_dir(), LoadOptions{.store = packed_});
    KvCache c = q->new_cache();
    const std::vector<float> prompt = q->cpu().forward(ids, c);
    ASSERT_EQ(prompt.size(), last.size());
    float worst = 0;
    for (std::size_t i = 0; i < last.size(); ++i)
        worst = std::max(worst, std::abs(prompt[i] - last[i]));
    EXPECT_LT(worst, 2.5e-2f);  // kInt8VsFp32Tolerance of tests/cpu/fast_path_test.cpp
    if (q->cpu().store_moe()->prompt_kernel() != nullptr) {
        EXPECT_GT(worst, 0.0f);  // really the int8 path
    }
}

TEST_F(FixtureStore, UnknownOrMisplacedKernelIsAClearError) {
    EXPECT_THAT(test::error_of([&] {
                    Model::load(test::tiny_model_dir(),
                                LoadOptions{.store = raw_, .kernel = "gpu"});
                }),
                HasSubstr("unknown kernel \"gpu\""));
    LoadOptions missing{.store = raw_,
                        .kernel = "scalar",
                        .kernel_persistent = true,
                        .kdll = "/nonexistent/libneural_cpu_persistent.so"};
    // A missing team library falls back to the OpenMP team (with a warning), never fails.
    auto m = Model::load(test::tiny_model_dir(), missing);
    EXPECT_STREQ(m->cpu().store_moe()->team().name(), "reference");
}

// The shared fixture's scales span at most 2 steps per row, so this copy widens down_proj row 0
// of every expert (span > 15): every packed record escapes one row, and the rows are used.
TEST_F(FixtureStore, RowsWithWideScalesAreEscapedAndStayBitIdentical) {
    const ExpertStore s = ExpertStore::open(wide_packed_);
    for (int l = 0; l < s.num_layers(); ++l) {
        for (int e = 0; e < s.num_experts(); ++e) {
            EXPECT_EQ(s.entry(l, e).escaped_rows(Projection::kGateUp), 0u);
            EXPECT_EQ(s.entry(l, e).escaped_rows(Projection::kDown), 1u) << l << " " << e;
            EXPECT_EQ(s.entry(l, e).payload_bytes, s.layout().fixed_bytes + 3);  // G_i = 3
            EXPECT_TRUE(
                is_escape(s.record(l, e).data() + s.layout()[Projection::kDown].scales_offset));
        }
    }
    const auto ref = test::golden_logits(*Model::load(wide_dir_));
    EXPECT_FALSE(same_bits(ref, test::golden_logits(*Model::load(test::tiny_model_dir()))));
    for (const fs::path& p : {wide_raw_, wide_packed_}) {
        SCOPED_TRACE(p.filename().string());
        EXPECT_TRUE(
            same_bits(test::golden_logits(*Model::load(wide_dir_, LoadOptions{.store = p})), ref));
    }
    VerifyOptions vo;
    vo.checkpoint = wide_dir_;
    const VerifyReport r = verify_store(wide_packed_, vo);
    EXPECT_TRUE(r.ok()) << (r.problems.empty() ? "" : r.problems[0]);
    EXPECT_EQ(r.escaped_rows, 32u);
}

TEST_F(FixtureStore, VerifyPassesAndChecksTheCheckpoint) {
    for (const fs::path& s : {raw_, packed_}) {
        VerifyOptions vo;
        vo.checkpoint = test::tiny_model_dir();
        const VerifyReport r = verify_store(s, vo);
        EXPECT_TRUE(r.ok()) << (r.problems.empty() ? "" : r.problems[0]);
        EXPECT_TRUE(r.checkpoint_checked);
        EXPECT_EQ(r.records, 32);
        EXPECT_EQ(r.file_bytes, fs::file_size(s));
        EXPECT_TRUE(verify_store(s, {}).ok());
    }
}

TEST_F(FixtureStore, FlippedRecordByteNamesLayerAndExpert) {
    for (const fs::path& src : {raw_, packed_}) {
        SCOPED_TRACE(src.filename().string());
        const fs::path p = copy_of(src);
        std::uint64_t at = 0;
        {
            const ExpertStore s = ExpertStore::open(p);
            at = s.entry(2, 5).offset + 100;  // inside gate_up's code bytes
            EXPECT_TRUE(s.record_checksum_ok(2, 5));
        }
        std::string b = test::read_file(p).substr(at, 1);
        b[0] = static_cast<char>(b[0] ^ 0x10);
        test::patch_file(p, at, b);
        EXPECT_FALSE(ExpertStore::open(p).record_checksum_ok(2, 5));
        const VerifyReport quick = verify_store(p, {});
        ASSERT_FALSE(quick.ok());
        EXPECT_EQ(quick.problem_count, 1);
        EXPECT_THAT(quick.problems[0], HasSubstr("layer 2 expert 5: record checksum mismatch"));
        VerifyOptions vo;
        vo.checkpoint = test::tiny_model_dir();
        const VerifyReport full = verify_store(p, vo);
        EXPECT_EQ(full.problem_count, 2);
        ASSERT_EQ(full.problems.size(), 2u);
        EXPECT_THAT(full.problems[1], HasSubstr("layer 2 expert 5: gate_up code bytes differ from "
                                                "the checkpoint (row 6, byte 4 of the row)"));
        fs::remove(p);
    }
}

#ifndef _WIN32
// Issue 44: repack --out never replaces what is not a regular file (a FIFO, a device, a socket),
// and writes through a link to a regular file (the link stays).
TEST_F(FixtureStore, RepackRefusesNonRegularOutputsAndWritesThroughLinks) {
    const fs::path fifo = own_ / "fifo.nstore";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    for (const fs::path& out : {fifo, fs::path("/dev/null")}) {
        RepackOptions o;
        o.checkpoint = test::tiny_model_dir();
        o.out = out;
        o.kind = StoreKind::kRaw;
        o.threads = 1;
        EXPECT_THAT(error_of([&] { repack(o); }), HasSubstr("Neural writes only regular files"))
            << out;
    }
    EXPECT_TRUE(fs::is_fifo(fs::symlink_status(fifo)));
    EXPECT_TRUE(fs::is_character_file(fs::status("/dev/null")));
    const fs::path target = own_ / "target.nstore";
    test::write_file(target, "old");
    const fs::path link = own_ / "link.nstore";
    fs::create_symlink(target, link);
    make_store(test::tiny_model_dir(), link, StoreKind::kRaw);
    EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
    EXPECT_NO_THROW(ExpertStore::open(target));
}
#endif

TEST_F(FixtureStore, TruncatedFiles) {
    const std::string bytes = test::read_file(raw_);
    const fs::path p = own_ / "cut.nstore";
    test::write_file(p, bytes.substr(0, bytes.size() - 3 * 4096));
    EXPECT_THAT(error_of([&] { ExpertStore::open(p); }),
                HasSubstr("truncated expert store: the record of layer 3 expert 6 ends at byte"));
    test::write_file(p, bytes.substr(0, 40));
    EXPECT_THAT(error_of([&] { ExpertStore::open(p); }),
                HasSubstr("truncated expert store: 40 bytes, shorter than the 64-byte header"));
    test::write_file(p, bytes.substr(0, 1000));
    EXPECT_THAT(error_of([&] { ExpertStore::open(p); }), HasSubstr("truncated"));
}

TEST_F(FixtureStore, VersionFromTheFuture) {
    const fs::path p = copy_of(packed_);
    std::string v(4, '\0');
    put_u32(reinterpret_cast<std::uint8_t*>(v.data()), 2);
    test::patch_file(p, 8, v);
    const std::string msg = error_of([&] { ExpertStore::open(p); });
    EXPECT_THAT(msg, HasSubstr(p.string()));
    EXPECT_THAT(msg, HasSubstr("expert store format version 2 is newer than this build of Neural "
                               "reads (version 1)"));
    EXPECT_THAT(error_of([&] { Model::load(test::tiny_model_dir(), LoadOptions{.store = p}); }),
                HasSubstr("format version 2 is newer"));
}

TEST_F(FixtureStore, UnknownAndWrongKind) {
    const fs::path p = copy_of(raw_);
    std::string k(4, '\0');
    put_u32(reinterpret_cast<std::uint8_t*>(k.data()), 7);
    test::patch_file(p, 12, k);
    EXPECT_THAT(error_of([&] { ExpertStore::open(p); }), HasSubstr("unknown expert store kind 7"));
    // A raw store relabelled packed (with a valid header checksum): its record sizes give it away.
    put_u32(reinterpret_cast<std::uint8_t*>(k.data()), 1);
    test::patch_file(p, 12, k);
    test::reseal_store_header(p);
    EXPECT_THAT(
        error_of([&] { ExpertStore::open(p); }),
        HasSubstr("record of layer 0 expert 0 holds 4896 bytes, but a packed record of this "
                  "shape (hidden 32, intermediate 96) holds 5728: wrong kind or corrupt "
                  "index"));
}

TEST_F(FixtureStore, DamagedHeaderMetadataOrIndex) {
    const std::string head = test::read_file(raw_);
    const FixedHeader h = FixedHeader::decode(reinterpret_cast<const std::uint8_t*>(head.data()));
    for (std::uint64_t at : {std::uint64_t{70}, h.index_offset + 3}) {
        const fs::path p = copy_of(raw_);
        std::string b = test::read_file(p).substr(at, 1);
        b[0] = static_cast<char>(b[0] ^ 0x01);
        test::patch_file(p, at, b);
        EXPECT_THAT(error_of([&] { ExpertStore::open(p); }),
                    HasSubstr("expert store header checksum mismatch"));
        fs::remove(p);
    }
}

TEST_F(FixtureStore, ForeignFiles) {
    const fs::path empty = own_ / "empty";
    test::write_file(empty, "");
    const fs::path text = own_ / "notes.txt";
    test::write_file(text, "hello, this is not a store at all, just some text in a file\n");
    for (const fs::path& p : {test::tiny_model_dir() / "model.safetensors", empty, text}) {
        const std::string msg = error_of([&] { ExpertStore::open(p); });
        EXPECT_THAT(msg, HasSubstr(p.string() + " is not a Neural expert store"));
    }
    EXPECT_THAT(error_of([&] { ExpertStore::open(own_ / "missing.nstore"); }),
                HasSubstr("cannot open"));
}

TEST_F(FixtureStore, StoreOfAnotherCheckpointIsRefused) {
    // Same shape, other weights: the sample hash tells them apart at load.
    const std::string msg = error_of([&] { Model::load(wide_dir_, LoadOptions{.store = raw_}); });
    EXPECT_THAT(msg, HasSubstr(raw_.string() + " was made from a different checkpoint than " +
                               wide_dir_.string()));
    // verify-store with that checkpoint lists the differing experts and the hash.
    VerifyOptions vo;
    vo.checkpoint = wide_dir_;
    const VerifyReport r = verify_store(raw_, vo);
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.problem_count, 32 + 4 + 1);  // every record, the 4 down_proj_scales, the hash
    EXPECT_THAT(r.problems[0], HasSubstr("layer 0 expert 0: down scales differ from the checkpoint "
                                         "(row 0, block 0)"));
}

TEST_F(FixtureStore, StoreOfAnotherModelIsRefused) {
    const fs::path other = own_ / "other";
    test::SynthSpec spec;
    spec.hidden = 64;
    spec.intermediate = 64;
    spec.layers = 4;
    spec.experts = 8;
    test::write_synthetic_checkpoint(other, spec);
    const ModelConfig config = ModelConfig::load(other / "config.json");
    const Checkpoint ckpt = Checkpoint::open(other);
    const ExpertStore s = ExpertStore::open(raw_);
    EXPECT_THAT(error_of([&] { s.check_matches(ckpt, config); }),
                HasSubstr(raw_.string() +
                          " was made for a different model: hidden_size is 32 in "
                          "the store but 64 in " +
                          other.string()));
    VerifyOptions vo;
    vo.checkpoint = other;
    EXPECT_THAT(error_of([&] { verify_store(raw_, vo); }), HasSubstr("different model"));
}

TEST_F(FixtureStore, DamagedEscapeIsAnErrorNotAWildRead) {
    const fs::path p = copy_of(wide_packed_);
    // The offsets of every record's first down-row escape pointer, read while the store is
    // open; the file is patched after it is closed (Windows refuses to write a mapped file).
    std::vector<std::uint64_t> at;
    {
        const ExpertStore s = ExpertStore::open(p);
        for (int l = 0; l < s.num_layers(); ++l) {
            for (int e = 0; e < s.num_experts(); ++e) {
                at.push_back(s.entry(l, e).offset + s.layout()[Projection::kDown].scales_offset +
                             1);
            }
        }
    }
    std::string off(4, '\0');
    put_u32(reinterpret_cast<std::uint8_t*>(off.data()), 0x7fffff00u);
    for (const std::uint64_t a : at) test::patch_file(p, a, off);
    // Checksums that match the damage: the escape check is what must catch it.
    test::reseal_store_record_checksums(p);
    const ExpertStore s = ExpertStore::open(p);  // the header is intact
    EXPECT_THAT(error_of([&] { s.check_escapes(1, 3); }),
                HasSubstr("damaged expert store record (layer 1 expert 3): down row 0 points to "
                          "escape bytes"));
    auto m = Model::load(wide_dir_, LoadOptions{.store = p});
    EXPECT_THAT(error_of([&] { test::golden_logits(*m); }),
                HasSubstr("damaged expert store record"));
    const VerifyReport r = verify_store(p, {});
    EXPECT_EQ(r.problem_count, 32);
}

// A record zeroed, or two records swapped (each payload intact, in the other's place): the store
// opens (header, metadata and index are intact), and the first read of a damaged record is an
// error naming it, on the reference path and the fused kernels, never different logits. The
// index entry holding a record's checksum is the one of its position, so a swapped record fails.
TEST_F(FixtureStore, DamagedRecordsAreErrorsNamingLayerAndExpertNeverAnswers) {
    struct Case {
        const char* what;
        fs::path store;
        std::string names;
    };
    std::vector<Case> cases;
    for (const fs::path& src : {raw_, packed_}) {
        const fs::path zeroed = own_ / ("zeroed-" + src.filename().string());
        fs::copy_file(src, zeroed);
        test::zero_store_record(zeroed, 1, 3);
        cases.push_back({"zeroed", zeroed, "record layer 1 expert 3 fails its checksum"});
    }
    {
        const fs::path swapped = own_ / "swapped-raw.nstore";
        fs::copy_file(raw_, swapped);
        test::swap_store_records(swapped, 0, 2, 2, 5);
        cases.push_back({"swapped", swapped, "record layer 0 expert 2 fails its checksum"});
        const ExpertStore s = ExpertStore::open(swapped);
        EXPECT_FALSE(s.record_checksum_ok(0, 2));
        EXPECT_FALSE(s.record_checksum_ok(2, 5));
    }
    for (const Case& c : cases) {
        for (const char* kernel : {"reference", "auto"}) {
            SCOPED_TRACE(std::string(c.what) + " " + c.store.filename().string() + " " + kernel);
            auto m = Model::load(test::tiny_model_dir(),
                                 LoadOptions{.store = c.store, .kernel = kernel});
            const std::string e = error_of([&] { test::golden_logits(*m); });
            EXPECT_THAT(e, HasSubstr("expert store " + c.store.string() + ": " + c.names));
            EXPECT_THAT(e, HasSubstr("run `neural verify-store` and repack"));
            // Every later read fails the same way: a damaged record never answers.
            EXPECT_THAT(error_of([&] { test::golden_logits(*m); }), HasSubstr(c.names));
            ChatSession session(*m);
            session.add_user("Hello!");
            TurnOptions o;
            o.max_tokens = 2;
            EXPECT_THAT(error_of([&] { session.respond(o); }), HasSubstr(c.names));
        }
        EXPECT_FALSE(verify_store(c.store, {}).ok());
    }
}

// Each record is hashed the first time it is read, once, whatever the number of threads asking;
// after that it is marked verified. A damaged one fails for every thread and is never marked.
TEST_F(FixtureStore, RecordsAreVerifiedOnceOnFirstReadFromAnyThread) {
    const fs::path p = copy_of(raw_);
    test::zero_store_record(p, 3, 7);
    const ExpertStore s = ExpertStore::open(p);
    EXPECT_FALSE(s.record_verified(0, 0));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&] {
            for (int l = 0; l < s.num_layers(); ++l) {
                for (int e = 0; e < s.num_experts(); ++e) {
                    try {
                        s.verify_record(l, e);
                    } catch (const Error& err) {
                        if (l == 3 && e == 7 &&
                            std::string(err.what())
                                    .find("record layer 3 expert 7 fails its checksum") !=
                                std::string::npos) {
                            failures.fetch_add(1);
                        }
                    }
                }
            }
        });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(failures.load(), 8);
    for (int l = 0; l < s.num_layers(); ++l) {
        for (int e = 0; e < s.num_experts(); ++e) {
            EXPECT_EQ(s.record_verified(l, e), !(l == 3 && e == 7)) << l << " " << e;
        }
    }
}

// A call's records read for the first time are checked on the worker team (one record per
// task), each once; a damaged one is left unverified, not thrown, so the caller's own
// verify_record reports it with its name; records of other layers and out-of-range indices are
// left alone. The same with a team of one thread.
TEST_F(FixtureStore, TeamChecksACallsNewRecordsAndLeavesADamagedOneToTheCaller) {
    for (const int threads : {4, 1}) {
        SCOPED_TRACE(threads);
        const fs::path p = own_ / ("team-" + std::to_string(threads) + ".nstore");
        fs::copy_file(packed_, p);
        test::zero_store_record(p, 1, 3);
        const ExpertStore s = ExpertStore::open(p);
        cpu::ReferenceTeam team(threads);
        const std::vector<int> chosen = {0, 2, 3, 2, -1, s.num_experts(), 5, 0};
        EXPECT_NO_THROW(cpu::verify_records(s, 1, chosen, team));
        for (int e = 0; e < s.num_experts(); ++e) {
            EXPECT_EQ(s.record_verified(1, e), e == 0 || e == 2 || e == 5) << e;
            EXPECT_FALSE(s.record_verified(0, e)) << e;
        }
        EXPECT_THAT(error_of([&] { s.verify_record(1, 3); }),
                    HasSubstr("record layer 1 expert 3 fails its checksum"));
        // Verified already: no job, nothing changes.
        EXPECT_NO_THROW(cpu::verify_records(s, 1, std::vector<int>{0, 2}, team));
        EXPECT_TRUE(s.record_verified(1, 2));
    }
}

// The RAM warm-up verifies what it reads in, so the forward pass finds those records checked; a
// damaged one is reported, not thrown (the warm-up runs in the background).
TEST_F(FixtureStore, WarmUpVerifiesTheRecordsItReadsAndReportsADamagedOne) {
    const fs::path p = copy_of(packed_);
    test::zero_store_record(p, 2, 1);
    const ExpertStore s = ExpertStore::open(p);
    std::vector<ExpertKey> order;
    for (int l = 0; l < s.num_layers(); ++l) {
        for (int e = 0; e < s.num_experts(); ++e) order.push_back({l, e});
    }
    const WarmupReport w = s.warm_up(order, std::chrono::seconds(60));
    EXPECT_TRUE(w.completed);
    EXPECT_EQ(w.damaged, 1u);
    EXPECT_THAT(w.damage, HasSubstr("record layer 2 expert 1 fails its checksum"));
    EXPECT_TRUE(s.record_verified(0, 0));
    EXPECT_FALSE(s.record_verified(2, 1));
}

}  // namespace
}  // namespace neural::store
