// `neural repack`, `neural verify-store` and `--store` of logits/generate, run as processes on
// the tiny fixture: exit codes, messages and identical outputs.

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/format.h"
#include "store/store.h"
#include "store/store_support.h"
#include "support/damaged_store.h"
#include "support/fixtures.h"
#include "support/run_neural.h"

namespace neural {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using test::Proc;

class StoreCli : public ::testing::Test {
protected:
    Proc neural(const std::vector<std::string>& args) {
        return test::run_neural(args, tmp_.path(), 60);
    }
    static std::string model() { return test::tiny_model_dir().string(); }

    test::TempDir tmp_;
};

TEST_F(StoreCli, RepackVerifyAndRunFromTheStore) {
    const std::string store = (tmp_ / "experts.nstore").string();
    Proc r = neural({"repack", "--checkpoint", model(), "--out", store, "--format", "packed",
                     "--threads", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith("wrote packed store " + store + ": 32 records"));

    r = neural({"verify-store", store, "--checkpoint", model()});
    EXPECT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, HasSubstr("packed store (format 1) of gpt_oss: 4 layers x 8 experts"));
    EXPECT_THAT(r.out, HasSubstr("OK: header and every record checksum; every expert equals the "
                                 "checkpoint's, expert hash matches"));

    const std::string prompts = (test::tiny_model_dir() / "prompts.json").string();
    const std::string a = (tmp_ / "a.json").string(), b = (tmp_ / "b.json").string();
    ASSERT_EQ(neural({"logits", model(), prompts, a, "--steps", "2", "--kernel", "reference"}).code,
              0);
    r = neural(
        {"logits", model(), prompts, b, "--steps", "2", "--store", store, "--kernel", "reference"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(test::read_file(a), test::read_file(b));

    // The fast path with bf16 dense kernels (within 1e-3 of the reference): the int8 lm_head
    // of --dense auto flips near-tied greedy picks of this random model.
    Proc g1 = neural({"generate", "--model", model(), "--ids", "1,2,3", "--max-tokens", "6",
                      "--temperature", "0", "--show-ids", "--dense", "bf16"});
    Proc g2 =
        neural({"generate", "--model", model(), "--ids", "1,2,3", "--max-tokens", "6",
                "--temperature", "0", "--show-ids", "--store", store, "--kernel", "reference"});
    ASSERT_EQ(g2.code, 0) << g2.err;
    EXPECT_EQ(g1.out, g2.out);
    EXPECT_EQ(g1.err, g2.err);
    Proc c = neural({"chat", "--model", model(), "--store", store, "--kernel", "reference",
                     "--once", "Hi", "--max-tokens", "4", "--temperature", "0"});
    EXPECT_EQ(c.code, 0) << c.err;
}

// A user's GGUF download (llama.cpp's conversion of the fixture) through the commands: repack
// from it, verify against either checkpoint, and logits / generate / tokenize from the .gguf file
// equal those of the safetensors folder.
TEST_F(StoreCli, RepackAndRunFromAGgufFile) {
    const std::string gguf =
        (test::shared_dir() / "fixtures" / "tiny-gptoss-a-gguf" / "model.gguf").string();
    const std::string store = (tmp_ / "gguf.nstore").string();
    Proc r = neural(
        {"repack", "--checkpoint", gguf, "--out", store, "--format", "packed", "--threads", "2"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_THAT(r.out, StartsWith("wrote packed store " + store + ": 32 records"));
    for (const std::string& ckpt : {gguf, model()}) {
        r = neural({"verify-store", store, "--checkpoint", ckpt});
        EXPECT_EQ(r.code, 0) << r.err;
        EXPECT_THAT(r.out, HasSubstr("every expert equals the checkpoint's, expert hash matches"));
    }

    const std::string prompts = (test::tiny_model_dir() / "prompts.json").string();
    const std::string a = (tmp_ / "a.json").string(), b = (tmp_ / "b.json").string();
    const std::string c = (tmp_ / "c.json").string();
    ASSERT_EQ(neural({"logits", model(), prompts, a, "--steps", "2", "--kernel", "reference"}).code,
              0);
    r = neural({"logits", gguf, prompts, b, "--steps", "2", "--kernel", "reference"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(test::read_file(a), test::read_file(b));
    r = neural(
        {"logits", gguf, prompts, c, "--steps", "2", "--store", store, "--kernel", "reference"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_EQ(test::read_file(a), test::read_file(c));

    // bf16 dense on the fast path against the GGUF's reference path (no store), as above.
    Proc g1 = neural({"generate", "--model", model(), "--ids", "1,2,3", "--max-tokens", "6",
                      "--temperature", "0", "--show-ids", "--dense", "bf16"});
    Proc g2 = neural({"generate", "--model", gguf, "--ids", "1,2,3", "--max-tokens", "6",
                      "--temperature", "0", "--show-ids"});
    ASSERT_EQ(g2.code, 0) << g2.err;
    EXPECT_EQ(g1.out, g2.out);
    Proc t1 = neural(
        {"tokenize", "--model", model(), "--special", "<|start|>user<|message|>Hello world"});
    Proc t2 =
        neural({"tokenize", "--model", gguf, "--special", "<|start|>user<|message|>Hello world"});
    ASSERT_EQ(t2.code, 0) << t2.err;
    EXPECT_EQ(t1.out, t2.out);

    // A damaged GGUF: exit 1 and a message naming the file.
    test::write_file(tmp_ / "cut.gguf", test::read_file(gguf).substr(0, 5000));
    r = neural({"repack", "--checkpoint", (tmp_ / "cut.gguf").string(), "--out", store + "2",
                "--format", "raw"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("cut.gguf"));
    EXPECT_THAT(r.err, HasSubstr("truncated"));
}

TEST_F(StoreCli, VerifyFailsNamingTheDamagedExpert) {
    const fs::path store = tmp_ / "raw.nstore";
    ASSERT_EQ(
        neural({"repack", "--checkpoint", model(), "--out", store.string(), "--format", "raw"})
            .code,
        0);
    std::uint64_t at = 0;
    {
        const store::ExpertStore s = store::ExpertStore::open(store);
        at = s.entry(1, 2).offset + s.layout()[Projection::kDown].scales_offset + 7;
    }
    std::string b = test::read_file(store).substr(at, 1);
    b[0] = static_cast<char>(b[0] + 1);
    test::patch_file(store, at, b);
    Proc r = neural({"verify-store", store.string(), "--checkpoint", model()});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("FAIL layer 1 expert 2: record checksum mismatch"));
    EXPECT_THAT(r.err, HasSubstr("FAIL layer 1 expert 2: down scales differ from the checkpoint "
                                 "(row 2, block 1)"));
    EXPECT_THAT(r.err, HasSubstr("neural verify-store: error: 2 problem(s) in " + store.string()));
}

// `verify-store` is not the only one to notice: `generate --store` refuses a zeroed record and
// a record swapped with another, naming the record, instead of answering from it.
TEST_F(StoreCli, GenerateFromADamagedStoreFailsNamingTheRecord) {
    const fs::path store = tmp_ / "raw.nstore";
    ASSERT_EQ(
        neural({"repack", "--checkpoint", model(), "--out", store.string(), "--format", "raw"})
            .code,
        0);
    const fs::path zeroed = tmp_ / "zeroed.nstore", swapped = tmp_ / "swapped.nstore";
    fs::copy_file(store, zeroed);
    test::zero_store_record(zeroed, 1, 3);
    fs::copy_file(store, swapped);
    test::swap_store_records(swapped, 0, 2, 2, 5);
    const std::pair<fs::path, std::string> cases[] = {
        {zeroed, "record layer 1 expert 3 fails its checksum"},
        {swapped, "record layer 0 expert 2 fails its checksum"}};
    for (const auto& [file, names] : cases) {
        for (const char* kernel : {"reference", "auto"}) {
            SCOPED_TRACE(file.filename().string() + " " + kernel);
            Proc r =
                neural({"generate", "--model", model(), "--ids", "1,2,3,4,5,6,7,8", "--max-tokens",
                        "4", "--temperature", "0", "--store", file.string(), "--kernel", kernel});
            EXPECT_EQ(r.code, 1) << r.out;
            EXPECT_THAT(r.err, HasSubstr("expert store " + file.string() + ": " + names));
            EXPECT_THAT(r.err, HasSubstr("run `neural verify-store` and repack"));
        }
        EXPECT_EQ(neural({"verify-store", file.string()}).code, 1);
    }
}

TEST_F(StoreCli, BadInputsAreClearErrors) {
    Proc r = neural(
        {"repack", "--checkpoint", model(), "--out", (tmp_ / "x").string(), "--format", "zip"});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--format must be raw or packed, not \"zip\""));
    r = neural({"repack", "--checkpoint", model()});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("--checkpoint, --out and --format are required"));

    const std::string foreign = (test::tiny_model_dir() / "config.json").string();
    r = neural({"verify-store", foreign});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr(foreign + " is not a Neural expert store"));
    r = neural({"generate", "--model", model(), "--ids", "1", "--store", foreign});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("is not a Neural expert store"));

    const fs::path future = tmp_ / "future.nstore";
    ASSERT_EQ(
        neural({"repack", "--checkpoint", model(), "--out", future.string(), "--format", "raw"})
            .code,
        0);
    test::patch_file(future, 8, std::string("\x09\x00\x00\x00", 4));
    r = neural({"logits", model(), (test::tiny_model_dir() / "prompts.json").string(),
                (tmp_ / "o.json").string(), "--store", future.string()});
    EXPECT_EQ(r.code, 1);
    EXPECT_THAT(r.err, HasSubstr("format version 9 is newer than this build of Neural reads"));

    for (const char* cmd : {"repack", "verify-store"}) {
        Proc h = neural({cmd, "--help"});
        EXPECT_EQ(h.code, 0);
        EXPECT_THAT(h.out, StartsWith(std::string("usage: neural ") + cmd));
    }
}

}  // namespace
}  // namespace neural
