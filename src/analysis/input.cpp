#include "stepprof/analysis/input.hpp"

#include <algorithm>
#include <limits>

#include "../util/parallel.hpp"

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
    : width_(region_names), counter_width_(counter_names), n_(updates.size()), device_any_(region_names, false),
      data_any_(region_names, false) {
  constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  constexpr std::size_t kCell = 3 * sizeof(double) + 1;  // device, host, calls, present
  const bool regions = region_names > 0 && n_ > 0 && region_names <= kMaxBytes / kCell / n_;
  const bool counters = counter_names > 0 && n_ > 0 && counter_names <= kMaxBytes / sizeof(double) / n_;
  if (regions) {
    for (auto* column : {&device_, &host_, &calls_}) column->reset(new double[width_ * n_]);
    present_.reset(new std::uint8_t[width_ * n_]);
  }
  if (counters) counters_.reset(new double[counter_width_ * n_]);
  // Ranges of updates fill disjoint parts of every column, on several threads for
  // large inputs; each range notes which regions have data, and those notes are
  // combined after.
  constexpr std::size_t kChunk = 1 << 15;  // updates
  const std::size_t chunks = (n_ + kChunk - 1) / kChunk;
  std::vector<std::vector<std::uint8_t>> seen(chunks, std::vector<std::uint8_t>(width_, 0));  // 1 data, 2 device
  detail::parallel_for(chunks, chunks >= 4 ? 0 : 1, [&](std::size_t c) {
    std::vector<std::uint8_t>& flags = seen[c];
    const std::size_t first = c * kChunk, last = std::min(n_, (c + 1) * kChunk);
    for (std::size_t id = 0; regions && id < width_; ++id) {
      for (auto* column : {&device_, &host_, &calls_})
        std::fill(column->get() + id * n_ + first, column->get() + id * n_ + last, kAbsent);
      std::fill(present_.get() + id * n_ + first, present_.get() + id * n_ + last, std::uint8_t{0});
    }
    for (std::size_t id = 0; counters && id < counter_width_; ++id)
      std::fill(counters_.get() + id * n_ + first, counters_.get() + id * n_ + last, kAbsent);
    for (std::size_t k = first; k < last; ++k) {
      for (const auto& r : updates[k]->regions) {
        if (r.region >= width_) continue;
        if (r.device_ms) flags[r.region] |= 2;
        if (r.device_ms || r.host_ms || r.calls) flags[r.region] |= 1;
        if (!regions) continue;
        const std::size_t at = r.region * n_ + k;
        if (present_[at]) continue;  // the first entry wins, as in UpdateRecord::region
        present_[at] = 1;
        if (r.device_ms) device_[at] = *r.device_ms;
        if (r.host_ms) host_[at] = *r.host_ms;
        if (r.calls) calls_[at] = static_cast<double>(*r.calls);
      }
      if (counters)
        for (const auto& x : updates[k]->counters) {
          if (x.name >= counter_width_) continue;
          double& slot = counters_[x.name * n_ + k];
          if (std::isnan(slot)) slot = x.value;  // the first entry wins, as in UpdateRecord::counter
        }
    }
  });
  for (const auto& flags : seen)
    for (NameTable::Id id = 0; id < width_; ++id) {
      if (flags[id] & 1) data_any_[id] = true;
      if (flags[id] & 2) device_any_[id] = true;
    }
}

RegionColumns::RegionColumns(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates,
                             NameTable::Id id) {
  if (in.index) {
    view_ = in.index->columns(id);
    if (view_.present.size() == updates.size()) return;
  }
  constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  for (auto* column : {&device_, &host_, &calls_}) column->assign(updates.size(), kAbsent);
  present_.assign(updates.size(), 0);
  for (std::size_t k = 0; k < updates.size(); ++k) {
    const RegionSample* s = updates[k]->region(id);
    if (!s) continue;
    present_[k] = 1;
    if (s->device_ms) device_[k] = *s->device_ms;
    if (s->host_ms) host_[k] = *s->host_ms;
    if (s->calls) calls_[k] = static_cast<double>(*s->calls);
  }
  view_ = {device_, host_, calls_, present_};
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
