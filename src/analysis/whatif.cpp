#include "stepprof/analysis/whatif.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "stepprof/analysis/code_paths.hpp"
#include "stepprof/analysis/cross_rank.hpp"
#include "stepprof/analysis/least_squares.hpp"
#include "stepprof/analysis/stats.hpp"
#include "stepprof/analysis/waiting.hpp"
#include "stepprof/schema.hpp"
#include "../util/parallel.hpp"

namespace stepprof {
namespace {

// SplitMix64 (Steele, Lea & Flood 2014): small, fast, and the same sequence on every
// platform, so a what-if is reproducible from its seed.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : s_(seed) {}
  /// The generator Rng(seed) after `skip` calls of next(): SplitMix64's state only adds
  /// its constant, so a stream can be cut into pieces that threads draw independently.
  static Rng after(std::uint64_t seed, std::uint64_t skip) { return Rng(seed + skip * kGamma); }
  std::uint64_t next() {
    std::uint64_t z = (s_ += kGamma);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return n ? static_cast<std::size_t>(next() % n) : 0; }

 private:
  static constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;
  std::uint64_t s_;
};

std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return Rng(a * 0x100000001B3ull ^ b).next(); }

double median_of(std::vector<double> v) { return v.empty() ? 0.0 : summarize(std::move(v))->median; }

Interval interval_of(double point, std::vector<double> boot, double central) {
  Interval iv{point, point, point};
  if (boot.empty()) return iv;
  std::sort(boot.begin(), boot.end());
  iv.low_ms = std::min(point, quantile_sorted(boot, (1.0 - central) / 2));
  iv.high_ms = std::max(point, quantile_sorted(boot, (1.0 + central) / 2));
  return iv;
}

// Whether any of `features` is one the scenario changes.
bool prices_change(const std::vector<std::size_t>& features, const std::vector<std::size_t>& changed) {
  return std::any_of(features.begin(), features.end(),
                     [&](std::size_t f) { return std::find(changed.begin(), changed.end(), f) != changed.end(); });
}

// A prediction's note where a model that prices (or, chosen otherwise, would price) the
// change has its terms set by single updates (RegionModel::choice_set_by): the interval
// refits the chosen terms only, so it does not show that the answer rests on the choice.
// The updates are grouped by the terms chosen without them.
std::string choice_note(const RegionModel& m, const FeatureSpace& space, const std::vector<std::size_t>& changed) {
  auto terms = [&](const std::vector<std::size_t>& features) {
    std::vector<std::string> names;
    for (const std::size_t f : features) names.push_back(space.features[f].name);
    return names.empty() ? std::string("no term (no feature gets a positive cost)") : fmt::format("{}", fmt::join(names, " + "));
  };
  std::vector<std::size_t> chosen;
  for (const CostTerm& t : m.terms) chosen.push_back(t.feature);
  const bool prices = prices_change(chosen, changed);
  const bool one_rank = std::all_of(m.choice_set_by.begin(), m.choice_set_by.end(), [&](const RegionModel::ChoiceFlip& u) {
    return u.rank == m.choice_set_by[0].rank;
  });
  // The alternatives in order of first appearance, each with its updates.
  std::vector<std::pair<std::vector<std::size_t>, std::vector<const RegionModel::ChoiceFlip*>>> groups;
  for (const auto& u : m.choice_set_by) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == u.terms; });
    if (it == groups.end()) it = groups.insert(groups.end(), {u.terms, {}});
    it->second.push_back(&u);
  }
  std::vector<std::string> parts;
  for (const auto& [alternative, flips] : groups) {
    std::vector<std::string> named;  // "step 16", "19"; with several ranks "step 16 of rank 1"
    for (std::size_t i = 0; i < flips.size() && i < 5; ++i)
      named.push_back(!one_rank && flips[i]->rank ? fmt::format("step {} of rank {}", flips[i]->step, *flips[i]->rank)
                      : i == 0                    ? fmt::format("step {}", flips[i]->step)
                                                  : fmt::format("{}", flips[i]->step));
    const std::size_t more = flips.size() - named.size();
    std::string which = named.back();
    if (named.size() > 1) which = fmt::format("{} or {}", fmt::join(named.begin(), named.end() - 1, ", "), named.back());
    if (more) which = fmt::format("{} or {} other update(s)", fmt::join(named, ", "), more);
    const bool alt_prices = prices_change(alternative, changed);
    parts.push_back(fmt::format("leaving out {}{} alone, the selection chooses {} instead, which {} the change",
                                flips.size() > 1 ? "any one of " : "", which, terms(alternative),
                                !alt_prices ? "does not price" : prices ? "also prices" : "prices"));
  }
  return fmt::format(
      "the model of {} ({}) is a choice that single updates set (of {} updates): {}; {} rests on that choice, and "
      "the interval (the chosen terms refitted) does not show it",
      m.region, terms(chosen), m.updates, fmt::join(parts, "; "),
      prices ? "the price of its work" : "leaving its time unchanged");
}

struct Sample {
  std::int64_t frames = 0;
  std::int64_t tokens = -1;  // -1: not known
};

// A micro-batch of the replay: samples [first, first + count) of Impl::samples.
struct Mb {
  std::uint32_t first = 0, count = 0;
  std::int64_t padded = -1;  // token slots per sample as recorded; -1: not known
  bool geometry = true;      // goes through the alternative group being replaced
};

}  // namespace

// ---- the replay ------------------------------------------------------------------------

struct WhatIfReplay::Impl {
  bool ok = false;
  std::string why_not;
  Scenario scenario = Scenario::kBatchedGeometry;
  std::string variant;
  const CostModelSet* models = nullptr;
  std::vector<const UpdateRecord*> updates;
  std::vector<std::vector<double>> x;  // feature values per update
  std::vector<std::size_t> leaves;     // models used for the change: usable leaf regions
  std::vector<std::vector<double>> y;  // per used model: its time per update [ms]
  std::vector<std::size_t> changed;    // features the scenario may change
  std::vector<RegionChange> affected;  // leaf regions whose candidate features change
  std::vector<std::string> assumptions, notes;

  // batched-geometry
  std::string group, target;
  bool detail = false, tokens_known = false;
  std::vector<Sample> samples;
  std::vector<Mb> mbs;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> layout;  // per update: first micro-batch, count
  std::vector<Sample> pool;                                     // every sample, by frame count
  std::vector<std::pair<std::uint32_t, std::uint32_t>> bucket;  // per pool entry: its frame count's [begin, end)
  std::optional<std::size_t> t_samples, t_frames, t_mbs, t_fsq, t_calls;
  std::vector<std::size_t> zeroed;  // the other paths' features
  // Per update: the measured time of the other paths that have no usable cost model
  // (e.g. a fallback in 3 of 204,800 updates). They no longer run, so that time goes;
  // removing it needs no model. Empty when there are none.
  std::vector<double> removed_ms;
  std::vector<RegionChange> removed;  // those paths, with their mean change
  std::optional<std::size_t> f_frames, f_fsq, f_valid, f_slots;
  // no-padding: updates without the token_slots or valid_tokens counter, kept as measured (an
  // absent counter is no 0: packing such an update to 0 token slots "saved" all its
  // language time).
  std::vector<bool> unknown_tokens;
  double calls_per_mb = 1;
  // Whether the target path took each micro-batch in one call (calls per micro-batch at
  // most 1, as measured): a batched call, whose samples share one frame count. The
  // per-sample fallback (one call per sample) is not: its micro-batches mix frame counts.
  bool target_batched = false;
  // pad without per-micro-batch detail, target_batched: updates in which only the target
  // path of the group ran. Every micro-batch was batched already (one frame count each),
  // so padding changes nothing there; a random split of their samples mixed frame counts
  // and priced padding they never need. (Updates that ran only a per-sample target are
  // padded like any other: their micro-batches fell back because they mixed frame counts.)
  std::vector<bool> on_target_only;

  void transform(std::size_t i, Rng& rng, std::vector<double>& xo, std::vector<Sample>& scratch) const;
  double change(std::size_t i, const std::vector<double>& xo, const std::vector<std::vector<double>>& coef) const;
};

void WhatIfReplay::Impl::transform(std::size_t i, Rng& rng, std::vector<double>& xo,
                                   std::vector<Sample>& scratch) const {
  xo = x[i];
  if (scenario == Scenario::kNoPadding) {
    if (f_slots && f_valid && !unknown_tokens[i]) xo[*f_slots] = xo[*f_valid];
    return;
  }
  const auto [mb_first, mb_count] = layout[i];
  if (mb_count == 0) return;
  if (!on_target_only.empty() && on_target_only[i]) return;
  double ts = 0, tf = 0, tsq = 0, tm = 0;
  double old_frames = 0, old_fsq = 0, old_valid = 0, old_slots = 0;
  double new_frames = 0, new_fsq = 0, new_valid = 0, new_slots = 0;
  if (variant == "pad" && !detail) {  // composition unknown: a random split of the update's samples
    scratch.assign(samples.begin() + mbs[mb_first].first,
                   samples.begin() + mbs[mb_first].first +
                       std::accumulate(mbs.begin() + mb_first, mbs.begin() + mb_first + mb_count, 0u,
                                       [](std::uint32_t s, const Mb& m) { return s + m.count; }));
    for (std::size_t k = scratch.size(); k > 1; --k) std::swap(scratch[k - 1], scratch[rng.below(k)]);
  }
  std::size_t offset = 0;
  for (std::uint32_t m = mb_first; m < mb_first + mb_count; ++m) {
    const Mb& mb = mbs[m];
    const double n = mb.count;
    if (!mb.geometry || mb.count == 0) {
      offset += mb.count;
      continue;
    }
    if (variant == "pad") {
      std::int64_t fmax = 0;
      for (std::uint32_t s = 0; s < mb.count; ++s)
        fmax = std::max(fmax, detail ? samples[mb.first + s].frames : scratch[offset + s].frames);
      const double f = static_cast<double>(fmax);
      ts += n;
      tf += n * f;
      tsq += n * f * f;
      tm += 1;
    } else {  // group: samples of one frame count, drawn from the window's samples
      const auto [b0, b1] = bucket[rng.below(pool.size())];
      std::int64_t longest = 0;
      double tokens = 0;
      for (std::uint32_t s = 0; s < mb.count; ++s) {
        const Sample& drawn = pool[b0 + rng.below(b1 - b0)];
        const auto f = static_cast<double>(drawn.frames);
        new_frames += f;
        new_fsq += f * f;
        tf += f;
        tsq += f * f;
        tokens += static_cast<double>(drawn.tokens);
        longest = std::max(longest, drawn.tokens);
        const Sample& old = samples[mb.first + s];
        old_frames += static_cast<double>(old.frames);
        old_fsq += static_cast<double>(old.frames) * static_cast<double>(old.frames);
        if (tokens_known) old_valid += static_cast<double>(old.tokens);
      }
      if (tokens_known) {
        new_valid += tokens;
        new_slots += n * static_cast<double>(longest);
        old_slots += n * static_cast<double>(mb.padded);
      }
      ts += n;
      tm += 1;
    }
    offset += mb.count;
  }
  for (const std::size_t f : zeroed) xo[f] = 0;
  if (t_samples) xo[*t_samples] = ts;
  if (t_frames) xo[*t_frames] = tf;
  if (t_fsq) xo[*t_fsq] = tsq;
  if (t_mbs) xo[*t_mbs] = tm;
  if (t_calls) xo[*t_calls] = tm * calls_per_mb;
  if (variant == "group") {
    if (f_frames) xo[*f_frames] += new_frames - old_frames;
    if (f_fsq) xo[*f_fsq] += new_fsq - old_fsq;
    if (tokens_known && f_valid) xo[*f_valid] += new_valid - old_valid;
    if (tokens_known && f_slots) xo[*f_slots] += new_slots - old_slots;
  }
}

double WhatIfReplay::Impl::change(std::size_t i, const std::vector<double>& xo,
                                  const std::vector<std::vector<double>>& coef) const {
  double d = 0;
  for (std::size_t k = 0; k < leaves.size(); ++k) {
    const RegionModel& m = models->models[leaves[k]];
    for (std::size_t j = 0; j < m.terms.size(); ++j) {
      const std::size_t f = m.terms[j].feature;
      d += coef[k][j] * (xo[f] - x[i][f]);
    }
  }
  return removed_ms.empty() ? d : d - removed_ms[i];
}

namespace {

std::string join_names(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Leaf regions of the nesting present in the models, outside the communication region.
std::vector<std::size_t> leaf_models(const AnalysisInput& in, const CostModelSet& set) {
  std::vector<std::size_t> out;
  if (!in.hierarchy) return out;
  for (std::size_t i = 0; i < set.models.size(); ++i) {
    const RegionModel& m = set.models[i];
    const HierarchyNode* node = in.hierarchy->find(m.region);
    if (!node) continue;
    if (!in.children_in_log(m.region).empty()) continue;
    if (!set.comm_region.empty() &&
        (m.region == set.comm_region || in.hierarchy->is_ancestor(set.comm_region, m.region)))
      continue;
    out.push_back(i);
  }
  return out;
}

// The replay holds one entry per sample: at most this many from the frame histograms over
// all updates (16 bytes each, twice: 8 GB; docs/whatif.md), and Mb::first must stay within
// 32 bits.
constexpr std::uint64_t kMaxReplaySamples = std::uint64_t{1} << 28;

// Why the frame histograms cannot give the replay's samples, or an empty string: one that
// disagrees with its update's samples counter (a hand-edited or mis-recorded log, e.g.
// {"9": 4611686018427387904} beside 16 samples), or more samples than the replay holds.
std::string check_histograms(const AnalysisInput& in, const std::vector<const UpdateRecord*>& updates) {
  const auto samples_id = in.counter(schema::counter::kSamples);
  std::size_t bad = 0;
  std::string first;
  std::uint64_t all = 0;
  for (const auto* u : updates) {
    if (u->frame_histogram.empty()) continue;  // (no samples to expand: not a disagreement)
    std::uint64_t total = 0;  // (the reader takes at most 2^32 per entry: no overflow)
    for (const auto& [frames, n] : u->frame_histogram) total += static_cast<std::uint64_t>(n);
    all += total;
    std::optional<double> counted;
    if (samples_id) counted = u->counter(*samples_id);
    if (!counted || *counted == static_cast<double>(total)) continue;
    if (!bad++)
      first = fmt::format("{}step {}: {} samples in the histogram, {} in the samples counter",
                          u->rank ? fmt::format("rank {} ", *u->rank) : std::string(), u->step, total, *counted);
  }
  if (bad)
    return fmt::format("the frame_histogram disagrees with the samples counter in {} of {} updates (first: {})", bad,
                       updates.size(), first);
  if (all > kMaxReplaySamples)
    return fmt::format("the frame_histograms hold {} samples in all, more than the {} the replay expands one by one; "
                       "read fewer updates (--steps A:B)",
                       all, kMaxReplaySamples);
  return {};
}

// Fills the micro-batch layout of every update: from the per-micro-batch detail when every
// update has it, else from the frame histogram (sizes from input_shapes or an even split).
// Returns why it cannot (check_histograms), or an empty string.
std::string build_layout(const AnalysisInput& in, WhatIfReplay::Impl& s, const std::vector<NameTable::Id>& group_ids) {
  s.detail = !s.updates.empty();
  for (const auto* u : s.updates) {
    bool ok = !u->microbatches.empty();
    for (const auto& mb : u->microbatches)
      if (mb.frames.empty() && mb.samples() > 0) ok = false;
    if (!ok) s.detail = false;
  }
  // Detail that disagrees with the update's own counters is not trusted (a hand-edited or
  // mis-recorded log): the update-level histograms are used instead, and the notes say why.
  if (s.detail) {
    const auto frames_id = in.counter(schema::counter::kFrames);
    const auto samples_id = in.counter(schema::counter::kSamples);
    std::size_t bad = 0;
    std::string first;
    for (const auto* u : s.updates) {
      double frames = 0, samples = 0;
      for (const auto& mb : u->microbatches) {
        samples += static_cast<double>(mb.samples());
        for (const auto f : mb.frames) frames += static_cast<double>(f);
      }
      std::optional<double> fc, sc;  // (not `id ? counter : nullopt`: g++ 12 then warns of maybe-uninitialized)
      if (frames_id) fc = u->counter(*frames_id);
      if (samples_id) sc = u->counter(*samples_id);
      std::string what;
      if (fc && *fc != frames) what = fmt::format("{} frames in the detail, {} in the frames counter", frames, *fc);
      else if (sc && *sc != samples)
        what = fmt::format("{} samples in the detail, {} in the samples counter", samples, *sc);
      if (what.empty()) continue;
      if (!bad++)
        first = fmt::format("{}step {}: {}", u->rank ? fmt::format("rank {} ", *u->rank) : std::string(), u->step, what);
    }
    if (bad) {
      s.detail = false;
      s.notes.push_back(fmt::format("the per-micro-batch detail disagrees with the update's counters in {} of {} "
                                    "updates (first: {}): not used",
                                    bad, s.updates.size(), first));
    }
  }
  s.tokens_known = s.detail;
  if (s.detail)
    for (const auto* u : s.updates)
      for (const auto& mb : u->microbatches)
        if (mb.tokens.size() != mb.frames.size()) s.tokens_known = false;
  if (!s.detail)
    if (auto why = check_histograms(in, s.updates); !why.empty()) return why;
  const auto micro_steps = in.counter(schema::counter::kMicroSteps);
  // Micro-batches whose path is no region of the group: replayed as micro-batches that do
  // not run it (a text-only one), which a misspelt or wrong path also becomes; said.
  std::size_t outside = 0;
  std::vector<NameTable::Id> outside_paths;
  // Updates in which a path of the group ran but that have no frame_histogram: nothing to
  // replay, so they are taken as unchanged (said: before, silently).
  std::size_t no_histogram = 0;
  std::string first_no_histogram;
  for (const auto* u : s.updates) {
    const auto first_mb = static_cast<std::uint32_t>(s.mbs.size());
    if (!s.detail && u->frame_histogram.empty() &&
        std::any_of(u->regions.begin(), u->regions.end(), [&](const auto& r) {
          return std::find(group_ids.begin(), group_ids.end(), r.region) != group_ids.end();
        }) &&
        !no_histogram++)
      first_no_histogram = fmt::format("{}step {}", u->rank ? fmt::format("rank {} ", *u->rank) : std::string(), u->step);
    if (s.detail) {
      for (const auto& mb : u->microbatches) {
        Mb m;
        m.first = static_cast<std::uint32_t>(s.samples.size());
        m.count = static_cast<std::uint32_t>(mb.frames.size());
        m.geometry = !mb.path || std::find(group_ids.begin(), group_ids.end(), *mb.path) != group_ids.end();
        if (!m.geometry) {
          ++outside;
          if (std::find(outside_paths.begin(), outside_paths.end(), *mb.path) == outside_paths.end())
            outside_paths.push_back(*mb.path);
        }
        std::int64_t longest = 0;
        for (std::size_t k = 0; k < mb.frames.size(); ++k) {
          const std::int64_t t = s.tokens_known ? mb.tokens[k] : -1;
          s.samples.push_back({mb.frames[k], t});
          longest = std::max(longest, t);
        }
        m.padded = mb.padded_length.value_or(longest);
        s.mbs.push_back(m);
      }
    } else {
      const auto first_sample = static_cast<std::uint32_t>(s.samples.size());
      for (const auto& [frames, n] : u->frame_histogram)
        for (std::int64_t k = 0; k < n; ++k) s.samples.push_back({frames, -1});
      const auto total = static_cast<std::uint32_t>(s.samples.size() - first_sample);
      std::vector<std::uint32_t> sizes;
      std::uint64_t shapes = 0;  // micro-batches the input_shapes list (each holds a sample or more)
      for (const auto& shape : u->input_shapes) shapes += static_cast<std::uint64_t>(shape.microbatches);
      if (shapes <= total)
        for (const auto& shape : u->input_shapes)
          for (std::int64_t k = 0; k < shape.microbatches && !shape.dims.empty(); ++k)
            sizes.push_back(static_cast<std::uint32_t>(shape.dims[0]));
      if (std::accumulate(sizes.begin(), sizes.end(), 0u) != total) {
        sizes.clear();
        const auto m = static_cast<std::uint32_t>(std::max(1.0, micro_steps ? u->counter(*micro_steps).value_or(1) : 1.0));
        for (std::uint32_t k = 0; k < m; ++k) sizes.push_back(total / m + (k < total % m ? 1 : 0));
      }
      std::uint32_t at = first_sample;
      for (const std::uint32_t n : sizes) {
        s.mbs.push_back({at, n, -1, true});
        at += n;
      }
    }
    s.layout.emplace_back(first_mb, static_cast<std::uint32_t>(s.mbs.size()) - first_mb);
  }
  if (no_histogram > 0)
    s.notes.push_back(fmt::format("{} of {} updates ran the group's paths but have no frame_histogram and no "
                                  "per-micro-batch detail (first: {}): their samples are unknown, so they are taken "
                                  "as unchanged and their saving is not counted",
                                  no_histogram, s.updates.size(), first_no_histogram));
  if (outside > 0) {
    std::string names, group;
    for (std::size_t k = 0; k < outside_paths.size() && k < 3; ++k)
      names += fmt::format("{}{}", k ? ", " : "", in.data.regions.name(outside_paths[k]));
    if (outside_paths.size() > 3) names += fmt::format(" and {} more", outside_paths.size() - 3);
    for (std::size_t k = 0; k < group_ids.size(); ++k)
      group += fmt::format("{}{}", k ? ", " : "", in.data.regions.name(group_ids[k]));
    // Every micro-batch outside the group: no sample to replay, for that reason (it said
    // the updates have no frame counts, which they had).
    const bool all_outside = std::none_of(s.mbs.begin(), s.mbs.end(), [](const Mb& m) { return m.geometry; });
    if (all_outside)
      return fmt::format("no micro-batch takes a path of the group ({}): the per-micro-batch detail of every update "
                         "names {} as its path (misspelt? the paths are region names, docs/log-schema.md)",
                         group, names);
    s.notes.push_back(fmt::format("{} micro-batch(es) name a path that is not one of the group's ({}): {}; they are "
                                  "replayed as micro-batches that do not run the group",
                                  outside, group, names));
  }
  // The pool the group variant draws from: every geometry sample, by frame count.
  for (const auto& m : s.mbs)
    if (m.geometry)
      for (std::uint32_t k = 0; k < m.count; ++k) s.pool.push_back(s.samples[m.first + k]);
  std::stable_sort(s.pool.begin(), s.pool.end(), [](const Sample& a, const Sample& b) { return a.frames < b.frames; });
  s.bucket.resize(s.pool.size());
  for (std::size_t b = 0; b < s.pool.size();) {
    std::size_t e = b;
    while (e < s.pool.size() && s.pool[e].frames == s.pool[b].frames) ++e;
    for (std::size_t k = b; k < e; ++k) s.bucket[k] = {static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(e)};
    b = e;
  }
  return {};
}

}  // namespace

WhatIfReplay::WhatIfReplay(const AnalysisInput& in, const CostModelSet& models, const WhatIfOptions& opt,
                           std::string variant)
    : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.scenario = opt.scenario;
  s.variant = std::move(variant);
  s.models = &models;
  s.updates = in.updates();
  const FeatureSpace& space = models.space;
  auto fail = [&](std::string why) { s.why_not = std::move(why); };
  if (s.scenario == Scenario::kBalancedRanks) { fail("balanced-ranks does not replay updates"); return; }
  // Too few updates for any cost model comes first: with it, every other reason (no
  // nesting, a path that did not run in these updates) may be one only of this window.
  if (s.updates.size() < kMinUpdates) {
    fail(fmt::format("the cost models need at least {} update records; the input holds {}{}", kMinUpdates, s.updates.size(),
                     in.hierarchy ? "" : " (and the region nesting is needed: give --hierarchy FILE, or a log with parents)"));
    return;
  }
  if (!in.hierarchy) { fail("needs the region nesting (give --hierarchy FILE, or a log with parents)"); return; }
  for (const auto* u : s.updates) s.x.push_back(space.values(*u));
  auto counter_feature = [&](std::optional<NameTable::Id> id) {
    return id ? space.find(Feature::Kind::kCounter, *id) : std::nullopt;
  };
  s.f_frames = counter_feature(space.counters.frames);
  s.f_fsq = space.find(Feature::Kind::kFramesSq, 0);
  s.f_valid = counter_feature(space.counters.valid_tokens);
  s.f_slots = counter_feature(space.counters.token_slots);

  if (s.scenario == Scenario::kNoPadding) {
    if (!s.f_slots || !s.f_valid) { fail("needs the token_slots and valid_tokens counters"); return; }
    std::size_t unknown = 0;
    std::string first;
    for (const auto* u : s.updates) {
      const bool known = u->counter(*space.counters.token_slots) && u->counter(*space.counters.valid_tokens);
      s.unknown_tokens.push_back(!known);
      if (!known && !unknown++)
        first = fmt::format("{}step {}", u->rank ? fmt::format("rank {} ", *u->rank) : std::string(), u->step);
    }
    if (unknown)
      s.notes.push_back(fmt::format("{} of {} updates lack the token_slots or valid_tokens counter (first: {}): they are "
                                    "taken as unchanged, as the padding analysis leaves them out",
                                    unknown, s.updates.size(), first));
    s.changed = {*s.f_slots};
    s.assumptions.push_back(
        "sequences are packed without padding: token slots = valid tokens in every update; each region keeps "
        "its cost per token slot");
  } else {
    // The group of alternatives and the path every micro-batch takes.
    std::vector<const PathCounters*> members;
    for (const auto& p : space.paths)
      if (opt.group.empty() ? (members.empty() || p.group == members.front()->group) : p.group == opt.group)
        members.push_back(&p);
    if (members.size() < 2) {
      if (members.size() == 1)  // the nesting names a group, but one path never ran
        fail(fmt::format("only {} of group {} ran in these updates: every micro-batch already takes one path, "
                         "nothing to change",
                         members.front()->region, members.front()->group));
      else
        fail(opt.group.empty() ? "the nesting marks no group of alternative code paths (alt=GROUP)"
                               : fmt::format("no alternative group \"{}\" in the nesting", opt.group));
      return;
    }
    s.group = members.front()->group;
    s.target = opt.path;
    if (s.target.empty()) {
      for (const auto& g : analyze_code_paths(in).groups)
        if (g.group == s.group) s.target = g.fast;
      if (s.target.empty()) {
        fail(fmt::format("cannot tell which path of group {} is the cheaper one (both must have run with their "
                         "frames or samples counted: counters <path>_frames or <path>_samples, e.g. {}_frames, or "
                         "per-micro-batch detail with each micro-batch's path; docs/log-schema.md); give --path "
                         "REGION",
                         s.group, members.front()->region));
        return;
      }
    }
    const auto t = std::find_if(members.begin(), members.end(), [&](const PathCounters* p) { return p->region == s.target; });
    if (t == members.end()) { fail(fmt::format("{} is not a path of group {}", s.target, s.group)); return; }
    const PathCounters& tp = **t;
    if (!tp.id) { fail(fmt::format("{} never ran in this window: its cost is unknown", tp.region)); return; }
    std::vector<NameTable::Id> group_ids;
    for (const auto* p : members)
      if (p->id) group_ids.push_back(*p->id);
    s.t_samples = space.path_feature(tp, PathWork::kSamples);
    s.t_frames = space.path_feature(tp, PathWork::kFrames);
    s.t_mbs = space.path_feature(tp, PathWork::kMicrobatches);
    s.t_fsq = space.find(Feature::Kind::kPathFramesSq, *tp.id);
    s.t_calls = space.find(Feature::Kind::kCalls, *tp.id);
    for (const auto* p : members) {
      if (p == &tp) continue;
      for (auto f : {space.path_feature(*p, PathWork::kSamples), space.path_feature(*p, PathWork::kFrames),
                     space.path_feature(*p, PathWork::kMicrobatches),
                     p->id ? space.find(Feature::Kind::kPathFramesSq, *p->id) : std::nullopt,
                     p->id ? space.find(Feature::Kind::kCalls, *p->id) : std::nullopt})
        if (f) s.zeroed.push_back(*f);
    }
    // Calls of the target path per micro-batch it ran (1 for a batched call).
    double calls = 0, runs = 0;
    for (const auto* u : s.updates) {
      const RegionSample* r = u->region(*tp.id);
      if (!r || !r->calls) continue;
      double m = tp.microbatches ? u->counter(*tp.microbatches).value_or(0) : 0;
      if (m == 0)
        for (const auto& mb : u->microbatches) m += mb.path == tp.id ? 1 : 0;
      if (m > 0) {
        calls += static_cast<double>(*r->calls);
        runs += m;
      }
    }
    if (runs > 0) s.calls_per_mb = calls / runs;
    // (Calls per micro-batch unknown, without a micro-batch count: taken as batched, as
    // before this was measured, and calls_per_mb as 1.)
    s.target_batched = runs == 0 || calls <= runs;
    if (auto why = build_layout(in, s, group_ids); !why.empty()) { fail(std::move(why)); return; }
    if (s.pool.empty()) { fail("no sample frame counts: batched-geometry replays the samples' frame counts, from the "
                                "frame_histogram or the frames of the per-micro-batch detail (docs/log-schema.md), "
                                "and these updates have neither"); return; }
    for (auto f : {s.t_samples, s.t_frames, s.t_mbs, s.t_fsq, s.t_calls})
      if (f) s.changed.push_back(*f);
    for (auto f : s.zeroed) s.changed.push_back(f);
    if (s.variant == "group") {
      for (auto f : {s.f_frames, s.f_fsq}) if (f) s.changed.push_back(*f);
      if (s.tokens_known)
        for (auto f : {s.f_valid, s.f_slots}) if (f) s.changed.push_back(*f);
    }
    const std::string others = [&] {
      std::vector<std::string> v;
      for (const auto* p : members)
        if (p != &tp) v.push_back(p->region);
      return join_names(v);
    }();
    s.assumptions.push_back(fmt::format(
        "every micro-batch through group {} takes {} ({} call(s) per micro-batch, as measured); {} no longer runs",
        s.group, s.target, fmt::format("{:.3g}", s.calls_per_mb), others));
    if (s.variant == "pad")
      s.assumptions.push_back(fmt::format(
          "each micro-batch's samples are padded up to its largest frame count; a padded frame costs what a real frame "
          "costs wherever a model counts {}'s frames; regions that count all frames (e.g. the vision encoder) see only "
          "the real ones",
          s.target));
    else
      s.assumptions.push_back(fmt::format(
          "samples are grouped by frame count, as a length-bucketing sampler does: every micro-batch keeps its size and "
          "holds samples of one frame count, drawn from the window's {} samples (a frame count in proportion to how "
          "often it occurs; each update's micro-batches drawn {} times at random, the predictions averaged){}",
          s.pool.size(), opt.draws,
          s.tokens_known ? "; token slots follow from the drawn samples' tokens, padded to the longest"
                         : "; token slots and valid tokens unchanged (per-sample token counts are not in the log)"));
    if (!s.detail)
      s.notes.push_back(
          "no per-micro-batch detail in the log: which samples shared a micro-batch is unknown; micro-batches are "
          "rebuilt from the frame histogram and input_shapes by random splits (averaged over the draws)");
    if (s.variant == "pad" && !s.detail && s.target_batched) {
      std::size_t only = 0;
      for (const auto* u : s.updates) {
        bool target_ran = false, other_ran = false;
        for (const NameTable::Id id : group_ids) {
          const RegionSample* r = u->region(id);
          const bool ran = r && (r->calls.value_or(0) > 0 || r->device_ms.value_or(0) > 0 || r->host_ms.value_or(0) > 0);
          (id == *tp.id ? target_ran : other_ran) |= ran;
        }
        s.on_target_only.push_back(target_ran && !other_ran);
        only += s.on_target_only.back() ? 1 : 0;
      }
      if (only > 0)
        s.notes.push_back(fmt::format("{} of {} updates ran only {} of the group, which takes a micro-batch in one "
                                      "call: every micro-batch was batched already (one frame count each), so they "
                                      "are unchanged (not split at random)",
                                      only, s.updates.size(), s.target));
    }
  }

  // The work the scenario changes must have varied over the updates: otherwise a cost per
  // unit of it is any split of a fixed cost per update (200 identical updates priced
  // padding at 1.67e-05 ms per token slot and predicted a saving).
  const bool varied = std::any_of(s.changed.begin(), s.changed.end(), [&](std::size_t f) {
    return std::any_of(s.x.begin(), s.x.end(), [&](const std::vector<double>& row) { return row[f] != s.x.front()[f]; });
  });
  if (!s.x.empty() && !varied) {
    std::vector<std::string> names;
    for (const std::size_t f : s.changed) {
      const Feature& feature = space.features[f];
      names.push_back(feature.kind == Feature::Kind::kCalls
                          ? fmt::format("calls of {}", in.data.regions.name(feature.id))
                          : feature.name);
    }
    fail(fmt::format("the work it changes ({}) is the same in every update, so its cost cannot be told apart from a "
                     "fixed cost per update: needs updates in which it differs",
                     join_names(names)));
    return;
  }

  // batched-geometry: the target path's work is priced by its model; another path of the
  // group no longer runs, so one without a usable model has its measured time removed.
  std::vector<NameTable::Id> removed_ids;
  if (s.scenario == Scenario::kBatchedGeometry) {
    for (const auto& p : space.paths) {
      if (p.group != s.group || !p.id) continue;
      const RegionModel* m = models.find(p.region);
      if (!m || m->usable || !(m->mean_ms > 0)) continue;
      if (p.region == s.target) {
        fail(fmt::format("the cost model of {} is not usable: {}", p.region, m->why_not));
        return;
      }
      removed_ids.push_back(*p.id);
      s.removed_ms.resize(s.updates.size(), 0.0);
      double sum = 0;
      for (std::size_t i = 0; i < s.updates.size(); ++i) {
        const double t = region_time(*s.updates[i], *p.id, m->device);
        s.removed_ms[i] += t;
        sum += t;
      }
      RegionChange rc;
      rc.region = m->region;
      rc.measured_ms = m->mean_ms;
      rc.removed = true;
      rc.change_ms = s.updates.empty() ? 0.0 : -sum / static_cast<double>(s.updates.size());
      rc.note = fmt::format("no longer runs: its measured time is removed (its cost model is not usable: {})",
                            m->why_not);
      s.notes.push_back(fmt::format("{} has no usable cost model ({}): it no longer runs, so its measured time is "
                                    "removed from the updates that ran it, and its work is priced at {}'s cost",
                                    m->region, m->why_not, s.target));
      s.removed.push_back(std::move(rc));
    }
  }

  // The models that price the change: usable leaf regions; say which ones cannot.
  std::vector<std::string> unpriced;
  for (const std::size_t i : leaf_models(in, models)) {
    const RegionModel& m = models.models[i];
    if (std::find(removed_ids.begin(), removed_ids.end(), m.id) != removed_ids.end()) continue;
    const bool affected = std::any_of(m.candidates.begin(), m.candidates.end(), [&](std::size_t f) {
      return std::find(s.changed.begin(), s.changed.end(), f) != s.changed.end();
    });
    if (m.usable) {
      s.leaves.push_back(i);
      std::vector<double> y;
      for (const auto* u : s.updates) y.push_back(region_time(*u, m.id, m.device));
      s.y.push_back(std::move(y));
    }
    if (!affected) continue;
    if (!m.usable) {  // its work may change, but nothing can say by how much
      unpriced.push_back(m.region);
      continue;
    }
    RegionChange rc;
    rc.region = m.region;
    rc.measured_ms = m.mean_ms;
    rc.modeled = true;
    s.affected.push_back(std::move(rc));
  }
  // A prediction needs at least one usable model that uses a feature the scenario changes.
  const bool priced = std::any_of(s.leaves.begin(), s.leaves.end(), [&](std::size_t i) {
    return std::any_of(models.models[i].terms.begin(), models.models[i].terms.end(), [&](const CostTerm& t) {
      return std::find(s.changed.begin(), s.changed.end(), t.feature) != s.changed.end();
    });
  });
  if (!priced) {
    std::vector<std::string> names;
    for (const std::size_t f : s.changed)
      if (std::find(names.begin(), names.end(), space.features[f].name) == names.end())
        names.push_back(space.features[f].name);
    // Models of regions with child regions that do use it: the prediction sums the leaf
    // regions, and a parent's own time outside its children is not modeled (a helper's
    // forward, 0.004 ms per token slot of its own beside a fixed-time child, was listed as
    // used, with that cost, above a verdict that no model used token slots).
    std::vector<std::string> parents;
    const auto leaves = leaf_models(in, models);
    for (std::size_t i = 0; i < models.models.size(); ++i) {
      const RegionModel& m = models.models[i];
      if (!m.usable || std::find(leaves.begin(), leaves.end(), i) != leaves.end() || !in.hierarchy) continue;
      // (Parents only: leaf_models() also leaves out regions outside the nesting and the
      // communication region's.)
      if (in.children_in_log(m.region).empty()) continue;
      if (std::any_of(m.terms.begin(), m.terms.end(), [&](const CostTerm& t) {
            return std::find(s.changed.begin(), s.changed.end(), t.feature) != s.changed.end();
          }))
        parents.push_back(m.region);
    }
    // Leaf models whose choice single updates set, and would price it chosen otherwise:
    // the verdict rests on that choice (the bundled log without step 16: no-padding).
    std::string narrow;
    for (const std::size_t i : s.leaves) {
      const RegionModel& m = models.models[i];
      if (std::any_of(m.choice_set_by.begin(), m.choice_set_by.end(),
                      [&](const auto& u) { return prices_change(u.terms, s.changed); }))
      {
        std::string note = choice_note(m, models.space, s.changed);
        note[0] = 'T';  // ("the model of ...", as a sentence of its own)
        narrow += ". " + note;
      }
    }
    fail(fmt::format("no usable cost model of a leaf region uses the work that changes ({}): the selected models "
                     "price these updates by other features, or are not usable (see the cost models); predicting no "
                     "change would only restate that{}{}",
                     fmt::join(names, ", "),
                     parents.empty()
                         ? std::string()
                         : fmt::format(". The models of {} use it, but {} child regions: the prediction sums the "
                                       "leaf regions of the nesting, and a region's own time outside its children is "
                                       "not modeled; a region around that own work (as a child) would let it be priced",
                                       fmt::join(parents, ", "), parents.size() == 1 ? "it has" : "they have"),
                     narrow));
    return;
  }
  // A model whose terms explain little of the region's variation (its held-out error is
  // small because the time hardly varies): its unit cost is about the mean time over the
  // mean work, so the prediction rests on the time being proportional to that work.
  for (const std::size_t i : s.leaves) {
    const RegionModel& m = models.models[i];
    const bool prices = std::any_of(m.terms.begin(), m.terms.end(), [&](const CostTerm& t) {
      return std::find(s.changed.begin(), s.changed.end(), t.feature) != s.changed.end();
    });
    const bool prices_without = std::any_of(m.choice_set_by.begin(), m.choice_set_by.end(),
                                            [&](const auto& u) { return prices_change(u.terms, s.changed); });
    if (!m.choice_set_by.empty() && (prices || prices_without)) s.notes.push_back(choice_note(m, models.space, s.changed));
    if (prices && m.r2 && *m.r2 < kWeakR2)
      s.notes.push_back(fmt::format(
          "the model of {} explains {:.0f} % of its variation over these updates (R² {:.2f}): its cost per unit is "
          "close to its mean time over its mean work, so the prediction assumes its time is proportional to that "
          "work, with no fixed part, beyond the range of work seen",
          m.region, std::max(0.0, *m.r2) * 100, *m.r2));
  }
  if (!unpriced.empty())
    s.notes.push_back(fmt::format("taken as unchanged, having no usable cost model although their work may change: {}",
                                  fmt::join(unpriced, ", ")));
  s.ok = true;
}

WhatIfReplay::~WhatIfReplay() = default;
bool WhatIfReplay::available() const { return impl_->ok; }
const std::string& WhatIfReplay::why_not() const { return impl_->why_not; }

std::size_t WhatIfReplay::replay(std::uint64_t seed, std::vector<double>& change_ms,
                                 std::vector<std::vector<double>>* features_sum) const {
  const Impl& s = *impl_;
  change_ms.assign(s.updates.size(), 0.0);
  if (features_sum) features_sum->resize(s.updates.size());
  if (!s.ok) return 0;
  std::vector<std::vector<double>> coef;
  for (const std::size_t i : s.leaves) {
    std::vector<double> c;
    for (const auto& t : s.models->models[i].terms) c.push_back(t.ms_per_unit);
    coef.push_back(std::move(c));
  }
  Rng rng(seed);
  std::vector<double> xo;
  std::vector<Sample> scratch;
  std::size_t samples = 0;
  for (std::size_t i = 0; i < s.updates.size(); ++i) {
    s.transform(i, rng, xo, scratch);
    change_ms[i] = s.change(i, xo, coef);
    if (features_sum) {
      auto& sum = (*features_sum)[i];
      sum.resize(xo.size(), 0.0);
      for (std::size_t f = 0; f < xo.size(); ++f) sum[f] += xo[f];
    }
    if (!s.layout.empty())
      for (std::uint32_t m = s.layout[i].first; m < s.layout[i].first + s.layout[i].second; ++m) samples += s.mbs[m].count;
  }
  return samples;
}

// ---- synchronization and the scenarios ----------------------------------------------------

namespace {

// What the synchronization needs per update, and the steps to aggregate over.
struct SyncData {
  bool all_ranks = false;  // every rank's log: max over ranks
  bool range = false;      // one rank of a multi-rank job
  std::vector<std::size_t> rank_of;  // per update (AnalysisInput::updates order): rank index
  std::vector<double> wall, comm, wait;
  std::vector<std::int64_t> step_of;
  std::vector<std::vector<std::size_t>> steps;  // per aligned step: its updates (one per rank), or one update
  std::vector<std::int64_t> step_numbers;
  std::size_t ranks = 0;     // the ranks with updates (rank_of's range)
  std::vector<bool> left_out;  // per rank: a short, late-starting or gapped log, not in `steps` (ranks_left_out)
  std::size_t compared = 0;  // the ranks in `steps`: ranks less those left out
  std::string comm_region;  // its name; empty: none found
  std::string description;
  std::vector<std::string> notes;
};

SyncData build_sync(const AnalysisInput& in) {
  SyncData d;
  const auto updates = in.updates();
  std::map<const UpdateRecord*, std::size_t> index;
  for (std::size_t i = 0; i < updates.size(); ++i) index[updates[i]] = i;
  const auto comm = find_comm_region(in);
  if (comm) d.comm_region = std::string(in.data.regions.name(comm->id));
  const bool comm_dev = comm && in.has_device_time(comm->id);
  d.rank_of.resize(updates.size());
  d.wall.resize(updates.size());
  d.comm.resize(updates.size());
  d.wait.resize(updates.size());
  d.step_of.resize(updates.size());
  std::size_t rank_index = 0;
  std::optional<std::int64_t> world;
  for (const auto& r : in.data.ranks) {
    if (r.updates.empty()) continue;
    if (r.config && r.config->world_size) world = r.config->world_size;
    double floor = 0;
    bool first = true;
    const std::size_t first_index = index[&r.updates.front()];
    for (std::size_t j = 0; j < r.updates.size(); ++j) {
      const UpdateRecord& u = r.updates[j];
      const std::size_t i = index[&u];
      d.rank_of[i] = rank_index;
      d.wall[i] = u.wall_ms;
      d.step_of[i] = u.step;
      // The rank comparison's communication time (cross_rank.hpp own_work): the region's
      // device time, else its host time in an update without a device time for it; 0 where
      // it is absent.
      d.comm[i] = comm ? own_work(in, r, first_index, j, comm->id, comm_dev).comm_ms : 0.0;
      if (first || d.comm[i] < floor) floor = d.comm[i];
      first = false;
    }
    for (const auto& u : r.updates) d.wait[index[&u]] = d.comm[index[&u]] - floor;
    ++rank_index;
  }
  d.ranks = rank_index;
  d.compared = d.ranks;
  d.left_out.assign(d.ranks, false);
  const std::string comm_name = comm ? std::string(in.data.regions.name(comm->id)) : std::string();
  if (d.ranks >= 2) {
    d.all_ranks = true;
    std::map<std::int64_t, std::vector<std::size_t>> by_step;
    for (std::size_t i = 0; i < updates.size(); ++i) by_step[d.step_of[i]].push_back(i);
    // Ranks whose logs are short (a crashed job, a cut log) or start late are left out, as
    // the rank comparison leaves them out (ranks_left_out), while two or more remain: with
    // a short one, only the steps it holds would be compared (one step of 40: no prediction
    // at all); with a late one, none of the steps before it started.
    std::vector<std::vector<std::int64_t>> steps_of(d.ranks);
    for (std::size_t i = 0; i < updates.size(); ++i) steps_of[d.rank_of[i]].push_back(d.step_of[i]);
    for (auto& mine : steps_of) {
      std::sort(mine.begin(), mine.end());
      mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    }
    std::vector<std::vector<std::pair<std::int64_t, double>>> own(d.ranks);  // (wall_ms - communication)
    for (std::size_t i = 0; i < updates.size(); ++i) own[d.rank_of[i]].emplace_back(d.step_of[i], d.wall[i] - d.comm[i]);
    const auto why = ranks_left_out(steps_of, slowest_often(own));
    for (std::size_t k = 0; k < d.ranks; ++k) d.left_out[k] = why[k] != RankLeftOut::kKept;
    d.compared = d.ranks - static_cast<std::size_t>(std::count(d.left_out.begin(), d.left_out.end(), true));
    std::vector<std::string> short_ranks, late_ranks, lost_ranks;
    {
      std::size_t k = 0;
      for (const auto& r : in.data.ranks) {
        if (r.updates.empty()) continue;
        const std::string rank = r.rank ? std::to_string(*r.rank) : "?";
        if (why[k] == RankLeftOut::kShort)
          short_ranks.push_back(fmt::format("{} ({} of the {} steps)", rank, steps_of[k].size(), by_step.size()));
        else if (why[k] == RankLeftOut::kLate)
          late_ranks.push_back(fmt::format("{} (from step {})", rank, steps_of[k].front()));
        else if (why[k] == RankLeftOut::kLost)
          lost_ranks.push_back(fmt::format("{} ({} of the {} steps)", rank, steps_of[k].size(), by_step.size()));
        ++k;
      }
    }
    std::size_t dropped = 0;
    for (auto& [step, ids] : by_step) {
      std::vector<bool> seen(d.ranks, false);
      std::vector<std::size_t> kept;
      for (auto i : ids)
        if (!d.left_out[d.rank_of[i]]) {
          seen[d.rank_of[i]] = true;
          kept.push_back(i);
        }
      if (static_cast<std::size_t>(std::count(seen.begin(), seen.end(), true)) != d.compared) {
        ++dropped;
        continue;
      }
      d.steps.push_back(std::move(kept));
      d.step_numbers.push_back(step);
    }
    if (!short_ranks.empty())
      d.notes.push_back(fmt::format(
          "rank{} {} left out: {} log{} under half of the steps (a crashed job or a cut log?), by the rule of "
          "the report's rank comparison; the steps are those of the other {} ranks",
          short_ranks.size() == 1 ? "" : "s", fmt::join(short_ranks, ", "), short_ranks.size() == 1 ? "its" : "their",
          short_ranks.size() == 1 ? " holds" : "s hold", d.compared));
    if (!late_ranks.empty())
      d.notes.push_back(fmt::format(
          "rank{} {} left out: {} log{} late, and leaving {} out keeps more steps compared than leaving out the "
          "steps {} lack{}, by the rules of the report's rank comparison; the steps are those of the other {} ranks",
          late_ranks.size() == 1 ? "" : "s", fmt::join(late_ranks, ", "), late_ranks.size() == 1 ? "its" : "their",
          late_ranks.size() == 1 ? " starts" : "s start", late_ranks.size() == 1 ? "it" : "them",
          late_ranks.size() == 1 ? "it" : "they", late_ranks.size() == 1 ? "s" : "", d.compared));
    if (!lost_ranks.empty())
      d.notes.push_back(fmt::format(
          "rank{} {} left out: {} log{} a step or two in the middle (lost records), and under half of the steps "
          "are in every log with {}, by the rules of the report's rank comparison; the steps are those of the other "
          "{} ranks",
          lost_ranks.size() == 1 ? "" : "s", fmt::join(lost_ranks, ", "), lost_ranks.size() == 1 ? "its" : "their",
          lost_ranks.size() == 1 ? " lacks" : "s lack", lost_ranks.size() == 1 ? "it" : "them", d.compared));
    d.description = fmt::format(
        "{}: a step takes max over ranks of (own work + its change) plus the step's "
        "time beyond the largest own work (the collective); own work = wall_ms - {}",
        world && *world > static_cast<std::int64_t>(d.ranks)
            ? fmt::format("the logs of {} of the {} ranks (the others' not given)", d.ranks, *world)
            : fmt::format("every rank's log ({} ranks)", d.ranks),
        comm ? comm_name : std::string("nothing (no communication region found)"));
    if (d.compared < d.ranks)  // (the weak-point note names them)
      d.description += fmt::format("; over {} of these ranks: {} left out for a short, late-starting or gapped log",
                                   d.compared, d.ranks - d.compared);
    if (dropped) d.notes.push_back(fmt::format("{} step(s) missing from some rank's log are left out", dropped));
    if (world && *world > static_cast<std::int64_t>(d.ranks))
      d.notes.push_back(fmt::format("world size {} but {} ranks' logs: ranks without a log are not in the maximum",
                                    *world, d.ranks));
    if (!comm) d.notes.push_back("no communication region: each rank's own work is its whole wall_ms");
  } else {
    for (std::size_t i = 0; i < updates.size(); ++i) {
      d.steps.push_back({i});
      d.step_numbers.push_back(d.step_of[i]);
    }
    d.range = !(world && *world == 1);
    if (d.range)
      d.description = comm ? fmt::format(
                                 "one rank's log of a job of {}: a range from \"only this rank improves\" (its "
                                 "saving is absorbed by waiting for the others; a slow-down counts beyond its wait "
                                 "in {}) to \"every rank improves alike\" (the whole change counts; not a bound: "
                                 "when ranks wait for each other's slow updates, a change on every rank also "
                                 "removes those waits, which one rank's log cannot see; every rank's log prices "
                                 "them)",
                                 world ? fmt::format("{} ranks", *world)
                                       : std::string("several ranks (the config gives no world_size)"),
                                 comm_name)
                           : std::string("one rank's log of a multi-rank job: a range from \"only this rank improves\" "
                                         "(no saving counts: the other ranks still take as long) to \"every rank "
                                         "improves alike\" (not a bound: waits for other ranks' slow updates go too, "
                                         "which one rank's log cannot see); no communication region, so its wait is "
                                         "unknown");
    else
      d.description = "a single-rank job: the update time changes by the change of its compute";
  }
  return d;
}

struct StepTimes {
  std::vector<double> measured, predicted, only;
};

// Per step: measured, predicted and (one rank) the "only this rank improves" times.
StepTimes step_times(const SyncData& d, const std::vector<double>& change, const std::vector<std::size_t>& steps) {
  StepTimes t;
  for (const std::size_t k : steps) {
    const auto& ids = d.steps[k];
    if (d.all_ranks) {
      double u = 0, cmax = -1e300, cnew = -1e300;
      for (const auto i : ids) {
        const double c = d.wall[i] - d.comm[i];
        u = std::max(u, d.wall[i]);
        cmax = std::max(cmax, c);
        cnew = std::max(cnew, c + change[i]);
      }
      t.measured.push_back(u);
      t.predicted.push_back(cnew + (u - cmax));
    } else {
      const auto i = ids.front();
      t.measured.push_back(d.wall[i]);
      t.predicted.push_back(d.wall[i] + change[i]);
      if (d.range) t.only.push_back(d.wall[i] + std::max(0.0, change[i] - d.wait[i]));
    }
  }
  return t;
}

std::optional<double> job_samples_per_update(const AnalysisInput& in, const SyncData& d) {
  for (const auto& r : in.data.ranks)
    if (r.config && r.config->global_batch) return static_cast<double>(*r.config->global_batch);
  const auto samples = in.counter(schema::counter::kSamples);
  if (!samples) return std::nullopt;
  const auto updates = in.updates();
  double sum = 0;
  for (const auto* u : updates) sum += u->counter(*samples).value_or(0);
  if (updates.empty()) return std::nullopt;
  double per_rank_update = sum / static_cast<double>(updates.size());
  std::optional<std::int64_t> world;
  for (const auto& r : in.data.ranks)
    if (r.config && r.config->world_size) world = r.config->world_size;
  // World size unknown: the ranks given are the job when they are several (as the
  // report's throughput takes them); one rank's log says nothing of the job's size (it
  // was taken as a job of 1 rank, beside "one rank's log of a job of several ranks").
  if (!world && d.ranks < 2) return std::nullopt;
  return per_rank_update * static_cast<double>(world ? std::max<std::int64_t>(*world, 1) : static_cast<std::int64_t>(d.ranks));
}

std::vector<std::size_t> all_steps(const SyncData& d) {
  std::vector<std::size_t> v(d.steps.size());
  std::iota(v.begin(), v.end(), 0);
  return v;
}

std::vector<std::size_t> rows_of(const SyncData& d, const std::vector<std::size_t>& steps) {
  std::vector<std::size_t> rows;
  for (const std::size_t k : steps)
    for (const auto i : d.steps[k]) rows.push_back(i);
  return rows;
}

// The steps of bootstrap replicate `b`: as many as `d` has, drawn with replacement.
// Replicate b takes draws [b * n, (b + 1) * n) of the stream Rng(seed), so replicates can
// be drawn on any thread and the result does not depend on how many there are.
std::vector<std::size_t> resample(const SyncData& d, std::uint64_t seed, std::size_t b) {
  const std::size_t n = d.steps.size();
  Rng rng = Rng::after(seed, static_cast<std::uint64_t>(b) * n);
  std::vector<std::size_t> steps(n);
  for (auto& k : steps) k = rng.below(n);
  return steps;
}

// `count` bootstrap replicates, replicate(steps of the resample) each, in replicate order;
// the replicates run on up to 8 cores (they read shared data only; each refits on its
// own copy of the resampled updates).
template <typename Replicate>
std::vector<StepTimes> bootstrap(const SyncData& d, std::size_t count, std::uint64_t seed, Replicate&& replicate) {
  std::vector<StepTimes> boot(count);
  detail::parallel_for(count, detail::threads_at_most(8), [&](std::size_t b) { boot[b] = replicate(resample(d, seed, b)); });
  return boot;
}

void finish(Prediction& p, const SyncData& d, const StepTimes& point, const std::vector<StepTimes>& boot,
            double central, std::optional<double> samples) {
  std::vector<double> bm, bp, bo;
  for (const auto& b : boot) {
    bm.push_back(median_of(b.measured));
    bp.push_back(median_of(b.predicted));
    if (!b.only.empty()) bo.push_back(median_of(b.only));
  }
  p.measured = interval_of(median_of(point.measured), bm, central);
  p.predicted = interval_of(median_of(point.predicted), bp, central);
  p.saved_ms = p.measured.median_ms - p.predicted.median_ms;
  if (d.range && !point.only.empty()) {
    p.range = true;
    p.only_this_rank = interval_of(median_of(point.only), bo, central);
    p.saved_only_ms = p.measured.median_ms - p.only_this_rank->median_ms;
  }
  p.samples_per_update = samples;
  // The total over 1,000 updates: the mean of the per-update savings.
  auto mean_saving = [&](const std::vector<double>& after) {
    double sum = 0;
    const std::size_t n = std::min(point.measured.size(), after.size());
    for (std::size_t k = 0; k < n; ++k) sum += point.measured[k] - after[k];
    return n ? sum / static_cast<double>(n) : 0.0;
  };
  p.saved_mean_ms = mean_saving(point.predicted);
  if (p.saved_only_ms) p.saved_only_mean_ms = mean_saving(point.only);
  for (std::size_t k = 0; k < point.measured.size(); ++k) {
    UpdatePrediction u;
    u.step = d.step_numbers[k];
    u.measured_ms = point.measured[k];
    u.predicted_ms = point.predicted[k];
    if (d.range && k < point.only.size()) u.only_this_rank_ms = point.only[k];
    p.updates.push_back(u);
  }
}

Prediction replay_prediction(const AnalysisInput& in, const CostModelSet& models, const WhatIfOptions& opt,
                             const std::string& variant, const SyncData& sync) {
  Prediction p;
  p.variant = variant;
  WhatIfReplay replay(in, models, opt, variant);
  const auto& s = replay.impl();
  if (!replay.available()) {
    p.why_not = replay.why_not();
    return p;
  }
  if (sync.steps.size() < 2) {
    p.why_not = sync.all_ranks ? "fewer than two steps are in every rank's log" : "fewer than two updates to compare";
    return p;
  }
  p.available = true;
  if (opt.scenario == Scenario::kNoPadding)
    p.summary = "token slots = valid tokens: no padding";
  else
    p.summary = fmt::format("every micro-batch takes {} ({})", s.target,
                            variant == "pad" ? "frames padded up to the micro-batch's largest frame count"
                                             : "samples grouped by frame count");
  const bool random = opt.scenario == Scenario::kBatchedGeometry && (variant == "group" || !s.detail);
  const std::size_t draws = random ? std::max<std::size_t>(1, opt.draws) : 1;

  // The expected work of every update after the change: its features averaged over the
  // draws (a draw is one grouping, or one guess at the unknown composition). The change
  // is linear in the features, so pricing the mean is the mean of the prices.
  // The draws run in batches, one per core; each batch's features are added to the sum in
  // draw order, so the sum is the one the draws give one after another.
  std::vector<std::vector<double>> xbar(s.updates.size());
  std::vector<std::vector<double>> per_draw(draws);
  const unsigned threads = detail::threads_at_most(4);  // each holds the features of every update
  std::vector<std::vector<std::vector<double>>> batch_sums(threads);
  for (std::size_t first = 0; first < draws; first += threads) {
    const std::size_t batch = std::min<std::size_t>(threads, draws - first);
    detail::parallel_for(batch, static_cast<unsigned>(batch), [&](std::size_t j) {
      // (Zeroed, not cleared: a vector per update freed and made again in every batch
      // was most of the command's allocation, and left freed memory beside fresh.)
      for (auto& sum : batch_sums[j]) std::fill(sum.begin(), sum.end(), 0.0);
      replay.replay(mix(opt.seed, first + j), per_draw[first + j], &batch_sums[j]);
    });
    for (std::size_t j = 0; j < batch; ++j)
      for (std::size_t i = 0; i < xbar.size(); ++i) {
        const auto& add = batch_sums[j][i];
        xbar[i].resize(add.size(), 0.0);
        for (std::size_t f = 0; f < add.size(); ++f) xbar[i][f] += add[f];
      }
  }
  for (auto& v : xbar)
    for (double& f : v) f /= static_cast<double>(draws);
  auto coefficients = [&] {
    std::vector<std::vector<double>> c;
    for (const std::size_t l : s.leaves) {
      std::vector<double> v;
      for (const auto& t : models.models[l].terms) v.push_back(t.ms_per_unit);
      c.push_back(std::move(v));
    }
    return c;
  };
  auto changes = [&](const std::vector<std::vector<double>>& coef, const std::vector<std::vector<double>>& xs) {
    std::vector<double> ch(s.updates.size(), 0.0);
    for (std::size_t i = 0; i < s.updates.size(); ++i) ch[i] = s.change(i, xs[i], coef);
    return ch;
  };
  const auto coef0 = coefficients();
  const StepTimes point = step_times(sync, changes(coef0, xbar), all_steps(sync));

  // Bootstrap: resample steps, refit the models' terms on them, price the same expected
  // work. The change of an update is sum over models and terms of coefficient x (feature
  // after - feature before), so the differences are taken once (`delta`, per update in
  // the order Impl::change sums them) and each replicate only weighs them anew.
  // Each used model's terms and times, reduced per step once (GroupedRows): a replicate
  // refits on a few rows per resampled step, not on every rank's update of it.
  std::vector<GroupedRows> groups_by_model;
  std::size_t width = 0;  // terms over all used models
  for (std::size_t k = 0; k < s.leaves.size(); ++k) {
    const RegionModel& m = models.models[s.leaves[k]];
    const auto rows = term_rows(m, s.x);
    groups_by_model.push_back(reduce_groups(MatrixView{rows, s.x.size(), m.terms.size()}, s.y[k], sync.steps));
    width += m.terms.size();
  }
  std::vector<double> delta(s.updates.size() * width);
  for (std::size_t i = 0, at = 0; i < s.updates.size(); ++i)
    for (const std::size_t l : s.leaves)
      for (const auto& t : models.models[l].terms) delta[at++] = xbar[i][t.feature] - s.x[i][t.feature];
  const std::size_t replicates = sync.steps.size() >= 2 ? opt.bootstrap : 0;
  const std::vector<StepTimes> boot =
      bootstrap(sync, replicates, mix(opt.seed, 0xB007), [&](const std::vector<std::size_t>& steps) {
        std::vector<double> coef;
        for (const auto& g : groups_by_model) {
          const auto c = nnls_groups(g, steps);
          coef.insert(coef.end(), c.begin(), c.end());
        }
        std::vector<double> ch(s.updates.size(), 0.0);
        for (std::size_t i = 0; i < s.updates.size(); ++i) {
          const double* d = delta.data() + i * width;
          double sum = 0;
          for (std::size_t t = 0; t < width; ++t) sum += coef[t] * d[t];
          ch[i] = s.removed_ms.empty() ? sum : sum - s.removed_ms[i];
        }
        return step_times(sync, ch, steps);
      });

  // Without per-micro-batch detail the interval widens by what the log cannot say: which
  // samples shared a micro-batch (pad: the spread of the predictions over the draws), and
  // how regrouping changes the token slots (group: from unchanged down to no padding).
  std::vector<double> widen;
  if (variant == "pad" && !s.detail)
    for (const auto& ch : per_draw) widen.push_back(median_of(step_times(sync, ch, all_steps(sync)).predicted));
  if (variant == "group" && !s.tokens_known && s.f_slots && s.f_valid) {
    // No padding left: token slots = valid tokens (one row at a time, not a copy of xbar).
    std::vector<double> packed(s.updates.size()), row;
    for (std::size_t i = 0; i < s.updates.size(); ++i) {
      row = xbar[i];
      row[*s.f_slots] = row[*s.f_valid];
      packed[i] = s.change(i, row, coef0);
    }
    widen.push_back(median_of(step_times(sync, packed, all_steps(sync)).predicted));
  }
  finish(p, sync, point, boot, opt.interval, job_samples_per_update(in, sync));
  for (const double w : widen) {
    p.predicted.low_ms = std::min(p.predicted.low_ms, w);
    p.predicted.high_ms = std::max(p.predicted.high_ms, w);
  }
  if (!widen.empty())
    p.notes.push_back(variant == "pad"
                          ? fmt::format("the interval is widened to cover the {} random splits of the updates' samples "
                                        "into micro-batches",
                                        draws)
                          : std::string("the interval is widened down to the prediction with no padding left, since "
                                        "the token slots after regrouping are unknown"));

  // Per region: the mean change over updates (regions whose model uses no changed feature
  // do not change and are not listed).
  for (auto rc : s.affected) {
    if (rc.modeled) {
      const auto it = std::find_if(s.leaves.begin(), s.leaves.end(),
                                   [&](std::size_t i) { return models.models[i].region == rc.region; });
      const RegionModel& m = models.models[*it];
      const bool uses_changed = std::any_of(m.terms.begin(), m.terms.end(), [&](const CostTerm& t) {
        return std::find(s.changed.begin(), s.changed.end(), t.feature) != s.changed.end();
      });
      if (!uses_changed) continue;
      double sum = 0;
      for (std::size_t i = 0; i < s.updates.size(); ++i) sum += m.predict(xbar[i]) - m.predict(s.x[i]);
      rc.change_ms = s.updates.empty() ? 0.0 : sum / static_cast<double>(s.updates.size());
    }
    p.regions.push_back(std::move(rc));
  }
  for (const auto& rc : s.removed) p.regions.push_back(rc);
  p.assumptions = s.assumptions;
  p.assumptions.push_back(
      "each region keeps the unit costs its model measured in this window; the time a parent region spends outside "
      "its children, and regions whose work does not change, stay as measured");
  p.notes.insert(p.notes.begin(), s.notes.begin(), s.notes.end());  // (after the widening's note, not over it)
  return p;
}

// balanced-ranks: every rank does the step's mean work at the median rank's speed.
Prediction balanced_prediction(const AnalysisInput& in, const CostModelSet& models, const WhatIfOptions& opt,
                               const SyncData& sync) {
  Prediction p;
  if (!sync.all_ranks) {
    p.why_not = sync.ranks == 1 && !sync.range  // (range: one rank of a multi-rank job)
                    ? "the job's world size is 1: there are no ranks to balance"
                    : "needs every rank's log (several ranks): give all the ranks' logs of one run";
    return p;
  }
  if (sync.steps.size() < 2) {
    p.why_not = "fewer than two steps are in every rank's log";
    return p;
  }
  p.available = true;
  p.summary = "every rank does the step's mean work, at the median rank's time per unit of work";
  const auto updates = in.updates();
  const FeatureSpace& space = models.space;
  std::vector<std::vector<double>> x;
  for (const auto* u : updates) x.push_back(space.values(*u));
  std::vector<double> compute(updates.size());
  for (std::size_t i = 0; i < updates.size(); ++i) compute[i] = sync.wall[i] - sync.comm[i];

  // Work per update: a cost model of the rank's own work time (same family and selection
  // as the regions' models, no per-call term), with samples always in it.
  std::vector<std::size_t> cand;
  for (const auto f : candidate_features(space, kTopLevel))
    if (space.features[f].kind != Feature::Kind::kCalls) cand.push_back(f);
  const auto all_rows = rows_of(sync, all_steps(sync));
  std::vector<std::size_t> terms;
  std::vector<double> coef;
  if (!cand.empty() && all_rows.size() >= 3) {
    std::vector<double> a(all_rows.size() * cand.size()), b(all_rows.size());
    for (std::size_t r = 0; r < all_rows.size(); ++r) {
      for (std::size_t k = 0; k < cand.size(); ++k) a[r * cand.size() + k] = x[all_rows[r]][cand[k]];
      b[r] = compute[all_rows[r]];
    }
    SelectionOptions so;
    so.min_gain = opt.models.min_gain;
    so.max_columns = opt.models.max_terms;
    if (space.counters.samples)
      if (const auto f = space.find(Feature::Kind::kCounter, *space.counters.samples))
        for (std::size_t k = 0; k < cand.size(); ++k)
          if (cand[k] == *f) so.forced.push_back(k);
    const Selection sel = select_columns(MatrixView{a, all_rows.size(), cand.size()}, b, so);
    for (std::size_t k = 0; k < sel.columns.size(); ++k) {
      terms.push_back(cand[sel.columns[k]]);
      coef.push_back(sel.coef[k]);
    }
  }
  auto work_of = [&](const std::vector<double>& c, std::size_t i) {
    double w = 0;
    for (std::size_t k = 0; k < terms.size(); ++k) w += c[k] * x[i][terms[k]];
    return w;
  };
  auto works = [&](const std::vector<double>& c) {
    std::vector<double> w(updates.size(), 1.0);
    if (terms.empty()) return w;
    for (const auto i : all_rows) w[i] = work_of(c, i);
    for (const auto i : all_rows)
      if (!(w[i] > 0)) return std::vector<double>(updates.size(), 1.0);
    return w;
  };
  std::string work_desc;
  for (std::size_t k = 0; k < terms.size(); ++k) {
    const Feature& f = space.features[terms[k]];
    work_desc += fmt::format("{}{:.4g} ms per {} ({})", work_desc.empty() ? "" : " + ", coef[k], f.unit, f.name);
  }
  const bool equal_work = works(coef) == std::vector<double>(updates.size(), 1.0);

  // Balanced step times for a set of steps and work coefficients.
  auto balanced = [&](const std::vector<std::size_t>& steps, const std::vector<double>& c, std::vector<RankBalance>* table) {
    const std::vector<double> w = works(c);
    std::vector<std::vector<double>> per_rank_ratio(sync.ranks), per_rank_compute(sync.ranks), per_rank_work(sync.ranks);
    for (const std::size_t k : steps)
      for (const auto i : sync.steps[k]) {
        per_rank_ratio[sync.rank_of[i]].push_back(compute[i] / w[i]);
        per_rank_compute[sync.rank_of[i]].push_back(compute[i]);
        per_rank_work[sync.rank_of[i]].push_back(w[i]);
      }
    std::vector<double> speed(sync.ranks), compared_speeds;
    for (std::size_t r = 0; r < sync.ranks; ++r) {
      speed[r] = median_of(per_rank_ratio[r]);
      if (!sync.left_out[r]) compared_speeds.push_back(speed[r]);
    }
    const double typical = median_of(compared_speeds);
    StepTimes t;
    for (const std::size_t k : steps) {
      const auto& ids = sync.steps[k];
      double mean_work = 0, u = 0, cmax = -1e300, cnew = -1e300;
      for (const auto i : ids) mean_work += w[i] / static_cast<double>(ids.size());
      for (const auto i : ids) {
        u = std::max(u, sync.wall[i]);
        cmax = std::max(cmax, compute[i]);
        const double scale = speed[sync.rank_of[i]] > 0 ? typical / speed[sync.rank_of[i]] : 1.0;
        cnew = std::max(cnew, compute[i] * scale * (mean_work / w[i]));
      }
      t.measured.push_back(u);
      t.predicted.push_back(cnew + (u - cmax));
    }
    if (table) {
      double mean_work = 0;
      for (std::size_t r = 0; r < sync.ranks; ++r)
        if (!sync.left_out[r]) mean_work += median_of(per_rank_work[r]) / static_cast<double>(sync.compared);
      std::size_t r = 0;
      for (const auto& log : in.data.ranks) {
        if (log.updates.empty()) continue;
        if (sync.left_out[r]) {  // (a short, late-starting or gapped log: not in the steps compared)
          ++r;
          continue;
        }
        RankBalance rb;
        rb.rank = log.rank.value_or(-1);
        rb.compute_ms = median_of(per_rank_compute[r]);
        rb.work_share = mean_work > 0 ? median_of(per_rank_work[r]) / mean_work : 1.0;
        rb.relative_time = typical > 0 ? speed[r] / typical : 1.0;
        table->push_back(rb);
        ++r;
      }
    }
    return t;
  };
  const StepTimes point = balanced(all_steps(sync), coef, &p.ranks);
  std::vector<double> terms_by_row(updates.size() * terms.size());  // x's work terms, row-major
  for (std::size_t i = 0; i < updates.size(); ++i)
    for (std::size_t k = 0; k < terms.size(); ++k) terms_by_row[i * terms.size() + k] = x[i][terms[k]];
  const GroupedRows work_groups =
      reduce_groups(MatrixView{terms_by_row, updates.size(), terms.size()}, compute, sync.steps);
  const std::vector<StepTimes> boot =
      bootstrap(sync, opt.bootstrap, mix(opt.seed, 0xBA1), [&](const std::vector<std::size_t>& steps) {
        const std::vector<double> c = terms.empty() ? coef : nnls_groups(work_groups, steps);
        return balanced(steps, c, nullptr);
      });
  finish(p, sync, point, boot, opt.interval, job_samples_per_update(in, sync));
  p.assumptions.push_back(
      equal_work ? std::string("work per rank and update is taken as equal (no work counters to measure it)")
                 : fmt::format("the work of a rank in an update is its own-work time predicted from its counters by a "
                               "cost model fitted over all ranks: {}; moving work between ranks keeps each step's "
                               "total",
                               work_desc));
  p.assumptions.push_back(
      "every rank works at the median rank's time per unit of work: a rank slower for its work (a slow GPU, a noisy "
      "neighbour, thermal throttling) is brought to the median, which moving work alone would not do; where ranks "
      "differ only in work, every rank's own work becomes the step's mean");
  p.assumptions.push_back(
      "each rank keeps its update-to-update fluctuations (its own work is scaled, not replaced by the mean), so the "
      "slowest rank of a step still sets the step; the collective's own time is unchanged");
  p.assumptions.push_back(fmt::format(
      "own work is wall_ms minus {0}: work inside {0} (a backward pass overlapped with the gradient all-reduce) is "
      "not balanced, so a straggler's lag there stays in the prediction (docs/whatif.md, Limits)",
      sync.comm_region.empty() ? std::string("the communication region") : sync.comm_region));
  if (sync.compared == 2)
    p.notes.push_back("with two ranks the median rank's speed is the mean of the two: a straggler is only half corrected");
  return p;
}

// A prediction over fewer than few_steps_bound(opt.interval) steps (whatif.hpp gives the
// reason for the bound).
std::string few_steps_note(std::size_t n, bool all_ranks, const WhatIfOptions& opt) {
  const std::string steps =
      fmt::format("{} step{}{}", n, n == 1 ? "" : "s", all_ranks ? " that every rank's log has" : "");
  const std::string total = fmt::format("the saving per 1,000 updates is the mean saving of {} steps times 1,000", n);
  if (opt.bootstrap == 0) return fmt::format("rests on only {}: {}", steps, total);
  // Of n steps, their whole range covers their distribution's median with probability 1 - 2^(1-n).
  const double whole = 1.0 - std::ldexp(1.0, 1 - static_cast<int>(n));
  return fmt::format(
      "rests on only {}: too few for a {:.0f} % interval. The bootstrap resamples steps, and of fewer than {} steps "
      "no interval short of their whole range covers their median with {:.0f} % probability, whatever their "
      "distribution (their whole range: {:.1f} % for {}); the range shown is only the spread of the resampled "
      "medians, and {}",
      steps, opt.interval * 100, few_steps_bound(opt.interval), opt.interval * 100, whole * 100, n, total);
}

}  // namespace

std::string_view scenario_name(Scenario s) {
  switch (s) {
    case Scenario::kBatchedGeometry: return "batched-geometry";
    case Scenario::kNoPadding: return "no-padding";
    case Scenario::kBalancedRanks: return "balanced-ranks";
  }
  return "unknown";
}

std::optional<Scenario> parse_scenario(std::string_view name) {
  for (Scenario s : {Scenario::kBatchedGeometry, Scenario::kNoPadding, Scenario::kBalancedRanks})
    if (scenario_name(s) == name) return s;
  return std::nullopt;
}

WhatIfResult run_whatif(const AnalysisInput& in, const WhatIfOptions& opt) {
  WhatIfResult r;
  r.scenario = opt.scenario;
  r.models = fit_cost_models(in, opt.models);
  r.bootstrap = opt.bootstrap;
  r.interval = opt.interval;
  r.updates = in.data.update_count();
  const SyncData sync = build_sync(in);
  r.ranks = sync.ranks;
  r.sync = sync.description;
  std::size_t without = 0;
  bool composition = false;  // some update has a frame histogram or input shapes to rebuild from
  const UpdateRecord* first_without = nullptr;
  for (const auto* u : in.updates()) {
    if (u->microbatches.empty() && !without++) first_without = u;
    composition = composition || !u->frame_histogram.empty() || !u->input_shapes.empty();
  }
  r.microbatch_detail = r.updates > 0 && without == 0;
  r.detail = r.microbatch_detail ? "per-micro-batch detail in every update: micro-batch composition as recorded"
             : composition
                 ? "no per-micro-batch detail: micro-batches rebuilt from the frame histogram and input_shapes "
                   "(random splits) and intervals widened by what that leaves unknown"
                 // (a profiler trace records none of them: it said "rebuilt from" them)
                 : "no per-micro-batch detail, frame histogram or input_shapes in the logs: the micro-batches' "
                   "composition is unknown";
  // Detail in some updates only: say so, since it is used only when every update has it.
  if (without > 0 && without < r.updates && first_without)
    r.detail += fmt::format(" (the detail is missing from {} of {} updates, the first {}step {}, so none is used)",
                            without, r.updates,
                            first_without->rank ? fmt::format("rank {} ", *first_without->rank) : std::string(),
                            first_without->step);
  if (opt.scenario == Scenario::kBalancedRanks) {
    r.predictions.push_back(balanced_prediction(in, r.models, opt, sync));
  } else if (opt.scenario == Scenario::kNoPadding) {
    r.predictions.push_back(replay_prediction(in, r.models, opt, "", sync));
  } else {
    const std::vector<std::string> variants =
        opt.variant.empty() ? std::vector<std::string>{"pad", "group"} : std::vector<std::string>{opt.variant};
    for (const auto& v : variants) r.predictions.push_back(replay_prediction(in, r.models, opt, v, sync));
  }
  // The replays (not balanced-ranks, which says it of own work): an audit found no-padding's
  // saving a third of what the job saved, the backward pass inside the communication
  // region scaling with token slots as the forward does.
  if (opt.scenario != Scenario::kBalancedRanks && !sync.comm_region.empty())
    for (auto& p : r.predictions)
      p.assumptions.push_back(fmt::format(
          "{0} is not modeled (its time is mostly waiting): compute inside it whose work changes (a backward pass "
          "overlapped with its all-reduce scales with the forward pass's work) is not priced, so the saving leaves "
          "that part out",
          sync.comm_region));
  r.steps = sync.steps.size();
  for (auto& p : r.predictions) {
    p.assumptions.push_back(sync.description);
    for (const auto& n : sync.notes) p.notes.push_back(n);
    if (p.available && r.steps < few_steps_bound(opt.interval)) p.notes.push_back(few_steps_note(r.steps, sync.all_ranks, opt));
  }
  return r;
}

}  // namespace stepprof
