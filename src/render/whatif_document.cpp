// The layout of `stepprof whatif` (and of the what-if section of the HTML report): the
// cost models, then each prediction with its interval, savings, region changes,
// assumptions and notes. Shared by the text, markdown and HTML renderers.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "document.hpp"
#include "format.hpp"
#include "many_ranks.hpp"

namespace stepprof::detail {
namespace {

// `central` is the bootstrap interval's coverage, 0 with --bootstrap 0: a range is then
// only the widening for what the log leaves unknown (docs/whatif.md), not a 90 % interval.
// `steps`: the steps the bootstrap resampled; below few_steps_bound(central) its range is no
// interval of that probability.
std::string interval(const Interval& iv, double central, std::size_t steps) {
  if (iv.low_ms == iv.high_ms && iv.low_ms == iv.median_ms) return ms(iv.median_ms);  // no interval (--bootstrap 0)
  if (central == 0)
    return fmt::format("{} (from {} to {}: what the log leaves unknown; no bootstrap)", ms(iv.median_ms),
                       num(iv.low_ms), num(iv.high_ms));
  if (steps < few_steps_bound(central))
    return fmt::format("{} (bootstrap range {} .. {} over only {} step{}: not a {:.0f} % interval)", ms(iv.median_ms),
                       num(iv.low_ms), num(iv.high_ms), steps, steps == 1 ? "" : "s", central * 100);
  return fmt::format("{} ({:.0f} % interval {} .. {})", ms(iv.median_ms), central * 100, num(iv.low_ms),
                     num(iv.high_ms));
}

// `saved_ms`: the difference of the medians; `mean_ms`: the mean per-update saving,
// which gives the total over 1,000 updates.
// Where the median saving is under half the mean (a change to a third of the updates
// leaves the median update as it was; or the longest updates save most), the mean leads: "saved 0.0 ms per update" was the
// headline of a what-if that saves 11 ms per update on average.
std::string saving(double saved_ms, double mean_ms, double measured_ms) {
  const std::string per_1000 = std::fabs(mean_ms) * 1000 / 60000 >= 1 ? fmt::format("{:.1f} min", mean_ms * 1000 / 60000)
                                                                      : fmt::format("{:.1f} s", mean_ms);
  if (mean_ms > 0 && saved_ms < 0.5 * mean_ms) {
    const double frac = measured_ms > 0 ? mean_ms / measured_ms : 0;
    return fmt::format("{} per update on average ({} of the median update; mean over the updates), {} per 1,000 "
                       "updates; the median update {} ({}: the time is saved in the updates away from the median, "
                       "such as the fewer or the longer ones)",
                       ms(mean_ms), pct(frac), per_1000,
                       saved_ms == 0  ? std::string("is unchanged")
                       : saved_ms > 0 ? "saves " + ms(saved_ms)
                                      : "is " + ms(-saved_ms) + " longer",
                       "difference of the medians");
  }
  const double frac = measured_ms > 0 ? saved_ms / measured_ms : 0;
  // The other way round (an audit: 226 ms by the medians, 102 by the mean, unexplained).
  const std::string why =
      saved_ms > 0 && mean_ms < 0.5 * saved_ms ? "; the mean is under half of it: some updates save much less, or take longer, so "
                                 "the total over 1,000 updates follows the mean"
                               : "";
  return fmt::format("{} per update ({}, difference of the medians), {} per 1,000 updates (mean {} per update{})",
                     ms(saved_ms), pct(frac), per_1000, ms(mean_ms), why);
}

std::string rate(std::optional<double> samples, double update_ms) {
  if (!samples || update_ms <= 0) return "-";
  return sig3(*samples / update_ms * 1000);
}

std::string term_text(const CostModelSet& set, const RegionModel& m) {
  if (m.terms.empty()) return "-";
  std::string s;
  for (const auto& t : m.terms) {
    const Feature& f = set.space.features[t.feature];
    const std::string what = f.kind == Feature::Kind::kCalls ? std::string() : " (" + f.name + ")";
    s += fmt::format("{}{} ms/{}{}", s.empty() ? "" : " + ", sig3(t.ms_per_unit), f.unit, what);
  }
  return s;
}

Table models_table(const CostModelSet& set) {
  Table t{{"region", "used", "mean ms", "held-out error", "R²", "cost per unit of work"}, {}, {}};
  for (const auto& m : set.models)
    t.rows.push_back({m.region + (m.device ? "" : " (host)"), m.usable ? "yes" : "no", num(m.mean_ms),
                      m.terms.empty() ? "-" : fmt::format("{} ms ({})", num(m.heldout_rmse_ms), pct(m.heldout_fraction)),
                      m.r2 ? fmt::format("{:.2f}", std::abs(*m.r2) < 0.005 ? 0.0 : *m.r2) : "-", term_text(set, m)});
  t.text_last = true;
  return t;
}

std::vector<Block> model_blocks(const CostModelSet& set) {
  std::vector<Block> out;
  out.emplace_back(Paragraph{fmt::format(
      "Each region's time per update (device time where recorded, else host time) = sum of non-negative costs per "
      "unit of work (NNLS, Lawson & Hanson); features chosen by forward selection on the leave-one-update-out error "
      "({}, {} update{}); a model is used only if that held-out error is at most {} of the region's mean time.",
      set.heldout_method, set.updates, set.updates == 1 ? "" : "s", fmt::format("{:.10g} %", set.threshold * 100))});
  out.emplace_back(models_table(set));
  Fields why;
  for (const auto& m : set.models)
    if (!m.usable) why.items.emplace_back("not used: " + m.region, m.why_not);
  if (!why.items.empty()) out.emplace_back(std::move(why));
  return out;
}

std::string prediction_title(const WhatIfResult& r, const Prediction& p) {
  return p.variant.empty() ? std::string(scenario_name(r.scenario))
                           : fmt::format("{} ({})", scenario_name(r.scenario), p.variant);
}

std::vector<Block> prediction_blocks(const WhatIfResult& r, const Prediction& p) {
  std::vector<Block> out;
  if (!p.available) {
    out.emplace_back(Paragraph{"Not available: " + p.why_not});
    return out;
  }
  Fields f;
  const double central = r.bootstrap ? r.interval : 0.0;  // (0: no bootstrap interval, see interval())
  f.items.emplace_back("change", p.summary);
  f.items.emplace_back("measured update time", interval(p.measured, central, r.steps));
  if (p.range && p.only_this_rank) {
    f.items.emplace_back("predicted (only this rank)", interval(*p.only_this_rank, central, r.steps));
    f.items.emplace_back("predicted (every rank)", interval(p.predicted, central, r.steps));
    f.items.emplace_back("saved (only this rank)", saving(*p.saved_only_ms, p.saved_only_mean_ms.value_or(*p.saved_only_ms), p.measured.median_ms));
    f.items.emplace_back("saved (every rank)", saving(p.saved_ms, p.saved_mean_ms, p.measured.median_ms));
    f.items.emplace_back("range", "\"only this rank\": this rank improves and the others do not; \"every rank\": every "
                                  "rank improves alike");
  } else {
    f.items.emplace_back("predicted update time", interval(p.predicted, central, r.steps));
    f.items.emplace_back("saved", saving(p.saved_ms, p.saved_mean_ms, p.measured.median_ms));
  }
  if (p.samples_per_update) {
    std::string tp = fmt::format("{} samples/s measured -> {} predicted", rate(p.samples_per_update, p.measured.median_ms),
                                 rate(p.samples_per_update, p.predicted.median_ms));
    if (p.range && p.only_this_rank)
      tp = fmt::format("{} samples/s measured -> {} .. {} predicted", rate(p.samples_per_update, p.measured.median_ms),
                       // (the range low to high: a slow-down reverses which end is which)
                       rate(p.samples_per_update, std::max(p.only_this_rank->median_ms, p.predicted.median_ms)),
                       rate(p.samples_per_update, std::min(p.only_this_rank->median_ms, p.predicted.median_ms)));
    f.items.emplace_back("throughput (job)",
                         tp + fmt::format(" ({} samples per update, at the median update time; the report's "
                                          "throughput is over the whole window, at the mean)",
                                          integer(*p.samples_per_update)));
  }
  out.emplace_back(std::move(f));
  if (!p.regions.empty()) {
    Table t{{"region whose work changes", "measured ms/update", "change ms/update", "priced by its model"}, {}, {}};
    for (const auto& rc : p.regions)
      t.rows.push_back({rc.region, num(rc.measured_ms), rc.modeled || rc.removed ? num(rc.change_ms) : "-",
                        rc.modeled ? "yes" : rc.removed ? "no: removed as measured" : "no"});
    out.emplace_back(std::move(t));
  }
  if (!p.ranks.empty()) {
    Table t{{"rank", "own work ms (median)", "work vs mean rank", "time per unit of work vs median rank"}, {}, {}};
    // Of many ranks, the slowest and the fastest by own work, as in the report.
    auto own_work = [&](std::size_t i) { return p.ranks[i].compute_ms; };
    const auto shown = rows_that_matter(p.ranks.size(), own_work, [](std::size_t) { return false; });
    std::vector<std::size_t> rows;
    if (shown) rows = *shown;
    else
      for (std::size_t i = 0; i < p.ranks.size(); ++i) rows.push_back(i);
    for (const std::size_t i : rows) {
      const auto& rb = p.ranks[i];
      t.rows.push_back({std::to_string(rb.rank), num(rb.compute_ms), fmt::format("{:.3f}x", rb.work_share),
                        fmt::format("{:.2f}x", rb.relative_time)});
    }
    out.emplace_back(std::move(t));
    if (shown) out.emplace_back(rows_left_out(p.ranks.size(), *shown, own_work, [](std::size_t) { return false; }, "median own work"));
  }
  Fields rests;
  for (const auto& s : p.assumptions) rests.items.emplace_back("assumption", s);
  for (const auto& s : p.notes) rests.items.emplace_back("weak point", s);
  out.emplace_back(std::move(rests));
  return out;
}

}  // namespace

Document build_whatif_document(const WhatIfResult& r, const Diagnostics& diag) {
  Document d;
  d.title = fmt::format("stepprof whatif {}", scenario_name(r.scenario));
  Section in{"input", "1. Input", {}};
  Fields f;
  f.items.emplace_back("updates", fmt::format("{} update record(s) of {} rank(s)", r.updates, r.ranks));
  f.items.emplace_back("micro-batches", r.detail);
  f.items.emplace_back("synchronization", r.sync);
  std::string intervals = r.bootstrap ? fmt::format("{:.0f} % percentile bootstrap over the {} step{}, {} replicates "
                                                     "(models refitted on each): they cover the cost models' fit and "
                                                     "the sample of steps, not the assumptions below",
                                                     r.interval * 100, r.steps, r.steps == 1 ? "" : "s", r.bootstrap)
                                       : std::string("none (--bootstrap 0)");
  if (r.bootstrap && r.steps < few_steps_bound(r.interval))
    intervals += fmt::format("; {} step{} too few for a {:.0f} % interval (fewer than {}: see the weak points)",
                             r.steps, r.steps == 1 ? " is" : "s are", r.interval * 100, few_steps_bound(r.interval));
  f.items.emplace_back("intervals", intervals);
  in.blocks.emplace_back(std::move(f));
  d.sections.push_back(std::move(in));
  Section models{"cost-models", "2. Cost models", model_blocks(r.models)};
  d.sections.push_back(std::move(models));
  int n = 3;
  for (const auto& p : r.predictions) {
    Section s{fmt::format("prediction-{}", n - 3), fmt::format("{}. What if: {}", n, prediction_title(r, p)),
              prediction_blocks(r, p)};
    d.sections.push_back(std::move(s));
    ++n;
  }
  d.sections.push_back(input_section(diag));
  return d;
}

Section whatif_section(const std::vector<WhatIfResult>& results, const std::string& title) {
  Section s{"whatif", title, {}};
  if (results.empty()) {
    s.blocks.emplace_back(Paragraph{"no what-if was computed"});
    return s;
  }
  s.blocks.emplace_back(Paragraph{"Cost models (the same for every what-if):"});
  for (auto& b : model_blocks(results.front().models)) s.blocks.push_back(std::move(b));
  for (const auto& r : results)
    for (const auto& p : r.predictions) {
      s.blocks.emplace_back(Paragraph{"What if: " + prediction_title(r, p)});
      for (auto& b : prediction_blocks(r, p)) s.blocks.push_back(std::move(b));
    }
  return s;
}

}  // namespace stepprof::detail
