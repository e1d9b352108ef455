// CSV tables (RFC 4180): per update, per region and update, and the region table.
#include <fmt/format.h>

#include <algorithm>

#include "stepprof/diagnostics.hpp"

#include "stepprof/render/exports.hpp"

namespace stepprof {
namespace {

// One RFC 4180 field: quoted when it holds a comma, a quote, CR or LF (quotes doubled).
// Other control bytes (NUL, ESC, ...; tab stays) are written as printable()'s `\xNN`, as
// in the text report: a NUL ends the field for C-string readers (R's read.csv cuts the
// line there) and an escape sequence redraws a terminal showing the file.
std::string field(std::string_view text) {
  const auto control = [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return (u < 0x20 && c != '\t' && c != '\r' && c != '\n') || u == 0x7f;
  };
  std::string shown;
  if (std::any_of(text.begin(), text.end(), control)) {
    for (char c : text) shown += control(c) ? printable(std::string_view(&c, 1)) : std::string(1, c);
    text = shown;
  }
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + '"';
}

// Shortest text that reads back as the same double; empty when absent.
std::string number(std::optional<double> v) { return v ? fmt::format("{}", *v) : std::string(); }
std::string integer(std::optional<std::int64_t> v) { return v ? std::to_string(*v) : std::string(); }

class Writer {
 public:
  void row(const std::vector<std::string>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i) text_ += ',';
      text_ += field(cells[i]);
    }
    text_ += "\r\n";
  }
  std::string take() { return std::move(text_); }

 private:
  std::string text_;
};

std::string updates_csv(const UpdateSeries& s) {
  Writer w;
  std::vector<std::string> header{"rank", "step", "wall_ms", "outside_regions_ms", "padding_fraction"};
  for (const auto& c : s.counters) header.push_back("counts." + c);
  w.row(header);
  for (const auto& r : s.ranks)
    for (std::size_t k = 0; k < r.steps.size(); ++k) {
      std::vector<std::string> row{integer(r.rank), std::to_string(r.steps[k]), number(r.wall_ms[k]),
                                   number(r.outside_ms[k]), number(r.padding_fraction[k])};
      for (const auto& c : r.counters) row.push_back(number(c[k]));
      w.row(row);
    }
  return w.take();
}

std::string regions_csv(const UpdateSeries& s) {
  Writer w;
  w.row({"rank", "step", "region", "parent", "depth", "device_ms", "host_ms", "calls", "device_self_ms",
         "host_self_ms"});
  for (const auto& r : s.ranks)
    for (const auto& p : r.regions) {
      const SeriesRegion& reg = s.regions[p.region];
      w.row({integer(r.rank), std::to_string(r.steps[p.update]), reg.name, reg.parent,
             reg.in_nesting ? std::to_string(reg.depth) : std::string(), number(p.device_ms), number(p.host_ms),
             integer(p.calls), number(p.device_self_ms), number(p.host_self_ms)});
    }
  return w.take();
}

std::string summary_csv(const RegionTable& t) {
  Writer w;
  w.row({"region", "parent", "depth", "in_nesting", "updates_present", "device_ms_median", "device_ms_p90",
         "device_ms_max", "device_ms_mean", "host_ms_median", "host_ms_p90", "host_ms_max", "host_ms_mean",
         "calls_median", "calls_min", "calls_max", "device_self_ms_median", "host_self_ms_median", "share_fraction",
         "self_share_fraction", "device_minus_host_ms_median", "gap"});
  auto stat = [](const std::optional<Summary>& s, double Summary::*m) {
    return s ? number((*s).*m) : std::string();
  };
  for (const auto& r : t.rows) {
    const bool nested = t.nesting_known && r.in_hierarchy;
    w.row({r.name, r.parent, nested ? std::to_string(r.depth) : std::string(),
           t.nesting_known ? (r.in_hierarchy ? "true" : "false") : std::string(), std::to_string(r.updates_present),
           stat(r.device_ms, &Summary::median), stat(r.device_ms, &Summary::p90), stat(r.device_ms, &Summary::max),
           stat(r.device_ms, &Summary::mean), stat(r.host_ms, &Summary::median), stat(r.host_ms, &Summary::p90),
           stat(r.host_ms, &Summary::max), stat(r.host_ms, &Summary::mean), stat(r.calls, &Summary::median),
           stat(r.calls, &Summary::min), stat(r.calls, &Summary::max), stat(r.device_self_ms, &Summary::median),
           stat(r.host_self_ms, &Summary::median), number(r.share), nested ? number(r.self_share) : std::string(),
           number(r.gap_ms), std::string(gap_name(r.gap))});
  }
  return w.take();
}

}  // namespace

std::vector<std::string> csv_table_names() { return {"updates.csv", "regions.csv", "summary.csv"}; }

std::vector<CsvFile> render_csv(const Report& report, const UpdateSeries& series) {
  const auto names = csv_table_names();
  return {{names[0], updates_csv(series)}, {names[1], regions_csv(series)}, {names[2], summary_csv(report.regions)}};
}

}  // namespace stepprof
