// The generator's model of one rank's optimizer update: what data it draws, which code
// paths run, how long each region takes. Internal to stepprof_synth.
//
// Random numbers are counter-based (a hash of the seed and the draw's coordinates), so
// any (rank, step) can be regenerated on its own, in any order, on any thread.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "stepprof/names.hpp"
#include "stepprof/record.hpp"
#include "stepprof/synth.hpp"

namespace stepprof::synth::detail {

/// A uniform draw in [0, 1) determined by the seed and up to four coordinates.
double uniform(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0);
/// A 64-bit hash of the seed and the coordinates (SplitMix64 finalizer, chained).
std::uint64_t hash(std::uint64_t seed, std::uint64_t a, std::uint64_t b = 0, std::uint64_t c = 0, std::uint64_t d = 0);

/// Frames of a sample that does not trigger the fallback (the real log's majority: 9).
inline constexpr std::int64_t kFullFrames = 9;
/// Valid tokens of a normal sample are uniform in [kMinLength, kMaxLength].
inline constexpr std::int64_t kMinLength = 2450, kMaxLength = 3250;

struct MicroBatch {
  std::vector<std::int64_t> frames;   ///< per sample
  std::vector<std::int64_t> lengths;  ///< valid tokens per sample
  std::vector<std::int64_t> indices;  ///< dataset index per sample
  bool mixed = false;                 ///< mixed frame counts: the per-sample fallback runs
  std::int64_t padded = 0;            ///< padded length = longest sample [tokens]
  // Device-stream times [ms].
  double prepare = 0, vision = 0, geometry_path = 0, geometry_self = 0, language = 0, forward_self = 0,
         backward = 0, engine_self = 0, micro_self = 0;
  [[nodiscard]] double forward() const { return prepare + vision + geometry_path + geometry_self + language + forward_self; }
  [[nodiscard]] double before_sync() const { return forward() + backward + engine_self + micro_self; }
};

struct UpdatePlan {
  std::vector<MicroBatch> mbs;
  double fetch_ms = 0;     ///< batch_fetch_and_count [ms]
  double speed = 1;        ///< compute-time multiplier (jitter x straggler factor)
  double arrival_ms = 0;   ///< from the update's start to reaching the gradient all-reduce [ms]
  bool injected_fallback = false;
  bool any_mixed = false;
};

/// Injections resolved to lookups; built once, shared read-only by all threads.
class Model {
 public:
  /// `options` must be valid, with random injections already drawn into the lists.
  explicit Model(const Options& options);

  /// The update of `rank` at `step`; `with_straggler` false leaves out straggler slowdowns
  /// (to measure what they add).
  [[nodiscard]] UpdatePlan plan(std::int64_t rank, std::int64_t step, bool with_straggler = true) const;

  /// The update record, given when the slowest rank reached the all-reduce (`sync_ms`
  /// after the update's start, >= plan.arrival_ms).
  [[nodiscard]] UpdateRecord record(const UpdatePlan& plan, std::int64_t rank, std::int64_t step,
                                    double sync_ms) const;

  [[nodiscard]] const NameTable& regions() const { return regions_; }
  [[nodiscard]] const NameTable& counters() const { return counters_; }
  [[nodiscard]] const Options& options() const { return opt_; }

  /// The config record of `rank`.
  [[nodiscard]] RunConfig config(std::int64_t rank) const;

  /// The resolved length of a padding spike (0 in the spec means 4 x kMaxLength).
  static std::int64_t spike_length(const PaddingSpike& s) { return s.length > 0 ? s.length : 4 * kMaxLength; }

 private:
  static std::uint64_t key(std::int64_t rank, std::int64_t step) {
    return (static_cast<std::uint64_t>(rank) << 40) ^ static_cast<std::uint64_t>(step);
  }
  double straggler_factor(std::int64_t rank, std::int64_t step) const;

  Options opt_;
  std::unordered_map<std::uint64_t, std::int64_t> fallback_mbs_;  // (rank, step) -> micro-batches
  std::unordered_map<std::uint64_t, std::int64_t> spike_length_;  // (rank, step) -> long sample's length
  NameTable regions_, counters_;
};

}  // namespace stepprof::synth::detail
