// Region and counter names -> process-wide ids (registered once per call site, under a
// lock), counters (lock-free atomic adds), and errors counted outside the hot path.
#include <new>

#include "internal.hpp"
#include "stepprof/schema.hpp"
#include "stepprof/record_writer.hpp"

namespace stepprof::detail {

NameRegistry& names() noexcept {
  static NameRegistry* r = [] {
    ensure_fork_handlers();
    return new NameRegistry;  // never destroyed: threads may outlive main
  }();
  return *r;
}

namespace {

// Made while the program loads, before main() can start threads: a fork() while another
// thread is making one of them (inside its static initialization, which holds a guard)
// would leave the child waiting on that guard forever, at its first region. (Each is a
// function-local static, so a use from another file's static initialization is safe too.)
[[maybe_unused]] const bool g_registries_made = (names(), thread_registry(), true);

std::array<std::atomic<std::uint64_t>, kErrorKinds>& global_errors() noexcept {
  static std::array<std::atomic<std::uint64_t>, kErrorKinds> e{};
  return e;
}

// Interns `name` in `table` (capacity `max`), returning `overflow` past it.
std::uint32_t intern(NameTable& table, std::atomic<std::uint32_t>& count, std::string_view name,
                     std::uint32_t max, std::uint32_t overflow, ErrorKind too_many) noexcept {
  auto& r = names();
  try {
    std::lock_guard lock(r.mu);
    if (auto id = table.find(name)) return *id;
    // A name that is not UTF-8 is written with U+FFFD for its bad bytes: interned in that
    // form, "a\xff" and "a\xfe" are one region, not two keys the reader rejects as one
    // region listed twice.
    const std::string written = as_written(name);
    if (written != name) {
      count_global_error(ErrorKind::kBadArgument);
      name = written;
      if (auto id = table.find(name)) return *id;
    }
    // A name the reader would reject as written (empty, or longer than
    // schema::kMaxNameBytes, U+FFFD's 3 bytes included) would lose every update record it
    // is in: it is not recorded.
    if (name.empty() || name.size() > schema::kMaxNameBytes) {
      count_global_error(ErrorKind::kBadArgument);
      return overflow;
    }
    if (table.size() >= max) {
      count_global_error(too_many);
      return overflow;
    }
    const auto id = table.intern(name);
    count.store(static_cast<std::uint32_t>(table.size()), std::memory_order_release);
    return id;
  } catch (...) {  // bad_alloc, or a failed lock
    count_global_error(ErrorKind::kOutOfMemory);
    return overflow;
  }
}

}  // namespace

std::string_view error_name(ErrorKind k) noexcept {
  switch (k) {
    case ErrorKind::kWriteFailed: return "write_failed";
    case ErrorKind::kOpenFailed: return "open_failed";
    case ErrorKind::kDepthOverflow: return "depth_overflow";
    case ErrorKind::kMismatchedExit: return "mismatched_exit";
    case ErrorKind::kTooManyRegions: return "too_many_regions";
    case ErrorKind::kTooManyCounters: return "too_many_counters";
    case ErrorKind::kBadArgument: return "bad_argument";
    case ErrorKind::kOutOfMemory: return "out_of_memory";
    case ErrorKind::kDeviceEventsExhausted: return "device_events_exhausted";
    case ErrorKind::kDeviceRecordFailed: return "device_record_failed";
    case ErrorKind::kDevicePendingFull: return "device_pending_full";
    case ErrorKind::kDeviceReadFailed: return "device_read_failed";
    case ErrorKind::kDeviceSyncFailed: return "device_sync_failed";
    case ErrorKind::kDeviceThreadsExhausted: return "device_threads_exhausted";
    case ErrorKind::kUnwrittenAtClose: return "unwritten_at_close";
    case ErrorKind::kOpenAtEndUpdate: return "open_at_end_update";
    case ErrorKind::kLogDeleted: return "log_deleted";
    case ErrorKind::kOpenAtBeginUpdate: return "open_at_begin_update";
    case ErrorKind::kUpdateDataFull: return "update_data_full";
    case ErrorKind::kCount: break;
  }
  return "unknown";
}

void count_global_error(ErrorKind k) noexcept {
  global_errors()[static_cast<std::size_t>(k)].fetch_add(1, std::memory_order_relaxed);
}

std::uint64_t global_error_count(ErrorKind k) noexcept {
  return global_errors()[static_cast<std::size_t>(k)].load(std::memory_order_relaxed);
}

RegionId register_region(const RegionSite& site) noexcept {
  auto& r = names();
  const auto id = intern(r.regions, r.region_count, site.name ? site.name : "", kMaxRegions, kOverflowRegion,
                         ErrorKind::kTooManyRegions);
  site.id.store(id, std::memory_order_relaxed);
  return id;
}

CounterId register_counter(const CounterSite& site) noexcept {
  auto& r = names();
  const auto id = intern(r.counters, r.counter_count, site.name ? site.name : "", kMaxCounters, kMaxCounters,
                         ErrorKind::kTooManyCounters);
  site.id.store(id, std::memory_order_relaxed);
  return id;
}

void add_count(CounterId id, std::int64_t n) noexcept {
  auto& r = names();
  // Counts of work items are 0 to 2^53 (a double's exact integers, what the reader
  // admits): another value is no count, and is left out alone. (Added, one above 2^53 had
  // made the update's whole sum unrecordable: the valid adds beside it were lost.)
  if (!count_ok(n)) {
    count_global_error(ErrorKind::kBadArgument);
    return;
  }
  if (id > kMaxCounters) id = kMaxCounters;
  // Presence first, then the value: end_update reads them in the other order, so an add
  // that races with it is reported, in one of the two updates, with its value.
  r.counter_touched[id].store(1, std::memory_order_relaxed);
  const std::int64_t before = r.counter_value[id].fetch_add(n, std::memory_order_relaxed);
  // A sum beyond 2^53 is not recorded (see end_update); noted here, before it can wrap
  // around int64 back to a plausible value.
  if (before < 0 || before > kMaxCount - n) r.counter_overflow[id].store(1, std::memory_order_relaxed);
}

}  // namespace stepprof::detail

namespace stepprof {
inline namespace recording {

RegionId region_id(std::string_view name) noexcept {
  auto& r = detail::names();
  return detail::intern(r.regions, r.region_count, name, detail::kMaxRegions, detail::kOverflowRegion,
                        detail::ErrorKind::kTooManyRegions);
}

CounterId counter_id(std::string_view name) noexcept {
  auto& r = detail::names();
  return detail::intern(r.counters, r.counter_count, name, detail::kMaxCounters, detail::kMaxCounters,
                        detail::ErrorKind::kTooManyCounters);
}

}  // namespace recording
}  // namespace stepprof
