#include "stepprof/analysis/report.hpp"

#include <functional>
#include <iterator>

#include "../util/parallel.hpp"

namespace stepprof {

Report build_report(const AnalysisInput& given) {
  // One lookup index for every analysis that goes over all updates once per region.
  const UpdateIndex index(given.updates(), given.data.regions.size(), given.data.counters.size());
  const std::vector<std::size_t> rank_first = AnalysisInput::rank_offsets(given.data);
  const AnalysisInput in{given.data, given.hierarchy, given.index ? given.index : &index, &rank_first};
  Report r;
  r.run = summarize_run(in);
  // The analyses only read the dataset and write their own part of the report: on large
  // inputs they run as independent jobs on the hardware threads, the longest first (the
  // region table, which also computes its rows on several threads).
  constexpr std::size_t kThreadFrom = 50'000;  // updates
  const std::function<void()> jobs[] = {
      [&] { r.regions = analyze_regions(in); },
      [&] {
        // (The code paths first: the cross-rank search takes their slow paths' excess out.)
        r.paths = analyze_code_paths(in);
        const auto comm = find_comm_region(in);
        for (const auto& rank : in.data.ranks) r.waiting.push_back(analyze_waiting(in, rank, comm));
        r.cross_rank = analyze_cross_rank(in, r.waiting, r.run.world_size, 0.75, &r.paths, &r.run.config_differences);
        r.slow_updates = analyze_slow_updates(in, &r.cross_rank);  // (compares the ranks' own work)
      },
      [&] { r.time = analyze_update_time(in, r.run); },
      [&] { r.padding = analyze_padding(in); },
  };
  detail::parallel_for(std::size(jobs), in.data.update_count() >= kThreadFrom ? 0 : 1,
                       [&](std::size_t i) { jobs[i](); });
  r.findings = derive_findings(
      {r.time, r.regions, r.paths, r.padding, r.waiting, r.cross_rank, in.hierarchy, r.slow_updates, &r.run});
  return r;
}

}  // namespace stepprof
