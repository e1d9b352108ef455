#include "stepprof/analysis/input.hpp"

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

bool AnalysisInput::has_device_time(NameTable::Id region) const {
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

double counter_or_zero(const UpdateRecord& u, std::optional<NameTable::Id> counter) {
  if (!counter) return 0;
  return u.counter(*counter).value_or(0);
}

}  // namespace stepprof
