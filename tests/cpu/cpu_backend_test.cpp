// The CPU backend behind Model::forward (cpu/cpu_backend.h): the same bits as the reference model
// it wraps, what it says about itself, and the kernel names it accepts.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/kernels/dense_int8.h"
#include "runtime/model.h"
#include "support/fixtures.h"

namespace neural {
namespace {

TEST(CpuBackend, ModelForwardIsTheReferenceModelBitForBit) {
    LoadOptions reference;
    reference.kernel = "reference";  // the plain path; the fast path's own tests: fast_path_test
    const auto model = Model::load(test::tiny_model_dir(), reference);
    EXPECT_STREQ(model->backend_name(), "cpu");
    EXPECT_EQ(model->describe_backend(), "cpu (fp32 reference)");
    EXPECT_EQ(model->describe_experts(), "reference path");
    EXPECT_EQ(model->store_pin().pinned, false);
    const std::vector<TokenId> ids = {1, 7, 42, 3, 99, 5};
    ForwardOptions all;
    all.all_logits = true;
    KvCache a = model->new_cache(), b = model->new_cache();
    const std::vector<float> through_model = model->forward(ids, a, all);
    const std::vector<float> direct = model->cpu().forward(ids, b, all);
    ASSERT_EQ(through_model.size(), direct.size());
    EXPECT_EQ(std::memcmp(through_model.data(), direct.data(), direct.size() * sizeof(float)), 0);
    EXPECT_EQ(a.size(), b.size());
    // A decode step on each cache stays identical too.
    const TokenId next = 11;
    const std::vector<float> m1 = model->forward(std::span<const TokenId>(&next, 1), a);
    const std::vector<float> d1 = model->cpu().forward(std::span<const TokenId>(&next, 1), b);
    ASSERT_EQ(m1.size(), d1.size());
    EXPECT_EQ(std::memcmp(m1.data(), d1.data(), d1.size() * sizeof(float)), 0);
}

TEST(CpuBackend, BadTokenLeavesTheCacheAsItWas) {
    const auto model = Model::load(test::tiny_model_dir());  // the default: the fast path
    KvCache cache = model->new_cache();
    const std::vector<TokenId> ok = {1, 2, 3};
    model->forward(ok, cache);
    const std::vector<TokenId> bad = {4, model->config().vocab_size};
    const std::string msg = test::error_of([&] { model->forward(bad, cache); });
    EXPECT_NE(msg.find("vocabulary"), std::string::npos) << msg;
    EXPECT_EQ(cache.size(), 3);
}

TEST(CpuBackend, KernelNames) {
    EXPECT_FALSE(parse_cpu_kernel("reference").has_value());
    ASSERT_TRUE(parse_cpu_kernel("scalar").has_value());
    EXPECT_EQ(*parse_cpu_kernel("scalar"), cpu::KernelIsa::scalar);
    const std::string msg = test::error_of([] { parse_cpu_kernel("avx1024"); });
    EXPECT_NE(msg.find("unknown kernel \"avx1024\""), std::string::npos) << msg;
}

// --dense names: auto is int8 exactly where a SIMD int8 variant goes with the expert kernel;
// the backend names its dense part.
TEST(CpuBackend, DenseNames) {
    for (cpu::KernelIsa isa :
         {cpu::KernelIsa::scalar, cpu::KernelIsa::avx2, cpu::KernelIsa::avx512}) {
        // auto keeps the checkpoint's bf16 weights on every CPU; the int8 paths only by name.
        EXPECT_EQ(parse_cpu_dense("auto", isa), CpuDense::bf16);
        EXPECT_EQ(parse_cpu_dense("bf16", isa), CpuDense::bf16);
        EXPECT_EQ(parse_cpu_dense("int8-head", isa), CpuDense::int8_head);
        EXPECT_EQ(parse_cpu_dense("int8", isa), CpuDense::int8);
        EXPECT_EQ(parse_cpu_dense("reference", isa), CpuDense::reference);
    }
    EXPECT_EQ(parse_cpu_dense("auto", cpu::KernelIsa::scalar), CpuDense::bf16);
    const std::string msg = test::error_of([] { parse_cpu_dense("fp8", cpu::KernelIsa::scalar); });
    EXPECT_NE(msg.find("unknown dense path \"fp8\""), std::string::npos) << msg;
    LoadOptions o;
    o.kernel = "scalar";
    o.dense = "int8";
    EXPECT_NE(Model::load(test::tiny_model_dir(), o)->describe_backend().find("dense int8-scalar"),
              std::string::npos);
    o.dense = "int8-head";
    EXPECT_NE(Model::load(test::tiny_model_dir(), o)
                  ->describe_backend()
                  .find("dense int8-scalar lm_head, scalar"),
              std::string::npos);
    o.dense = "bf16";
    EXPECT_NE(Model::load(test::tiny_model_dir(), o)->describe_backend().find("dense scalar"),
              std::string::npos);
}

}  // namespace
}  // namespace neural
