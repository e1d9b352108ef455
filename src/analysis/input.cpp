#include "stepprof/analysis/input.hpp"

#include <limits>

namespace stepprof {

std::vector<const UpdateRecord*> AnalysisInput::updates() const {
  std::vector<const UpdateRecord*> out;
  out.reserve(data.update_count());
  for (const auto& r : data.ranks)
    for (const auto& u : r.updates) out.push_back(&u);
  return out;
}

bool AnalysisInput::device_time_is_busy_union() const {
  for (const auto& r : data.ranks)
    if (r.config && r.config->device_timing && r.config->device_timing->find("union") != std::string::npos) return true;
  return false;
}

UpdateIndex::UpdateIndex(const std::vector<const UpdateRecord*>& updates, std::size_t region_names,
                         std::size_t counter_names)
    : width_(region_names), counter_width_(counter_names), n_(updates.size()), device_(region_names, false),
      present_(region_names, false) {
  const bool regions = region_names > 0 && n_ > 0 && region_names <= kMaxBytes / sizeof(void*) / n_;
  const bool counters = counter_names > 0 && n_ > 0 && counter_names <= kMaxBytes / sizeof(double) / n_;
  if (regions) columns_.assign(width_ * n_, nullptr);
  if (counters) counters_.assign(counter_width_ * n_, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t k = 0; k < n_; ++k) {
    for (const auto& r : updates[k]->regions) {
      if (r.region >= width_) continue;
      if (r.device_ms) device_[r.region] = true;
      if (r.device_ms || r.host_ms || r.calls) present_[r.region] = true;
      // The first entry wins, as in UpdateRecord::region.
      if (regions && !columns_[r.region * n_ + k]) columns_[r.region * n_ + k] = &r;
    }
    if (counters)
      for (const auto& c : updates[k]->counters) {
        if (c.name >= counter_width_) continue;
        double& slot = counters_[c.name * n_ + k];
        if (std::isnan(slot)) slot = c.value;  // the first entry wins, as in UpdateRecord::counter
      }
  }
}

std::optional<std::size_t> AnalysisInput::first_update_of(const RankLog& rank) const {
  std::size_t k = 0;
  for (const auto& r : data.ranks) {
    if (&r == &rank) return k;
    k += r.updates.size();
  }
  return std::nullopt;
}

bool AnalysisInput::has_device_time(NameTable::Id region) const {
  if (index) return index->has_device_time(region);
  for (const auto& r : data.ranks)
    for (const auto& u : r.updates)
      if (const auto* s = u.region(region); s && s->device_ms) return true;
  return false;
}

std::optional<double> region_ms(const UpdateRecord& u, NameTable::Id region, bool device) {
  const RegionSample* s = u.region(region);
  if (!s) return std::nullopt;
  return device ? s->device_ms : s->host_ms;
}

double AnalysisInput::counter_or_zero(std::size_t k, const UpdateRecord& u,
                                      std::optional<NameTable::Id> counter) const {
  if (!counter) return 0;
  return counter_of(k, u, *counter).value_or(0);
}

double counter_or_zero(const UpdateRecord& u, std::optional<NameTable::Id> counter) {
  if (!counter) return 0;
  return u.counter(*counter).value_or(0);
}

}  // namespace stepprof
