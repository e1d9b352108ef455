// Per-update series: the values behind the HTML report's charts and the CSV tables,
// one per rank and optimizer update (not summaries). Computed once here, from the
// records and the report's region table and code-path groups, so that the renderers
// (render_html, render_csv) only format them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/analysis/input.hpp"
#include "stepprof/analysis/report.hpp"

namespace stepprof {

/// A region as the series see it, in the region table's order (nesting order when known).
struct SeriesRegion {
  std::string name;
  std::string parent;       ///< "" at the top level or when the nesting is unknown
  int depth = 0;            ///< 0 at the top level
  bool in_nesting = false;  ///< false: nesting unknown, or the region is not in it
  /// Role "background", its own or an ancestor's (regions.hpp RegionRow::background): not a
  /// part of the update, so left out of the breakdowns and of its parent's children.
  bool background = false;
  /// The clock its time is taken from: device-stream time when the log has any for the
  /// region, else host time (as the region table's shares).
  bool device = false;
};

/// One region in one update of one rank, as logged, plus its exclusive time.
struct RegionPoint {
  std::uint32_t update = 0;  ///< index into RankSeries::steps
  std::uint32_t region = 0;  ///< index into UpdateSeries::regions
  std::optional<double> device_ms, host_ms;  ///< `cuda_stream_ms`, `cpu_call_ms` [ms]
  std::optional<std::int64_t> calls;         ///< `calls` [count]
  /// Exclusive (self) time per clock: the region's time minus the sum of its children's
  /// in the same update (regions.hpp children_ms); a leaf's is its own time [ms].
  /// Absent when the nesting is unknown or the region is not in it.
  std::optional<double> device_self_ms, host_self_ms;
};

/// One layer of a stacked chart of an update's time.
struct StackPart {
  enum class Kind : std::uint8_t {
    kRegion,   ///< a region's inclusive time
    kSelf,     ///< a parent's exclusive time (the part of it outside its children)
    kOutside,  ///< wall_ms minus the top-level regions (regions.hpp outside_regions_ms)
  };
  Kind kind = Kind::kRegion;
  std::string region;  ///< the region; "" for kOutside
  std::vector<std::optional<double>> ms;  ///< per update of the rank; absent where the region is [ms]
};

/// Levels of the nesting an update's time is cut at (0..15): each cut is a pass over every
/// region, and deeper cuts are not read in a chart.
inline constexpr int kMaxBreakdownLevels = 16;

/// An update's time cut at one level of the nesting: the regions at depth `level`, plus,
/// above that level, the leaves and the exclusive time of the parents, plus the time
/// outside every top-level region. With the nesting known the parts of one update add up
/// to its wall_ms (up to the device-vs-host difference of the regions timed on the
/// device, and nesting violations).
/// The most parts a Breakdown has (the outside part besides): beyond it, the regions
/// with the least time are summed in one part "(N other regions)" (not shown, for an
/// unstacked breakdown). A chart of more could not be read, and a log with a region per
/// update (names made with the step in them) made the parts quadratic in the updates.
inline constexpr std::size_t kMaxParts = 24;

struct Breakdown {
  int level = 0;        ///< depth of the cut; -1 when the nesting is unknown
  bool stacked = true;  ///< false without nesting: parts are every region, which may overlap
  std::vector<StackPart> parts;  ///< in the region table's order, then "(N other regions)", kOutside last
};

struct UpdateSeries;
/// How many Breakdowns a rank's full series has, from the series' regions alone (the same
/// for every rank): 1 (unstacked) when the nesting is unknown, else one per level of the
/// nesting's non-background regions, at most kMaxBreakdownLevels (0 when none is in it).
std::size_t breakdown_count(const UpdateSeries& s);

/// Cost per unit of work of one alternative code path, per update.
struct PathSeries {
  std::string region;
  bool device = true;  ///< time from the device clock (else host)
  /// Time of the path / its work counter (frames or samples, the group's unit) in each
  /// update; absent where the path did not run or its work counter is absent or 0 [ms per unit].
  std::vector<std::optional<double>> ms_per_unit;
};

struct PathGroupSeries {
  std::string group;
  std::string unit;  ///< "frame" or "sample" (code_paths.hpp PathGroup::unit)
  std::vector<PathSeries> paths;
};

/// Everything per update of one rank; every vector indexed by update is as long as `steps`.
struct RankSeries {
  std::optional<std::int64_t> rank;
  std::vector<std::int64_t> steps;  ///< ascending
  std::vector<double> wall_ms;      ///< [ms]
  /// 1 - valid_tokens / token_slots from the counters when the update has both (as the
  /// report's padding section), else the logged `padding_fraction` [fraction].
  std::vector<std::optional<double>> padding_fraction;
  /// wall_ms minus the top-level regions' host time; only with the nesting known [ms].
  std::vector<std::optional<double>> outside_ms;
  std::vector<std::vector<std::optional<double>>> counters;  ///< [counter index][update] [count]
  std::vector<RegionPoint> regions;   ///< update by update, in region order; absent regions not listed
  std::vector<Breakdown> breakdowns;  ///< levels 0..min(max depth, kMaxBreakdownLevels - 1); one unstacked entry without nesting
  std::vector<PathGroupSeries> paths;  ///< as the report's code-path groups
};

/// One value per rank and step, for a heatmap.
struct RankStepMatrix {
  std::string id;     ///< stable: "update_ms", "outside_comm_ms"
  std::string title;  ///< what the values are
  std::vector<std::vector<std::optional<double>>> values;  ///< [rank index][step index] [ms]
};

struct UpdateSeries {
  std::vector<std::string> counters;  ///< counter names, in order of first appearance in the input
  std::vector<SeriesRegion> regions;  ///< the region table's rows, same order
  bool nesting_known = false;
  /// The device times are busy-time unions, not spans on the update's timeline (profiler
  /// traces: RegionTable::device_busy_union): the stacked breakdowns then take every
  /// region's host time, so that their parts add up to wall_ms, and leave out regions with
  /// device time only (a trace's `nccl`, whose kernels are inside the regions that
  /// launched them).
  bool device_busy_union = false;
  std::vector<RankSeries> ranks;      ///< one per rank of the dataset, same order
  std::vector<std::int64_t> steps;    ///< every step of any rank, ascending (matrix columns)
  /// With several ranks: wall_ms per rank and step ("update_ms"), and, when every rank
  /// has a communication region (waiting.hpp), wall_ms minus that region's host time
  /// (device time where it has no host time): the time the rank spends outside
  /// communication, which shows a straggler ("outside_comm_ms").
  std::vector<RankStepMatrix> matrices;
};

/// Padding fraction of one update: 1 - valid / slots when both counters are present and
/// slots > 0, else the logged `padding_fraction`, else nullopt [fraction].
std::optional<double> update_padding_fraction(const UpdateRecord& u, std::optional<NameTable::Id> token_slots,
                                              std::optional<NameTable::Id> valid_tokens);

/// What a RankSeries holds.
enum class RankDetail : std::uint8_t {
  kHeadline,  ///< rank, steps, wall_ms, padding_fraction, outside_ms (what heatmaps need)
  kTables,    ///< and counters and regions (what the CSV tables need)
  kFull,      ///< and breakdowns and code paths (what the HTML page charts)
};

namespace detail {
/// A region row with what the series need to compute its values.
struct SeriesPlan {
  std::optional<NameTable::Id> id;  ///< the region's name id; absent when no update has it
  std::vector<NameTable::Id> kids;  ///< children in the nesting that occur in the log
};
}  // namespace detail

/// Builds the series one rank at a time, as build_series() does for every rank: for a
/// caller that writes a rank's rows and lets go of them (the CSV tables; every rank's
/// series held at once took 1 GB more than the report itself at 16,384 ranks x 20
/// updates). Keeps references to `in` and `report` (built from the same input, as for
/// build_series), which must outlive it.
class SeriesBuilder {
 public:
  SeriesBuilder(const AnalysisInput& in, const Report& report);
  /// The series' counters, regions and nesting_known; no ranks, steps or matrices.
  [[nodiscard]] const UpdateSeries& head() const { return head_; }
  /// in.data.ranks.size().
  [[nodiscard]] std::size_t rank_count() const { return in_.data.ranks.size(); }
  /// The series of in.data.ranks[i], with what `detail` says. Precondition: i < rank_count().
  [[nodiscard]] RankSeries rank(std::size_t i, RankDetail detail) const;
  /// The head, every rank's series with RankDetail::kHeadline (about 50 bytes per update
  /// record), every step and the heatmap matrices: what a page of charts needs of every rank
  /// before it charts some ranks in full, one at a time (rank()).
  [[nodiscard]] UpdateSeries overview() const;

 private:
  const AnalysisInput& in_;
  const Report& report_;
  UpdateSeries head_;
  std::vector<detail::SeriesPlan> plans_;  // one per head_.regions entry
};

/// Builds the series of every rank. `report` must have been built from the same input
/// (its region rows give the order and nesting, its code-path groups the paths and units,
/// its waiting results the communication regions). `full` (optional; one entry per rank
/// of in.data.ranks, in that order): a rank whose entry is false gets only its steps,
/// wall_ms, padding_fraction and outside_ms (what heatmaps and the page's headers need),
/// not its counters, regions, breakdowns or code paths: the HTML page charts only some
/// ranks of a large job (html_chart_ranks, render/exports.hpp), and the full series of
/// 16,384 ranks x 20 updates took 1.3 GB. Null: every rank in full.
UpdateSeries build_series(const AnalysisInput& in, const Report& report, const std::vector<bool>* full = nullptr);

}  // namespace stepprof
