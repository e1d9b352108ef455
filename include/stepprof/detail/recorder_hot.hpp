// The recorder's hot path: what STEPPROF_REGION does between entry and exit, inline.
// Internal to stepprof (namespace detail); included by stepprof.hpp when recording is
// compiled in. Entry and exit touch only the calling thread's own state: no string
// hashing, no allocation, no locks, no exceptions (docs/recorder.md, "Threads").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace stepprof::detail {

inline constexpr std::uint32_t kMaxRegions = 1024;  ///< distinct region names per process
inline constexpr std::uint32_t kMaxDepth = 64;      ///< open regions per thread (deeper ones are counted as errors)
inline constexpr std::uint32_t kUnsetId = 0xFFFFFFFFu;   ///< a site whose name is not registered yet
inline constexpr std::uint32_t kOverflowRegion = kMaxRegions;  ///< sink slot for regions past kMaxRegions (never written)
inline constexpr std::uint32_t kNoEvent = 0xFFFFFFFFu;   ///< a frame without device events
inline constexpr std::uint32_t kTopParent = 0xFFFFFFFFu;  ///< parent of a top-level region (= stepprof::kTopLevel)

/// One open region on a thread's stack.
struct Frame {
  std::uint64_t start;   ///< host clock at entry [ticks of read_clock()]
  std::uint32_t region;  ///< region id
  std::uint32_t event;   ///< device start event, or kNoEvent
  void* stream;          ///< device stream the events are recorded on (valid when event != kNoEvent)
  /// Entries of the same region open further out on this thread when this one began: 0
  /// unless it recurses. A recursive entry's time lies inside the outermost one's, so it
  /// counts as a call but adds no time (as the profiler-trace importer counts it).
  std::uint32_t reentered;
  std::uint32_t unused;  ///< pads to 32 bytes: the stack is indexed with a shift
};
static_assert(sizeof(Frame) == 32, "Frame is a fixed 32-byte record");

/// A region's running totals on one thread, since the thread first ran it. Written only
/// by the owning thread (plain load + store, no read-modify-write); read by end_update,
/// which reports the difference since its previous read.
struct RegionAcc {
  std::atomic<std::uint64_t> ticks{0};  ///< host time inside the region [clock ticks]
  std::atomic<std::uint64_t> calls{0};  ///< exits [count]
  std::atomic<std::uint32_t> parent{kTopParent};  ///< enclosing region at the latest exit
  std::uint32_t open = 0;  ///< entries open on this thread's stack (> 1: recursion); owner only
  std::uint64_t unused2 = 0;  ///< pads to 32 bytes: the table is indexed with a shift
};
static_assert(sizeof(RegionAcc) == 32, "RegionAcc is a fixed 32-byte record");

/// The part of a thread's recorder state the inline hot path uses. Allocated once per
/// thread on its first region (src/recorder/thread_state.cpp) and never freed while the
/// process runs (a thread that exits hands it to the next new thread).
struct ThreadState {
  std::uint32_t depth = 0;  ///< open regions, including ones past kMaxDepth
  /// True while this thread records device events (the recorder is open with device
  /// timing and this thread opened it or called set_device_stream).
  std::atomic<bool> device{false};
  /// Set by another thread that destroyed a Region of this thread (a coroutine resumed
  /// elsewhere, a scope object handed over): this thread closes it at its next entry.
  std::atomic<bool> foreign_exit{false};
  /// Times this state was handed on to a new thread after its owner exited (modulo
  /// 2^16): a scoped region entered by the previous owner is not this thread's. Written
  /// under the thread registry's lock before the new owner runs.
  std::uint16_t generation = 0;
  Frame stack[kMaxDepth] = {};
  RegionAcc acc[kMaxRegions + 1];
};

/// The calling thread's state; null until its first region. Initial-exec TLS keeps the
/// access one instruction, also in a shared object loaded at startup.
#if defined(__NVCC__)  // (nvcc's front end says tls_model "does not apply here"; the host compiler applies it)
#pragma nv_diagnostic push
#pragma nv_diag_suppress 1835
#endif
extern constinit thread_local ThreadState* t_state __attribute__((tls_model("initial-exec")));
#if defined(__NVCC__)
#pragma nv_diagnostic pop
#endif

/// True when the host clock is the invariant TSC, false for std::chrono::steady_clock.
/// Decided once at static initialization (src/recorder/clock.cpp).
extern const bool g_use_tsc;

// Cold paths, out of line (src/recorder/).
ThreadState* attach_thread() noexcept;
void device_enter(ThreadState* t, Frame& f) noexcept;
void device_exit(ThreadState* t, const Frame& f) noexcept;
void depth_overflow(ThreadState* t) noexcept;
/// The nearest region below stack index `d` of `t` that is recorded (not past the name
/// limit, kOverflowRegion), or kTopParent: the parent of a region entered inside one past
/// the limit. `d` < kMaxDepth.
std::uint32_t recorded_parent(const ThreadState* t, std::uint32_t d) noexcept;
/// On the owning thread: closes the regions other threads asked to close (foreign_exit).
void apply_foreign_exits(ThreadState* t) noexcept;

/// One read of the recorder's host clock [ticks]: rdtsc where the TSC is invariant,
/// else steady_clock [ns]. Ticks convert to ns with the calibration in clock.cpp.
inline std::uint64_t read_clock() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  if (g_use_tsc) [[likely]] return __builtin_ia32_rdtsc();
#endif
  return static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

/// Where an entered region sits: its thread's state and its index on that thread's stack.
struct Entered {
  ThreadState* t;
  std::uint32_t depth;       ///< stack index (>= kMaxDepth: too deep, not recorded)
  std::uint16_t region;      ///< region id (<= kOverflowRegion)
  std::uint16_t generation;  ///< t->generation at entry
};
static_assert(kOverflowRegion <= 0xFFFF, "region ids fit Entered::region");

/// Opens region `id` on the calling thread.
inline Entered enter(std::uint32_t id) noexcept {
  ThreadState* t = t_state;
  if (t == nullptr) [[unlikely]] t = attach_thread();
  if (t->foreign_exit.load(std::memory_order_acquire)) [[unlikely]] apply_foreign_exits(t);
  const std::uint32_t d = t->depth;
  t->depth = d + 1;
  if (d < kMaxDepth) [[likely]] {
    Frame& f = t->stack[d];
    f.region = id;
    f.event = kNoEvent;
    RegionAcc& a = t->acc[id];
    f.reentered = a.open;
    a.open = f.reentered + 1;
    if (t->device.load(std::memory_order_acquire) && f.reentered == 0) [[unlikely]] device_enter(t, f);
    f.start = read_clock();
  } else {
    depth_overflow(t);
  }
  return {t, d, static_cast<std::uint16_t>(id), t->generation};
}

/// Closes frame `d` (< kMaxDepth) of the thread that owns `t`, the innermost open one,
/// whose region is `region` (= t->stack[d].region, passed so a caller that has it in a
/// register need not load it again), at host clock `end`.
inline void leave_frame(ThreadState* t, std::uint32_t d, std::uint32_t region, std::uint64_t end) noexcept {
  t->depth = d;
  const Frame& f = t->stack[d];
  RegionAcc& a = t->acc[region];
  a.open = f.reentered;
  if (f.reentered == 0) [[likely]] {  // (a recursive entry: inside the outermost one's time and parent)
    a.ticks.store(a.ticks.load(std::memory_order_relaxed) + (end - f.start), std::memory_order_relaxed);
    std::uint32_t parent = d ? t->stack[d - 1].region : kTopParent;
    if (parent == kOverflowRegion) [[unlikely]] parent = recorded_parent(t, d - 1);
    a.parent.store(parent, std::memory_order_relaxed);
  }
  // Release: a reader that sees this call also sees its ticks and parent.
  a.calls.store(a.calls.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  if (f.event != kNoEvent) [[unlikely]] device_exit(t, f);
}

/// Closes the region at stack index `d` of the thread that owns `t` (the innermost one),
/// at host clock `end`.
inline void leave_at(ThreadState* t, std::uint32_t d, std::uint64_t end) noexcept {
  if (d < kMaxDepth) [[likely]]
    leave_frame(t, d, t->stack[d].region, end);
  else
    t->depth = d;
}

/// Closes the region at stack index `d` of the thread that owns `t` (the innermost one).
inline void leave(ThreadState* t, std::uint32_t d) noexcept { leave_at(t, d, read_clock()); }

/// A scoped region's exit when it is not the innermost open region of the calling
/// thread, or was entered on another thread (thread_state.cpp).
void leave_mismatched(const Entered& e) noexcept;

/// Closes a scoped region: the innermost open one of the thread that entered it, as
/// expected, else leave_mismatched. (A Region destroyed on another thread must not touch
/// the state of the thread that made it, which that thread writes without a lock; nor
/// one whose thread ended, whose state another thread may now use.)
[[gnu::always_inline]] inline void leave_checked(const Entered& e) noexcept {
  ThreadState* t = e.t;
  if (t == t_state && t->generation == e.generation && t->depth == e.depth + 1) [[likely]] {
    if (e.depth >= kMaxDepth) [[unlikely]] {  // (not recorded)
      t->depth = e.depth;
      return;
    }
    if (t->stack[e.depth].region == e.region) [[likely]] {
      leave_frame(t, e.depth, e.region, read_clock());
      return;
    }
  }
  leave_mismatched(e);
}

}  // namespace stepprof::detail
