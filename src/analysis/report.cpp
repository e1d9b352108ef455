#include "stepprof/analysis/report.hpp"

namespace stepprof {

Report build_report(const AnalysisInput& in) {
  Report r;
  r.run = summarize_run(in);
  r.time = analyze_update_time(in, r.run);
  r.regions = analyze_regions(in);
  r.paths = analyze_code_paths(in);
  r.padding = analyze_padding(in);
  for (const auto& rank : in.data.ranks) r.waiting.push_back(analyze_waiting(in, rank));
  r.cross_rank = analyze_cross_rank(in, r.waiting, r.run.world_size);
  r.findings = derive_findings({r.time, r.regions, r.paths, r.padding, r.waiting, r.cross_rank, in.hierarchy});
  return r;
}

}  // namespace stepprof
