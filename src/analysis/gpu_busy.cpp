#include "stepprof/analysis/gpu_busy.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "stepprof/schema.hpp"

namespace stepprof {

std::string describe_gpu_busy_updates(const GpuBusy& g) {
  const bool all = g.updates == g.updates_total;
  const char* others = " (the others have no gpu_busy_ms or a wall_ms of 0)";
  if (g.ranks_total < 2)
    return all ? fmt::format("{} update{}", g.updates, g.updates == 1 ? "" : "s")
               : fmt::format("{} of {} updates{}", g.updates, g.updates_total, others);
  const std::string of_ranks = g.ranks == g.ranks_total ? fmt::format("of {} ranks", g.ranks)
                                                        : fmt::format("of {} of the {} ranks", g.ranks, g.ranks_total);
  return all ? fmt::format("{} update records {}", g.updates, of_ranks)
             : fmt::format("{} of the {} update records, {}{}", g.updates, g.updates_total, of_ranks, others);
}

std::optional<double> logged_gpu_busy_ms(const UpdateRecord& u) { return u.extra_number(schema::kGpuBusyMs); }

std::optional<GpuBusy> analyze_gpu_busy(const AnalysisInput& in) {
  GpuBusy g;
  std::vector<double> busy, idle, fraction;
  std::vector<double> rank_fraction;  // (one rank's, for its median)
  const auto updates = in.updates();
  g.updates_total = updates.size();
  std::optional<std::int64_t> rank_of_last;
  // Ranks in the window, with the field or not (updates() goes rank by rank).
  const UpdateRecord* previous = nullptr;
  for (const UpdateRecord* u : updates) {
    if (!previous || u->rank != previous->rank) ++g.ranks_total;
    previous = u;
  }
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
    if (!busy.empty() && u->rank != rank_of_last) close_rank();
    rank_of_last = u->rank;
    // (Busy beyond the update's wall time is another unit, which the reader warned of:
    // taken as busy throughout, not as more than the update.)
    const double busy_ms = std::min(*b, u->wall_ms);
    const double idle_ms = u->wall_ms - busy_ms;
    busy.push_back(busy_ms);
    idle.push_back(idle_ms);
    fraction.push_back(idle_ms / u->wall_ms);
    rank_fraction.push_back(idle_ms / u->wall_ms);
  }
  if (busy.empty()) return std::nullopt;
  close_rank();
  if (g.ranks_total < 2) g.most_idle_rank.reset();
  g.updates = busy.size();
  g.busy_ms = *summarize(std::move(busy));
  g.idle_ms = *summarize(std::move(idle));
  g.idle_fraction = *summarize(std::move(fraction));
  return g;
}

}  // namespace stepprof
