// Section 3 of the report: where an update's time goes, per region.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/analysis/input.hpp"
#include "stepprof/analysis/stats.hpp"

namespace stepprof {

/// How a region's device-stream and host times relate.
enum class TimeGap : std::uint8_t {
  kNone,             ///< within max(1 ms, 20 %) of each other
  kDeviceLonger,     ///< the host returns long before the device finishes (asynchronous launches, stalls)
  kHostLonger,       ///< the host spends much longer than the device (host-bound: the GPU idles)
};

/// Stable lowercase name: "none", "device_longer", "host_longer" (JSON and CSV output).
std::string_view gap_name(TimeGap gap);

struct RegionRow {
  std::string name;
  std::string parent;  ///< "" at the top level or when the nesting is unknown
  int depth = 0;       ///< 0 at the top level
  bool in_hierarchy = false;  ///< false: present in the log but not in the given nesting
  /// Role "background", its own or an ancestor's: runs alongside the update on another
  /// thread, not part of it (its share is still of the update time; it is no finding's
  /// subject).
  bool background = false;
  std::size_t updates_present = 0;  ///< updates in which the region occurs
  std::optional<Summary> device_ms;  ///< cuda_stream_ms per update where present [ms]
  std::optional<Summary> host_ms;    ///< cpu_call_ms per update where present [ms]
  std::optional<Summary> calls;      ///< calls per update where present [count]
  /// Exclusive (self) time: the region minus its children, per update [ms];
  /// only when the nesting is known and the region has children in the log.
  std::optional<Summary> device_self_ms, host_self_ms;
  /// The exclusive time per update on the share's basis: each update's device self time
  /// where it has a device time, else its host self time [ms]. Where some updates (ranks,
  /// threads) have device times and others host times only, device_self_ms covers the
  /// first ones only; this covers every update with either (the exclusive-time finding).
  std::optional<Summary> self_ms;
  /// Share of the total update time over the window: sum(region) / sum(wall_ms), each
  /// update's device time where it has one, else its host time [fraction].
  double share = 0;
  /// The same for the exclusive time [fraction]; absent where the exclusive time is (a
  /// parent whose children's times do not subtract from it: a trace's busy-union times).
  std::optional<double> self_share;
  std::optional<double> gap_ms;     ///< median over updates of device_ms - host_ms [ms]
  /// A data-loading region (role "data") with several ranks' logs: per step, the largest
  /// time of any rank (device time where the update has one, else host time; 0 for a
  /// rank without it), over the steps [ms]. A step waits for its slowest rank, so a
  /// loader that stalls on one rank (a pipeline's first stage) holds up every rank;
  /// pooled over every rank's updates its stalls were diluted.
  std::optional<Summary> step_max_ms;
  /// With step_max_ms: a rank whose time is the step's largest in at least 2/3 of the
  /// steps and whose median is at least twice the other ranks' (the median of their
  /// medians, over the updates that have the region, of the ranks that have it in most of
  /// theirs; there must be one) and 1 ms more: the loader is slow on that rank only (its
  /// storage, its workers, its samples). Absent otherwise.
  struct SlowLoaderRank {
    std::int64_t rank = -1;
    std::size_t steps_largest = 0;  ///< steps in which its time was the largest [count]
    std::size_t steps = 0;          ///< steps compared [count]
    double median_ms = 0;           ///< its median per update [ms]
    double others_median_ms = 0;    ///< the median of the other ranks' medians [ms]
  };
  std::optional<SlowLoaderRank> step_max_rank;
  TimeGap gap = TimeGap::kNone;
};

/// NestingViolation::parent when the top-level regions add up to more than wall_ms.
inline constexpr std::string_view kUpdateAsParent = "(the update, wall_ms)";

/// A parent whose children's times add up to more than the parent in some update.
struct NestingViolation {
  std::string parent;  ///< region name, or kUpdateAsParent
  std::int64_t step = 0;
  std::int64_t rank = -1;  ///< -1: the log names no rank
  double parent_ms = 0, children_ms = 0;
  bool device = true;
  /// For the update as parent: a top-level region that alone took longer than the update
  /// (it was entered before an earlier end_update(), e.g. an epoch), with its time [ms].
  std::string longer_child;
  double longer_child_ms = 0;
  std::int64_t longer_child_calls = 0;  ///< its calls in that update (0: not recorded) [count]
  /// The children that add up to children_ms in that update, longest first, with their
  /// times on the violation's clock [ms] (up to kViolationChildrenNamed; the rest summed in
  /// children_ms only): which of them overlap, e.g. regions of a thread pool nested under
  /// no region of their own thread.
  std::vector<std::pair<std::string, double>> children;
  std::size_t children_total = 0;  ///< children with a time on that clock in that update [count]
};

inline constexpr std::size_t kViolationChildrenNamed = 4;

/// " (a 80.0 ms, b 60.0 ms and 2 more)": a violation's children for a message ("" when none).
std::string violation_children_text(const NestingViolation& v);

struct RegionTable {
  std::vector<RegionRow> rows;  ///< nesting order (depth-first) when known, else by share
  bool nesting_known = false;
  /// Device times are each region's busy time over its kernels on every stream (a
  /// profiler trace): they do not subtract, so self times and self shares are host
  /// times while shares are device times where recorded.
  bool device_busy_union = false;
  std::string nesting_source;
  std::size_t updates = 0;      ///< updates analyzed
  /// Host time per update outside every top-level region: wall_ms - sum(top-level host ms)
  /// [ms], over the updates where it is known (outside_regions_ms below); nullopt for none.
  std::optional<Summary> outside_regions_ms;
  std::size_t violation_count = 0;  ///< (update, parent) pairs whose children exceed the parent
  std::vector<NestingViolation> violations;  ///< the first few
  std::vector<std::string> not_in_log;  ///< regions of the nesting that never occur in the log
  std::vector<std::string> not_in_nesting;  ///< regions of the log that the nesting does not list
};

/// Tolerance for nesting checks: children may exceed their parent by this much
/// (clock granularity and event-recording latency): max(0.5 ms, 1 % of the parent).
double nesting_tolerance_ms(double parent_ms);

/// Sum of the times of `regions` in update `u` on one clock (device or host) [ms];
/// nullopt when none of them has a time on that clock in the update. Exclusive (self)
/// time of a region = its own time minus this sum over its children.
std::optional<double> children_ms(const UpdateRecord& u, const std::vector<NameTable::Id>& regions, bool device);

/// Exclusive (self) time of `region` in update `u` on one clock [ms]: its own time minus
/// children_ms over its `children`. nullopt when the region has no time on that clock in
/// `u`, and, on the device clock, when a child present in `u` has host time only (a call
/// on a thread without device timing, device events exhausted): how much of the parent's
/// device time it took is not known (subtracted as 0 it stayed in the parent's exclusive
/// time; by its host time, clocks would be mixed). The region table, which reads columns,
/// applies the same rule, and then counts such an update's host self time.
std::optional<double> self_ms(const UpdateRecord& u, NameTable::Id region, const std::vector<NameTable::Id>& children,
                              bool device);

/// Host time of update `u` outside every top-level region: wall_ms minus the sum of the
/// `top_level` regions' host times [ms]; regions with device time only do not count.
/// nullopt when the update has top-level regions and none of them has a host time (a log
/// timed on the device only: how much of the update they cover is not known).
std::optional<double> outside_regions_ms(const UpdateRecord& u, const std::vector<NameTable::Id>& top_level);

RegionTable analyze_regions(const AnalysisInput& in);

}  // namespace stepprof
