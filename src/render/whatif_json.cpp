// `stepprof whatif --format json` (schema "stepprof.whatif/1", docs/whatif.md "JSON").
#include "json_common.hpp"
#include "stepprof/render/render.hpp"

namespace stepprof {
namespace {

using detail::Json;
using detail::opt;

Json interval(const Interval& iv) { return Json{{"median", iv.median_ms}, {"low", iv.low_ms}, {"high", iv.high_ms}}; }

std::string kind_name(Feature::Kind k) {
  switch (k) {
    case Feature::Kind::kCalls: return "calls";
    case Feature::Kind::kCounter: return "counter";
    case Feature::Kind::kFramesSq: return "frames_squared";
    case Feature::Kind::kPathFramesSq: return "path_frames_squared";
    case Feature::Kind::kPathFrames: return "path_frames";
    case Feature::Kind::kPathSamples: return "path_samples";
    case Feature::Kind::kPathMicrobatches: return "path_microbatches";
  }
  return "unknown";
}

Json models(const CostModelSet& set) {
  Json rows = Json::array();
  auto feature = [&](std::size_t i) {
    const Feature& f = set.space.features[i];
    return Json{{"feature", f.name}, {"kind", kind_name(f.kind)}, {"unit", f.unit}};
  };
  for (const auto& m : set.models) {
    Json terms = Json::array();
    for (const auto& t : m.terms) {
      Json j = feature(t.feature);
      j["ms_per_unit"] = t.ms_per_unit;
      terms.push_back(std::move(j));
    }
    Json candidates = Json::array();
    for (const auto c : m.candidates) candidates.push_back(set.space.features[c].name);
    Json selection = Json::array();
    for (const auto& [f, err] : m.selection) selection.push_back({{"feature", set.space.features[f].name}, {"heldout_rmse_ms", err}});
    Json choice = nullptr;  // (not checked: null)
    if (m.choice_checked) {
      Json set_by = Json::array();
      for (const auto& u : m.choice_set_by) {
        Json chosen = Json::array();
        for (const auto f : u.terms) chosen.push_back(set.space.features[f].name);
        set_by.push_back({{"rank", opt(u.rank)}, {"step", u.step}, {"terms", chosen}});
      }
      choice = {{"set_by", set_by}};
    }
    rows.push_back({{"region", m.region},
                    {"clock", m.device ? "device" : "host"},
                    {"updates", m.updates},
                    {"mean_ms", m.mean_ms},
                    {"terms", terms},
                    {"r2", opt(m.r2)},
                    {"heldout_rmse_ms", m.terms.empty() ? Json(nullptr) : Json(m.heldout_rmse_ms)},
                    {"heldout_fraction", m.terms.empty() ? Json(nullptr) : Json(m.heldout_fraction)},
                    {"usable", m.usable},
                    {"why_not", m.usable ? Json(nullptr) : Json(m.why_not)},
                    {"candidates", candidates},
                    {"selection", selection},
                    {"choice", choice}});
  }
  return Json{{"threshold_fraction", set.threshold},
              {"updates", set.updates},
              {"heldout_method", set.heldout_method},
              {"comm_region", set.comm_region.empty() ? Json(nullptr) : Json(set.comm_region)},
              {"microbatch_frames", set.space.microbatch_frames},
              {"regions", rows}};
}

Json prediction(const Prediction& p) {
  Json regions = Json::array();
  for (const auto& r : p.regions)
    regions.push_back({{"region", r.region},
                       {"measured_ms", r.measured_ms},
                       {"change_ms", r.modeled || r.removed ? Json(r.change_ms) : Json(nullptr)},
                       {"modeled", r.modeled},
                       {"removed", r.removed},
                       {"note", r.note.empty() ? Json(nullptr) : Json(r.note)}});
  Json ranks = Json::array();
  for (const auto& r : p.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"compute_ms", r.compute_ms},
                     {"work_share_fraction", r.work_share},
                     {"relative_time", r.relative_time}});
  Json updates = Json::array();
  for (const auto& u : p.updates)
    updates.push_back({{"step", u.step},
                       {"measured_ms", u.measured_ms},
                       {"predicted_ms", u.predicted_ms},
                       {"only_this_rank_ms", opt(u.only_this_rank_ms)}});
  auto per_s = [&](double ms) -> Json {
    if (!p.samples_per_update || ms <= 0) return nullptr;
    return *p.samples_per_update / ms * 1000;
  };
  Json j{{"variant", p.variant.empty() ? Json(nullptr) : Json(p.variant)},
         {"available", p.available},
         {"why_not", p.available ? Json(nullptr) : Json(p.why_not)}};
  if (!p.available) return j;
  j["summary"] = p.summary;
  j["range"] = p.range;
  j["measured_update_ms"] = interval(p.measured);
  j["predicted_update_ms"] = interval(p.predicted);
  j["only_this_rank_update_ms"] = p.only_this_rank ? interval(*p.only_this_rank) : Json(nullptr);
  j["saved_ms_per_update"] = p.saved_ms;
  j["saved_fraction"] = p.measured.median_ms > 0 ? Json(p.saved_ms / p.measured.median_ms) : Json(nullptr);
  j["saved_mean_ms_per_update"] = p.saved_mean_ms;
  j["saved_s_per_1000_updates"] = p.saved_mean_ms;  // mean ms per update x 1000 updates / 1000 ms per s
  j["only_this_rank_saved_ms_per_update"] = opt(p.saved_only_ms);
  j["only_this_rank_saved_mean_ms_per_update"] = opt(p.saved_only_mean_ms);
  j["samples_per_update"] = opt(p.samples_per_update);
  j["throughput"] = {{"measured_samples_per_s", per_s(p.measured.median_ms)},
                     {"predicted_samples_per_s", per_s(p.predicted.median_ms)},
                     {"only_this_rank_samples_per_s", p.only_this_rank ? per_s(p.only_this_rank->median_ms) : Json(nullptr)}};
  j["regions"] = regions;
  j["ranks"] = ranks;
  j["assumptions"] = p.assumptions;
  j["notes"] = p.notes;
  j["updates"] = updates;
  return j;
}

}  // namespace

std::string render_whatif_json(const WhatIfResult& r, const Diagnostics& diag) {
  Json predictions = Json::array();
  for (const auto& p : r.predictions) predictions.push_back(prediction(p));
  Json j{{"schema", "stepprof.whatif/1"},
         {"analyzed", true},
         {"scenario", std::string(scenario_name(r.scenario))},
         {"ranks", r.ranks},
         {"updates", r.updates},
         {"steps", r.steps},
         {"microbatch_detail", r.microbatch_detail},
         {"detail", r.detail},
         {"sync", r.sync},
         {"bootstrap", r.bootstrap},
         {"interval_fraction", r.bootstrap ? Json(r.interval) : Json(nullptr)},  // (no bootstrap: no interval)
         {"cost_models", models(r.models)},
         {"predictions", predictions},
         {"diagnostics", detail::diagnostics_json(diag)}};
  return detail::dump_json(j);
}

std::string render_whatif_json_unanalyzed(const Diagnostics& diag) {
  return detail::dump_json(detail::unanalyzed_json("stepprof.whatif/1", diag));
}

}  // namespace stepprof
