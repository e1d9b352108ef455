// The recorder on a real NVIDIA GPU, through the CUDA driver API: regions around kernels
// that spin for a known time on the GPU's global timer (tests/gpu_spin.ptx, JIT-compiled
// by the driver, so no nvcc is needed). Skips (passes) without a CUDA driver and device;
// scripts/gpu-test.sh runs it on a GPU machine.
//
// Tolerances: a kernel spins until >= the requested ns have passed on %globaltimer
// (updated about every microsecond), and CUDA events resolve about 0.5 us, so the device
// time of a region holding one kernel is at least the spin minus 0.1 ms; the upper bound
// allows 2 ms of launch latency and scheduling per kernel.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "gpu_test_driver.hpp"
#include "recorder_test_util.hpp"
#include "stepprof/device_timer.hpp"
#include "stepprof/stepprof.hpp"

using namespace stepprof;
using namespace stepprof::test;
namespace g = stepprof::test::gpu;

namespace {

// The test's own handle on the driver, to load the kernel and launch it.
struct Kernel {
  void* lib = nullptr;
  g::PFN_cuModuleLoadData load = nullptr;
  g::PFN_cuModuleGetFunction get = nullptr;
  g::PFN_cuModuleUnload unload = nullptr;
  g::PFN_cuLaunchKernel launch = nullptr;
  g::PFN_cuStreamCreate stream_create = nullptr;
  g::PFN_cuStreamDestroy stream_destroy = nullptr;
  g::PFN_cuCtxSynchronize ctx_sync = nullptr;
  g::CUmodule module = nullptr;
  g::CUfunction spin = nullptr;

  // Needs a current context (the recorder's open() made one current).
  std::string init() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return "libcuda.so.1 not found";
    load = reinterpret_cast<g::PFN_cuModuleLoadData>(dlsym(lib, "cuModuleLoadData"));
    get = reinterpret_cast<g::PFN_cuModuleGetFunction>(dlsym(lib, "cuModuleGetFunction"));
    unload = reinterpret_cast<g::PFN_cuModuleUnload>(dlsym(lib, "cuModuleUnload"));
    launch = reinterpret_cast<g::PFN_cuLaunchKernel>(dlsym(lib, "cuLaunchKernel"));
    stream_create = reinterpret_cast<g::PFN_cuStreamCreate>(dlsym(lib, "cuStreamCreate"));
    stream_destroy = reinterpret_cast<g::PFN_cuStreamDestroy>(dlsym(lib, "cuStreamDestroy_v2"));
    ctx_sync = reinterpret_cast<g::PFN_cuCtxSynchronize>(dlsym(lib, "cuCtxSynchronize"));
    if (!load || !get || !unload || !launch || !stream_create || !stream_destroy || !ctx_sync)
      return "missing driver entry points";
    std::ifstream in(std::string(STEPPROF_SOURCE_DIR) + "/tests/gpu_spin.ptx");
    std::stringstream ptx;
    ptx << in.rdbuf();
    const std::string text = ptx.str();
    if (text.empty()) return "cannot read tests/gpu_spin.ptx";
    if (int r = load(&module, text.c_str()); r != 0) return "cuModuleLoadData failed: " + std::to_string(r);
    if (int r = get(&spin, module, "stepprof_spin_ns"); r != 0) return "cuModuleGetFunction failed: " + std::to_string(r);
    return {};
  }

  // Queues a one-thread kernel that spins `ms` on `stream` (asynchronous).
  void spin_ms(double ms, g::CUstream stream = nullptr) {
    auto ns = static_cast<unsigned long long>(ms * 1e6);
    void* params[] = {&ns};
    ASSERT_EQ(launch(spin, 1, 1, 1, 1, 1, 1, 0, stream, params, nullptr), 0);
  }

  ~Kernel() {
    if (module) unload(module);
  }
};

double device_ms(const Json& u, const char* region) { return u["cuda_stream_ms"][region].get<double>(); }

// A recorder writing `path` with device timing on (the default, kAuto).
Options gpu_options(const std::string& path) {
  Options o;
  o.path = path;
  o.run_id = "gpu-test";
  return o;
}

}  // namespace

class GpuRecorderTest : public RecorderTest {
 protected:
  void SetUp() override {
    const auto timer = make_cuda_device_timer();
    if (!timer->available()) GTEST_SKIP() << "no CUDA device: " << timer->status();
  }
};

TEST_F(GpuRecorderTest, RegionsAroundKernelsGetTheirDeviceTime) {
  TempLog log("gpu");
  Options o = gpu_options(log.path);
  ASSERT_EQ(open(o), Status::kOk);
  Kernel k;
  const std::string err = k.init();
  ASSERT_EQ(err, "");
  k.spin_ms(1);  // warm-up: JIT and first-launch costs outside the measured update
  ASSERT_EQ(end_update(0), Status::kOk);

  double host_launch = 0;
  const double t0 = now_ms();
  {
    STEPPROF_REGION("gpu_outer");
    k.spin_ms(5);
    {
      STEPPROF_REGION("gpu_inner");
      const double l0 = now_ms();
      k.spin_ms(10);
      host_launch = now_ms() - l0;
    }
    k.spin_ms(5);
  }
  const double host_region = now_ms() - t0;
  ASSERT_EQ(end_update(1), Status::kOk);  // synchronizes: the update's wall time covers the kernels
  ASSERT_EQ(close(), Status::kOk);

  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["device_timing"], "cuda-events");
  const Json& u = lines[2];
  EXPECT_GE(device_ms(u, "gpu_inner"), 10 - 0.1);
  EXPECT_LE(device_ms(u, "gpu_inner"), 10 + 2);
  EXPECT_GE(device_ms(u, "gpu_outer"), 20 - 0.1);
  EXPECT_LE(device_ms(u, "gpu_outer"), 20 + 3 * 2);
  EXPECT_GE(u["wall_ms"].get<double>(), 20 - 0.1);
  // The launches are asynchronous: unless the launch queue blocked, the host region ends
  // long before the GPU work does.
  if (host_region < 10) {
    EXPECT_LT(u["cpu_call_ms"]["gpu_outer"].get<double>(), 10.0);
  }
  EXPECT_LT(host_launch, 10.0);
  EXPECT_EQ(u["parents"]["gpu_inner"], "gpu_outer");
}

TEST_F(GpuRecorderTest, WithoutBoundarySyncLateTimesArriveInALaterRecord) {
  TempLog log("gpu-nosync");
  Options o = gpu_options(log.path);
  o.sync_at_update = false;
  ASSERT_EQ(open(o), Status::kOk);
  Kernel k;
  ASSERT_EQ(k.init(), "");
  k.spin_ms(1);
  ASSERT_EQ(k.ctx_sync(), 0);
  ASSERT_EQ(begin_update(), Status::kOk);  // the update's wall time starts here
  {
    STEPPROF_REGION("gpu_late");
    k.spin_ms(200);
  }
  ASSERT_EQ(end_update(0), Status::kOk);  // the kernel is still running: not read yet
  ASSERT_EQ(k.ctx_sync(), 0);
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_FALSE(lines[1].contains("cuda_stream_ms"));
  EXPECT_EQ(lines[1]["calls"]["gpu_late"], 1);
  EXPECT_GE(device_ms(lines[2], "gpu_late"), 200 - 0.1);
  EXPECT_LE(device_ms(lines[2], "gpu_late"), 200 + 2);
  EXPECT_LT(lines[1]["wall_ms"].get<double>(), 200.0);  // end_update did not wait
}

TEST_F(GpuRecorderTest, AThreadTimesOnItsOwnStream) {
  TempLog log("gpu-thread");
  Options o = gpu_options(log.path);
  ASSERT_EQ(open(o), Status::kOk);
  Kernel k;
  ASSERT_EQ(k.init(), "");
  g::CUstream side = nullptr;
  std::thread worker([&] {
    ASSERT_EQ(set_device_stream(nullptr), Status::kOk);  // binds the recorder's context to this thread
    ASSERT_EQ(k.stream_create(&side, 0x1 /* CU_STREAM_NON_BLOCKING */), 0);
    ASSERT_EQ(set_device_stream(side), Status::kOk);
    STEPPROF_REGION("gpu_side");
    k.spin_ms(10, side);
  });
  worker.join();
  ASSERT_EQ(end_update(0), Status::kOk);  // synchronizes the side stream too
  ASSERT_EQ(close(), Status::kOk);
  if (side) k.stream_destroy(side);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_GE(device_ms(lines[1], "gpu_side"), 10 - 0.1);
  EXPECT_LE(device_ms(lines[1], "gpu_side"), 10 + 2);
}

// A recorder that retained the primary context and was closed on another thread leaves
// that context current but destroyed on the thread that opened it (the driver then fails
// every call there with CUDA_ERROR_CONTEXT_IS_DESTROYED). The next recorder opened on that
// thread must not adopt it: it makes the primary context current again, and times regions.
TEST_F(GpuRecorderTest, ARecorderClosedOnAnotherThreadLeavesTheNextOneWorking) {
  {
    TempLog first("gpu-first");
    Options o = gpu_options(first.path);
    ASSERT_EQ(open(o), Status::kOk);
    ASSERT_EQ(end_update(0), Status::kOk);
    std::thread closer([] { EXPECT_EQ(close(), Status::kOk); });
    closer.join();
  }
  TempLog log("gpu-second");
  Options o = gpu_options(log.path);
  ASSERT_EQ(open(o), Status::kOk);
  Kernel k;
  ASSERT_EQ(k.init(), "");
  k.spin_ms(1);
  ASSERT_EQ(end_update(0), Status::kOk);
  {
    STEPPROF_REGION("gpu_after_reopen");
    k.spin_ms(10);
  }
  ASSERT_EQ(end_update(1), Status::kOk);
  ASSERT_EQ(close(), Status::kOk);
  const auto lines = read_lines(log.path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["device_timing"], "cuda-events");
  EXPECT_GE(device_ms(lines[2], "gpu_after_reopen"), 10 - 0.1);
  EXPECT_LE(device_ms(lines[2], "gpu_after_reopen"), 10 + 2);
}
