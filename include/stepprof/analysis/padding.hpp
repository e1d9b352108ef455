// Section 5 of the report: how much of the token tensor is padding, and what it costs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "stepprof/analysis/input.hpp"
#include "stepprof/analysis/stats.hpp"

namespace stepprof {

/// A region whose time grows with the token slots of the update.
struct TokenBoundRegion {
  std::string region;
  double correlation = 0;      ///< Pearson r of its time with token_slots over updates
  double median_ms = 0;        ///< its median time per update [ms]
};

/// An update whose padding fraction stands far above the others'.
struct PaddingSpike {
  std::int64_t rank = -1;  ///< -1: the log names no rank
  std::int64_t step = 0;
  double fraction = 0;                  ///< the update's padding fraction [fraction]
  std::optional<double> padded_length;  ///< its longest padded length in input_shapes [tokens]
};

struct PaddingResult {
  bool available = false;  ///< false when the log has no token_slots/valid_tokens counters, or no token slots
  std::string why_not;     ///< when not available: why, in words (e.g. "token_slots is 0 in every update")
  /// Summed over the window's updates that logged the counters [count]. An update that
  /// logged neither is left out of every figure here (absent is not 0); one that logged
  /// only one of them, or more valid tokens than slots, too (the reader reports it).
  double token_slots = 0, valid_tokens = 0;
  /// Token-weighted padding fraction: 1 - sum(valid_tokens) / sum(token_slots) [fraction].
  double fraction = 0;
  std::optional<Summary> per_update_fraction;  ///< per update, from the counters [fraction]
  /// (token_slots - valid_tokens) / sum(wall_ms) x 1000, per rank [slots/s]; absent when not
  /// available or beyond a double (wall times of 5e-324 ms).
  std::optional<double> padding_slots_per_s;
  double padding_slots_per_update = 0;  ///< mean per update per rank [slots]
  std::optional<double> max_padded_length;  ///< longest padded length in input_shapes [tokens]
  /// Leaf regions (of the nesting) whose time correlates with token slots (r at least
  /// `min_correlation`),
  /// compute only (no role in the nesting, not the communication region: waits do not
  /// scale with this rank's tokens),
  /// and the time that padding costs in them if their time is proportional to token
  /// slots: fraction x sum of their median times [ms per update]. Needs the nesting
  /// (leaves do not overlap); without it `cost_needs_nesting` is set instead.
  std::vector<TokenBoundRegion> token_bound;
  std::optional<double> cost_ms_per_update;
  bool cost_needs_nesting = false;
  /// Where no region is token-bound, why (for the message): the updates the correlation
  /// was computed over [count] (it needs 3), the closest leaf region below min_correlation (its r
  /// in `correlation`; none where no r could be computed) and the coefficient of variation
  /// of token slots per update over those updates [fraction] (little spread leaves
  /// nothing to follow).
  std::size_t cost_updates = 0;
  /// The r a region needs to count as token-bound: 0.4, or more where the updates are too
  /// few for a smaller one to differ from chance at the 5 % level (significant_correlation
  /// of cost_updates: 0.88 with 5 updates; an audit's 5-update window had counted a
  /// region of fixed time at r = 0.48).
  double min_correlation = 0.4;
  std::optional<TokenBoundRegion> closest_below;
  std::optional<double> token_slots_cv;
  /// Regions in every update that the nesting lacks (a misspelt or forgotten name in a
  /// --hierarchy file) whose time follows token slots as a token-bound region's must: not
  /// counted in the cost (whether they are leaves is unknown), named so that the nesting
  /// can be fixed. A helper's typo left the cost out with "the closest: gradient_clipping".
  std::vector<TokenBoundRegion> outside_nesting;
  /// Padding spikes: updates whose padding fraction exceeds the 90th percentile over all
  /// updates by more than kSpikeMargin (e.g. one long sample padding a whole
  /// micro-batch). `spikes` holds the largest kMaxSpikesKept, largest first.
  static constexpr double kSpikeMargin = 0.20;  ///< [fraction]
  static constexpr std::size_t kMaxSpikesKept = 20;
  std::optional<double> spike_threshold;  ///< p90 + kSpikeMargin [fraction]
  std::size_t spike_count = 0;
  std::vector<PaddingSpike> spikes;
  /// Every spike's (rank, step), sorted (-1: the log names no rank); spike_count of them
  /// (at most a tenth of the updates, by the threshold's p90).
  std::vector<std::pair<std::int64_t, std::int64_t>> spike_updates;
};

PaddingResult analyze_padding(const AnalysisInput& in);

}  // namespace stepprof
