#include "stepprof/analysis/gpu_busy.hpp"

#include <algorithm>
#include <vector>

#include "stepprof/schema.hpp"

namespace stepprof {

std::optional<double> logged_gpu_busy_ms(const UpdateRecord& u) { return u.extra_number(schema::kGpuBusyMs); }

std::optional<GpuBusy> analyze_gpu_busy(const AnalysisInput& in) {
  GpuBusy g;
  std::vector<double> busy, idle, fraction;
  std::vector<double> rank_fraction;  // (one rank's, for its median)
  const auto updates = in.updates();
  g.updates_total = updates.size();
  std::optional<std::int64_t> rank_of_last;
  bool several = false;
  auto close_rank = [&] {
    if (rank_fraction.empty()) return;
    ++g.ranks;
    const double m = *median(rank_fraction);
    if (!g.most_idle_rank || m > g.most_idle_fraction) {
      g.most_idle_rank = rank_of_last.value_or(-1);
      g.most_idle_fraction = m;
    }
    rank_fraction.clear();
  };
  for (const UpdateRecord* u : updates) {
    const auto b = logged_gpu_busy_ms(*u);
    if (!b || !(u->wall_ms > 0)) continue;
    if (!busy.empty() && u->rank != rank_of_last) {
      several = true;
      close_rank();
    }
    rank_of_last = u->rank;
    const double idle_ms = std::max(0.0, u->wall_ms - *b);
    busy.push_back(*b);
    idle.push_back(idle_ms);
    fraction.push_back(idle_ms / u->wall_ms);
    rank_fraction.push_back(idle_ms / u->wall_ms);
  }
  if (busy.empty()) return std::nullopt;
  close_rank();
  if (!several) g.most_idle_rank.reset();
  g.updates = busy.size();
  g.busy_ms = *summarize(std::move(busy));
  g.idle_ms = *summarize(std::move(idle));
  g.idle_fraction = *summarize(std::move(fraction));
  return g;
}

}  // namespace stepprof
