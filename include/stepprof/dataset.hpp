// What the readers produce: every rank's config and update records, with the
// region and counter names interned once for the whole input.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "stepprof/names.hpp"
#include "stepprof/record.hpp"

namespace stepprof {

/// One rank's records, merged over all input files that hold that rank.
struct RankLog {
  std::optional<std::int64_t> rank;   ///< absent when neither config nor records say
  std::optional<RunConfig> config;    ///< absent when no config record was found
  std::vector<UpdateRecord> updates;  ///< sorted by step; steps are unique
  std::vector<std::uint32_t> files;   ///< indices into Dataset::files
};

/// All input, after validation. Records the reader rejected are not here; each was
/// reported as a diagnostic.
struct Dataset {
  std::vector<std::string> files;  ///< input names as given (`-` for stdin)
  NameTable regions;               ///< region names (cuda_stream_ms/cpu_call_ms/calls keys)
  NameTable counters;              ///< counter names (`counts` keys)
  std::vector<RankLog> ranks;      ///< sorted by rank
  std::uint64_t updates_outside_window = 0;  ///< valid updates dropped by --steps
  std::uint64_t updates_before_window = 0;   ///< ... of which were before its first step
  /// Update records skipped as another run's than the one analyzed (mixed-runs errors;
  /// ReadOptions::run chooses the run).
  std::uint64_t updates_of_other_runs = 0;

  /// Total number of update records over all ranks.
  [[nodiscard]] std::size_t update_count() const;
};

}  // namespace stepprof
