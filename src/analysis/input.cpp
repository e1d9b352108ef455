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

namespace {

// Each name's column: names present in at least 1/UpdateIndex::kMinShare of the
// `sampled` updates counted (`count`) get one, in id order, while `cell` bytes per
// (update, name) over all `n` updates stay within UpdateIndex::kMaxBytes; the others get
// `none`. Returns the number of columns.
std::size_t assign_slots(const std::vector<std::size_t>& count, std::size_t sampled, std::size_t n, std::size_t cell,
                         std::uint32_t none, std::vector<std::uint32_t>& slot) {
  slot.assign(count.size(), none);
  if (n == 0 || sampled == 0) return 0;
  std::size_t used = 0;
  for (std::size_t id = 0; id < count.size(); ++id)
    if (count[id] * UpdateIndex::kMinShare >= sampled && used + 1 <= UpdateIndex::kMaxBytes / cell / n)
      slot[id] = static_cast<std::uint32_t>(used++);
  return used;
}

}  // namespace

UpdateIndex::UpdateIndex(const std::vector<const UpdateRecord*>& updates, std::size_t region_names,
                         std::size_t counter_names)
    : width_(region_names), counter_width_(counter_names), n_(updates.size()), device_any_(region_names, false),
      data_any_(region_names, false) {
  constexpr double kAbsent = std::numeric_limits<double>::quiet_NaN();
  constexpr std::size_t kCell = 3 * sizeof(double) + 1;  // device, host, calls, present
  // Which names get columns is judged on every kStride-th update of a large input (one
  // pass over every record costs as much as filling the columns: the records lie far
  // apart). Where a name's values are kept changes no lookup's result, only the memory.
  constexpr std::size_t kStride = 16, kSampleFrom = std::size_t{1} << 16;  // updates
  const std::size_t stride = n_ >= kSampleFrom ? kStride : 1;
  std::vector<std::size_t> regions_in(width_, 0), counters_in(counter_width_, 0);
  std::size_t sampled = 0;
  {
    std::vector<std::size_t> last(width_, n_);  // the update a region was last counted in
    for (std::size_t k = 0; k < n_; k += stride, ++sampled) {
      for (const auto& r : updates[k]->regions) {
        if (r.region >= width_ || last[r.region] == k) continue;  // (updates, not entries)
        ++regions_in[r.region];
        last[r.region] = k;
      }
      for (const auto& x : updates[k]->counters)
        if (x.name < counter_width_) ++counters_in[x.name];
    }
  }
  const std::size_t columns = assign_slots(regions_in, sampled, n_, kCell, kNoSlot, slot_);
  const std::size_t counter_columns = assign_slots(counters_in, sampled, n_, sizeof(double), kNoSlot, counter_slot_);
  if (columns > 0) {
    for (auto* column : {&device_, &host_, &calls_}) column->reset(new double[columns * n_]);
    present_.reset(new std::uint8_t[columns * n_]);
  }
  if (counter_columns > 0) counters_.reset(new double[counter_columns * n_]);
  // Ranges of updates are filled on several threads for large inputs, each noting which
  // regions have data and listing the samples of regions without columns (put together
  // after, in update order). Without columns, present_ is null and lookups read the
  // records.
  constexpr std::size_t kChunk = 1 << 15;  // updates
  const std::size_t chunks = (n_ + kChunk - 1) / kChunk;
  const unsigned threads = chunks >= 4 ? 0 : 1;  // (0: every core)
  struct Found {
    NameTable::Id id;
    Listing listing;
  };
  std::vector<std::vector<std::uint8_t>> seen(chunks, std::vector<std::uint8_t>(width_, 0));  // 1 data, 2 device
  std::vector<std::vector<Found>> found(chunks);
  detail::parallel_for(chunks, threads, [&](std::size_t c) {
    const std::size_t first = c * kChunk, last = std::min(n_, (c + 1) * kChunk);
    std::vector<std::uint8_t>& flags = seen[c];
    for (std::size_t at = 0; at < columns; ++at) {
      for (auto* column : {&device_, &host_, &calls_})
        std::fill(column->get() + at * n_ + first, column->get() + at * n_ + last, kAbsent);
      std::fill(present_.get() + at * n_ + first, present_.get() + at * n_ + last, std::uint8_t{0});
    }
    for (std::size_t at = 0; at < counter_columns; ++at)
      std::fill(counters_.get() + at * n_ + first, counters_.get() + at * n_ + last, kAbsent);
    std::vector<std::size_t> listed_in(columns > 0 ? width_ : 0, n_);  // the update a region was last listed in
    for (std::size_t k = first; k < last; ++k) {
      for (const auto& r : updates[k]->regions) {
        if (r.region >= width_) continue;
        if (r.device_ms) flags[r.region] |= 2;
        if (r.device_ms || r.host_ms || r.calls) flags[r.region] |= 1;
        if (columns == 0) continue;
        if (slot_[r.region] == kNoSlot) {
          if (listed_in[r.region] == k) continue;  // (of a record that lists it twice: the first entry)
          listed_in[r.region] = k;
          found[c].push_back({r.region, {k, &r}});
          continue;
        }
        const std::size_t at = slot_[r.region] * n_ + k;
        if (present_[at]) continue;  // (of a record that lists it twice: the first entry)
        present_[at] = 1;
        if (r.device_ms) device_[at] = *r.device_ms;
        if (r.host_ms) host_[at] = *r.host_ms;
        if (r.calls) calls_[at] = static_cast<double>(*r.calls);
      }
      for (const auto& x : updates[k]->counters) {
        if (counter_columns == 0 || x.name >= counter_width_ || counter_slot_[x.name] == kNoSlot) continue;
        double& value = counters_[counter_slot_[x.name] * n_ + k];
        if (std::isnan(value)) value = x.value;  // (of a record that lists it twice: the first entry)
      }
    }
  });
  for (std::size_t c = 0; c < chunks; ++c)
    for (std::size_t id = 0; id < width_; ++id) {
      if (seen[c][id] & 1) data_any_[id] = true;
      if (seen[c][id] & 2) device_any_[id] = true;
    }
  if (columns > 0) {
    // Each region's listings together, in update order (chunks are ascending ranges).
    std::vector<std::size_t> listings(width_, 0);
    for (const auto& f : found)
      for (const Found& x : f) ++listings[x.id];
    listed_begin_.assign(width_, 0);
    std::size_t total = 0;
    for (std::size_t id = 0; id < width_; ++id) {
      listed_begin_[id] = total;
      total += listings[id];
    }
    listed_.resize(total);
    listed_end_ = listed_begin_;
    for (const auto& f : found)
      for (const Found& x : f) listed_[listed_end_[x.id]++] = x.listing;
  }
}

std::vector<const HierarchyNode*> AnalysisInput::children_in_log(std::string_view name) const {
  std::vector<const HierarchyNode*> out;
  if (!hierarchy) return out;
  std::vector<const HierarchyNode*> todo;  // (explicit: a nesting may be thousands deep)
  auto push = [&](std::string_view of) {
    const auto kids = hierarchy->children(of);
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) todo.push_back(*it);
  };
  push(name);
  while (!todo.empty()) {
    const HierarchyNode* c = todo.back();
    todo.pop_back();
    if (c->role == RegionRole::kBackground) continue;  // (alongside it, not a part of it)
    if (const auto id = region(c->name); id && has_data(*id)) out.push_back(c);
    else push(c->name);
  }
  return out;
}

int AnalysisInput::depth_in_log(std::string_view name) const {
  int depth = 0;
  for (std::string p = parent_in_log(name); !p.empty(); p = parent_in_log(p)) ++depth;
  return depth;
}

std::string AnalysisInput::parent_in_log(std::string_view name) const {
  if (!hierarchy) return {};
  for (const HierarchyNode* n = hierarchy->find(name); n && !n->parent.empty(); n = hierarchy->find(n->parent))
    if (const auto id = region(n->parent); id && has_data(*id)) return n->parent;
  return {};
}

bool AnalysisInput::has_data(NameTable::Id region) const {
  if (index) return index->has_data(region);
  for (const auto& r : data.ranks)
    for (const auto& u : r.updates)
      if (const auto* s = u.region(region); s && (s->device_ms || s->host_ms || s->calls)) return true;
  return false;
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
  auto put = [&](std::size_t k, const RegionSample* s) {
    if (!s) return;
    present_[k] = 1;
    if (s->device_ms) device_[k] = *s->device_ms;
    if (s->host_ms) host_[k] = *s->host_ms;
    if (s->calls) calls_[k] = static_cast<double>(*s->calls);
  };
  // A region without columns: from its listings when the index has them (looking it up
  // in every update took seconds for thousands of such regions).
  const auto listing = in.index ? in.index->listing(id) : std::span<const UpdateIndex::Listing>{};
  if (!listing.empty()) {
    for (const auto& l : listing) put(l.k, l.sample);
  } else {
    for (std::size_t k = 0; k < updates.size(); ++k) put(k, updates[k]->region(id));
  }
  view_ = {device_, host_, calls_, present_};
}

std::vector<std::size_t> AnalysisInput::rank_offsets(const Dataset& data) {
  std::vector<std::size_t> first;
  first.reserve(data.ranks.size());
  std::size_t k = 0;
  for (const auto& r : data.ranks) {
    first.push_back(k);
    k += r.updates.size();
  }
  return first;
}

std::optional<std::size_t> AnalysisInput::first_update_of(const RankLog& rank) const {
  if (rank_first && rank_first->size() == data.ranks.size() && !data.ranks.empty()) {
    // (Compared as addresses: `rank` may be a RankLog of another dataset.)
    const auto at = reinterpret_cast<std::uintptr_t>(&rank), begin = reinterpret_cast<std::uintptr_t>(data.ranks.data());
    if (at >= begin && at < begin + data.ranks.size() * sizeof(RankLog) && (at - begin) % sizeof(RankLog) == 0)
      return (*rank_first)[(at - begin) / sizeof(RankLog)];
    return std::nullopt;
  }
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
