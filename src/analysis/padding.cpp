#include "stepprof/analysis/padding.hpp"
#include "stepprof/analysis/waiting.hpp"

#include <algorithm>
#include <cmath>

#include "stepprof/schema.hpp"

namespace stepprof {

PaddingResult analyze_padding(const AnalysisInput& in) {
  PaddingResult p;
  const auto slots_id = in.counter(schema::counter::kTokenSlots);
  const auto valid_id = in.counter(schema::counter::kValidTokens);
  if (!slots_id || !valid_id) {
    p.why_not = !slots_id && !valid_id ? "the log has no token_slots and valid_tokens counters"
                : !slots_id            ? "the log has no token_slots counter"
                                       : "the log has no valid_tokens counter";
    // (A padding_fraction field alone gives no token-weighted padding nor its cost.)
    for (const auto* u : in.updates())
      if (u->padding_fraction) {
        p.why_not += "; its padding_fraction field alone gives neither the token-weighted fraction nor what the "
                     "padding costs: record the token_slots and valid_tokens counters (docs/log-schema.md)";
        break;
      }
    return p;
  }
  const auto updates = in.updates();
  std::vector<double> per_update;
  // Token slots of each update; absent where the update logged neither counter (absent is
  // not 0, docs/log-schema.md): it is left out of the padding figures and of the
  // correlation with region times.
  std::vector<std::optional<double>> slots_series;
  std::vector<std::size_t> per_update_k;  // which update each per_update value is
  // (Reserved: grown by doubling, these were a sixth of the 64 x 10,000 report's page
  // faults, each step's copy into fresh memory.)
  slots_series.reserve(updates.size());
  per_update.reserve(updates.size());
  per_update_k.reserve(updates.size());
  double wall = 0;
  std::size_t counted = 0;   // updates in the padding figures
  std::size_t left_out = 0;  // updates whose token counters contradict each other
  for (std::size_t k = 0; k < updates.size(); ++k) {
    const UpdateRecord* u = updates[k];
    const auto sv = in.counter_of(k, *u, *slots_id), vv = in.counter_of(k, *u, *valid_id);
    slots_series.push_back(sv);  // (indexed by update: kept for every one)
    if (!sv && !vv) continue;
    // (An error the reader reported, check_token_counters.)
    if (schema::counter::token_counters_contradict(sv, vv)) {
      ++left_out;
      continue;
    }
    const double s = *sv, v = *vv;
    ++counted;
    p.token_slots += s;
    p.valid_tokens += v;
    wall += u->wall_ms;
    if (s > 0) {
      per_update.push_back(1.0 - v / s);
      per_update_k.push_back(k);
    }
    for (const auto& shape : u->input_shapes)
      if (shape.dims.size() == 2)  // (b, l): see check_input_shape_dims
        p.max_padded_length = std::max(p.max_padded_length.value_or(0), static_cast<double>(shape.dims.back()));
  }
  if (p.token_slots <= 0) {
    p.why_not = left_out > 0 ? "the updates with token slots have contradicting token counters (see the bad-field "
                               "error)"
                             : "token_slots is 0 in every update: no token slots, nothing padded";
    return p;
  }
  p.available = true;
  p.fraction = 1.0 - p.valid_tokens / p.token_slots;
  p.per_update_fraction = summarize(per_update);
  if (p.per_update_fraction) {
    const double threshold = p.per_update_fraction->p90 + PaddingResult::kSpikeMargin;
    p.spike_threshold = threshold;
    for (std::size_t i = 0; i < per_update.size(); ++i) {
      if (!(per_update[i] > threshold)) continue;
      ++p.spike_count;
      const UpdateRecord& u = *updates[per_update_k[i]];
      PaddingSpike spike{u.rank.value_or(-1), u.step, per_update[i], std::nullopt};
      p.spike_updates.emplace_back(spike.rank, spike.step);
      for (const auto& shape : u.input_shapes)
        if (shape.dims.size() == 2)  // (b, l): see check_input_shape_dims
          spike.padded_length = std::max(spike.padded_length.value_or(0), static_cast<double>(shape.dims.back()));
      p.spikes.push_back(spike);
    }
    // Largest first; equal fractions in rank, step order.
    std::stable_sort(p.spikes.begin(), p.spikes.end(),
                     [](const PaddingSpike& a, const PaddingSpike& b) { return a.fraction > b.fraction; });
    if (p.spikes.size() > PaddingResult::kMaxSpikesKept) p.spikes.resize(PaddingResult::kMaxSpikesKept);
    std::sort(p.spike_updates.begin(), p.spike_updates.end());
  }
  const double padding = p.token_slots - p.valid_tokens;
  // (A rate beyond a double, from wall times of 5e-324 ms, is left unknown: null in JSON.)
  if (wall > 0 && std::isfinite(padding / wall * 1000.0)) p.padding_slots_per_s = padding / wall * 1000.0;
  p.padding_slots_per_update = padding / static_cast<double>(counted);

  // Token-bound regions: leaves of the nesting whose time follows token slots. Without
  // the nesting, regions may contain each other, and summing them would count time twice.
  if (!in.hierarchy) {
    p.cost_needs_nesting = true;
    return p;
  }
  // Compute only: a region with a role (communication, data loading, the optimizer step,
  // background work) or the communication region found by name does not scale with the
  // tokens computed on, though its time may follow them (a rank that computes longer
  // waits less, and a wait can track any other rank's tokens).
  const auto comm = find_comm_region(in);
  for (NameTable::Id id = 0; id < in.data.regions.size(); ++id) {
    const std::string_view name = in.data.regions.name(id);
    const HierarchyNode* node = in.hierarchy->find(name);
    // Leaves of the nesting only; a region the nesting lacks (a misspelt name in a
    // --hierarchy file) is looked at too, to be named if its time follows token slots.
    if (node && !in.children_in_log(name).empty()) continue;  // (a child the log lacks does not count)
    if ((node && node->role != RegionRole::kNone) || (comm && comm->id == id)) continue;
    const bool device = in.has_device_time(id);
    std::vector<double> t, s;
    t.reserve(updates.size());
    s.reserve(updates.size());
    std::size_t present = 0;
    for (std::size_t i = 0; i < updates.size(); ++i) {
      auto ms = in.region_ms_of(i, *updates[i], id, device);
      // (Device time where the update has it, else host time: a rank with device timing
      // off left every region out of the token-bound ones, and the padding cost with them.)
      if (!ms && device) ms = in.region_ms_of(i, *updates[i], id, false);
      if (!ms) break;  // must run in every update
      ++present;
      if (!slots_series[i]) continue;
      t.push_back(*ms);
      s.push_back(*slots_series[i]);
    }
    if (present < updates.size() || t.empty()) continue;
    if (!node) {
      if (const auto r = pearson(t, s); r && *r >= std::max(0.4, significant_correlation(t.size())))
        p.outside_nesting.push_back({std::string(name), *r, *median(t)});
      continue;
    }
    p.cost_updates = std::max(p.cost_updates, t.size());
    if (!p.token_slots_cv) p.token_slots_cv = summarize(s)->cv;
    const auto r = pearson(t, s);
    // (Every such region has the same updates: those that logged token slots.)
    p.min_correlation = std::max(0.4, significant_correlation(t.size()));
    if (r && *r < p.min_correlation && (!p.closest_below || *r > p.closest_below->correlation))
      p.closest_below = TokenBoundRegion{std::string(name), *r, *median(t)};
    if (!r || *r < p.min_correlation) continue;
    p.token_bound.push_back({std::string(name), *r, *median(t)});
  }
  if (!p.token_bound.empty()) {
    double sum = 0;
    for (const auto& r : p.token_bound) sum += r.median_ms;
    p.cost_ms_per_update = p.fraction * sum;
  }
  return p;
}

}  // namespace stepprof
