// CUDA events through the driver API, loaded at run time (dlopen "libcuda.so.1"), so the
// recorder needs no CUDA to build or run. Device time of a region = cuEventElapsedTime
// between events recorded on its stream at entry and exit, read back at the update
// boundary (completion polled with cuEventQuery, as the CUDA documentation advises).
#include <dlfcn.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_driver.hpp"
#include "stepprof/device_timer.hpp"

namespace stepprof {
namespace {

using namespace detail::cu;

class CudaDeviceTimer final : public DeviceTimer {
 public:
  explicit CudaDeviceTimer(int device) { status_ = init(device); }

  ~CudaDeviceTimer() override {
    release();
    if (owns_primary_ && d_.cuDevicePrimaryCtxRelease) {
      d_.cuDevicePrimaryCtxRelease(device_);
      // When that was the primary context's last holder, the context is gone but stays
      // current on the thread that set it: every later driver call there (a module load, a
      // second recorder's events) would fail with CUDA_ERROR_CONTEXT_IS_DESTROYED. Leave the
      // calling thread without it, as it was before open(). (Other threads bound to it are
      // handled by the next timer's init(), which does not adopt a destroyed context.)
      unsigned flags = 0;
      int active = 1;
      CUcontext current = nullptr;
      if (d_.cuDevicePrimaryCtxGetState(device_, &flags, &active) == CUDA_SUCCESS && !active &&
          d_.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current == ctx_)
        d_.cuCtxSetCurrent(nullptr);
    }
    // libcuda stays loaded: unloading the driver under a running process is not safe.
  }

  [[nodiscard]] std::string status() const override { return status_; }
  [[nodiscard]] bool available() const override { return ctx_ != nullptr; }

  bool reserve(std::uint32_t capacity) noexcept override {
    try {
      events_.assign(capacity, nullptr);
      return true;
    } catch (...) {
      return false;
    }
  }

  bool create_events(std::uint32_t first, std::uint32_t n) noexcept override {
    if (static_cast<std::uint64_t>(first) + n > events_.size()) return false;
    for (std::uint32_t i = first; i < first + n; ++i) {
      if (events_[i]) continue;
      CUevent e = nullptr;
      if (d_.cuEventCreate(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return false;
      events_[i] = e;
    }
    return true;
  }

  bool bind_thread() noexcept override {
    CUcontext current = nullptr;
    if (d_.cuCtxGetCurrent(&current) != CUDA_SUCCESS) return false;
    if (current) return true;  // the thread's own context (e.g. set by the CUDA runtime)
    return d_.cuCtxSetCurrent(ctx_) == CUDA_SUCCESS;
  }

  bool record(std::uint32_t event, void* stream) noexcept override {
    return d_.cuEventRecord(events_[event], static_cast<CUstream>(stream)) == CUDA_SUCCESS;
  }

  Query elapsed_ms(std::uint32_t start, std::uint32_t end, double& ms) noexcept override {
    for (const std::uint32_t e : {end, start}) {
      const CUresult q = d_.cuEventQuery(events_[e]);
      if (q == CUDA_ERROR_NOT_READY) return Query::kNotReady;
      if (q != CUDA_SUCCESS) return Query::kError;
    }
    float f = 0;
    const CUresult r = d_.cuEventElapsedTime(&f, events_[start], events_[end]);
    if (r == CUDA_ERROR_NOT_READY) return Query::kNotReady;
    if (r != CUDA_SUCCESS) return Query::kError;
    ms = static_cast<double>(f);
    return Query::kReady;
  }

  bool synchronize(void* stream) noexcept override {
    return d_.cuStreamSynchronize(static_cast<CUstream>(stream)) == CUDA_SUCCESS;
  }

  void release() noexcept override {
    if (!d_.cuEventDestroy) return;
    for (CUevent& e : events_) {
      if (e) d_.cuEventDestroy(e);
      e = nullptr;
    }
  }

 private:
  template <typename F>
  bool sym(F& out, const char* name, const char* fallback = nullptr) {
    void* p = dlsym(lib_, name);
    if (!p && fallback) p = dlsym(lib_, fallback);
    out = reinterpret_cast<F>(p);
    if (!p) missing_ = name;
    return p != nullptr;
  }

  std::string error_text(CUresult r) const {
    const char* s = nullptr;
    if (d_.cuGetErrorString && d_.cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
    return "CUDA error " + std::to_string(r);
  }

  // Returns the status string; ctx_ is set only on success.
  std::string init(int device) {
    lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return "off: libcuda.so.1 not found";
    const bool ok = sym(d_.cuInit, "cuInit") && sym(d_.cuDeviceGetCount, "cuDeviceGetCount") &&
                    sym(d_.cuDeviceGet, "cuDeviceGet") && sym(d_.cuCtxGetCurrent, "cuCtxGetCurrent") &&
                    sym(d_.cuCtxSetCurrent, "cuCtxSetCurrent") && sym(d_.cuCtxGetDevice, "cuCtxGetDevice") &&
                    sym(d_.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain") &&
                    sym(d_.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease") &&
                    sym(d_.cuDevicePrimaryCtxGetState, "cuDevicePrimaryCtxGetState") &&
                    sym(d_.cuEventCreate, "cuEventCreate") &&
                    sym(d_.cuEventDestroy, "cuEventDestroy_v2", "cuEventDestroy") &&
                    sym(d_.cuEventRecord, "cuEventRecord") && sym(d_.cuEventQuery, "cuEventQuery") &&
                    sym(d_.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime") &&
                    sym(d_.cuStreamSynchronize, "cuStreamSynchronize") &&
                    sym(d_.cuGetErrorString, "cuGetErrorString");
    if (!ok) return std::string("off: libcuda.so.1 lacks ") + missing_;
    if (CUresult r = d_.cuInit(0); r != CUDA_SUCCESS) return "off: cuInit failed: " + error_text(r);
    int count = 0;
    if (CUresult r = d_.cuDeviceGetCount(&count); r != CUDA_SUCCESS) return "off: cuDeviceGetCount failed: " + error_text(r);
    if (count == 0) return "off: no CUDA device";
    CUcontext current = nullptr;
    if (CUresult r = d_.cuCtxGetCurrent(&current); r != CUDA_SUCCESS) return "off: cuCtxGetCurrent failed: " + error_text(r);
    if (current) {
      // The thread's own context (the CUDA runtime's, e.g. torch's), unless it was destroyed
      // while current: a primary context released by its last holder (an earlier recorder
      // of this process, closed on another thread) stays current, and nothing can be
      // created in it. An event made and destroyed tells.
      CUresult r = d_.cuCtxGetDevice(&device_);
      CUevent probe = nullptr;
      if (r == CUDA_SUCCESS) r = d_.cuEventCreate(&probe, CU_EVENT_DEFAULT);
      if (r == CUDA_SUCCESS) {
        d_.cuEventDestroy(probe);
        ctx_ = current;
        return "cuda-events";
      }
      if (r != CUDA_ERROR_CONTEXT_IS_DESTROYED) return "off: the current CUDA context is not usable: " + error_text(r);
      // A destroyed context: made current again below by retaining `device`'s primary one.
    }
    const int ordinal = device < 0 ? 0 : device;
    if (ordinal >= count) return "off: CUDA device " + std::to_string(ordinal) + " not present (" + std::to_string(count) + " devices)";
    if (CUresult r = d_.cuDeviceGet(&device_, ordinal); r != CUDA_SUCCESS) return "off: cuDeviceGet failed: " + error_text(r);
    CUcontext primary = nullptr;
    if (CUresult r = d_.cuDevicePrimaryCtxRetain(&primary, device_); r != CUDA_SUCCESS)
      return "off: cuDevicePrimaryCtxRetain failed: " + error_text(r);
    owns_primary_ = true;
    if (CUresult r = d_.cuCtxSetCurrent(primary); r != CUDA_SUCCESS) return "off: cuCtxSetCurrent failed: " + error_text(r);
    ctx_ = primary;
    return "cuda-events";
  }

  void* lib_ = nullptr;
  Driver d_;
  const char* missing_ = "";
  std::string status_;
  CUcontext ctx_ = nullptr;
  CUdevice device_ = 0;
  bool owns_primary_ = false;
  std::vector<CUevent> events_;
};

}  // namespace

std::shared_ptr<DeviceTimer> make_cuda_device_timer(int device) {
  return std::make_shared<CudaDeviceTimer>(device);
}

}  // namespace stepprof
