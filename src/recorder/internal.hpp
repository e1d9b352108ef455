// Internals of the recorder shared by its source files (not installed).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "stepprof/device_timer.hpp"
#include "stepprof/names.hpp"
#include "stepprof/stepprof.hpp"

namespace stepprof::detail {

inline constexpr std::uint32_t kMaxCounters = 1024;  ///< distinct counter names per process

/// The largest count, dimension or index a record holds: 2^53, the last integer a double
/// holds exactly (what the reader admits as a count; a larger value makes it reject the
/// whole record).
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 53;
/// True for a count, dimension or dataset index a record can hold: 0 to kMaxCount.
inline constexpr bool count_ok(std::int64_t v) noexcept { return v >= 0 && v <= kMaxCount; }

/// What the recorder counts instead of failing; names are the `recorder_errors` keys.
enum class ErrorKind : std::uint8_t {
  kWriteFailed,             ///< a record could not be written whole (it is lost)
  kOpenFailed,              ///< the log file could not be opened
  kDepthOverflow,           ///< a region nested deeper than kMaxDepth on one thread (not recorded)
  kMismatchedExit,          ///< region_exit(id) for a region that is not the innermost open one
  kTooManyRegions,          ///< a region name past kMaxRegions (not recorded)
  kTooManyCounters,         ///< a counter name past kMaxCounters (not recorded)
  kBadArgument,             ///< a rejected per-update value (e.g. padding fraction 1.5, empty shape)
  kOutOfMemory,             ///< data could not be stored (not recorded)
  kDeviceEventsExhausted,   ///< no free device event: the region's call has host time only
  kDeviceRecordFailed,      ///< recording a device event failed
  kDevicePendingFull,       ///< too many device-timed calls waiting to be read back
  kDeviceReadFailed,        ///< a device time could not be read back
  kDeviceSyncFailed,        ///< waiting for a device stream at the update boundary failed
  kDeviceThreadsExhausted,  ///< set_device_stream() on more threads than device_threads
  kUnwrittenAtClose,        ///< close() found region calls, counters or update data after the last end_update (not written)
  kOpenAtEndUpdate,         ///< end_update() called inside a region of its thread (its time goes in a later record)
  kLogDeleted,              ///< the log file was deleted while recorded to: made again, the records before are in no file
  kOpenAtBeginUpdate,       ///< begin_update() called inside a region of its thread (its time before the restart stays)
  kUpdateDataFull,          ///< per-update data past Options::max_update_data_bytes (not recorded)
  kCount,
};
inline constexpr std::size_t kErrorKinds = static_cast<std::size_t>(ErrorKind::kCount);

std::string_view error_name(ErrorKind k) noexcept;

/// A device-timed call waiting to be read back: its region and its two events.
struct PendingPair {
  std::uint32_t region, start, end;
};

/// Everything the recorder keeps per thread. The inline hot path sees the ThreadState
/// base; the rest is used by the cold paths and by end_update.
struct ThreadStateFull : ThreadState {
  /// Errors this thread counted (single writer: the thread itself).
  std::array<std::atomic<std::uint64_t>, kErrorKinds> errors{};
  std::atomic<bool> exited{false};  ///< the thread ended; the state can be reused once read

  // Device timing. Written by the owning thread in set_device_stream/open under the
  // recorder's lock, before `device` is set (release); read by it on the hot path after
  // `device` (acquire), and by end_update under the recorder's lock.
  std::uint64_t device_session = 0;  ///< the recorder session these fields belong to
  void* stream = nullptr;
  DeviceTimer* timer = nullptr;
  std::atomic<std::uint8_t>* busy = nullptr;  ///< per event: 1 while recorded and not read back
  std::uint32_t ev_first = 0, ev_mask = 0, ev_next = 0;
  std::unique_ptr<PendingPair[]> pending;  ///< single-producer single-consumer ring
  std::uint32_t pending_cap = 0;           ///< a power of two
  std::atomic<std::uint64_t> pending_head{0};  ///< written by the owner
  std::atomic<std::uint64_t> pending_tail{0};  ///< written by end_update

  // Read only by end_update / open (under the thread registry's lock): what was last
  // reported, per region and per error kind.
  std::unique_ptr<std::uint64_t[]> base_calls, base_ticks;
  std::array<std::uint64_t, kErrorKinds> base_errors{};

  // Exits of this thread's regions asked by other threads (a Region destroyed there), at
  // their host clock; applied by this thread at its next entry (apply_foreign_exits).
  // Under the thread registry's lock.
  struct ForeignExit {
    std::uint32_t depth, region;
    std::uint64_t end;
  };
  std::array<ForeignExit, kMaxDepth> foreign{};
  std::uint32_t foreign_n = 0;

  // In a fork() child, the regions the forking thread had open in the parent (outermost
  // first): dropped from the stack at the fork (forget_threads_after_fork), so that they
  // are neither parents of the child's regions nor open at its end_update() or close();
  // their exits in the child are taken here, not counted as mismatched. Owner only.
  std::array<std::uint32_t, kMaxDepth> inherited{};
  std::uint32_t inherited_n = 0;
  /// Takes the exit of region `region` entered before the fork (and of the inherited
  /// regions opened inside it): true if it was one.
  bool take_inherited(std::uint32_t region) noexcept {
    for (std::uint32_t k = inherited_n; k-- > 0;)
      if (inherited[k] == region) {
        inherited_n = k;
        return true;
      }
    return false;
  }

  void count_error(ErrorKind k) noexcept {
    auto& e = errors[static_cast<std::size_t>(k)];
    e.store(e.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  }
};

/// Every thread state ever attached (never freed; an exited thread's state is reused).
struct ThreadRegistry {
  std::mutex mu;
  std::vector<ThreadStateFull*> states;
};
ThreadRegistry& thread_registry() noexcept;
/// The calling thread's full state (attaching it if needed).
ThreadStateFull* this_thread_state() noexcept;

/// Region and counter names, and the counters' per-update values (process-wide).
struct NameRegistry {
  std::mutex mu;
  NameTable regions;   ///< id == region id
  NameTable counters;  ///< id == counter id
  std::atomic<std::uint32_t> region_count{0}, counter_count{0};
  std::array<std::atomic<std::int64_t>, kMaxCounters + 1> counter_value{};
  std::array<std::atomic<std::uint8_t>, kMaxCounters + 1> counter_touched{};
  /// 1 when the counter's sum in this update passed 2^53 (what a double holds exactly),
  /// including sums that wrapped around int64.
  std::array<std::atomic<std::uint8_t>, kMaxCounters + 1> counter_overflow{};
};
NameRegistry& names() noexcept;

/// Registers (once) the fork handlers that hold every recorder lock across fork()
/// (recorder.cpp): called before any of those locks is first made, so that a fork while
/// another thread holds one, before or without open(), cannot leave it held in the child.
void ensure_fork_handlers() noexcept;

/// In the child of fork() (only the calling thread runs): the forking thread's open
/// regions were entered in the parent, so its stack starts empty (they become
/// `inherited`); the other threads' states belong to threads the child does not have,
/// so they are marked exited (reusable by the child's threads). thread_state.cpp.
void forget_threads_after_fork() noexcept;

/// Releases the device events of thread `t`'s open frames at depth >= `from` (frames
/// that are dropped unrecorded). Called by the owning thread.
void release_open_frames(ThreadStateFull* t, std::uint32_t from) noexcept;
/// Drops the open frames from stack index `from` up without recording them (a mismatched
/// exit, a thread that ends with regions open): gives back their device events and undoes
/// their entries' recursion counts. The caller then lowers the depth.
void forget_frames(ThreadStateFull* t, std::uint32_t from) noexcept;

/// Errors counted outside any thread's hot path (registration, writes, boundaries).
void count_global_error(ErrorKind k) noexcept;
std::uint64_t global_error_count(ErrorKind k) noexcept;

/// What a call that adds per-update data did, for the C ABI's status (the C++
/// functions, frame_histogram_add(), input_shape(), sample_indices(), return nothing):
/// stored (or nothing to store, or no recorder open); refused, counted as bad_argument;
/// or not stored, counted as update_data_full (past Options::max_update_data_bytes) or
/// out_of_memory.
enum class DataAdded { kStored, kBadArgument, kNotStored };
DataAdded add_frames(std::int64_t frames, std::int64_t samples) noexcept;
DataAdded add_input_shape(std::span<const std::int64_t> dims) noexcept;
DataAdded add_sample_indices(std::span<const std::int64_t> indices) noexcept;

// Clock (clock.cpp).
/// Host clock ticks -> ns at the best current estimate.
struct ClockPair {
  std::uint64_t ticks;  ///< read_clock()
  std::int64_t ns;      ///< steady_clock [ns]
};
ClockPair read_clock_pair() noexcept;
/// ns per tick from a short calibration (1 for steady_clock); computed once, thread-safe.
double initial_ns_per_tick() noexcept;

}  // namespace stepprof::detail
