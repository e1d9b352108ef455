// Device timing on the calling thread's hot path: take an event from the thread's ring,
// record it on the stream at entry and at exit, and queue the pair for end_update to
// read back. Nothing here waits for the device.
#include "internal.hpp"

namespace stepprof::detail {
namespace {

// Takes the next event of the thread's ring, unless end_update has not read it back yet.
bool take_event(ThreadStateFull* t, std::uint32_t& ev) noexcept {
  const std::uint32_t idx = t->ev_first + (t->ev_next & t->ev_mask);
  std::atomic<std::uint8_t>& busy = t->busy[idx];
  if (busy.load(std::memory_order_acquire) != 0) {
    t->count_error(ErrorKind::kDeviceEventsExhausted);
    return false;
  }
  busy.store(1, std::memory_order_relaxed);
  ++t->ev_next;
  ev = idx;
  return true;
}

void give_back(ThreadStateFull* t, std::uint32_t ev) noexcept { t->busy[ev].store(0, std::memory_order_release); }

}  // namespace

void device_enter(ThreadState* base, Frame& f) noexcept {
  auto* t = static_cast<ThreadStateFull*>(base);
  std::uint32_t ev = 0;
  if (!take_event(t, ev)) return;
  if (!t->timer->record(ev, t->stream)) {
    t->count_error(ErrorKind::kDeviceRecordFailed);
    give_back(t, ev);
    return;
  }
  f.event = ev;
  f.stream = t->stream;
}

void device_exit(ThreadState* base, const Frame& f) noexcept {
  auto* t = static_cast<ThreadStateFull*>(base);
  // Closed since the entry: close() has reset this thread's events; drop the call.
  if (!t->device.load(std::memory_order_acquire)) return;
  std::uint32_t end = 0;
  if (!take_event(t, end)) {
    give_back(t, f.event);
    return;
  }
  if (!t->timer->record(end, f.stream)) {
    t->count_error(ErrorKind::kDeviceRecordFailed);
    give_back(t, f.event);
    give_back(t, end);
    return;
  }
  const std::uint64_t head = t->pending_head.load(std::memory_order_relaxed);
  const std::uint64_t tail = t->pending_tail.load(std::memory_order_acquire);
  if (head - tail >= t->pending_cap) {
    t->count_error(ErrorKind::kDevicePendingFull);
    give_back(t, f.event);
    give_back(t, end);
    return;
  }
  t->pending[head & (t->pending_cap - 1)] = PendingPair{f.region, f.event, end};
  t->pending_head.store(head + 1, std::memory_order_release);
}

void release_open_frames(ThreadStateFull* t, std::uint32_t from) noexcept {
  const std::uint32_t top = t->depth < kMaxDepth ? t->depth : kMaxDepth;
  const bool device = t->device.load(std::memory_order_acquire);
  for (std::uint32_t d = from; d < top; ++d) {
    Frame& f = t->stack[d];
    if (f.event == kNoEvent) continue;
    if (device) give_back(t, f.event);
    f.event = kNoEvent;
  }
}

}  // namespace stepprof::detail
