// Section 7 of the report: a short ranked list of what to look at, each with its
// measured evidence and the time at stake per update. Built only from the other
// analyses' results (it reads no records itself).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "stepprof/analysis/slow_updates.hpp"
#include "stepprof/analysis/code_paths.hpp"
#include "stepprof/analysis/cross_rank.hpp"
#include "stepprof/analysis/padding.hpp"
#include "stepprof/analysis/regions.hpp"
#include "stepprof/analysis/run_summary.hpp"
#include "stepprof/analysis/update_time.hpp"
#include "stepprof/analysis/waiting.hpp"

namespace stepprof {

struct Finding {
  std::string kind;      ///< stable id: slow-path, straggler, slow-ranks, straggler_episode, waiting, missing-ranks, padding,
                         ///< data-loading, exclusive-time, untracked-time, variability, time-gap, nesting,
                         ///< stopped-rank
  std::string subject;   ///< the region (or group) concerned, if any
  double ms_per_update = 0;  ///< time at stake per update [ms] (the ranking key)
  /// ms_per_update / median update time [fraction]; nullopt when that median is not
  /// above 0 (every wall_ms 0: a `zero-wall-time` warning says so).
  std::optional<double> share;
  std::string title;     ///< one line: what is happening
  std::string evidence;  ///< the measurements behind it, with units
  std::string action;    ///< what to change or look at next
};

/// Everything findings are derived from.
struct FindingInputs {
  const UpdateTimeResult& time;
  const RegionTable& regions;
  const CodePathResult& paths;
  const PaddingResult& padding;
  const std::vector<WaitingResult>& waiting;
  const CrossRankResult& cross_rank;
  const Hierarchy* hierarchy;
  const std::optional<SlowUpdates>& slow;  ///< what the slowest updates are made of
  /// The run section (config fields that differ between ranks); null: not used.
  const RunSummary* run = nullptr;
};

/// Findings sorted by time at stake, largest first; at most `max_findings`.
std::vector<Finding> derive_findings(const FindingInputs& in, std::size_t max_findings = 8);

}  // namespace stepprof
