// FakeDeviceClock: a simulated device for tests (see device_timer.hpp).
#include <algorithm>

#include "stepprof/device_timer.hpp"

namespace stepprof {

double FakeDeviceClock::tail(void* stream) const {
  auto it = tail_.find(stream);
  return it == tail_.end() ? 0.0 : it->second;
}

void FakeDeviceClock::launch(void* stream, double ms) {
  std::lock_guard lock(mu_);
  tail_[stream] = std::max(tail(stream), now_) + ms;
}

void FakeDeviceClock::advance(double ms) {
  std::lock_guard lock(mu_);
  now_ += ms;
}

double FakeDeviceClock::now_ms() const {
  std::lock_guard lock(mu_);
  return now_;
}

void FakeDeviceClock::fail_next_records(int n) {
  std::lock_guard lock(mu_);
  fail_records_ = n;
}

int FakeDeviceClock::synchronize_calls() const {
  std::lock_guard lock(mu_);
  return synchronize_calls_;
}

int FakeDeviceClock::record_calls() const {
  std::lock_guard lock(mu_);
  return record_calls_;
}

bool FakeDeviceClock::reserve(std::uint32_t capacity) noexcept {
  try {
    std::lock_guard lock(mu_);
    events_.assign(capacity, Event{});
    return true;
  } catch (...) {
    return false;
  }
}

bool FakeDeviceClock::create_events(std::uint32_t first, std::uint32_t n) noexcept {
  std::lock_guard lock(mu_);
  if (static_cast<std::uint64_t>(first) + n > events_.size()) return false;
  for (std::uint32_t i = first; i < first + n; ++i) events_[i] = Event{true, false, 0};
  return true;
}

bool FakeDeviceClock::record(std::uint32_t event, void* stream) noexcept {
  std::lock_guard lock(mu_);
  ++record_calls_;
  if (fail_records_ > 0) {
    --fail_records_;
    return false;
  }
  if (event >= events_.size() || !events_[event].created) return false;
  // The stream reaches the event when the work queued before it is done.
  events_[event].recorded = true;
  events_[event].at_ms = std::max(tail(stream), now_);
  return true;
}

DeviceTimer::Query FakeDeviceClock::elapsed_ms(std::uint32_t start, std::uint32_t end, double& ms) noexcept {
  std::lock_guard lock(mu_);
  if (start >= events_.size() || end >= events_.size() || !events_[start].recorded || !events_[end].recorded)
    return Query::kError;
  if (events_[start].at_ms > now_ || events_[end].at_ms > now_) return Query::kNotReady;
  ms = events_[end].at_ms - events_[start].at_ms;
  return Query::kReady;
}

bool FakeDeviceClock::synchronize(void* stream) noexcept {
  std::lock_guard lock(mu_);
  ++synchronize_calls_;
  now_ = std::max(now_, tail(stream));
  return true;
}

void FakeDeviceClock::release() noexcept {
  std::lock_guard lock(mu_);
  ++release_calls_;
  for (auto& e : events_) e = Event{};
}

int FakeDeviceClock::release_calls() const {
  std::lock_guard lock(mu_);
  return release_calls_;
}

}  // namespace stepprof
