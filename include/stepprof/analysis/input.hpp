// What every analysis reads: the validated dataset and, when known, the region nesting.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "stepprof/dataset.hpp"
#include "stepprof/hierarchy.hpp"

namespace stepprof {

/// The regions and counters of every update, stored per name (column by column):
/// where each region's sample is in each update, and each counter's value,
/// so that an analysis that goes over every update once per region finds each sample in
/// O(1) and reads the next ones ahead (UpdateRecord::region scans the update's
/// regions, and the samples of consecutive updates lie far apart in memory). Indexes
/// the updates in AnalysisInput::updates() order. Costs 8 bytes per (update, region
/// name) and per (update, counter name) [bytes]; a part is not built (lookups fall back
/// to UpdateRecord::region and ::counter) beyond kMaxBytes, e.g. for logs with
/// thousands of region names.
class UpdateIndex {
 public:
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 30;
  UpdateIndex(const std::vector<const UpdateRecord*>& updates, std::size_t region_names,
              std::size_t counter_names = 0);

  /// The sample of `id` in the k-th update (which must be `u`), or nullptr when absent.
  [[nodiscard]] const RegionSample* find(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    if (columns_.empty() || id >= width_) return u.region(id);
    const RegionSample* const* column = &columns_[id * n_];
    if (k + kAhead < n_) __builtin_prefetch(column[k + kAhead]);  // loops go up k for a fixed id
    return column[k];
  }
  /// The value of counter `id` in the k-th update (which must be `u`), or nullopt.
  [[nodiscard]] std::optional<double> counter(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    if (counters_.empty() || id >= counter_width_) return u.counter(id);
    const double v = counters_[id * n_ + k];
    if (std::isnan(v)) return std::nullopt;  // absent (the reader admits only finite values)
    return v;
  }
  /// True when any update has a device time for the region.
  [[nodiscard]] bool has_device_time(NameTable::Id id) const { return id < device_.size() && device_[id]; }
  /// True when any update has a device or host time or calls for the region.
  [[nodiscard]] bool has_data(NameTable::Id id) const { return id < present_.size() && present_[id]; }

 private:
  static constexpr std::size_t kAhead = 16;
  std::size_t width_ = 0, counter_width_ = 0, n_ = 0;
  std::vector<const RegionSample*> columns_;  // [id * n + k]
  std::vector<double> counters_;              // [id * n + k], NaN when absent
  std::vector<bool> device_, present_;
};

struct AnalysisInput {
  const Dataset& data;
  const Hierarchy* hierarchy = nullptr;  ///< null when the nesting is unknown
  /// Optional lookup index over updates() (build_report builds one); analyses fall back
  /// to UpdateRecord::region without it.
  const UpdateIndex* index = nullptr;

  /// The sample of `id` in `u`, the k-th element of updates(), or nullptr.
  [[nodiscard]] const RegionSample* region_of(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    return index ? index->find(k, u, id) : u.region(id);
  }
  /// The time analyses use for a region in the k-th update (see region_ms below).
  [[nodiscard]] std::optional<double> region_ms_of(std::size_t k, const UpdateRecord& u, NameTable::Id id,
                                                   bool device) const {
    const RegionSample* s = region_of(k, u, id);
    if (!s) return std::nullopt;
    return device ? s->device_ms : s->host_ms;
  }
  /// The value of counter `id` in the k-th element of updates(), `u`, or nullopt.
  [[nodiscard]] std::optional<double> counter_of(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    return index ? index->counter(k, u, id) : u.counter(id);
  }
  /// Counter value in the k-th element of updates(), or 0 when absent (for sums of work).
  [[nodiscard]] double counter_or_zero(std::size_t k, const UpdateRecord& u, std::optional<NameTable::Id> counter) const;
  /// Position of the first update of `rank` in updates(); nullopt when `rank` is not
  /// an element of data.ranks.
  [[nodiscard]] std::optional<std::size_t> first_update_of(const RankLog& rank) const;

  /// Every update of every rank, in rank then step order.
  [[nodiscard]] std::vector<const UpdateRecord*> updates() const;
  /// The region's id, if the log has that region.
  [[nodiscard]] std::optional<NameTable::Id> region(std::string_view name) const { return data.regions.find(name); }
  [[nodiscard]] std::optional<NameTable::Id> counter(std::string_view name) const { return data.counters.find(name); }
  /// True when the logs' device times are GPU busy time (a union of kernel intervals,
  /// summed over streams), as imported from a profiler trace, rather than the span between
  /// two stream events: the config's `device_timing` says "union". Children that ran on
  /// several streams may then add up to more than their parent.
  [[nodiscard]] bool device_time_is_busy_union() const;
  /// True when any update has a device (CUDA stream) time for the region.
  [[nodiscard]] bool has_device_time(NameTable::Id region) const;
};

/// The time analyses use for a region in one update: device-stream time when the log
/// has device times for the region, else host time [ms]; nullopt when absent.
std::optional<double> region_ms(const UpdateRecord& u, NameTable::Id region, bool device);

/// Counter value, or 0 when the counter is absent from the update (for sums of work).
double counter_or_zero(const UpdateRecord& u, std::optional<NameTable::Id> counter);

}  // namespace stepprof
