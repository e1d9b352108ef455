// The `stepprof report` analysis: every section, computed once from a dataset. The
// renderers (text, markdown, JSON) only format this.
#pragma once

#include <vector>

#include "stepprof/analysis/slow_updates.hpp"
#include "stepprof/analysis/code_paths.hpp"
#include "stepprof/analysis/cross_rank.hpp"
#include "stepprof/analysis/findings.hpp"
#include "stepprof/analysis/padding.hpp"
#include "stepprof/analysis/regions.hpp"
#include "stepprof/analysis/run_summary.hpp"
#include "stepprof/analysis/update_time.hpp"
#include "stepprof/analysis/waiting.hpp"

namespace stepprof {

struct Report {
  RunSummary run;
  UpdateTimeResult time;
  std::optional<SlowUpdates> slow_updates;  ///< the updates above the p90 and what grew in them
  RegionTable regions;
  CodePathResult paths;
  PaddingResult padding;
  std::vector<WaitingResult> waiting;  ///< one per rank
  CrossRankResult cross_rank;          ///< needs several ranks' logs
  std::vector<Finding> findings;
};

Report build_report(const AnalysisInput& in);

}  // namespace stepprof
