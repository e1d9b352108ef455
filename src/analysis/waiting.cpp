#include "stepprof/analysis/waiting.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <span>

#include <fmt/format.h>

namespace stepprof {
namespace {

bool looks_like_comm(std::string_view name) {
  if (is_collective_call(name)) return true;  // (gloo:broadcast)
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  constexpr std::array<std::string_view, 6> keys = {"comm", "allreduce", "all_reduce", "nccl", "reduce_scatter",
                                                    "all_gather"};
  return std::any_of(keys.begin(), keys.end(), [&](std::string_view k) { return lower.find(k) != std::string::npos; });
}

}  // namespace

bool is_collective_call(std::string_view name) {
  for (std::string_view backend : {"nccl:", "gloo:", "ucc:", "mpi:"})
    if (name.starts_with(backend)) return true;
  return false;
}

namespace {

// Ranks whose first kLookedAt updates list region `id`.
std::size_t ranks_with(const AnalysisInput& in, NameTable::Id id) {
  constexpr std::size_t kLookedAt = 100;
  std::size_t n = 0;
  for (const auto& rank : in.data.ranks) {
    const std::size_t end = std::min(rank.updates.size(), kLookedAt);
    for (std::size_t k = 0; k < end; ++k)
      if (rank.updates[k].region(id)) {
        ++n;
        break;
      }
  }
  return n;
}

}  // namespace

std::optional<CommRegion> find_comm_region(const AnalysisInput& in) {
  // Of several regions with the role (a pipeline's sends and receives besides the
  // gradient all-reduce), the one most ranks have: a region only some ranks run would
  // leave the others out of the comparison.
  std::optional<NameTable::Id> best;
  std::size_t best_ranks = 0, candidates = 0;
  if (in.hierarchy)
    for (const auto& n : in.hierarchy->nodes())
      if (n.role == RegionRole::kCommunication)
        if (auto id = in.region(n.name)) {
          if (++candidates == 1) {
            best = id;
            continue;
          }
          if (candidates == 2) best_ranks = ranks_with(in, *best);
          if (const std::size_t r = ranks_with(in, *id); r > best_ranks) {
            best = id;
            best_ranks = r;
          }
        }
  if (best) return CommRegion{*best, "role in the nesting"};
  for (NameTable::Id id = 0; id < in.data.regions.size(); ++id) {
    const auto name = in.data.regions.name(id);
    const HierarchyNode* node = in.hierarchy ? in.hierarchy->find(name) : nullptr;
    if (looks_like_comm(name) && !(node && node->role != RegionRole::kNone)) return CommRegion{id, "region name"};
  }
  return std::nullopt;
}

namespace {

// WaitingResult::spike_steps and the rest, from the communication times `c` of the
// rank's updates `ups`.
void find_wait_spikes(const RankLog& rank, const std::vector<std::size_t>& ups, const std::vector<double>& c,
                      WaitingResult& w) {
  std::vector<double> own(c.size());
  for (std::size_t k = 0; k < c.size(); ++k) own[k] = rank.updates[ups[k]].wall_ms - c[k];
  std::vector<double> scratch = c;  // (median reorders its input)
  const double c_med = *median(scratch);
  scratch = own;
  const double own_med = *median(scratch);
  w.spike_threshold_ms = c_med + std::max(3 * robust_sd(c, c_med), 0.5 * c_med);
  const double own_limit = own_med + std::max(3 * robust_sd(own, own_med), 0.05 * own_med);
  // A wait worth naming: at least 5 % of the median update (noise of a millisecond in a
  // short collective is not one).
  std::vector<double> walls;
  for (const std::size_t i : ups) walls.push_back(rank.updates[i].wall_ms);
  const double least = 0.05 * *median(walls);
  std::vector<double> excess;
  for (std::size_t k = 0; k < c.size(); ++k)
    if (c[k] > w.spike_threshold_ms && c[k] - c_med >= least && least > 0 && own[k] <= own_limit) {
      w.spike_steps.push_back(rank.updates[ups[k]].step);
      excess.push_back(c[k] - c_med);
    }
  if (excess.empty()) return;
  w.spike_excess_ms = *median(excess);
  double sum = 0;
  for (const double e : excess) sum += e;
  w.spike_ms_per_update = sum / static_cast<double>(c.size());
}

}  // namespace

WaitingResult analyze_waiting(const AnalysisInput& in, const RankLog& rank) {
  return analyze_waiting(in, rank, find_comm_region(in));
}

namespace {
WaitingResult analyze_waiting_of(const AnalysisInput& in, const RankLog& rank, const std::optional<CommRegion>& found);
}  // namespace

WaitingResult analyze_waiting(const AnalysisInput& in, const RankLog& rank, const std::optional<CommRegion>& found) {
  WaitingResult w = analyze_waiting_of(in, rank, found);
  if (rank.config && rank.config->world_size == 1) {  // (no other rank to wait for)
    w.alone = true;
    w.waiting = false;
    w.wait_ms.reset();
    w.path_waits.clear();
    w.spike_steps.clear();
    w.spike_threshold_ms = w.spike_excess_ms = w.spike_ms_per_update = 0;
  }
  return w;
}

namespace {
WaitingResult analyze_waiting_of(const AnalysisInput& in, const RankLog& rank, const std::optional<CommRegion>& found) {
  WaitingResult w;
  w.rank = rank.rank;
  w.single_rank = in.data.ranks.size() == 1;
  w.updates = rank.updates.size();

  if (!found) return w;
  const std::optional<NameTable::Id> comm = found->id;
  w.comm_found_by = found->found_by;
  if (!comm) return w;
  w.comm_region = std::string(in.data.regions.name(*comm));
  const bool comm_dev = in.has_device_time(*comm);

  // Positions in in.updates() let the index find regions in O(1).
  const std::optional<std::size_t> first = in.first_update_of(rank);
  // Region id's device and host time columns over this rank's updates (NaN where absent),
  // when the index has them: read in order, as the lookups below would give them.
  struct Columns {
    std::span<const double> device, host;
  };
  const auto column = [&](NameTable::Id id) -> Columns {
    if (!first || !in.index) return {};
    const auto cols = in.index->columns(id);
    if (cols.device.empty()) return {};
    return {cols.device.subspan(*first, rank.updates.size()), cols.host.subspan(*first, rank.updates.size())};
  };
  // Region id's time in the rank's i-th update [ms], or nullopt when absent; `col` is
  // column(id). A region with device times (`dev`) is read on the device where the update
  // has one, else on the host, as the cross-rank analysis reads it (a thread or update
  // without device timing: its updates were left out of the wait).
  auto ms = [&](const Columns& col, std::size_t i, NameTable::Id id, bool dev) -> std::optional<double> {
    const auto one = [&](bool on_device) -> std::optional<double> {
      const std::span<const double> c = on_device ? col.device : col.host;
      if (!c.empty()) {
        if (std::isnan(c[i])) return std::nullopt;
        return c[i];
      }
      const UpdateRecord& u = rank.updates[i];
      return first ? in.region_ms_of(*first + i, u, id, on_device) : region_ms(u, id, on_device);
    };
    if (dev)
      if (auto t = one(true)) return t;
    return one(false);
  };
  std::vector<std::size_t> ups;  // indices into rank.updates
  std::vector<double> c;
  const auto comm_col = column(*comm);
  for (std::size_t i = 0; i < rank.updates.size(); ++i)
    if (auto t = ms(comm_col, i, *comm, comm_dev)) {
      ups.push_back(i);
      c.push_back(*t);
    }
  if (c.size() < 3) {
    w.why_no_correlation = fmt::format("the communication region is in {} update(s): a correlation needs 3 or more",
                                       c.size());
    return w;
  }
  if (std::all_of(c.begin(), c.end(), [&](double v) { return v == c.front(); })) {
    // (Every candidate's correlation would be unknown, and said to be the candidates'.)
    w.why_no_correlation = fmt::format("the communication region's time never varies over its {} updates, so no "
                                       "time can be compared with it",
                                       c.size());
  }
  // (From the communication region and wall_ms alone: also when no compute region is
  // logged or it never varies; dropped below if the anti-correlation finds a wait.)
  find_wait_spikes(rank, ups, c, w);

  // The compute region most anti-correlated with comm (present in every such update),
  // preferring the shallowest of near-equals: the whole forward pass over one of its parts
  // (depth as the log has the nesting: a wrapper it never has is no level).
  struct Cand {
    NameTable::Id id;
    double r;
    int depth;
    std::vector<double> t;
  };
  const Cand* best = nullptr;
  std::vector<Cand> cands;
  std::vector<std::string_view> with_role;  // (few: looked up by ancestry, O(log depth) each)
  if (in.hierarchy)
    for (const HierarchyNode& n : in.hierarchy->nodes())
      if (n.role != RegionRole::kNone) with_role.push_back(n.name);
  // Why no region was compared, for the message: regions left out as around the
  // communication region, for a role, or for not being in every such update or varying.
  std::size_t around = 0, by_role = 0, absent_or_fixed = 0;
  for (NameTable::Id id = 0; id < in.data.regions.size(); ++id) {
    if (id == *comm) continue;
    const auto name = in.data.regions.name(id);
    if (in.hierarchy && (in.hierarchy->is_ancestor(name, w.comm_region) || in.hierarchy->is_ancestor(w.comm_region, name))) {
      ++around;
      continue;
    }
    if (is_collective_call(name)) {  // (another collective's call: waiting too, not compute)
      ++around;
      continue;
    }
    // Compute only: not a region with a role (data loading, the optimizer step, another
    // communication region, a background thread) nor one inside such a region (a data
    // loader's region was named the compute, a helper found: its time can follow the wait
    // for other reasons).
    if (std::any_of(with_role.begin(), with_role.end(), [&](std::string_view r) {
          return r == name || in.hierarchy->is_ancestor(r, name);
        })) {
      ++by_role;
      continue;
    }
    const bool dev = in.has_device_time(id);
    const auto col = column(id);
    std::vector<double> t;
    t.reserve(ups.size());
    for (const std::size_t i : ups) {
      auto v = ms(col, i, id, dev);
      if (!v) break;
      t.push_back(*v);
    }
    auto r = t.size() == ups.size() ? pearson(t, c) : std::nullopt;
    if (!r) {
      ++absent_or_fixed;
      continue;
    }
    cands.push_back({id, *r, in.depth_in_log(name), std::move(t)});
  }
  if (cands.empty()) {
    if (!w.why_no_correlation.empty()) return w;  // (the communication region never varies)
    w.why_no_correlation = fmt::format(
        "no compute region to compare it with: of the log's other {} region(s), {} are above or inside {} or are "
        "other collectives' calls, {} have "
        "a role in the nesting or are inside one (data, optimizer, communication, background: is each role right?), "
        "and {} are missing from some of its updates or never vary",
        in.data.regions.size() - 1, around, w.comm_region, by_role, absent_or_fixed);
    return w;
  }
  double best_r = 1;
  for (const auto& k : cands) best_r = std::min(best_r, k.r);
  for (const auto& k : cands)
    if (k.r <= best_r + 0.02 && (!best || k.depth < best->depth || (k.depth == best->depth && k.r < best->r)))
      best = &k;

  w.compute_region = std::string(in.data.regions.name(best->id));
  w.correlation = best->r;
  std::vector<double> sum(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) sum[i] = c[i] + best->t[i];
  w.compute_sd_ms = stdev(best->t);
  w.comm_sd_ms = stdev(c);
  w.sum_sd_ms = stdev(sum);
  w.waiting = best->r <= -0.5 && w.sum_sd_ms < 0.6 * std::min(w.compute_sd_ms, w.comm_sd_ms);
  w.comm_floor_ms = *std::min_element(c.begin(), c.end());
  std::vector<double> wait;
  for (double x : c) wait.push_back(x - w.comm_floor_ms);
  w.wait_ms = summarize(wait);
  if (w.waiting) {
    w.spike_steps.clear();
    w.spike_threshold_ms = w.spike_excess_ms = w.spike_ms_per_update = 0;
  }
  if (w.waiting && in.hierarchy)
    for (const auto& [group, nodes] : in.hierarchy->alternatives())
      for (const HierarchyNode* node : nodes) {
        const auto id = in.region(node->name);
        if (!id) continue;
        std::vector<double> with, without;
        for (std::size_t k = 0; k < ups.size(); ++k) {
          const UpdateRecord& u = rank.updates[ups[k]];
          const auto r = first ? in.region_of(*first + ups[k], u, *id) : UpdateIndex::values_of(u.region(*id));
          const bool ran = r && (r->calls.value_or(0) > 0 || r->device_ms.value_or(0) > 0 || r->host_ms.value_or(0) > 0);
          (ran ? with : without).push_back(wait[k]);
        }
        if (with.empty() || without.empty()) continue;
        w.path_waits.push_back({node->name, with.size(), without.size(), *median(with), *median(without)});
      }
  return w;
}

}  // namespace

}  // namespace stepprof
