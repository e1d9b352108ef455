#include "stepprof/analysis/cost_model.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "stepprof/analysis/least_squares.hpp"
#include "stepprof/analysis/waiting.hpp"
#include "stepprof/schema.hpp"
#include "../util/parallel.hpp"

namespace stepprof {
namespace {

std::string unit_of_counter(std::string_view name) {
  namespace c = schema::counter;
  if (name == c::kTokenSlots) return "token slot";
  if (name == c::kValidTokens) return "valid token";
  if (name == c::kSupervisedTokens) return "supervised token";
  if (name == c::kMicroSteps) return "micro-batch";
  auto ends = [&](std::string_view s) { return name.size() >= s.size() && name.substr(name.size() - s.size()) == s; };
  if (ends("frames")) return "frame";
  if (ends("samples")) return "sample";
  if (ends("microbatches")) return "micro-batch";
  return "count";
}

bool every_update_has_path_frames(const Dataset& data) {
  bool any = false;
  for (const auto& r : data.ranks)
    for (const auto& u : r.updates) {
      if (u.microbatches.empty()) return false;
      for (const auto& mb : u.microbatches)
        if (!mb.path || (mb.frames.empty() && mb.samples() > 0)) return false;
      any = true;
    }
  return any;
}

bool any_histogram(const Dataset& data) {
  for (const auto& r : data.ranks)
    for (const auto& u : r.updates)
      if (!u.frame_histogram.empty()) return true;
  return false;
}

}  // namespace

std::optional<std::size_t> FeatureSpace::find(Feature::Kind kind, NameTable::Id id) const {
  if (kind == Feature::Kind::kCalls) {
    if (id < calls_feature.size() && calls_feature[id] != kNone) return calls_feature[id];
    return std::nullopt;
  }
  // The work features come first and are few; the kCalls features after them may be
  // thousands (one per region), so the scan stops there.
  for (std::size_t i = 0; i < features.size() && features[i].kind != Feature::Kind::kCalls; ++i)
    if (features[i].kind == kind && (kind == Feature::Kind::kFramesSq || features[i].id == id)) return i;
  return std::nullopt;
}

std::vector<double> FeatureSpace::values(const UpdateRecord& u) const {
  std::vector<double> x(features.size(), 0.0);
  // The update's own regions' calls (in reverse: the first entry of a region wins, as in
  // UpdateRecord::region), not every region's feature looked up in the update.
  for (auto r = u.regions.rbegin(); r != u.regions.rend(); ++r)
    if (r->region < calls_feature.size() && calls_feature[r->region] != kNone)
      x[calls_feature[r->region]] = static_cast<double>(r->calls.value_or(0));
  for (std::size_t i = 0; i < features.size(); ++i) {
    const Feature& f = features[i];
    switch (f.kind) {
      case Feature::Kind::kCounter: x[i] = u.counter(f.id).value_or(0.0); break;
      case Feature::Kind::kCalls: break;
      case Feature::Kind::kFramesSq:
        for (const auto& [frames, samples] : u.frame_histogram)
          x[i] += static_cast<double>(frames) * static_cast<double>(frames) * static_cast<double>(samples);
        break;
      case Feature::Kind::kPathFramesSq:
      case Feature::Kind::kPathFrames:
      case Feature::Kind::kPathSamples:
      case Feature::Kind::kPathMicrobatches:
        for (const auto& mb : u.microbatches) {
          if (mb.path != f.id) continue;
          if (f.kind == Feature::Kind::kPathMicrobatches) x[i] += 1;
          else if (f.kind == Feature::Kind::kPathSamples) x[i] += static_cast<double>(mb.samples());
          else
            for (const std::int64_t fr : mb.frames)
              x[i] += f.kind == Feature::Kind::kPathFrames ? static_cast<double>(fr)
                                                           : static_cast<double>(fr) * static_cast<double>(fr);
        }
        break;
    }
  }
  return x;
}

std::optional<std::size_t> FeatureSpace::path_feature(const PathCounters& p, PathWork what) const {
  if (p.work_from_microbatches) {
    if (!p.id) return std::nullopt;
    return find(what == PathWork::kFrames    ? Feature::Kind::kPathFrames
                : what == PathWork::kSamples ? Feature::Kind::kPathSamples
                                             : Feature::Kind::kPathMicrobatches,
                *p.id);
  }
  const auto& id = what == PathWork::kFrames ? p.frames : what == PathWork::kSamples ? p.samples : p.microbatches;
  return id ? find(Feature::Kind::kCounter, *id) : std::nullopt;
}

double RegionModel::predict(std::span<const double> x) const {
  double t = 0;
  for (const auto& term : terms) t += term.ms_per_unit * x[term.feature];
  return t;
}

const RegionModel* CostModelSet::find(std::string_view region) const {
  for (const auto& m : models)
    if (m.region == region) return &m;
  return nullptr;
}

FeatureSpace build_feature_space(const AnalysisInput& in) {
  namespace c = schema::counter;
  FeatureSpace s;
  s.counters.samples = in.counter(c::kSamples);
  s.counters.frames = in.counter(c::kFrames);
  s.counters.token_slots = in.counter(c::kTokenSlots);
  s.counters.valid_tokens = in.counter(c::kValidTokens);
  s.counters.supervised_tokens = in.counter(c::kSupervisedTokens);
  s.counters.micro_steps = in.counter(c::kMicroSteps);
  s.microbatch_frames = every_update_has_path_frames(in.data);

  auto add_counter = [&](std::optional<NameTable::Id> id) {
    if (!id || s.find(Feature::Kind::kCounter, *id)) return;
    const std::string name(in.data.counters.name(*id));
    s.features.push_back({Feature::Kind::kCounter, *id, name, unit_of_counter(name)});
  };
  add_counter(s.counters.token_slots);
  add_counter(s.counters.valid_tokens);
  add_counter(s.counters.frames);
  add_counter(s.counters.samples);
  if (any_histogram(in.data)) s.features.push_back({Feature::Kind::kFramesSq, 0, "frames_sq", "frame^2"});
  add_counter(s.counters.supervised_tokens);
  add_counter(s.counters.micro_steps);

  if (in.hierarchy)
    for (const auto& [group, nodes] : in.hierarchy->alternatives())
      for (const auto* node : nodes) {
        PathCounters p;
        p.region = node->name;
        p.group = group;
        p.id = in.region(node->name);
        p.samples = in.counter(node->samples());
        p.frames = in.counter(node->frames());
        p.microbatches = in.counter(node->microbatches());
        p.work_from_microbatches = s.microbatch_frames && p.id && !p.samples && !p.frames && !p.microbatches;
        auto add_detail = [&](Feature::Kind kind, std::string name, const char* unit) {
          if (p.work_from_microbatches) s.features.push_back({kind, *p.id, std::move(name), unit});
        };
        add_counter(p.frames);
        add_detail(Feature::Kind::kPathFrames, node->frames(), "frame");
        add_counter(p.samples);
        add_detail(Feature::Kind::kPathSamples, node->samples(), "sample");
        if (s.microbatch_frames && p.id)
          s.features.push_back({Feature::Kind::kPathFramesSq, *p.id, node->name + "_frames_sq", "frame^2"});
        add_counter(p.microbatches);
        add_detail(Feature::Kind::kPathMicrobatches, node->microbatches(), "micro-batch");
        s.paths.push_back(std::move(p));
      }
  // (A region is listed once per update: the reader refuses a repeated key.)
  s.region_updates.assign(in.data.regions.size(), 0);
  for (const auto& r : in.data.ranks)
    for (const auto& u : r.updates)
      for (const auto& sample : u.regions)
        if (sample.region < s.region_updates.size()) ++s.region_updates[sample.region];
  const std::size_t least = std::min(kMinUpdates, in.data.update_count());
  s.calls_feature.assign(in.data.regions.size(), FeatureSpace::kNone);
  for (NameTable::Id id = 0; id < in.data.regions.size(); ++id)
    if (s.region_updates[id] >= least) {
      s.calls_feature[id] = s.features.size();
      s.features.push_back({Feature::Kind::kCalls, id, "calls", "call"});
    }
  return s;
}

std::vector<std::size_t> candidate_features(const FeatureSpace& space, NameTable::Id region) {
  std::vector<std::size_t> out;
  auto add = [&](std::optional<std::size_t> i) {
    if (i && std::find(out.begin(), out.end(), *i) == out.end()) out.push_back(*i);
  };
  auto counter = [&](std::optional<NameTable::Id> id) {
    return id ? space.find(Feature::Kind::kCounter, *id) : std::nullopt;
  };
  auto path_work = [&](const PathCounters& p) {
    add(space.path_feature(p, PathWork::kFrames));
    add(space.path_feature(p, PathWork::kSamples));
    if (p.id) add(space.find(Feature::Kind::kPathFramesSq, *p.id));
    add(space.path_feature(p, PathWork::kMicrobatches));
  };
  const auto path = std::find_if(space.paths.begin(), space.paths.end(),
                                 [&](const PathCounters& p) { return p.id == region; });
  if (path != space.paths.end()) {
    path_work(*path);
  } else {
    add(space.find(Feature::Kind::kCalls, region));
    const auto& c = space.counters;
    add(counter(c.token_slots));
    add(counter(c.valid_tokens));
    add(counter(c.frames));
    add(counter(c.samples));
    add(space.find(Feature::Kind::kFramesSq, 0));
    add(counter(c.supervised_tokens));
    add(counter(c.micro_steps));
    for (const auto& p : space.paths) path_work(p);
  }
  add(space.find(Feature::Kind::kCalls, region));
  return out;
}

double region_time(const UpdateRecord& u, NameTable::Id region, bool device) {
  return region_ms(u, region, device).value_or(0.0);
}

namespace {

// RegionModel::choice_set_by: the selection run again without each update in turn, its
// chosen columns compared (as a set) with those of all updates. `a` is the updates x
// candidates matrix the model was selected on, `y` its times.
void check_choice(RegionModel& m, const std::vector<double>& a, const std::vector<double>& y,
                  const SelectionOptions& so, const Selection& all, const std::vector<const UpdateRecord*>& updates) {
  const std::size_t n = y.size(), cols = m.candidates.size();
  std::vector<std::size_t> chosen = all.columns;
  std::sort(chosen.begin(), chosen.end());
  std::vector<double> a_without((n - 1) * cols), y_without(n - 1);
  for (std::size_t out = 0; out < n; ++out) {
    for (std::size_t r = 0, w = 0; r < n; ++r) {
      if (r == out) continue;
      std::copy_n(a.begin() + static_cast<std::ptrdiff_t>(r * cols), cols,
                  a_without.begin() + static_cast<std::ptrdiff_t>(w * cols));
      y_without[w++] = y[r];
    }
    const Selection sel = select_columns(MatrixView{a_without, n - 1, cols}, y_without, so);
    std::vector<std::size_t> columns = sel.columns;
    std::sort(columns.begin(), columns.end());
    if (columns == chosen) continue;
    RegionModel::ChoiceFlip flip{updates[out]->rank, updates[out]->step, {}};
    for (const std::size_t c : sel.columns) flip.terms.push_back(m.candidates[c]);
    m.choice_set_by.push_back(std::move(flip));
  }
  m.choice_checked = true;
}

}  // namespace

CostModelSet fit_cost_models(const AnalysisInput& in, const CostModelOptions& options) {
  CostModelSet set;
  set.threshold = options.threshold;
  set.space = build_feature_space(in);
  const auto updates = in.updates();
  set.updates = updates.size();
  set.heldout_method = updates.size() <= kExactLooRows
                           ? "exact refits"
                           : fmt::format("PRESS shortcut (more than {} updates)", kExactLooRows);
  const auto comm = find_comm_region(in);
  if (comm) set.comm_region = std::string(in.data.regions.name(comm->id));

  std::vector<std::vector<double>> x;
  x.reserve(updates.size());
  for (const auto* u : updates) x.push_back(set.space.values(*u));

  // The time of each region in fewer than kMinUpdates updates, summed over its samples
  // (one pass; looking each one up in every update took 12 s for 50,000 such regions).
  // Device time where any update has it, else host time (AnalysisInput::has_device_time).
  std::vector<double> rare_sum(in.data.regions.size(), 0.0);
  std::vector<char> rare_device(in.data.regions.size(), 0);
  auto rare = [&](const RegionSample& s) {
    return s.region < rare_sum.size() && set.space.calls_feature[s.region] == FeatureSpace::kNone;
  };
  for (const auto* u : updates)
    for (const auto& s : u->regions)
      if (rare(s) && s.device_ms) rare_device[s.region] = 1;
  for (const auto* u : updates)
    for (const auto& s : u->regions)
      if (rare(s)) rare_sum[s.region] += std::max(0.0, (rare_device[s.region] ? s.device_ms : s.host_ms).value_or(0.0));
  // Each region's model is fitted on its own (on several threads: the held-out error of
  // every candidate set is a least-squares solve over all updates); kept in region order.
  auto fit_region = [&](NameTable::Id id) -> std::optional<RegionModel> {
    RegionModel m;
    m.region = std::string(in.data.regions.name(id));
    m.id = id;
    m.device = in.has_device_time(id);
    m.updates = updates.size();
    if (set.space.calls_feature[id] == FeatureSpace::kNone) {  // (in fewer than kMinUpdates updates)
      if (!(rare_sum[id] > 0)) return std::nullopt;  // (never ran, as below)
      m.mean_ms = rare_sum[id] / static_cast<double>(updates.size());
      m.why_not = fmt::format("listed in {} of the {} updates: at least {} are needed", set.space.region_updates[id],
                              updates.size(), kMinUpdates);
      return m;
    }
    std::vector<double> y;
    y.reserve(updates.size());
    for (const auto* u : updates) y.push_back(region_time(*u, id, m.device));
    // A region that never ran (e.g. only a path name) gets no model.
    if (std::none_of(y.begin(), y.end(), [](double t) { return t > 0; })) return std::nullopt;
    double sum = 0;
    for (double t : y) sum += t;
    m.mean_ms = sum / static_cast<double>(y.size());
    if (comm && comm->id == id) {
      m.why_not = "communication region: its time is mostly waiting for other ranks (the what-ifs model it apart)";
      return m;
    }
    if (in.hierarchy && in.hierarchy->in_background(m.region)) {
      m.why_not = "background region: it runs beside the updates on its own thread (a data loader), so its time is "
                  "not part of an update's";
      return m;
    }
    m.candidates = candidate_features(set.space, id);
    if (updates.size() < 3) {
      m.why_not = fmt::format("fitted on {} update(s): at least {} are needed", updates.size(), kMinUpdates);
      return m;
    }
    std::vector<double> a(updates.size() * m.candidates.size());
    for (std::size_t r = 0; r < updates.size(); ++r)
      for (std::size_t k = 0; k < m.candidates.size(); ++k) a[r * m.candidates.size() + k] = x[r][m.candidates[k]];
    SelectionOptions so;
    so.min_gain = options.min_gain;
    so.max_columns = options.max_terms;
    // The model to beat: a path's cost per unit of its own work (its first candidate), any
    // other region's cost per call.
    const bool is_path = std::any_of(set.space.paths.begin(), set.space.paths.end(),
                                     [&](const PathCounters& p) { return p.id == id; });
    const auto calls = set.space.find(Feature::Kind::kCalls, id);
    for (std::size_t k = 0; k < m.candidates.size(); ++k)
      if (is_path ? k == 0 : m.candidates[k] == calls) so.baseline = k;
    const Selection sel = select_columns(MatrixView{a, updates.size(), m.candidates.size()}, y, so);
    for (std::size_t k = 0; k < sel.columns.size(); ++k) m.terms.push_back({m.candidates[sel.columns[k]], sel.coef[k]});
    for (const auto& step : sel.steps) m.selection.emplace_back(m.candidates[step.column], step.heldout_rmse);
    m.r2 = sel.r2;
    m.heldout_rmse_ms = sel.heldout_rmse;
    m.heldout_fraction = m.mean_ms > 0 ? m.heldout_rmse_ms / m.mean_ms : 0;
    if (m.terms.empty())
      m.why_not = "no feature gets a positive cost";
    else if (updates.size() < kMinUpdates)
      m.why_not = fmt::format("fitted on {} updates: at least {} are needed", updates.size(), kMinUpdates);
    else if (m.heldout_fraction > options.threshold) {
      // The threshold as given (10 significant digits), the error with as many decimals as
      // show it above the threshold as shown ("3 % ... above the 0 % threshold" for
      // --threshold 0.001; "1.103 % ... above the 1.103 %" for 0.0110299999).
      const std::string threshold = fmt::format("{:.10g}", options.threshold * 100);
      const double shown_threshold = std::stod(threshold), error = m.heldout_fraction * 100;
      int decimals = 0;
      while (decimals < 15 && !(std::stod(fmt::format("{:.{}f}", error, decimals)) > shown_threshold)) ++decimals;
      // With the error in ms and the option that takes it: a near-free fast path (0.036 ms
      // of error on 0.032 ms) failed the relative test with 94.8 ms per update at stake,
      // and the user was not told the threshold is an option (a helper).
      m.why_not = fmt::format(
          "held-out error {:.{}f} % of its mean time is above the {} % threshold ({:.3g} ms of {:.3g} ms per update; "
          "--threshold {:.2f} would take it)",
          error, decimals, threshold, m.heldout_rmse_ms, m.mean_ms, std::ceil(m.heldout_fraction * 100) / 100);
    }
    else
      m.usable = true;
    if (m.usable && updates.size() <= kChoiceCheckUpdates) check_choice(m, a, y, so, sel, updates);
    return m;
  };
  std::vector<std::optional<RegionModel>> fitted(in.data.regions.size());
  // Each job holds an (updates x candidates) matrix: at most 4 at a time.
  detail::parallel_for(fitted.size(), updates.size() >= 1000 ? detail::threads_at_most(4) : 1,
                       [&](std::size_t id) { fitted[id] = fit_region(static_cast<NameTable::Id>(id)); });
  for (auto& m : fitted)
    if (m) set.models.push_back(std::move(*m));
  return set;
}

std::vector<double> term_rows(const RegionModel& model, const std::vector<std::vector<double>>& x) {
  const std::size_t k = model.terms.size();
  std::vector<double> out(x.size() * k);
  for (std::size_t i = 0; i < x.size(); ++i)
    for (std::size_t j = 0; j < k; ++j) out[i * k + j] = x[i][model.terms[j].feature];
  return out;
}

}  // namespace stepprof
