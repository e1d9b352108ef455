// `stepprof synth`: writes realistic multi-rank step logs in the shape of the bundled
// real log (examples/qwen-vggt/rank1.jsonl), with stragglers, fallback paths and
// padding spikes injected at known ranks and updates, and says exactly where.
//
// The model is synchronous data parallelism with gradient accumulation: each rank
// fetches a batch, runs `accumulation` micro-batches of forward and backward, and
// then all ranks meet in the gradient all-reduce inside `backward_and_communication`.
// A rank that arrives early waits there for the slowest rank, so time a rank saves in
// compute reappears in its communication region (the waiting signal of the report).
// Costs per unit of work are fitted to the real log (docs/synth.md); every update
// record goes through the one serializer (record_writer.hpp).
//
// Output is deterministic: the same options (seed included) give the same bytes,
// whatever the number of threads.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stepprof::synth {

/// A rank whose compute is slower for a window of updates (a slow GPU, thermal
/// throttling, a noisy neighbour): its forward and backward times are multiplied by
/// `factor`; the other ranks wait for it in the all-reduce.
struct Straggler {
  std::int64_t rank = 0;
  std::int64_t first_step = 0, last_step = 0;  ///< inclusive window of updates
  double factor = 1.3;                          ///< compute-time multiplier (> 1)
};

/// An update in which some micro-batches mix frame counts, so the geometry encoder
/// takes the per-sample fallback path `vggt_single` instead of `vggt_batched`.
struct Fallback {
  std::int64_t rank = 0;
  std::int64_t step = 0;
  std::int64_t microbatches = 1;  ///< how many of the update's micro-batches fall back (<= accumulation)
};

/// An update in which one micro-batch holds one very long sample, so the whole
/// micro-batch is padded to its length: token slots, padding and the language-model
/// time jump.
struct PaddingSpike {
  std::int64_t rank = 0;
  std::int64_t step = 0;
  std::int64_t length = 0;  ///< the long sample's length [tokens]; 0: 4 x the longest normal length
};

struct Options {
  std::int64_t ranks = 4;         ///< world size; one file per rank
  std::int64_t updates = 100;     ///< optimizer updates per rank
  std::int64_t first_step = 1;    ///< step number of the first update
  std::uint64_t seed = 1;
  std::int64_t micro_batch = 8;   ///< samples per micro-batch (real log: 8)
  std::int64_t accumulation = 2;  ///< micro-batches per update (real log: 2)
  /// Probability that a micro-batch mixes frame counts on its own (background
  /// fallbacks, not listed as injections). 0 keeps every fallback an injection.
  double fallback_rate = 0;
  bool parents = true;            ///< write `parents` (the nesting) in every update record
  std::vector<Straggler> stragglers;
  std::vector<Fallback> fallbacks;
  std::vector<PaddingSpike> padding_spikes;
  /// Further injections drawn from the seed at random ranks and updates.
  std::int64_t random_stragglers = 0, random_fallbacks = 0, random_padding_spikes = 0;
};

/// Memory `generate` holds for the whole job: per update, the slowest and the next
/// slowest rank's arrival at the all-reduce and which rank was slowest [bytes].
inline constexpr std::uint64_t kJobBytesPerUpdate = 24;

/// Checks options against each other (ranks and steps in range, factors > 1, ...).
/// Returns an empty string when valid, else what is wrong.
std::string validate(const Options& options);

/// What was injected where, with the figures a test needs to check the report.
struct InjectedStraggler {
  Straggler spec;
  /// Mean over the window of the straggler's extra compute per update [ms].
  double extra_ms = 0;
  /// Mean over the window of how much later the straggler reached the all-reduce than
  /// the next slowest rank, i.e. how long it held up the job per update [ms].
  double lead_ms = 0;
  /// Updates of the window in which this rank was the last to reach the all-reduce.
  std::int64_t slowest_updates = 0;
};

struct InjectedFallback {
  Fallback spec;
  std::vector<std::int64_t> frame_counts;  ///< distinct frame counts of the mixed micro-batches, ascending
  std::int64_t single_samples = 0;         ///< samples that took vggt_single in the update
  /// Micro-batches of the update that mixed frame counts: the injected ones, and any the
  /// background --fallback-rate made mix too [count].
  std::int64_t mixed_microbatches = 0;
};

struct InjectedPaddingSpike {
  PaddingSpike spec;          ///< with `length` resolved
  std::int64_t padded_length = 0;  ///< padded length of the spiking micro-batch [tokens]
  double padding_fraction = 0;     ///< the update's padding fraction [fraction]
  /// Whether `stepprof report` on the whole logs lists it: its padding fraction is above
  /// Manifest::padding_spike_threshold. Unset when that is (a run past kSpikeCheckUpTo).
  std::optional<bool> above_report_threshold;
};

/// Runs of more updates (ranks x updates) than this are not checked against the report's
/// spike threshold (the check keeps every update's padding fraction: 8 bytes each).
inline constexpr std::int64_t kSpikeCheckUpTo = std::int64_t{1} << 22;

struct Manifest {
  Options options;                  ///< as given, random injection counts included
  std::vector<std::string> files;   ///< one per rank, rank order
  std::uint64_t bytes = 0;          ///< total bytes written (uncompressed)
  std::vector<InjectedStraggler> stragglers;  ///< explicit ones first, then random ones
  std::vector<InjectedFallback> fallbacks;
  std::vector<InjectedPaddingSpike> padding_spikes;
  /// Background fallbacks (fallback_rate > 0): updates that took vggt_single without an
  /// injection [count].
  std::int64_t background_fallback_updates = 0;
  /// With padding spikes: the threshold `stepprof report` takes for a spike on these logs,
  /// the 90th percentile (type 7) of every update's padding fraction plus
  /// PaddingResult::kSpikeMargin (analysis/padding.hpp) [fraction]. A spike at or below it
  /// is not listed (one in fewer than about 10 updates, or a short spike length, can raise
  /// the percentile past itself). Unset past kSpikeCheckUpTo updates.
  std::optional<double> padding_spike_threshold;
};

/// The name of rank `rank`'s log among `ranks` in generate's directory: `rank<N>.jsonl`,
/// N zero-padded to the digits of ranks - 1 (rank07 of 16), `.jsonl.gz` with `gzip`.
std::string log_file_name(std::int64_t rank, std::int64_t ranks, bool gzip);

/// Writes one log per rank into `dir` (created if missing) as `rank<N>.jsonl`
/// (zero-padded, so names sort in rank order), or `.jsonl.gz` with `gzip`.
/// `threads` files are written at once (0: one per hardware thread). `cancelled`, if
/// given, is polled between updates; when it returns true writing stops, the partial
/// files are removed and std::runtime_error("interrupted") is thrown. Holds
/// kJobBytesPerUpdate x updates bytes before it writes. Throws std::runtime_error when a
/// file cannot be written (the message names it) or `validate(options)` fails, and
/// std::bad_alloc when that memory is not there.
Manifest generate(const Options& options, const std::string& dir, bool gzip = false, unsigned threads = 0,
                  const std::function<bool()>& cancelled = {});

/// The manifest as JSON (`stepprof.synth-manifest/1`, documented in docs/synth.md).
std::string manifest_to_json(const Manifest& manifest);

/// One line per injection, for people: "straggler: rank 5, steps 101..120, ...".
std::string describe(const Manifest& manifest);

}  // namespace stepprof::synth
