// What every analysis reads: the validated dataset and, when known, the region nesting.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "stepprof/dataset.hpp"
#include "stepprof/hierarchy.hpp"

namespace stepprof {

/// What an update holds for one region: its times and calls, without the nesting.
struct RegionValues {
  std::optional<double> device_ms;    ///< device-stream time [ms]
  std::optional<double> host_ms;      ///< host time [ms]
  std::optional<std::int64_t> calls;  ///< entries [count]
};

/// The regions and counters of every update, stored per name (column by column): each
/// region's device time, host time and calls, and each counter's value, as contiguous
/// columns of doubles (NaN when absent), so that an analysis that goes over every update
/// once per region reads memory in order instead of one update record after another
/// (an update's samples lie far from the next update's). Indexes the updates in
/// AnalysisInput::updates() order. Costs 25 bytes per (update, indexed region name) and 8
/// bytes per (update, indexed counter name) [bytes]. Only names present in at least
/// 1/kMinShare of the updates get columns (judged on every 16th update of an input of
/// 65,536 updates or more), so the index holds about kMinShare x 25 bytes per region
/// sample at most; each other region has the list of its updates and samples (16
/// bytes per sample), and other counters fall back to UpdateRecord::counter. (A column per
/// name made a log whose region names are new in every update, batch_1, batch_2, ...,
/// a 1 GB index for 6,500 updates of 0.8 MB.) Columns stop at kMaxBytes; without any,
/// lookups read the records.
class UpdateIndex {
 public:
  static constexpr std::size_t kMaxBytes = std::size_t{1} << 30;
  static constexpr std::size_t kMinShare = 32;
  UpdateIndex(const std::vector<const UpdateRecord*>& updates, std::size_t region_names,
              std::size_t counter_names = 0);

  /// The values of region `id` in the k-th update (which must be `u`), or nullopt when
  /// the region is absent there.
  [[nodiscard]] std::optional<RegionValues> find(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    if (!present_ || id >= width_) return values_of(u.region(id));
    if (slot_[id] == kNoSlot) return values_of(listed(k, id));
    const std::size_t at = slot_[id] * n_ + k;
    if (!present_[at]) return std::nullopt;
    return RegionValues{value(device_[at]), value(host_[at]), calls_of(calls_[at])};
  }
  /// The device (`device` true) or host time of region `id` in the k-th update (which
  /// must be `u`) [ms], or nullopt when absent.
  [[nodiscard]] std::optional<double> time(std::size_t k, const UpdateRecord& u, NameTable::Id id, bool device) const {
    if (!present_ || id >= width_ || slot_[id] == kNoSlot) {
      const RegionSample* s = present_ && id < width_ ? listed(k, id) : u.region(id);
      if (!s) return std::nullopt;
      return device ? s->device_ms : s->host_ms;
    }
    return value((device ? device_ : host_)[slot_[id] * n_ + k]);
  }
  /// The value of counter `id` in the k-th update (which must be `u`), or nullopt.
  [[nodiscard]] std::optional<double> counter(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    if (!counters_ || id >= counter_width_ || counter_slot_[id] == kNoSlot) return u.counter(id);
    return value(counters_[counter_slot_[id] * n_ + k]);
  }
  /// A region's columns, one entry per update in updates() order: device times and host
  /// times [ms] and calls [count], NaN where absent, and presence (1 where the update
  /// lists the region, even without values).
  struct Columns {
    std::span<const double> device, host, calls;
    std::span<const std::uint8_t> present;
  };
  /// Region `id`'s columns; empty spans when the index has none (beyond kMaxBytes, or a
  /// region in fewer than 1/kMinShare of the updates) or does not know the region.
  [[nodiscard]] Columns columns(NameTable::Id id) const {
    if (!present_ || id >= width_ || slot_[id] == kNoSlot) return {};
    const std::size_t at = slot_[id] * n_;
    return {{device_.get() + at, n_}, {host_.get() + at, n_}, {calls_.get() + at, n_}, {present_.get() + at, n_}};
  }
  /// A region without columns (in fewer than 1/kMinShare of the updates): an update that
  /// lists it (its position in updates() order) and its sample there.
  struct Listing {
    std::size_t k;
    const RegionSample* sample;
  };
  /// Region `id`'s listings, by ascending k; empty when it has columns, or the index has
  /// none (then lookups read the records).
  [[nodiscard]] std::span<const Listing> listing(NameTable::Id id) const {
    if (!present_ || id >= width_ || slot_[id] != kNoSlot) return {};
    return {listed_.data() + listed_begin_[id], listed_end_[id] - listed_begin_[id]};
  }
  /// True when any update has a device time for the region.
  [[nodiscard]] bool has_device_time(NameTable::Id id) const { return id < device_any_.size() && device_any_[id]; }
  /// True when any update has a device or host time or calls for the region.
  [[nodiscard]] bool has_data(NameTable::Id id) const { return id < data_any_.size() && data_any_[id]; }

  /// The region's sample as RegionValues, or nullopt for nullptr.
  [[nodiscard]] static std::optional<RegionValues> values_of(const RegionSample* s) {
    if (!s) return std::nullopt;
    return RegionValues{s->device_ms, s->host_ms, s->calls};
  }

 private:
  // Region id's sample in the k-th update, from its listings, or nullptr.
  [[nodiscard]] const RegionSample* listed(std::size_t k, NameTable::Id id) const {
    const auto list = listing(id);
    const auto at =
        std::lower_bound(list.begin(), list.end(), k, [](const Listing& l, std::size_t x) { return l.k < x; });
    return at != list.end() && at->k == k ? at->sample : nullptr;
  }
  static std::optional<double> value(double v) {
    if (std::isnan(v)) return std::nullopt;  // absent (the reader admits only finite values)
    return v;
  }
  static std::optional<std::int64_t> calls_of(double v) {
    if (std::isnan(v)) return std::nullopt;
    return static_cast<std::int64_t>(v);
  }
  static constexpr std::uint32_t kNoSlot = 0xFFFFFFFFu;
  std::size_t width_ = 0, counter_width_ = 0, n_ = 0;
  // Each name's column (in the arrays below), or kNoSlot when it has none.
  std::vector<std::uint32_t> slot_, counter_slot_;
  // Region id's listings (regions without columns) are listed_[listed_begin_[id] ..
  // listed_end_[id]).
  std::vector<std::size_t> listed_begin_, listed_end_;
  std::vector<Listing> listed_;
  // Filled by ranges of updates on several threads (allocated without initializing).
  std::unique_ptr<double[]> device_, host_, calls_;  // [slot * n + k], NaN when absent
  std::unique_ptr<std::uint8_t[]> present_;          // [slot * n + k]: 1 when the update lists the region
  std::unique_ptr<double[]> counters_;               // [slot * n + k], NaN when absent
  std::vector<bool> device_any_, data_any_;
};

/// The time analyses use for a region in one update: device-stream time when the log
/// has device times for the region, else host time [ms]; nullopt when absent.
std::optional<double> region_ms(const UpdateRecord& u, NameTable::Id region, bool device);

struct AnalysisInput {
  const Dataset& data;
  const Hierarchy* hierarchy = nullptr;  ///< null when the nesting is unknown
  /// Optional lookup index over updates() (build_report builds one); analyses fall back
  /// to UpdateRecord::region without it.
  const UpdateIndex* index = nullptr;
  /// Optional: each rank's first position in updates(), per element of data.ranks
  /// (rank_offsets(data); build_report sets it), so that first_update_of() is O(1).
  const std::vector<std::size_t>* rank_first = nullptr;

  /// Each element of data.ranks' first position in updates() (prefix sums of their sizes).
  [[nodiscard]] static std::vector<std::size_t> rank_offsets(const Dataset& data);

  /// The values of region `id` in `u`, the k-th element of updates(), or nullopt when absent.
  [[nodiscard]] std::optional<RegionValues> region_of(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    return index ? index->find(k, u, id) : UpdateIndex::values_of(u.region(id));
  }
  /// The time analyses use for a region in the k-th update (see region_ms below).
  [[nodiscard]] std::optional<double> region_ms_of(std::size_t k, const UpdateRecord& u, NameTable::Id id,
                                                   bool device) const {
    if (index) return index->time(k, u, id, device);
    return region_ms(u, id, device);
  }
  /// The value of counter `id` in the k-th element of updates(), `u`, or nullopt.
  [[nodiscard]] std::optional<double> counter_of(std::size_t k, const UpdateRecord& u, NameTable::Id id) const {
    return index ? index->counter(k, u, id) : u.counter(id);
  }
  /// Counter value in the k-th element of updates(), or 0 when absent (for sums of work).
  [[nodiscard]] double counter_or_zero(std::size_t k, const UpdateRecord& u, std::optional<NameTable::Id> counter) const;
  /// Position of the first update of `rank` in updates(); nullopt when `rank` is not
  /// an element of data.ranks. O(1) with rank_first, else O(ranks): without it, a call
  /// per rank is quadratic in the ranks (27 % of the report's time at 65,536 ranks).
  [[nodiscard]] std::optional<std::size_t> first_update_of(const RankLog& rank) const;

  /// Every update of every rank, in rank then step order.
  [[nodiscard]] std::vector<const UpdateRecord*> updates() const;
  /// The region's id, if the log has that region.
  [[nodiscard]] std::optional<NameTable::Id> region(std::string_view name) const { return data.regions.find(name); }
  [[nodiscard]] std::optional<NameTable::Id> counter(std::string_view name) const { return data.counters.find(name); }
  /// The children of `name` in the nesting (hierarchy) that the log has (has_data), in
  /// the nesting's order, with a child the log never has (a wrapper of a --hierarchy file,
  /// or a name the log lists without a time) replaced by its own children, and so on down;
  /// role=background children left out (they run alongside it): the region's children as
  /// the region table nests them. (Walked through direct children only, an absent middle
  /// region made its parent a leaf beside its grandchildren: whatif no-padding counted
  /// 16.5 against 7.65 ms, a review.) Empty without the nesting.
  [[nodiscard]] std::vector<const HierarchyNode*> children_in_log(std::string_view name) const;
  /// The depth of `name` in the nesting as the log has it: its ancestors that the log
  /// has (has_data), so that a wrapper it never has is no level (children_in_log).
  /// 0 for a top-level region, or one not in the nesting or without it. O(depth).
  [[nodiscard]] int depth_in_log(std::string_view name) const;
  /// The nearest ancestor of `name` in the nesting that the log has (has_data): its
  /// parent as the log has the nesting, a wrapper it never has skipped. "" for none (a
  /// top-level region, or one not in the nesting). O(depth).
  [[nodiscard]] std::string parent_in_log(std::string_view name) const;
  /// True when some update has region `region` with a time or calls (as the region table
  /// counts a region present).
  [[nodiscard]] bool has_data(NameTable::Id region) const;
  /// True when the logs' device times are GPU busy time (a union of kernel intervals,
  /// summed over streams), as imported from a profiler trace, rather than the span between
  /// two stream events: the config's `device_timing` says "union". Children that ran on
  /// several streams may then add up to more than their parent.
  [[nodiscard]] bool device_time_is_busy_union() const;
  /// True when any update has a device (CUDA stream) time for the region.
  [[nodiscard]] bool has_device_time(NameTable::Id region) const;
};


/// Counter value, or 0 when the counter is absent from the update (for sums of work).
double counter_or_zero(const UpdateRecord& u, std::optional<NameTable::Id> counter);

/// A region's columns over AnalysisInput::updates() (UpdateIndex::Columns): views into
/// the index when it has them, else gathered from the update records and owned here.
/// Movable (the views stay valid), not copyable.
class RegionColumns {
 public:
  RegionColumns(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates, NameTable::Id id);
  RegionColumns(RegionColumns&&) noexcept = default;
  RegionColumns& operator=(RegionColumns&&) noexcept = default;
  RegionColumns(const RegionColumns&) = delete;
  RegionColumns& operator=(const RegionColumns&) = delete;
  [[nodiscard]] const UpdateIndex::Columns& get() const { return view_; }

 private:
  std::vector<double> device_, host_, calls_;
  std::vector<std::uint8_t> present_;
  UpdateIndex::Columns view_;
};

}  // namespace stepprof
