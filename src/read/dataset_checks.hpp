// Checks on the whole dataset after reading, for logs that are valid record by record but
// not as a whole: names made with the step number in them, updates without a wall time,
// region times far beyond their update's, token counters that contradict each other.
#pragma once

#include "stepprof/dataset.hpp"
#include "stepprof/diagnostics.hpp"

namespace stepprof::detail {

/// The fewest names that occur in one step each, and the smallest share of all names
/// they must be, for check_one_off_names to warn.
inline constexpr std::size_t kMinOneOffNames = 20;

/// Reports a Problem::kOneOffNames warning for the regions, and one for the counters,
/// when at least kMinOneOffNames of their names, and more than a quarter of them, each
/// occur in a single step (on any number of ranks), these steps being at least
/// kMinOneOffNames different ones (in a log of one update every name is in one step): each such name is its own region
/// or counter, so every table and chart lists them one by one and the analyses grow
/// with their number. The message counts them and names the first three with their steps.
void check_one_off_names(const Dataset& data, Diagnostics& diag);

/// Reports one Problem::kZeroWallTime warning when updates have `wall_ms` 0 while their
/// regions took time (a recorder that never started the update's clock): the update's
/// shares and throughput are then meaningless. Counts them and names the first.
void check_zero_wall_time(const Dataset& data, Diagnostics& diag);

/// Reports one Problem::kBadField error when updates have counts.valid_tokens above
/// counts.token_slots, or one of the two without the other, in a log that has both
/// counters (negative or 100 % padding: counters swapped, slots counted before padding, one
/// not recorded); analyze_padding and the token throughputs (analyze_update_time) leave
/// such updates out. Nothing when no update has
/// token_slots or none has valid_tokens. Counts them and names the first.
/// Also one Problem::kBadField warning when updates' `padding_fraction` field differs from
/// 1 - valid_tokens / token_slots by more than kPaddingFieldTolerance (the analyses use
/// the counters).
void check_token_counters(const Dataset& data, Diagnostics& diag);

/// How far an update's padding_fraction may be from 1 - valid_tokens / token_slots
/// before check_token_counters says so (the recorder writes the field with 17 digits;
/// a field rounded to 4 decimals stays within) [fraction].
inline constexpr double kPaddingFieldTolerance = 1e-4;

/// A region time above this many times its update's wall_ms is reported by
/// check_region_times. (A region entered on several threads at once sums their host time,
/// and device work can finish after its update's end, so a region may exceed its update;
/// by 100x only a value in another unit, e.g. ns written as ms, or a corrupt one does.)
inline constexpr double kRegionBeyondUpdateFactor = 100;

/// Reports one Problem::kRegionBeyondUpdate warning when region times (host or device)
/// exceed kRegionBeyondUpdateFactor x their update's wall_ms (updates with wall_ms 0 are
/// check_zero_wall_time's; ranks read from a profiler trace, whose config has
/// `trace_format`, are not checked: GPU time counts in the step that launched it). The figures use them as written: one such value dominates its
/// region's share of the update, mean and max. Counts them and names the largest
/// relative to its update (region, clock, step, rank, both times).
void check_region_times(const Dataset& data, Diagnostics& diag);

/// An update whose wall_ms is above this many times its rank's median wall_ms is
/// reported by check_wall_times. (A clock that jumped, e.g. time.time() across an NTP
/// step, or a value in another unit; a checkpoint save inside the update, of minutes for
/// a large model, can be as long, and the message says so.) The first update after each
/// config record is not judged, nor counted in the median: it counts from the recorder's
/// open(), compilation and warm-up included.
inline constexpr double kWallBeyondRankFactor = 100;

/// The fewest updates with wall_ms above 0 a rank needs for its median to be judged by.
inline constexpr std::size_t kMinUpdatesForWallCheck = 5;

/// Reports one Problem::kWallTimeOutlier warning when updates' wall_ms exceed
/// kWallBeyondRankFactor x their rank's median wall_ms (ranks with at least
/// kMinUpdatesForWallCheck updates timed; the first update after a config record left
/// out). The figures use them as written: one such value
/// dominates the update time's mean and max. Counts them and names the largest relative
/// to its rank's median (step, rank, wall_ms, the median, its longest region).
void check_wall_times(const Dataset& data, Diagnostics& diag);

/// Reports one Problem::kZeroRegionTimes warning for the ranks whose every region time,
/// host and device, is 0 while their updates' wall_ms are not (a recorder whose region
/// clock did not run, times rounded to 0 in another unit): their regions read as taking
/// no time, which lowers every region's median over the job and misleads the rank
/// comparison. Names the first such rank and counts them.
void check_zero_region_times(const Dataset& data, Diagnostics& diag);

/// Every check above.
/// Micro-batches whose `path` is no region of their update (a misspelt path): one
/// `bad-field` warning counting them, naming the first.
void check_microbatch_paths(const Dataset& data, Diagnostics& diag);

/// Updates whose `gpu_busy_ms` exceeds their `wall_ms` (beyond rounding): one `bad-field`
/// warning counting them, naming the first.
void check_gpu_busy(const Dataset& data, Diagnostics& diag);

void check_dataset(const Dataset& data, Diagnostics& diag);

}  // namespace stepprof::detail
