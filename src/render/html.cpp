// The HTML report: the text report's layout (document.hpp) as HTML, plus charts.
// Everything from the logs is escaped (html_escape.hpp); the charts' data goes into the
// page as JSON and is drawn by the script bundled at build time (web_assets.hpp).
#include <unordered_map>

#include <fmt/format.h>

#include "document.hpp"
#include "html_escape.hpp"
#include "many_ranks.hpp"
#include "pieces.hpp"
#include "stepprof/render/exports.hpp"
#include "web_assets.hpp"

namespace stepprof {
namespace {

using Json = nlohmann::ordered_json;
using detail::html_escape;
using detail::Pieces;

constexpr std::string_view kStyle = R"css(
:root { --fg: #1d2330; --muted: #5b6475; --line: #d9dee7; --bg: #ffffff; --band: #f5f7fa; --accent: #2f5fb3; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--fg); background: var(--bg); }
header { padding: 18px 28px 10px; border-bottom: 1px solid var(--line); background: var(--band); }
h1 { margin: 0 0 4px; font-size: 22px; }
header .sub { margin: 0 0 8px; color: var(--muted); overflow-wrap: anywhere; }
nav a { color: var(--accent); text-decoration: none; margin-right: 14px; white-space: nowrap; }
nav a:hover { text-decoration: underline; }
main { padding: 8px 28px 40px; max-width: 1400px; }
section { margin-top: 22px; }
h2 { font-size: 18px; margin: 0 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 14px; margin: 0 0 4px; }
p { margin: 6px 0; max-width: 110ch; overflow-wrap: anywhere; }
table { border-collapse: collapse; margin: 8px 0 12px; }
th, td { padding: 3px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
table.data th { background: var(--band); text-align: right; font-weight: 600; white-space: nowrap; }
table.data td { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
table.data th:first-child, table.data td:first-child { text-align: left; }
table.data td:first-child { white-space: normal; overflow-wrap: anywhere; }
table.fields th { text-align: left; font-weight: 600; color: var(--muted); white-space: nowrap; padding-left: 0; }
table.fields td { overflow-wrap: anywhere; }
ol.findings { padding-left: 22px; }
ol.findings li { margin-bottom: 10px; }
ol.findings .title { font-weight: 600; margin: 0 0 2px; }
ol.findings dl { margin: 0; display: grid; grid-template-columns: max-content 1fr; gap: 2px 10px; }
ol.findings dt { color: var(--muted); }
ol.findings dd { margin: 0; overflow-wrap: anywhere; }
figure { margin: 10px 0 16px; padding: 10px 12px; border: 1px solid var(--line); border-radius: 6px; }
figure .controls { float: right; color: var(--muted); }
figure .controls label { margin-left: 12px; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 4px; max-width: 130ch; }
.chart { width: 100%; height: 340px; }
.chart.tall { height: 420px; }
footer { padding: 12px 28px 24px; color: var(--muted); font-size: 12px; border-top: 1px solid var(--line); }
@media print { figure { break-inside: avoid; } }
)css";

std::string rank_label(const RankSeries& r) { return r.rank ? fmt::format("rank {}", *r.rank) : "rank unknown"; }

std::string level_label(const Breakdown& b, std::size_t levels) {
  if (!b.stacked) return "every region (not stacked)";
  if (b.level == 0) return "top-level regions";
  std::string s = fmt::format("nesting depth {}", b.level);
  if (static_cast<std::size_t>(b.level) + 1 == levels) s += " (every leaf)";
  return s;
}

std::string part_label(const StackPart& p) {
  switch (p.kind) {
    case StackPart::Kind::kRegion: return p.region;
    case StackPart::Kind::kSelf: return p.region + " (self)";
    case StackPart::Kind::kOutside: return "(outside every region)";
  }
  return p.region;
}

// What the charts draw. A job of 64 ranks x 10,000 updates would put hundreds of MB of
// numbers into the page, more than a browser draws: lines longer than kMaxChartPoints
// are drawn as the means of `stride` consecutive updates, and the per-rank charts of
// jobs with more than kAllRanksUpTo ranks show the ranks the tables show (the slowest,
// the fastest and every straggler). The heatmaps keep every rank, in rows of
// `ranks_per_heatmap_row` consecutive ranks beyond kMaxHeatmapRows ranks.
constexpr std::size_t kMaxChartPoints = 2000;

// Beyond this many ranks a heatmap row is several consecutive ranks, each cell the largest
// of their values: a straggler stays a dark row, and the chart stays readable (a row per
// rank at 4,096 ranks is less than a pixel high).
constexpr std::size_t kMaxHeatmapRows = 256;

std::size_t ranks_per_heatmap_row(std::size_t ranks) {
  return ranks <= kMaxHeatmapRows ? 1 : (ranks + kMaxHeatmapRows - 1) / kMaxHeatmapRows;
}

struct ChartPlan {
  std::size_t stride = 1;         // updates per point
  std::vector<std::size_t> ranks;  // indices into UpdateSeries::ranks, ascending
};

// The ranks charted one by one, as indices into `ranks` (each rank's number, if known),
// ascending: the rows the report's per-rank tables show.
std::vector<std::size_t> charted_ranks(const Report& report, const std::vector<std::optional<std::int64_t>>& ranks) {
  // The median update time of each rank, as the report's per-rank table has it.
  // (By a map: a search of every rank for each was 268 million steps at 16,384 ranks.)
  std::unordered_map<std::int64_t, double> median_of;
  for (const auto& [rank, sum] : report.time.per_rank_ms) median_of.try_emplace(rank, sum.median);
  std::vector<double> medians(ranks.size(), 0.0);
  for (std::size_t i = 0; i < ranks.size(); ++i)
    if (ranks[i])
      if (const auto it = median_of.find(*ranks[i]); it != median_of.end()) medians[i] = it->second;
  auto flagged = [&](std::size_t i) { return ranks[i] && detail::flagged_rank(report.cross_rank, *ranks[i]); };
  const auto shown = detail::rows_that_matter(ranks.size(), [&](std::size_t i) { return medians[i]; }, flagged);
  std::vector<std::size_t> out;
  if (shown) {
    out = *shown;
    std::sort(out.begin(), out.end());
  } else {
    for (std::size_t i = 0; i < ranks.size(); ++i) out.push_back(i);
  }
  return out;
}

ChartPlan plan_charts(const Report& report, const UpdateSeries& s) {
  ChartPlan plan;
  std::size_t longest = s.steps.size();
  for (const auto& r : s.ranks) longest = std::max(longest, r.steps.size());
  plan.stride = longest <= kMaxChartPoints ? 1 : (longest + kMaxChartPoints - 1) / kMaxChartPoints;
  std::vector<std::optional<std::int64_t>> ranks;
  for (const auto& r : s.ranks) ranks.push_back(r.rank);
  plan.ranks = charted_ranks(report, ranks);
  return plan;
}

// Every `stride`-th step: the first step of each point.
Json thinned_steps(const std::vector<std::int64_t>& steps, std::size_t stride) {
  Json a = Json::array();
  for (std::size_t i = 0; i < steps.size(); i += stride) a.push_back(steps[i]);
  return a;
}

// The mean of each `stride` consecutive values, absent ones left out (null when all are).
template <class Value>
Json thinned(const std::vector<Value>& v, std::size_t stride) {
  auto present = [](const Value& x) {
    if constexpr (std::is_same_v<Value, double>) return true;
    else return x.has_value();
  };
  auto value = [](const Value& x) {
    if constexpr (std::is_same_v<Value, double>) return x;
    else return *x;
  };
  Json a = Json::array();
  for (std::size_t i = 0; i < v.size(); i += stride) {
    double sum = 0;
    std::size_t n = 0;
    for (std::size_t k = i; k < std::min(v.size(), i + stride); ++k)
      if (present(v[k])) {
        sum += value(v[k]);
        ++n;
      }
    if (n == 0) a.push_back(nullptr);
    else a.push_back(stride == 1 ? sum : sum / static_cast<double>(n));  // (one value: exactly as logged)
  }
  return a;
}

// One rank's charts: its update time, padding, breakdowns and code paths.
Json rank_chart(const RankSeries& r, std::size_t k) {
  Json cuts = Json::array();
  for (const auto& b : r.breakdowns) {
    Json parts = Json::array();
    for (const auto& p : b.parts) parts.push_back({{"label", part_label(p)}, {"ms", thinned(p.ms, k)}});
    cuts.push_back({{"label", level_label(b, r.breakdowns.size())}, {"stacked", b.stacked}, {"parts", parts}});
  }
  Json groups = Json::array();
  for (const auto& g : r.paths) {
    Json paths = Json::array();
    for (const auto& p : g.paths)
      paths.push_back({{"label", p.device ? p.region : p.region + " (host time)"},
                       {"ms_per_unit", thinned(p.ms_per_unit, k)}});
    groups.push_back({{"group", g.group}, {"unit", g.unit}, {"paths", paths}});
  }
  return Json{{"label", rank_label(r)},
              {"steps", thinned_steps(r.steps, k)},
              {"wall_ms", thinned(r.wall_ms, k)},
              {"padding_fraction", thinned(r.padding_fraction, k)},
              {"breakdowns", cuts},
              {"paths", groups}};
}

// The heatmaps. A matrix has a row for every rank, or for every `per` consecutive ranks:
// the largest of their values in each column.
Json matrices_chart(const UpdateSeries& s, std::size_t k) {
  const std::size_t per = ranks_per_heatmap_row(s.ranks.size());
  Json matrices = Json::array(), labels = Json::array();
  for (std::size_t i = 0; i < s.ranks.size(); i += per) {
    const std::size_t end = std::min(s.ranks.size(), i + per);
    std::vector<std::int64_t> numbers;  // the group's ranks, when each is known
    for (std::size_t j = i; j < end; ++j)
      if (s.ranks[j].rank) numbers.push_back(*s.ranks[j].rank);
    if (end - i == 1 || numbers.size() != end - i)
      labels.push_back(end - i == 1 ? rank_label(s.ranks[i])
                                    : fmt::format("{} .. {}", rank_label(s.ranks[i]), rank_label(s.ranks[end - 1])));
    else if (numbers.back() - numbers.front() + 1 == static_cast<std::int64_t>(numbers.size()))
      labels.push_back(fmt::format("ranks {}..{}", numbers.front(), numbers.back()));
    else  // ranks without a log in between: only those present ("ranks 99, 104")
      labels.push_back("ranks " + detail::rank_numbers(numbers));
  }
  for (const auto& m : s.matrices) {
    Json rows = Json::array();
    for (std::size_t i = 0; i < m.values.size(); i += per) {
      Json row = thinned(m.values[i], k);
      for (std::size_t j = i + 1; j < std::min(m.values.size(), i + per); ++j) {
        const Json other = thinned(m.values[j], k);
        for (std::size_t c = 0; c < row.size() && c < other.size(); ++c)
          if (!other[c].is_null() && (row[c].is_null() || other[c].get<double>() > row[c].get<double>()))
            row[c] = other[c];
      }
      rows.push_back(std::move(row));
    }
    matrices.push_back(
        {{"id", m.id}, {"title", m.title}, {"labels", labels}, {"ranks_per_row", per}, {"values", rows}});
  }
  return matrices;
}

// The charts' data, as one JSON object in the page's data element (<, >, &, U+2028 and
// U+2029 escaped): {"nesting_known", "steps", "ranks": [one per charted rank], "matrices",
// "whatif" (when given)}. Written a part at a time, each charted rank's series built in
// full, written and let go of in turn (every rank's series and the whole object at once
// were most of the page's memory); the bytes are those of the whole object's dump.
void chart_data(const SeriesBuilder& builder, const UpdateSeries& s, const ChartPlan& plan, const Json& whatif,
                Pieces& out) {
  const std::size_t k = plan.stride;
  out += R"({"nesting_known":)";
  out += Json(s.nesting_known).dump();
  out += R"(,"steps":)";
  out += detail::json_for_script(thinned_steps(s.steps, k));
  out += R"(,"ranks":[)";
  for (std::size_t n = 0; n < plan.ranks.size() && out.ok(); ++n) {
    if (n) out += ',';
    out += detail::json_for_script(rank_chart(builder.rank(plan.ranks[n], RankDetail::kFull), k));
  }
  if (!out.ok()) return;  // (a failed or interrupted write: nothing more is written)
  out += R"(],"matrices":)";
  out += detail::json_for_script(matrices_chart(s, k));
  if (!whatif.is_null()) {
    out += R"(,"whatif":)";
    out += detail::json_for_script(whatif);
  }
  out += '}';
}

// What the charts leave out, for the page's header; empty when they show everything.
std::string chart_note(const UpdateSeries& s, const ChartPlan& plan) {
  std::string note;
  if (plan.stride > 1)
    note = fmt::format("Each point of the charts is the mean of {} consecutive updates.", plan.stride);
  if (plan.ranks.size() < s.ranks.size())
    note += fmt::format("{}Per-rank charts show {} of the {} ranks: the slowest and the fastest by median update "
                        "time and every straggler; the heatmaps show every rank.",
                        note.empty() ? "" : " ", plan.ranks.size(), s.ranks.size());
  if (const std::size_t per = ranks_per_heatmap_row(s.ranks.size()); per > 1)
    note += fmt::format("{}Each heatmap row is {} consecutive ranks, each cell the largest of their values.",
                        note.empty() ? "" : " ", per);
  // (Not the JSON report: it holds summaries and the slowest rank per step only.)
  if (!note.empty()) note += " Every update of every rank is in DIR/updates.csv of stepprof report --format csv --out DIR.";
  return note;
}

// The what-if chart: the measured update time and every available prediction, per step.
Json whatif_data(const std::vector<WhatIfResult>& results, std::size_t stride) {
  const Prediction* first = nullptr;
  for (const auto& r : results)
    for (const auto& p : r.predictions)
      if (p.available && !first) first = &p;
  if (!first) return nullptr;
  std::vector<std::int64_t> steps;
  std::vector<double> measured;
  for (const auto& u : first->updates) {
    steps.push_back(u.step);
    measured.push_back(u.measured_ms);
  }
  Json series = Json::array();
  series.push_back({{"label", "measured"}, {"ms", thinned(measured, stride)}});
  for (const auto& r : results)
    for (const auto& p : r.predictions) {
      if (!p.available || p.updates.size() != first->updates.size()) continue;
      std::vector<double> ms;
      for (const auto& u : p.updates) ms.push_back(u.predicted_ms);
      const std::string name(scenario_name(r.scenario));
      series.push_back({{"label", p.variant.empty() ? name : name + " (" + p.variant + ")"}, {"ms", thinned(ms, stride)}});
    }
  return Json{{"steps", thinned_steps(steps, stride)}, {"series", series}, {"range", first->range}};
}

// A chart: a figure with a heading, optional selectors, the chart element and a caption.
struct Figure {
  std::string chart;  // data-chart value
  std::string title;
  std::string caption;
  bool rank_select = false, level_select = false, tall = false;
};

void figure(const Figure& f, Pieces& out) {
  out += "<figure>";
  if (f.rank_select || f.level_select) {
    out += "<div class=\"controls\">";
    if (f.rank_select) out += "<label>rank <select data-control=\"rank\"></select></label>";
    if (f.level_select) out += "<label>level <select data-control=\"level\"></select></label>";
    out += "</div>";
  }
  out += "<h3>" + html_escape(f.title) + "</h3>";
  out += fmt::format("<div class=\"chart{}\" data-chart=\"{}\" role=\"img\" aria-label=\"{}\"></div>", f.tall ? " tall" : "",
                     html_escape(f.chart), html_escape(f.title));
  if (!f.caption.empty()) out += "<figcaption>" + html_escape(f.caption) + "</figcaption>";
  out += "</figure>\n";
}

// The charts of a section; `s` holds every rank's headline series (SeriesBuilder::overview).
std::vector<Figure> figures_for(std::string_view section, const Report& report, const UpdateSeries& s) {
  std::vector<Figure> out;
  const bool several = s.ranks.size() > 1;
  const bool any_updates = !s.steps.empty();
  if (section == "update-time" && any_updates) {
    out.push_back({"update-time", several ? "Update time per update, per rank" : "Update time per update",
                   "wall_ms of each optimizer update.", false, false, false});
    for (const auto& m : s.matrices)
      out.push_back({"heatmap-" + m.id, "Rank x update: " + m.title,
                     m.id == "outside_comm_ms"
                         ? "A rank that is slow outside communication makes the others wait inside it: the "
                           "straggler is the dark row."
                         : "",
                     false, false, false});
  } else if (section == "regions" && any_updates && !s.regions.empty()) {
    std::string caption;
    if (s.nesting_known) {
      caption =
          "Stacked per update at the chosen level of the nesting: the regions at that depth, the exclusive time of "
          "their parents (\"(self)\") and the time outside every top-level region; the dashed line is the update's "
          "wall_ms. Regions timed on the device stream are stacked with their device time.";
      std::string left_out;
      for (const auto& r : s.regions)
        if (!r.in_nesting) left_out += (left_out.empty() ? "" : ", ") + r.name;
      if (!left_out.empty()) caption += " Not in the nesting, so not stacked: " + left_out + ".";
    } else {
      caption =
          "Nesting unknown (give --hierarchy FILE): each region's time per update, not stacked, since regions may "
          "contain each other.";
    }
    // (No level to stack: the nesting names none of the log's regions, or only background
    // ones. The chart had nothing to draw and threw, and the charts after it stayed empty.)
    const std::size_t levels = breakdown_count(s);
    if (levels > 0) out.push_back({"regions", "Where each update's time goes", caption, several, levels > 1, true});
  } else if (section == "code-paths") {
    for (std::size_t g = 0; g < report.paths.groups.size() && !s.ranks.empty(); ++g) {
      const auto& group = report.paths.groups[g];
      out.push_back({fmt::format("paths-{}", g),
                     fmt::format("Cost per {} by code path, per update: {}", group.unit, group.group),
                     fmt::format("Each path's time in the update / the {}s it processed; no point where the path did "
                                 "not run.",
                                 group.unit),
                     several, false, false});
    }
  } else if (section == "padding") {
    bool any = false;
    for (const auto& r : s.ranks)
      for (const auto& v : r.padding_fraction) any = any || v.has_value();
    if (any)
      out.push_back({"padding", several ? "Padding per update, per rank" : "Padding per update",
                     "1 - valid_tokens / token_slots of each update.", false, false, false});
  }
  return out;
}

void block(const detail::Block& b, Pieces& out) {
  if (const auto* f = std::get_if<detail::Fields>(&b)) {
    out += "<table class=\"fields\"><tbody>\n";
    for (const auto& [k, v] : f->items) out += "<tr><th>" + html_escape(k) + "</th><td>" + html_escape(v) + "</td></tr>\n";
    out += "</tbody></table>\n";
  } else if (const auto* t = std::get_if<detail::Table>(&b)) {
    out += "<table class=\"data\"><thead><tr>";
    for (const auto& h : t->header) out += "<th>" + html_escape(h) + "</th>";
    out += "</tr></thead><tbody>\n";
    for (std::size_t r = 0; r < t->rows.size(); ++r) {
      out += "<tr>";
      for (std::size_t i = 0; i < t->rows[r].size(); ++i) {
        const int depth = i == 0 && r < t->depth.size() ? t->depth[r] : 0;
        out += depth > 0 ? fmt::format("<td style=\"padding-left:{:.1f}em\">", 0.7 + 1.2 * depth) : std::string("<td>");
        out += html_escape(t->rows[r][i]) + "</td>";
      }
      out += "</tr>\n";
    }
    out += "</tbody></table>\n";
  } else if (const auto* p = std::get_if<detail::Paragraph>(&b)) {
    out += "<p>" + html_escape(p->text) + "</p>\n";
  } else if (const auto* l = std::get_if<detail::NumberedList>(&b)) {
    out += "<ol class=\"findings\">\n";
    for (const auto& item : l->items) {
      out += "<li><p class=\"title\">" + html_escape(item.title) + "</p><dl>";
      for (const auto& [k, v] : item.details) out += "<dt>" + html_escape(k) + "</dt><dd>" + html_escape(v) + "</dd>";
      out += "</dl></li>\n";
    }
    out += "</ol>\n";
  }
}

}  // namespace

std::vector<bool> html_chart_ranks(const Report& report, const Dataset& data) {
  std::vector<std::optional<std::int64_t>> ranks;
  for (const auto& r : data.ranks) ranks.push_back(r.rank);
  std::vector<bool> full(ranks.size(), false);
  for (const std::size_t i : charted_ranks(report, ranks)) full[i] = true;
  return full;
}

bool render_html(const Report& report, const SeriesBuilder& builder, const Diagnostics& diag,
                 const std::vector<WhatIfResult>& whatifs, const std::function<bool(std::string_view)>& write) {
  const UpdateSeries series = builder.overview();  // (every rank's headline series; the charted ranks' in full later)
  detail::Document doc = detail::build_document(report, diag);
  const ChartPlan plan = plan_charts(report, series);
  const Json whatif = whatif_data(whatifs, plan.stride);
  if (!whatifs.empty()) {
    // Before the input problems, which stay last.
    const auto at = doc.sections.empty() ? doc.sections.end() : doc.sections.end() - 1;
    doc.sections.insert(at, detail::whatif_section(whatifs, "8. What if"));
  }
  const std::string files = detail::file_list(report.run.files);

  Pieces out(write);
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  out += fmt::format(
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src 'sha256-{}'; "
      "style-src 'unsafe-inline'; img-src data:\">\n",
      detail::report_script_sha256());
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  out += "<meta name=\"generator\" content=\"stepprof\">\n";
  out += "<title>" + html_escape(doc.title + (files.empty() ? "" : ": " + files)) + "</title>\n";
  out += "<style>" + std::string(kStyle) + "</style>\n</head>\n<body>\n";
  out += "<header><h1>" + html_escape(doc.title) + "</h1>\n";
  if (!files.empty()) out += "<p class=\"sub\">" + html_escape(files) + "</p>\n";
  if (const std::string note = chart_note(series, plan); !note.empty())
    out += "<p class=\"sub\">" + html_escape(note) + "</p>\n";
  out += "<nav>";
  for (const auto& s : doc.sections)
    out += "<a href=\"#" + html_escape(s.id) + "\">" + html_escape(s.title) + "</a>\n";
  out += "</nav></header>\n<main>\n";
  for (const auto& s : doc.sections) {
    out += "<section id=\"" + html_escape(s.id) + "\">\n<h2>" + html_escape(s.title) + "</h2>\n";
    for (const auto& f : figures_for(s.id, report, series)) figure(f, out);
    if (s.id == "whatif" && !whatif.is_null())
      figure({"whatif", "Measured and predicted update time per update",
              whatif["range"].get<bool>()
                  ? "From one rank's log: the predictions shown assume every rank improves alike; the tables give "
                    "the range from only this rank improving. Not a bound: a change on every rank also removes "
                    "their waits for each other, which one rank's log cannot see."
                  : "Each what-if replays the same updates with the scenario's work, priced by the cost models.",
              false, false, false},
             out);
    for (const auto& b : s.blocks) block(b, out);
    out += "</section>\n";
  }
  out += "</main>\n<footer>Written by stepprof. Charts drawn with " + html_escape(detail::chart_library()) +
         " (Apache License 2.0), bundled into this file: it opens offline.</footer>\n";
  out += "<script type=\"application/json\" id=\"stepprof-data\">";
  chart_data(builder, series, plan, whatif, out);
  out += "</script>\n";
  out += "<script>";
  out += detail::report_script();
  out += "</script>\n</body>\n</html>\n";
  return out.finish();
}

}  // namespace stepprof
