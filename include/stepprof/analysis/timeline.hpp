// The layout behind `stepprof trace`: where each update and region goes on a time
// axis, per rank, for the Chrome trace renderer (render_trace). Step logs hold
// per-update sums, not timestamps, so the slices are laid out by fixed rules
// (docs/exports.md "Trace layout"):
//
//  - Time axis: updates one after another. Update k of the window starts, on every rank,
//    when the slowest rank's update k-1 ended: at the sum over earlier steps of the
//    largest wall_ms over ranks (the first step of the window at 0). When every update
//    record carries `start_unix_ms` (schema::kStartUnixMs; no current recorder writes
//    it, `import kineto` does: each ProfilerStep's start), updates start at that time
//    instead, relative to the earliest.
//  - One track per clock (host: `cpu_call_ms`, device: `cuda_stream_ms`), each with one
//    slice per update (its wall_ms) as the root. With the nesting known, the top-level
//    regions are laid out one after another from the update's start, in nesting order,
//    and each region's children one after another from the region's start; a region
//    absent from an update (or without a time on the track's clock) is skipped and its
//    children take its place. A region is one slice of its summed time per update
//    (`calls` says how many entries it summed). Children that add up to more than their
//    parent are shrunk proportionally to fit (the slice keeps `scale` < 1).
//  - Regions the nesting does not place (no nesting at all, or not in it) get a track
//    of their own per clock, with one slice per update from the update's start, cut to
//    the update's duration where longer.
//  - Counters are sampled once per update, at its start.
// Times are whole microseconds (the trace format's unit), so that nesting is exact in every viewer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/analysis/input.hpp"
#include "stepprof/reader.hpp"

namespace stepprof {

enum class Clock : std::uint8_t { kHost, kDevice };

struct TimelineSlice {
  /// The region (text owned by the dataset's region NameTable); empty for an update.
  std::string_view region;
  std::int64_t start_us = 0, dur_us = 0;  ///< on the trace's time axis [us]
  std::int64_t step = 0;                  ///< the optimizer update it belongs to
  bool update = false;                    ///< the whole update (wall_ms)
  double recorded_ms = 0;                 ///< the logged time: sum over calls, or wall_ms [ms]
  std::optional<std::int64_t> calls;      ///< `calls` in the update [count]
  std::optional<double> scale;            ///< laid-out / recorded duration, when shrunk to fit (< 1)
};

struct TimelineTrack {
  std::string name;
  Clock clock = Clock::kHost;
  std::optional<std::string> region;  ///< set for a track that holds one region only
  /// In start order; a slice's children follow it (depth first); slices are either
  /// nested or disjoint.
  std::vector<TimelineSlice> slices;
};

/// A counter track: several series sampled at the same times.
struct TimelineCounter {
  struct Sample {
    std::int64_t ts_us = 0;                     ///< the update's start [us]
    std::int64_t step = 0;
    std::vector<std::optional<double>> values;  ///< per series; absent where the log has none
  };
  std::string name;                 ///< e.g. "tokens"
  std::vector<std::string> series;  ///< e.g. {"token_slots", "valid_tokens"}
  std::vector<Sample> samples;      ///< one per update in which any series has a value
};

struct TimelineProcess {
  std::optional<std::int64_t> rank;
  std::int64_t pid = 0;  ///< the rank; 1000000 + position when the log gives no rank
  std::string name;      ///< "rank 3"
  std::vector<TimelineTrack> tracks;
  std::vector<TimelineCounter> counters;
};

/// The longest time axis a trace is laid out on [us]: 2^53 us (285 years), the largest
/// range in which a JavaScript number (the trace viewers') holds every microsecond.
inline constexpr double kMaxTraceSpanUs = 9007199254740992.0;

struct Timeline {
  std::vector<TimelineProcess> processes;  ///< one per rank, in rank order
  /// Set, with nothing laid out, when updates laid out one after another would span more
  /// than kMaxTraceSpanUs: the steps' largest wall_ms added up [ms] (wall_ms in another
  /// unit, or corrupt: each may be up to 10^12 ms, so 10,000 updates of them overflowed
  /// a 64-bit microsecond clock and the trace ran backwards).
  std::optional<double> span_too_long_ms;
  bool nesting_known = false;
  bool real_timestamps = false;    ///< updates placed at their logged start_unix_ms
  std::size_t shrunk_slices = 0;   ///< slices shrunk to fit their parent or update
  std::vector<std::string> notes;  ///< how the slices were laid out, one sentence each
  /// Why the logs' start_unix_ms were not used (one update's is not a Unix time in ms, or
  /// some updates lack it); empty when they were, or when no update has one.
  std::string timestamps_not_used;
};

/// Lays out every update of every rank (rules above). The result refers to the names in
/// `in.data` and must not outlive it. Counters: "tokens" (token_slots,
/// valid_tokens, supervised_tokens), "work" (samples, frames, micro_steps), "padding
/// fraction" (series.hpp update_padding_fraction), one "samples per code path (GROUP)"
/// per group of alternatives in the nesting (0 for a path whose region and samples
/// counter are both absent from the update: it did not run), then every other counter
/// on its own track.
/// `only_ranks` (empty: every rank) draws only the ranks in those ranges (a log that
/// names no rank is then left out); the updates are still placed by every rank's times,
/// so a step keeps the length the slowest rank gave it.
Timeline build_timeline(const AnalysisInput& in, const std::vector<RankRange>& only_ranks = {});

/// The update's logged `start_unix_ms` (schema::kStartUnixMs: host time at its entry, ms
/// since the Unix epoch; `import kineto` writes each ProfilerStep's start), or nullopt
/// when it has none or one that is no Unix time in ms (0 to 1e14) [ms].
std::optional<double> logged_start_unix_ms(const UpdateRecord& u);

}  // namespace stepprof
