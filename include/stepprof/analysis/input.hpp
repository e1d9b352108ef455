// What every analysis reads: the validated dataset and, when known, the region nesting.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "stepprof/dataset.hpp"
#include "stepprof/hierarchy.hpp"

namespace stepprof {

struct AnalysisInput {
  const Dataset& data;
  const Hierarchy* hierarchy = nullptr;  ///< null when the nesting is unknown

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
