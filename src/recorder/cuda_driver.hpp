// The few CUDA driver-API types and entry points the recorder uses, declared here so that
// stepprof builds without CUDA headers; the library is loaded at run time with dlopen.
// Signatures from cuda.h (CUDA 12/13); tests/test_cuda_decls.cpp checks them against the
// real header when it is installed.
#pragma once

#include <cstdint>

// Opaque handle types, spelled as in cuda.h so the pointers are the same types.
struct CUctx_st;
struct CUevent_st;
struct CUstream_st;

namespace stepprof::detail::cu {

using CUresult = int;  // cuda.h: enum cudaError_enum, int-sized
using CUdevice = int;
using CUcontext = ::CUctx_st*;
using CUevent = ::CUevent_st*;
using CUstream = ::CUstream_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
/// The calling thread's current context was destroyed, or is a primary context that is not
/// active (released by its last holder while still current on this thread).
inline constexpr CUresult CUDA_ERROR_CONTEXT_IS_DESTROYED = 709;
inline constexpr unsigned CU_EVENT_DEFAULT = 0x0;  // timing enabled

using PFN_cuInit = CUresult (*)(unsigned int flags);
using PFN_cuDeviceGetCount = CUresult (*)(int* count);
using PFN_cuDeviceGet = CUresult (*)(CUdevice* device, int ordinal);
using PFN_cuCtxGetCurrent = CUresult (*)(CUcontext* pctx);
using PFN_cuCtxSetCurrent = CUresult (*)(CUcontext ctx);
using PFN_cuCtxGetDevice = CUresult (*)(CUdevice* device);
using PFN_cuDevicePrimaryCtxRetain = CUresult (*)(CUcontext* pctx, CUdevice dev);
using PFN_cuDevicePrimaryCtxRelease = CUresult (*)(CUdevice dev);  // symbol cuDevicePrimaryCtxRelease_v2
using PFN_cuDevicePrimaryCtxGetState = CUresult (*)(CUdevice dev, unsigned int* flags, int* active);
using PFN_cuEventCreate = CUresult (*)(CUevent* phEvent, unsigned int flags);
using PFN_cuEventDestroy = CUresult (*)(CUevent hEvent);  // symbol cuEventDestroy_v2
using PFN_cuEventRecord = CUresult (*)(CUevent hEvent, CUstream hStream);
using PFN_cuEventQuery = CUresult (*)(CUevent hEvent);
using PFN_cuEventElapsedTime = CUresult (*)(float* pMilliseconds, CUevent hStart, CUevent hEnd);
using PFN_cuStreamSynchronize = CUresult (*)(CUstream hStream);
using PFN_cuGetErrorString = CUresult (*)(CUresult error, const char** pStr);

/// The loaded entry points (all non-null once load() succeeded).
struct Driver {
  PFN_cuInit cuInit = nullptr;
  PFN_cuDeviceGetCount cuDeviceGetCount = nullptr;
  PFN_cuDeviceGet cuDeviceGet = nullptr;
  PFN_cuCtxGetCurrent cuCtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent cuCtxSetCurrent = nullptr;
  PFN_cuCtxGetDevice cuCtxGetDevice = nullptr;
  PFN_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain = nullptr;
  PFN_cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease = nullptr;
  PFN_cuDevicePrimaryCtxGetState cuDevicePrimaryCtxGetState = nullptr;
  PFN_cuEventCreate cuEventCreate = nullptr;
  PFN_cuEventDestroy cuEventDestroy = nullptr;
  PFN_cuEventRecord cuEventRecord = nullptr;
  PFN_cuEventQuery cuEventQuery = nullptr;
  PFN_cuEventElapsedTime cuEventElapsedTime = nullptr;
  PFN_cuStreamSynchronize cuStreamSynchronize = nullptr;
  PFN_cuGetErrorString cuGetErrorString = nullptr;
};

}  // namespace stepprof::detail::cu
