// Driver-API entry points the real-GPU test uses to run a kernel (besides those the
// recorder itself loads, src/recorder/cuda_driver.hpp). Checked against cuda.h by
// test_cuda_decls.cpp where the CUDA headers are installed.
#pragma once

#include <cstddef>

#include "cuda_driver.hpp"

struct CUmod_st;
struct CUfunc_st;

namespace stepprof::test::gpu {

using stepprof::detail::cu::CUresult;
using stepprof::detail::cu::CUstream;
using CUmodule = ::CUmod_st*;
using CUfunction = ::CUfunc_st*;

using PFN_cuModuleLoadData = CUresult (*)(CUmodule* module, const void* image);
using PFN_cuModuleGetFunction = CUresult (*)(CUfunction* hfunc, CUmodule hmod, const char* name);
using PFN_cuModuleUnload = CUresult (*)(CUmodule hmod);
using PFN_cuLaunchKernel = CUresult (*)(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                                        void** kernelParams, void** extra);
using PFN_cuStreamCreate = CUresult (*)(CUstream* phStream, unsigned int Flags);
using PFN_cuStreamDestroy = CUresult (*)(CUstream hStream);  // symbol cuStreamDestroy_v2
using PFN_cuCtxSynchronize = CUresult (*)();

}  // namespace stepprof::test::gpu
