// Compile-time check: the recorder's hand-written CUDA driver declarations
// (src/recorder/cuda_driver.hpp) match cuda.h, where the CUDA headers are installed.
// The build is the test; running it only prints what was checked.
#include <cuda.h>

#include <cstdio>
#include <type_traits>

#include "cuda_driver.hpp"
#include "gpu_test_driver.hpp"

namespace cu = stepprof::detail::cu;

// A parameter matches when the types are the same, or when cuda.h has an enum (CUresult)
// where the recorder has an integer of the same size (passed the same way).
template <typename Mine, typename Theirs>
constexpr bool kSameParam = std::is_same_v<Mine, Theirs> ||
                            (std::is_enum_v<Theirs> && std::is_integral_v<Mine> && sizeof(Mine) == sizeof(Theirs));

// Same parameters, and the int-sized result for cuda.h's enum CUresult.
template <typename Mine, typename Theirs>
struct SameSignature : std::false_type {};
template <typename... A, typename... B>
struct SameSignature<cu::CUresult (*)(A...), CUresult (*)(B...)>
    : std::bool_constant<sizeof...(A) == sizeof...(B) && (kSameParam<A, B> && ...)> {};

#define CHECK_SIG(name, real)                                                          \
  static_assert(SameSignature<cu::PFN_##name, decltype(&::real)>::value,               \
                #name " in cuda_driver.hpp does not match cuda.h's " #real)

CHECK_SIG(cuInit, cuInit);
CHECK_SIG(cuDeviceGetCount, cuDeviceGetCount);
CHECK_SIG(cuDeviceGet, cuDeviceGet);
CHECK_SIG(cuCtxGetCurrent, cuCtxGetCurrent);
CHECK_SIG(cuCtxSetCurrent, cuCtxSetCurrent);
CHECK_SIG(cuCtxGetDevice, cuCtxGetDevice);
CHECK_SIG(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
CHECK_SIG(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
CHECK_SIG(cuDevicePrimaryCtxGetState, cuDevicePrimaryCtxGetState);
CHECK_SIG(cuEventCreate, cuEventCreate);
CHECK_SIG(cuEventDestroy, cuEventDestroy_v2);
CHECK_SIG(cuEventRecord, cuEventRecord);
CHECK_SIG(cuEventQuery, cuEventQuery);
CHECK_SIG(cuEventElapsedTime, cuEventElapsedTime_v2);
CHECK_SIG(cuStreamSynchronize, cuStreamSynchronize);
CHECK_SIG(cuGetErrorString, cuGetErrorString);

namespace gpu = stepprof::test::gpu;
#define CHECK_TEST_SIG(name, real)                                                     \
  static_assert(SameSignature<gpu::PFN_##name, decltype(&::real)>::value,              \
                #name " in gpu_test_driver.hpp does not match cuda.h's " #real)
CHECK_TEST_SIG(cuModuleLoadData, cuModuleLoadData);
CHECK_TEST_SIG(cuModuleGetFunction, cuModuleGetFunction);
CHECK_TEST_SIG(cuModuleUnload, cuModuleUnload);
CHECK_TEST_SIG(cuLaunchKernel, cuLaunchKernel);
CHECK_TEST_SIG(cuStreamCreate, cuStreamCreate);
CHECK_TEST_SIG(cuStreamDestroy, cuStreamDestroy_v2);
CHECK_TEST_SIG(cuCtxSynchronize, cuCtxSynchronize);

static_assert(sizeof(CUresult) == sizeof(cu::CUresult));
static_assert(std::is_same_v<cu::CUevent, CUevent> && std::is_same_v<cu::CUstream, CUstream> &&
              std::is_same_v<cu::CUcontext, CUcontext> && std::is_same_v<cu::CUdevice, CUdevice>);
static_assert(cu::CUDA_SUCCESS == CUDA_SUCCESS && cu::CUDA_ERROR_NOT_READY == CUDA_ERROR_NOT_READY);
static_assert(cu::CU_EVENT_DEFAULT == CU_EVENT_DEFAULT);

int main() {
  std::printf("cuda_driver.hpp matches cuda.h (CUDA_VERSION %d)\n", CUDA_VERSION);
  return 0;
}
