// Per-thread recorder state: attached on a thread's first region (the only time the
// hot path takes a lock), handed on to a new thread after its owner exits and
// end_update has read its last totals. Never freed while the process runs, so a region
// still running on any thread never touches freed memory.
#include <unistd.h>

#include <algorithm>
#include <new>

#include "internal.hpp"

namespace stepprof::detail {

constinit thread_local ThreadState* t_state __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {

// Marks the state of an exiting thread reusable. Constructed (as a thread_local) only in
// attach_thread, so the hot path never pays for its guard.
struct ExitHook {
  ThreadStateFull* state = nullptr;
  ~ExitHook() {
    if (!state) return;
    // The main thread's thread_local destructors run first in exit(), before static
    // destructors and atexit handlers: a region, end_update() or close() there went to
    // the fallback state, its time dropped without a count. The process is ending, so
    // no other thread needs the main thread's state: it stays this thread's.
    if (::gettid() == ::getpid()) return;
    if (state->depth > 0) state->count_error(ErrorKind::kMismatchedExit);  // regions never exited: not recorded
    forget_frames(state, 0);
    state->device.store(false, std::memory_order_relaxed);
    state->depth = 0;
    state->inherited_n = 0;
    state->exited.store(true, std::memory_order_release);
    t_state = nullptr;
  }
};

// Used when a state cannot be allocated (out of memory), or by a region that runs in a
// thread_local destructor after the thread's ExitHook: shared, never registered, so its
// totals are never read. Static storage, never destroyed.
ThreadStateFull* fallback_state() noexcept {
  alignas(ThreadStateFull) static unsigned char storage[sizeof(ThreadStateFull)];
  static ThreadStateFull* s = new (storage) ThreadStateFull;
  return s;
}

}  // namespace

ThreadRegistry& thread_registry() noexcept {
  static ThreadRegistry* r = [] {
    ensure_fork_handlers();
    return new ThreadRegistry;  // never destroyed
  }();
  return *r;
}

ThreadState* attach_thread() noexcept {
  static thread_local bool exiting_or_attached = false;
  if (exiting_or_attached) {
    // A region in a thread_local destructor that runs after ExitHook: not recorded.
    return fallback_state();
  }
  ThreadStateFull* s = nullptr;
  auto& reg = thread_registry();
  try {
    std::lock_guard lock(reg.mu);
    // Reuse the state of an exited thread once end_update has read it (depth and
    // pending device pairs are then empty; its totals continue from where they were).
    for (ThreadStateFull* old : reg.states) {
      if (old->exited.load(std::memory_order_acquire) &&
          old->pending_head.load(std::memory_order_relaxed) == old->pending_tail.load(std::memory_order_relaxed)) {
        old->exited.store(false, std::memory_order_relaxed);
        ++old->generation;  // (scoped regions its former owner entered are not the new one's)
        old->foreign_n = 0;  // (its thread ended with those regions open: counted then)
        old->foreign_exit.store(false, std::memory_order_relaxed);
        old->depth = 0;  // its device range, if any, stays with it for the session
        old->inherited_n = 0;
        s = old;
        break;
      }
    }
    if (!s) {
      auto fresh = std::make_unique<ThreadStateFull>();
      fresh->base_calls = std::make_unique<std::uint64_t[]>(kMaxRegions + 1);
      fresh->base_ticks = std::make_unique<std::uint64_t[]>(kMaxRegions + 1);
      reg.states.push_back(fresh.get());
      s = fresh.release();
    }
  } catch (...) {
    // Out of memory for the thread's state: this call records nothing, and says so (it
    // was dropped without a count: a helper). The next call tries again.
    count_global_error(ErrorKind::kOutOfMemory);
    return fallback_state();
  }
  static thread_local ExitHook hook;
  hook.state = s;
  exiting_or_attached = true;
  t_state = s;
  return s;
}

void leave_mismatched(const Entered& e) noexcept {
  auto* t = static_cast<ThreadStateFull*>(e.t);
  if (t == t_state && t->generation != e.generation) {
    // Entered before a fork() in the parent (this is the child): not an error. Else
    // entered by the thread that had this state before: it ended with the region open
    // (counted then). This thread's own regions are not touched.
    if (!t->take_inherited(e.region)) t->count_error(ErrorKind::kMismatchedExit);
    return;
  }
  if (t != t_state && t != fallback_state()) {
    // Entered on another thread (a coroutine resumed elsewhere, a scope object handed
    // over): that thread writes its state without a lock, so it is asked to close the
    // region itself, at its next entry, with this moment as its end. (Closing it from
    // here raced with that thread's own regions; leaving it open stacked stale frames.)
    // A thread that ended (its state unused, or handed on to another thread) has no
    // region left to close: the exit is counted.
    const std::uint64_t end = read_clock();
    bool full = false;
    {
      std::lock_guard lock(thread_registry().mu);
      if (t->exited.load(std::memory_order_acquire) || t->generation != e.generation) {
        full = true;
      } else if (t->foreign_n < kMaxDepth) {
        t->foreign[t->foreign_n++] = {e.depth, e.region, end};
        t->foreign_exit.store(true, std::memory_order_release);
      } else {
        full = true;
      }
    }
    if (full) this_thread_state()->count_error(ErrorKind::kMismatchedExit);  // (not closed: counted)
    return;
  }
  t->count_error(ErrorKind::kMismatchedExit);
  // Still open further out (regions entered inside it were not exited): those are closed
  // unrecorded, then it is. Otherwise it was exited already: nothing to record.
  if (t->depth > e.depth && (e.depth >= kMaxDepth || t->stack[e.depth].region == e.region)) {
    if (e.depth < kMaxDepth) forget_frames(t, e.depth + 1);
    leave(t, e.depth);
  }
}

void apply_foreign_exits(ThreadState* base) noexcept {
  auto* t = static_cast<ThreadStateFull*>(base);
  std::lock_guard lock(thread_registry().mu);
  // The innermost first: a request waits while regions this thread entered later are open
  // above it; one whose frame is gone (closed since, by a mismatched exit) is dropped.
  for (bool again = true; again;) {
    again = false;
    for (std::uint32_t k = 0; k < t->foreign_n; ++k) {
      const auto x = t->foreign[k];
      const bool gone = x.depth >= t->depth || (x.depth < kMaxDepth && t->stack[x.depth].region != x.region);
      if (!gone && x.depth + 1 != t->depth) continue;
      if (!gone) leave_at(t, x.depth, x.depth < kMaxDepth ? std::max(x.end, t->stack[x.depth].start) : x.end);
      t->foreign[k] = t->foreign[--t->foreign_n];
      again = true;
      break;
    }
  }
  if (t->foreign_n == 0) t->foreign_exit.store(false, std::memory_order_relaxed);
}

ThreadStateFull* this_thread_state() noexcept {
  ThreadState* t = t_state;
  if (t == nullptr) t = attach_thread();
  return static_cast<ThreadStateFull*>(t);
}

void forget_frames(ThreadStateFull* t, std::uint32_t from) noexcept {
  release_open_frames(t, from);
  const std::uint32_t top = t->depth < kMaxDepth ? t->depth : kMaxDepth;
  for (std::uint32_t d = top; d-- > from;) t->acc[t->stack[d].region].open = t->stack[d].reentered;
}

std::uint32_t recorded_parent(const ThreadState* t, std::uint32_t d) noexcept {
  while (d-- > 0)
    if (t->stack[d].region != kOverflowRegion) return t->stack[d].region;
  return kTopParent;
}

void forget_threads_after_fork() noexcept {
  auto& reg = thread_registry();
  std::lock_guard lock(reg.mu);  // (free: the fork handlers held it across the fork)
  auto* self = static_cast<ThreadStateFull*>(t_state);
  for (ThreadStateFull* st : reg.states) {
    // Device events are the parent's: never given back or read here.
    st->device.store(false, std::memory_order_relaxed);
    st->pending_tail.store(st->pending_head.load(std::memory_order_relaxed), std::memory_order_relaxed);
    st->foreign_n = 0;
    st->foreign_exit.store(false, std::memory_order_relaxed);
    if (st == self) {
      const std::uint32_t top = st->depth < kMaxDepth ? st->depth : kMaxDepth;
      std::uint32_t n = 0;
      for (std::uint32_t d = 0; d < top; ++d)
        if (st->stack[d].region != kOverflowRegion) st->inherited[n++] = st->stack[d].region;
      st->inherited_n = n;
      forget_frames(st, 0);
      ++st->generation;  // (a scoped region entered before the fork is not the child's)
    } else {
      // Its thread is not in the child: reusable by a new thread. (It may have been
      // between two stores of an entry at the fork: its stack is not read.)
      for (std::uint32_t r = 0; r <= kMaxRegions; ++r) st->acc[r].open = 0;
      st->inherited_n = 0;
      st->exited.store(true, std::memory_order_release);
    }
    st->depth = 0;
  }
}

void depth_overflow(ThreadState* t) noexcept {
  static_cast<ThreadStateFull*>(t)->count_error(ErrorKind::kDepthOverflow);
}

}  // namespace stepprof::detail

namespace stepprof {
inline namespace recording {

Status region_exit(RegionId id) noexcept {
  using namespace detail;
  if (id > kOverflowRegion) id = kOverflowRegion;  // as region_enter() maps an id never registered
  ThreadStateFull* t = this_thread_state();
  const std::uint32_t depth = t->depth;
  if (depth > 0 && (depth > kMaxDepth || t->stack[depth - 1].region == id)) {
    leave(t, depth - 1);  // the innermost region (or one past kMaxDepth, which is not recorded)
    return Status::kOk;
  }
  // Close the regions opened inside `id` unrecorded, then `id` itself.
  const std::uint32_t top = depth < kMaxDepth ? depth : kMaxDepth;
  for (std::uint32_t d = top; d-- > 0;) {
    if (t->stack[d].region != id) continue;
    t->count_error(ErrorKind::kMismatchedExit);
    forget_frames(t, d + 1);
    leave(t, d);
    return Status::kWarnMismatch;
  }
  // A region entered in the parent before fork() (this is the child): not an error.
  if (t->take_inherited(id)) return Status::kOk;
  t->count_error(ErrorKind::kMismatchedExit);
  return Status::kWarnMismatch;
}

}  // namespace recording
}  // namespace stepprof
