#include "stepprof/analysis/report.hpp"

#include <exception>
#include <thread>

namespace stepprof {

Report build_report(const AnalysisInput& given) {
  // One lookup index for every analysis that goes over all updates once per region.
  const UpdateIndex index(given.updates(), given.data.regions.size(), given.data.counters.size());
  const AnalysisInput in{given.data, given.hierarchy, given.index ? given.index : &index};
  Report r;
  r.run = summarize_run(in);
  // The region table takes about as long as all the other analyses together: on large
  // inputs it runs on a second thread (the analyses only read the dataset).
  constexpr std::size_t kThreadFrom = 50'000;  // updates
  std::exception_ptr error;
  std::thread regions;
  if (in.data.update_count() >= kThreadFrom && std::thread::hardware_concurrency() > 1) {
    regions = std::thread([&] {
      try {
        r.regions = analyze_regions(in);
      } catch (...) {
        error = std::current_exception();
      }
    });
  } else {
    r.regions = analyze_regions(in);
  }
  r.time = analyze_update_time(in, r.run);
  r.paths = analyze_code_paths(in);
  r.padding = analyze_padding(in);
  for (const auto& rank : in.data.ranks) r.waiting.push_back(analyze_waiting(in, rank));
  if (regions.joinable()) regions.join();
  if (error) std::rethrow_exception(error);
  r.cross_rank = analyze_cross_rank(in, r.waiting, r.run.world_size);
  r.findings = derive_findings({r.time, r.regions, r.paths, r.padding, r.waiting, r.cross_rank, in.hierarchy});
  return r;
}

}  // namespace stepprof
