#include <gtest/gtest.h>

#include <cstdio>

#include "cuda/abi_layout.h"
#include "cuda/abi_probe.h"
#include "cuda/device.h"
#include "cuda/driver/kernels.h"

namespace neural {
namespace {

TEST(CudaDevice, ListsDevicesAndRunsAKernel) {
    std::string why;
    auto devices = cuda::list_devices(&why);
    if (devices.empty()) GTEST_SKIP() << "no GPU: " << why;
    for (const auto& d : devices) {
        EXPECT_FALSE(d.name.empty());
        EXPECT_GT(d.total_bytes, 0u);
        EXPECT_LE(d.free_bytes, d.total_bytes);
        EXPECT_GE(d.compute_major, 7) << d.name << " is older than the oldest architecture built";
        EXPECT_EQ(cuda::self_test(d.index), "") << d.name;
    }
}

}  // namespace
}  // namespace neural

// ---- the driver-API backend: fatbin, kernel names, shared-struct layout --------------------------

namespace neural {
namespace {

TEST(CudaFatbin, EveryKernelTheHostNamesIsInTheFatbin) {
    ASSERT_GT(cuda::embedded_fatbin().size, 0u);
    std::string why;
    if (cuda::list_devices(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
    ASSERT_EQ(cuda::drv::set_device(0), CUDA_SUCCESS);
    CUmodule module = nullptr;
    ASSERT_EQ(cuda::module_for_current_device(&module, &why), CUDA_SUCCESS) << why;
    const auto& names = cuda::kernel_names();
    EXPECT_GE(names.size(), 40u);
    for (const char* name : names) {
        CUfunction f = nullptr;
        EXPECT_EQ(cuda::api().cuModuleGetFunction(&f, module, name), CUDA_SUCCESS)
            << name << " is named by the host but missing from the fatbin";
    }
    // A name the fatbin lacks is reported as such, never launched.
    CUfunction f = nullptr;
    EXPECT_EQ(cuda::api().cuModuleGetFunction(&f, module, "no_such_kernel"), CUDA_ERROR_NOT_FOUND);
    const cuda::Kernel<void(int)> missing("no_such_kernel_either");
    EXPECT_EQ(missing.launch(1, 1, 0, nullptr, 0), CUDA_ERROR_NOT_FOUND);
    EXPECT_EQ(cuda::drv::get_last_error(), CUDA_ERROR_NOT_FOUND);
    EXPECT_GT(cuda::module_load_ms(), 0.0);
    std::printf("fatbin %zu bytes, module load %.2f ms, %zu kernels\n",
                cuda::embedded_fatbin().size, cuda::module_load_ms(), names.size());
}

TEST(CudaAbi, HostAndDeviceLayoutsAgree) {
    std::string why;
    if (cuda::list_devices(&why).empty()) GTEST_SKIP() << "no GPU: " << why;
    ASSERT_EQ(cuda::drv::set_device(0), CUDA_SUCCESS);
    const auto host = cuda::host_abi_layout();
    const auto device = cuda::device_abi_layout(&why);
    ASSERT_EQ(device.size(), host.size()) << why;
    ASSERT_EQ(static_cast<int>(host.size()), cuda::kAbiLayoutCount);
    for (std::size_t i = 0; i < host.size(); ++i) {
        EXPECT_EQ(host[i].value, device[i].value) << host[i].what;
    }
}

}  // namespace
}  // namespace neural
