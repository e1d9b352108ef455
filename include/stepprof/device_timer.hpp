// Device timing behind an interface: the recorder records an event on a device stream at
// region entry and exit (never waiting inside a region) and reads the elapsed times back
// once per optimizer update, in end_update(). Two implementations:
//   - make_cuda_device_timer(): CUDA events through the driver API, loaded at run time
//     with dlopen("libcuda.so.1"), so stepprof builds and runs without CUDA;
//   - FakeDeviceClock: a simulated device with streams and a clock the test advances,
//     so the read-back-at-the-boundary logic is tested on machines without a GPU.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace stepprof {

/// Events are numbered 0..capacity-1 by the recorder, which gives each device-timing
/// thread its own range. Thread safety: record() is called concurrently from several
/// threads on distinct events; the other functions are called with the recorder's lock
/// held (one at a time).
class DeviceTimer {
 public:
  enum class Query : std::uint8_t {
    kReady,     ///< both events completed; the elapsed time is set
    kNotReady,  ///< an event has not completed yet (the stream has not reached it)
    kError,     ///< the events cannot be read (e.g. never recorded, a driver error)
  };

  virtual ~DeviceTimer() = default;
  /// For the config record's `device_timing`: "cuda-events", "fake", or "off: <why>".
  [[nodiscard]] virtual std::string status() const = 0;
  /// False when device timing is off (status() says why); nothing else is then called.
  [[nodiscard]] virtual bool available() const = 0;
  /// Prepares event storage for event numbers [0, capacity). Called once, at open.
  virtual bool reserve(std::uint32_t capacity) noexcept = 0;
  /// Creates events [first, first + n) on the calling thread (its device context).
  virtual bool create_events(std::uint32_t first, std::uint32_t n) noexcept = 0;
  /// Makes the device context current on the calling thread if none is (CUDA).
  virtual bool bind_thread() noexcept = 0;
  /// Hot path: records event `event` on `stream` (asynchronous, never waits).
  virtual bool record(std::uint32_t event, void* stream) noexcept = 0;
  /// Update boundary: the device time between two recorded events [ms].
  virtual Query elapsed_ms(std::uint32_t start, std::uint32_t end, double& ms) noexcept = 0;
  /// Update boundary (sync_at_update): waits until all work queued on `stream` is done.
  virtual bool synchronize(void* stream) noexcept = 0;
  /// Destroys the events (the recorder has read back or dropped them all). Called by the
  /// next open() after close(), not by close(): a thread still timing regions may record
  /// one of them as close() runs; a process that never opens again leaves them to the
  /// driver at exit.
  virtual void release() noexcept = 0;
};

/// The CUDA driver-API timer. Never null. When libcuda.so.1 cannot be loaded, has no
/// device, or cuInit fails, available() is false and status() is "off: <why>", e.g.
/// "off: libcuda.so.1 not found". Uses the context current on the calling thread, else
/// retains the primary context of `device` (-1: device 0) and makes it current, as the
/// CUDA runtime would on its first call.
std::shared_ptr<DeviceTimer> make_cuda_device_timer(int device = -1);

/// A simulated device for tests. Each stream (any `void*`, nullptr included) is a queue
/// of work items; the device clock `now_ms()` only moves when the test calls advance()
/// or the recorder calls synchronize(). An event recorded on a stream completes when
/// the stream has finished all work queued before it:
///   launch(s, 5) at device time 0 -> the stream is busy until 5;
///   an event recorded next on s completes at 5, and is ready once now_ms() >= 5.
/// Thread-safe (one mutex).
class FakeDeviceClock final : public DeviceTimer {
 public:
  /// Queues `ms` of work on `stream`, after the work already queued there.
  void launch(void* stream, double ms);
  /// Moves the device clock forward by `ms` (work completes as time passes).
  void advance(double ms);
  [[nodiscard]] double now_ms() const;
  /// The next `n` record() calls fail (as a driver error would).
  void fail_next_records(int n);
  /// Counts of calls the recorder made, for tests.
  [[nodiscard]] int synchronize_calls() const;
  [[nodiscard]] int record_calls() const;
  [[nodiscard]] int release_calls() const;

  [[nodiscard]] std::string status() const override { return "fake"; }
  [[nodiscard]] bool available() const override { return true; }
  bool reserve(std::uint32_t capacity) noexcept override;
  bool create_events(std::uint32_t first, std::uint32_t n) noexcept override;
  bool bind_thread() noexcept override { return true; }
  bool record(std::uint32_t event, void* stream) noexcept override;
  Query elapsed_ms(std::uint32_t start, std::uint32_t end, double& ms) noexcept override;
  bool synchronize(void* stream) noexcept override;
  void release() noexcept override;

 private:
  struct Event {
    bool created = false;
    bool recorded = false;
    double at_ms = 0;  ///< device time at which the stream reaches the event
  };
  double tail(void* stream) const;  // when the stream's queued work ends

  mutable std::mutex mu_;
  double now_ = 0;
  std::map<void*, double> tail_;  // stream -> end of its queued work [ms]
  std::vector<Event> events_;
  int fail_records_ = 0;
  int synchronize_calls_ = 0;
  int record_calls_ = 0;
  int release_calls_ = 0;
};

}  // namespace stepprof
