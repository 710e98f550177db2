// safetensors container validation on small synthetic files (single and sharded checkpoints).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/safetensors.h"
#include "neural/error.h"
#include "support/fixtures.h"

namespace neural {
namespace {

using test::error_of;

namespace fs = std::filesystem;
using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// u64 little-endian header length + header text + data bytes.
std::string raw_file(const std::string& header_text, const std::string& data) {
    std::string out;
    std::uint64_t n = header_text.size();
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    return out + header_text + data;
}

std::string st_file(const json& header, const std::string& data) {
    return raw_file(header.dump(), data);
}

// `n` bytes counting up from `start` (so every tensor's bytes are recognizable).
std::string pattern(std::size_t n, int start = 0) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>((start + i) & 0xff);
    return s;
}

json entry(const std::string& dtype, std::vector<std::int64_t> shape, std::uint64_t begin,
           std::uint64_t end) {
    return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

// Writes `bytes` as tmp/name and opens it, returning the error message.
std::string open_error(const test::TempDir& tmp, const std::string& bytes,
                       const std::string& name = "t.safetensors") {
    const fs::path path = tmp / name;
    test::write_file(path, bytes);
    return error_of([&] { SafetensorsFile::open(path); });
}

TEST(Safetensors, ValidFileRoundTrips) {
    test::TempDir tmp;
    json h;
    h["__metadata__"] = {{"format", "pt"}};
    h["a"] = entry("F32", {2, 3}, 0, 24);
    h["b"] = entry("BF16", {4}, 24, 32);
    h["c"] = entry("U8", {2, 2, 16}, 32, 96);
    h["empty"] = entry("I64", {0, 5}, 96, 96);
    h["scalar"] = entry("I32", {}, 96, 100);
    const std::string data = pattern(100, 1);
    const fs::path path = tmp / "model.safetensors";
    test::write_file(path, st_file(h, data));

    SafetensorsFile f = SafetensorsFile::open(path);
    EXPECT_EQ(f.path(), path);
    ASSERT_EQ(f.tensors().size(), 5u);  // __metadata__ is not a tensor
    EXPECT_EQ(f.find("__metadata__"), nullptr);
    EXPECT_EQ(f.find("missing"), nullptr);

    const TensorInfo* a = f.find("a");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->name, "a");
    EXPECT_EQ(a->dtype, DType::kF32);
    EXPECT_THAT(a->shape, ElementsAre(2, 3));
    EXPECT_EQ(a->begin, 0u);
    EXPECT_EQ(a->end, 24u);
    EXPECT_EQ(a->nbytes(), 24u);
    EXPECT_EQ(a->numel(), 6);
    EXPECT_EQ(a->shape_string(), "[2, 3]");
    ASSERT_NE(a->file, nullptr);
    EXPECT_EQ(*a->file, path);
    EXPECT_EQ(std::memcmp(a->data, data.data(), 24), 0);

    const TensorInfo* b = f.find("b");
    ASSERT_NE(b, nullptr);
    EXPECT_EQ(b->dtype, DType::kBF16);
    EXPECT_THAT(b->shape, ElementsAre(4));
    EXPECT_EQ(std::memcmp(b->data, data.data() + 24, 8), 0);
    EXPECT_EQ(b->data - a->data, 24);

    const TensorInfo* c = f.find("c");
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->dtype, DType::kU8);
    EXPECT_EQ(c->shape_string(), "[2, 2, 16]");
    EXPECT_EQ(c->numel(), 64);
    EXPECT_EQ(std::memcmp(c->data, data.data() + 32, 64), 0);
    EXPECT_EQ(c->data[63], static_cast<std::uint8_t>(32 + 63 + 1));

    const TensorInfo* e = f.find("empty");
    ASSERT_NE(e, nullptr);
    EXPECT_EQ(e->numel(), 0);
    EXPECT_EQ(e->nbytes(), 0u);

    const TensorInfo* s = f.find("scalar");
    ASSERT_NE(s, nullptr);
    EXPECT_TRUE(s->shape.empty());
    EXPECT_EQ(s->numel(), 1);
    EXPECT_EQ(s->shape_string(), "[]");
}

TEST(Safetensors, HeaderPaddedWithSpacesIsAccepted) {
    // The reference writer pads the header to a multiple of 8 with spaces.
    test::TempDir tmp;
    json h;
    h["x"] = entry("F16", {3}, 0, 6);
    std::string text = h.dump();
    text.append(8 - text.size() % 8 + 8, ' ');
    const fs::path path = tmp / "p.safetensors";
    test::write_file(path, raw_file(text, pattern(6)));
    SafetensorsFile f = SafetensorsFile::open(path);
    ASSERT_NE(f.find("x"), nullptr);
    EXPECT_EQ(f.find("x")->dtype, DType::kF16);
}

TEST(Safetensors, DtypeNamesAndSizes) {
    EXPECT_STREQ(dtype_name(DType::kBF16), "BF16");
    EXPECT_STREQ(dtype_name(DType::kF8E4M3), "F8_E4M3");
    EXPECT_EQ(dtype_size(DType::kBF16), 2u);
    EXPECT_EQ(dtype_size(DType::kF32), 4u);
    EXPECT_EQ(dtype_size(DType::kF64), 8u);
    EXPECT_EQ(dtype_size(DType::kU8), 1u);
    EXPECT_EQ(dtype_size(DType::kI64), 8u);
    EXPECT_EQ(dtype_size(DType::kF8E5M2), 1u);
}

TEST(Safetensors, FileShorterThan8Bytes) {
    test::TempDir tmp;
    std::string msg = open_error(tmp, "abcde");
    EXPECT_THAT(msg, HasSubstr((tmp / "t.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("5 bytes, shorter than the 8-byte header length"));
}

TEST(Safetensors, EmptyFile) {
    test::TempDir tmp;
    std::string msg = open_error(tmp, "");
    EXPECT_THAT(msg, HasSubstr("0 bytes, shorter than the 8-byte header length"));
}

TEST(Safetensors, MissingFile) {
    test::TempDir tmp;
    std::string msg = error_of([&] { SafetensorsFile::open(tmp / "nope.safetensors"); });
    EXPECT_THAT(msg, HasSubstr("nope.safetensors"));
}

TEST(Safetensors, HeaderLengthPastEndOfFile) {
    test::TempDir tmp;
    std::string bytes = raw_file("{}", "");
    bytes[0] = static_cast<char>(200);  // claims 200 header bytes; the file has 2
    std::string msg = open_error(tmp, bytes);
    EXPECT_THAT(msg, HasSubstr((tmp / "t.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("header length 200 runs past the end of the file (10 bytes)"));
}

TEST(Safetensors, HugeHeaderLengthDoesNotWrap) {
    test::TempDir tmp;
    std::string bytes = raw_file("{}", "");
    for (int i = 0; i < 8; ++i) bytes[static_cast<size_t>(i)] = static_cast<char>(0xff);
    std::string msg = open_error(tmp, bytes);
    EXPECT_THAT(msg, HasSubstr("runs past the end of the file"));
}

TEST(Safetensors, HeaderNotJson) {
    test::TempDir tmp;
    std::string msg = open_error(tmp, raw_file("{\"a\": [", "xxxx"));
    EXPECT_THAT(msg, HasSubstr((tmp / "t.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("header is not valid JSON"));
}

TEST(Safetensors, HeaderNotAnObject) {
    test::TempDir tmp;
    std::string msg = open_error(tmp, raw_file("[1, 2, 3]", ""));
    EXPECT_THAT(msg, HasSubstr("t.safetensors: header must be a JSON object"));
}

TEST(Safetensors, EntryNotAnObject) {
    test::TempDir tmp;
    std::string msg = open_error(tmp, raw_file(R"({"w": 5})", ""));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\": entry must be an object"));
}

TEST(Safetensors, MissingDtype) {
    test::TempDir tmp;
    json h;
    h["w"] = {{"shape", {2}}, {"data_offsets", {0, 2}}};
    std::string msg = open_error(tmp, st_file(h, pattern(2)));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\": missing dtype"));
}

TEST(Safetensors, UnknownDtype) {
    test::TempDir tmp;
    json h;
    h["weird"] = entry("F4", {2}, 0, 1);
    std::string msg = open_error(tmp, st_file(h, pattern(1)));
    EXPECT_THAT(msg, HasSubstr((tmp / "t.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("tensor \"weird\": unknown dtype \"F4\""));
}

TEST(Safetensors, MissingShape) {
    test::TempDir tmp;
    json h;
    h["w"] = {{"dtype", "U8"}, {"data_offsets", {0, 2}}};
    std::string msg = open_error(tmp, st_file(h, pattern(2)));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\": missing shape"));
}

TEST(Safetensors, NegativeDimension) {
    test::TempDir tmp;
    json h;
    h["neg"] = entry("U8", {4, -1}, 0, 4);
    std::string msg = open_error(tmp, st_file(h, pattern(4)));
    EXPECT_THAT(msg, HasSubstr("tensor \"neg\": shape [4,-1] has a non-integer or negative "
                               "dimension"));
}

TEST(Safetensors, NonIntegerDimension) {
    test::TempDir tmp;
    json h;
    h["w"] = entry("U8", {4}, 0, 4);
    h["w"]["shape"] = {2.5};
    std::string msg = open_error(tmp, st_file(h, pattern(4)));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\""));
    EXPECT_THAT(msg, HasSubstr("non-integer or negative dimension"));
}

TEST(Safetensors, ShapeOverflow) {
    test::TempDir tmp;
    json h;
    h["big"] = entry("F32", {std::int64_t{1} << 40, std::int64_t{1} << 40}, 0, 4);
    std::string msg = open_error(tmp, st_file(h, pattern(4)));
    EXPECT_THAT(msg, HasSubstr("tensor \"big\""));
    EXPECT_THAT(msg, HasSubstr("overflows"));
}

TEST(Safetensors, DataOffsetsMalformed) {
    test::TempDir tmp;
    json h;
    h["w"] = {{"dtype", "U8"}, {"shape", {2}}, {"data_offsets", {-1, 1}}};
    std::string msg = open_error(tmp, st_file(h, pattern(2)));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\": data_offsets must be two non-negative integers"));

    json k;
    k["w"] = {{"dtype", "U8"}, {"shape", {2}}, {"data_offsets", {0}}};
    msg = open_error(tmp, st_file(k, pattern(2)), "k.safetensors");
    EXPECT_THAT(msg, HasSubstr("data_offsets must be two non-negative integers"));
}

TEST(Safetensors, DataOffsetsReversed) {
    test::TempDir tmp;
    json h;
    h["rev"] = entry("U8", {4}, 8, 4);
    std::string msg = open_error(tmp, st_file(h, pattern(8)));
    EXPECT_THAT(msg, HasSubstr("tensor \"rev\": data_offsets [8, 4] are reversed"));
}

TEST(Safetensors, OffsetsPastTheDataAreaMeanTruncation) {
    test::TempDir tmp;
    json h;
    h["a"] = entry("U8", {8}, 0, 8);
    h["b"] = entry("F32", {4}, 8, 24);
    std::string full = st_file(h, pattern(24));
    std::string msg = open_error(tmp, full.substr(0, full.size() - 5));
    EXPECT_THAT(msg, HasSubstr((tmp / "t.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("tensor \"b\": data_offsets [8, 24] lie outside the data area "
                               "(19 bytes)"));
    EXPECT_THAT(msg, HasSubstr("truncated"));
}

TEST(Safetensors, ByteSizeMustEqualOffsetSpan) {
    test::TempDir tmp;
    json h;
    h["w"] = entry("F32", {2, 2}, 0, 12);
    std::string msg = open_error(tmp, st_file(h, pattern(16)));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\": F32 [2, 2] needs 16 bytes but data_offsets span 12"));
}

TEST(Safetensors, OverlappingTensors) {
    test::TempDir tmp;
    json h;
    h["first"] = entry("U8", {8}, 0, 8);
    h["second"] = entry("U8", {8}, 4, 12);
    std::string msg = open_error(tmp, st_file(h, pattern(12)));
    EXPECT_THAT(msg, HasSubstr((tmp / "t.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("tensors \"first\" and \"second\" overlap"));
    EXPECT_THAT(msg, HasSubstr("[0, 8] and [4, 12]"));
}

TEST(Safetensors, ContainedTensorOverlaps) {
    // One tensor entirely inside another, with a third after both.
    test::TempDir tmp;
    json h;
    h["outer"] = entry("U8", {16}, 0, 16);
    h["inner"] = entry("U8", {4}, 4, 8);
    h["tail"] = entry("U8", {4}, 16, 20);
    std::string msg = open_error(tmp, st_file(h, pattern(20)));
    EXPECT_THAT(msg, HasSubstr("overlap"));
    EXPECT_THAT(msg, HasSubstr("\"outer\""));
    EXPECT_THAT(msg, HasSubstr("\"inner\""));
}

TEST(Safetensors, AdjacentTensorsDoNotOverlap) {
    test::TempDir tmp;
    json h;
    h["a"] = entry("U8", {4}, 0, 4);
    h["z"] = entry("U8", {0}, 2, 2);  // empty tensors take no bytes
    h["b"] = entry("U8", {4}, 4, 8);
    const fs::path path = tmp / "ok.safetensors";
    test::write_file(path, st_file(h, pattern(8)));
    EXPECT_EQ(SafetensorsFile::open(path).tensors().size(), 3u);
}

// --- Checkpoint (single file) ---------------------------------------------------------------

void write_single(const fs::path& dir) {
    json h;
    h["w"] = entry("F32", {2, 3}, 0, 24);
    h["b"] = entry("BF16", {3}, 24, 30);
    test::write_file(dir / "model.safetensors", st_file(h, pattern(30)));
}

TEST(Checkpoint, SingleFile) {
    test::TempDir tmp;
    write_single(tmp.path());
    Checkpoint c = Checkpoint::open(tmp.path());
    EXPECT_EQ(c.dir(), tmp.path());
    EXPECT_EQ(c.tensor_count(), 2u);
    EXPECT_EQ(c.total_bytes(), 30u);
    ASSERT_EQ(c.files().size(), 1u);
    const TensorInfo& w = c.require("w", DType::kF32, {2, 3});
    EXPECT_EQ(w.data[0], 0);
    EXPECT_EQ(w.data[23], 23);
    const TensorInfo& b = c.require("b", DType::kBF16, {3});
    EXPECT_EQ(b.data[0], 24);
    EXPECT_EQ(c.find("nope"), nullptr);
}

TEST(Checkpoint, RequireMissingTensor) {
    test::TempDir tmp;
    write_single(tmp.path());
    Checkpoint c = Checkpoint::open(tmp.path());
    std::string msg = error_of([&] { c.require("model.norm.weight", DType::kBF16, {32}); });
    EXPECT_THAT(msg, HasSubstr(tmp.path().string()));
    EXPECT_THAT(msg, HasSubstr("tensor \"model.norm.weight\" is missing (expected BF16 [32])"));
}

TEST(Checkpoint, RequireWrongDtype) {
    test::TempDir tmp;
    write_single(tmp.path());
    Checkpoint c = Checkpoint::open(tmp.path());
    std::string msg = error_of([&] { c.require("w", DType::kBF16, {2, 3}); });
    EXPECT_THAT(msg, HasSubstr((tmp / "model.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\" has dtype F32, expected BF16"));
}

TEST(Checkpoint, RequireWrongShape) {
    test::TempDir tmp;
    write_single(tmp.path());
    Checkpoint c = Checkpoint::open(tmp.path());
    std::string msg = error_of([&] { c.require("w", DType::kF32, {3, 2}); });
    EXPECT_THAT(msg, HasSubstr((tmp / "model.safetensors").string()));
    EXPECT_THAT(msg, HasSubstr("tensor \"w\" has shape [2, 3], expected [3, 2]"));
    // Same element count but a different rank is still a mismatch.
    msg = error_of([&] { c.require("w", DType::kF32, {6}); });
    EXPECT_THAT(msg, HasSubstr("has shape [2, 3], expected [6]"));
}

TEST(Checkpoint, FolderNotFound) {
    test::TempDir tmp;
    std::string msg = error_of([&] { Checkpoint::open(tmp / "absent"); });
    EXPECT_THAT(msg, HasSubstr("checkpoint folder not found"));
    EXPECT_THAT(msg, HasSubstr("absent"));
}

TEST(Checkpoint, FolderWithoutWeights) {
    test::TempDir tmp;
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr(tmp.path().string()));
    EXPECT_THAT(msg, HasSubstr("no model.safetensors or model.safetensors.index.json found"));
}

TEST(Checkpoint, FixtureHasAllTensors) {
    Checkpoint c = Checkpoint::open(test::tiny_model_dir());
    EXPECT_EQ(c.tensor_count(), 79u);  // embed, norm, lm_head + 19 per layer x 4
    c.require("model.embed_tokens.weight", DType::kBF16, {201088, 32});
    c.require("lm_head.weight", DType::kBF16, {201088, 32});
    c.require("model.layers.3.mlp.experts.gate_up_proj_blocks", DType::kU8, {8, 192, 1, 16});
    c.require("model.layers.3.mlp.experts.down_proj_scales", DType::kU8, {8, 32, 3});
}

// --- Checkpoint (sharded) -------------------------------------------------------------------

const char* kShard1 = "model-00001-of-00002.safetensors";
const char* kShard2 = "model-00002-of-00002.safetensors";

// Shard 1 holds "a" (bytes 0..11) and "extra" (not indexed); shard 2 holds "b" and "c".
void write_shards(const fs::path& dir) {
    json h1;
    h1["a"] = entry("F32", {3}, 0, 12);
    h1["extra"] = entry("U8", {4}, 12, 16);
    test::write_file(dir / kShard1, st_file(h1, pattern(16, 0)));
    json h2;
    h2["b"] = entry("BF16", {2, 2}, 0, 8);
    h2["c"] = entry("U8", {5}, 8, 13);
    test::write_file(dir / kShard2, st_file(h2, pattern(13, 100)));
}

json index_json(const json& weight_map) {
    return {{"metadata", {{"total_size", 33}}}, {"weight_map", weight_map}};
}

void write_index(const fs::path& dir, const json& index) {
    test::write_file(dir / "model.safetensors.index.json", index.dump(2));
}

TEST(Checkpoint, ShardedTensorsComeFromTheirShard) {
    test::TempDir tmp;
    write_shards(tmp.path());
    write_index(tmp.path(), index_json({{"a", kShard1}, {"b", kShard2}, {"c", kShard2}}));
    Checkpoint c = Checkpoint::open(tmp.path());
    EXPECT_EQ(c.tensor_count(), 3u);
    EXPECT_EQ(c.files().size(), 2u);
    EXPECT_EQ(c.total_bytes(), 12u + 8u + 5u);

    const TensorInfo& a = c.require("a", DType::kF32, {3});
    EXPECT_EQ(*a.file, tmp / kShard1);
    EXPECT_EQ(a.data[0], 0);
    EXPECT_EQ(a.data[11], 11);
    const TensorInfo& b = c.require("b", DType::kBF16, {2, 2});
    EXPECT_EQ(*b.file, tmp / kShard2);
    EXPECT_EQ(b.data[0], 100);
    const TensorInfo& cc = c.require("c", DType::kU8, {5});
    EXPECT_EQ(*cc.file, tmp / kShard2);
    EXPECT_EQ(cc.data[0], 108);
    EXPECT_EQ(cc.data[4], 112);
    // In a shard but not in the index: ignored, like transformers.
    EXPECT_EQ(c.find("extra"), nullptr);
}

TEST(Checkpoint, IndexTakesPrecedenceOverSingleFile) {
    test::TempDir tmp;
    write_shards(tmp.path());
    write_single(tmp.path());
    write_index(tmp.path(), index_json({{"a", kShard1}}));
    Checkpoint c = Checkpoint::open(tmp.path());
    EXPECT_EQ(c.tensor_count(), 1u);
    EXPECT_EQ(c.find("w"), nullptr);
}

TEST(Checkpoint, ShardedMissingShardFile) {
    test::TempDir tmp;
    write_shards(tmp.path());
    fs::remove(tmp / kShard2);
    write_index(tmp.path(), index_json({{"a", kShard1}, {"b", kShard2}}));
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr("model.safetensors.index.json"));
    EXPECT_THAT(msg, HasSubstr((tmp / kShard2).string()));
    EXPECT_THAT(msg, HasSubstr("(listed for tensor \"b\") is missing"));
}

TEST(Checkpoint, ShardedIndexListsTensorTheShardLacks) {
    test::TempDir tmp;
    write_shards(tmp.path());
    write_index(tmp.path(), index_json({{"a", kShard1}, {"ghost", kShard2}}));
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr((tmp / kShard2).string()));
    EXPECT_THAT(msg, HasSubstr("tensor \"ghost\" is listed in model.safetensors.index.json but "
                               "that shard does not contain it"));
}

TEST(Checkpoint, ShardedTensorInWrongShard) {
    test::TempDir tmp;
    write_shards(tmp.path());
    write_index(tmp.path(), index_json({{"a", kShard2}, {"b", kShard2}}));
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr("tensor \"a\" is listed in"));
}

TEST(Checkpoint, ShardedIndexInvalidJson) {
    test::TempDir tmp;
    write_shards(tmp.path());
    test::write_file(tmp / "model.safetensors.index.json", "{\"weight_map\": {\"a\": ");
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr((tmp / "model.safetensors.index.json").string()));
    EXPECT_THAT(msg, HasSubstr("invalid JSON"));
}

TEST(Checkpoint, ShardedIndexWithoutWeightMap) {
    test::TempDir tmp;
    write_shards(tmp.path());
    write_index(tmp.path(), json{{"metadata", json::object()}});
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr("missing \"weight_map\" object"));

    write_index(tmp.path(), json::array({1}));
    msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr("missing \"weight_map\" object"));
}

TEST(Checkpoint, ShardedWeightMapValueMustBeAString) {
    test::TempDir tmp;
    write_shards(tmp.path());
    write_index(tmp.path(), index_json({{"a", 3}}));
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr("weight_map entry \"a\" must be a file name"));
}

TEST(Checkpoint, ShardNameWithAPathIsRejected) {
    test::TempDir tmp;
    fs::create_directory(tmp / "inner");
    write_shards(tmp / "inner");
    // The shard exists one level up from the checkpoint, but must not be reachable.
    write_shards(tmp.path());
    write_index(tmp / "inner", index_json({{"a", std::string("../") + kShard1}}));
    std::string msg = error_of([&] { Checkpoint::open(tmp / "inner"); });
    EXPECT_THAT(msg, HasSubstr("weight_map entry \"a\" names \"../" + std::string(kShard1) +
                               "\", which is not a file in the checkpoint folder"));

    for (const std::string bad : {"..", "/etc/passwd", "sub/x.safetensors", "."}) {
        write_index(tmp / "inner", index_json({{"a", bad}}));
        msg = error_of([&] { Checkpoint::open(tmp / "inner"); });
        EXPECT_THAT(msg, HasSubstr("is not a file in the checkpoint folder")) << bad;
    }
}

TEST(Checkpoint, ShardedTensorInTwoShardsIsAmbiguous) {
    test::TempDir tmp;
    json h1;
    h1["a"] = entry("U8", {4}, 0, 4);
    test::write_file(tmp / kShard1, st_file(h1, pattern(4)));
    json h2;
    h2["a"] = entry("U8", {4}, 0, 4);
    h2["b"] = entry("U8", {4}, 4, 8);
    test::write_file(tmp / kShard2, st_file(h2, pattern(8)));
    write_index(tmp.path(), index_json({{"a", kShard1}, {"b", kShard2}}));
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr("tensor \"a\" appears in more than one shard"));
}

TEST(Checkpoint, ShardedCorruptShardNamesTheShard) {
    test::TempDir tmp;
    write_shards(tmp.path());
    std::string bytes = test::read_file(tmp / kShard2);
    test::write_file(tmp / kShard2, bytes.substr(0, bytes.size() - 3));
    write_index(tmp.path(), index_json({{"a", kShard1}, {"b", kShard2}}));
    std::string msg = error_of([&] { Checkpoint::open(tmp.path()); });
    EXPECT_THAT(msg, HasSubstr((tmp / kShard2).string()));
    EXPECT_THAT(msg, HasSubstr("lie outside the data area"));
}

}  // namespace
}  // namespace neural
