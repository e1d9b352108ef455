// CSV tables (RFC 4180): per update, per region and update, and the region table.
#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "pieces.hpp"
#include "stepprof/diagnostics.hpp"

#include "stepprof/render/exports.hpp"

namespace stepprof {
namespace {

// One RFC 4180 field: quoted when it holds a comma, a quote, CR or LF (quotes doubled).
// Other control characters (NUL, ESC, C1 controls: control_bytes(); tab stays) are
// written as printable()'s `\xNN` per byte, as
// in the text report: a NUL ends the field for C-string readers (R's read.csv cuts the
// line there) and an escape sequence redraws a terminal showing the file.
std::string field(std::string_view text) {
  // (Tab, CR and LF stay: the quoting below holds them. So do the line separators and
  // bidirectional controls, 3 bytes: they change no terminal's state, and a table of data
  // keeps its names as they are.)
  const auto control = [&](std::size_t i) -> std::size_t {
    const char c = text[i];
    if (c == '\t' || c == '\r' || c == '\n') return 0;
    const std::size_t n = control_bytes(text, i);
    return n == 3 ? 0 : n;
  };
  std::string shown;
  bool any = false;
  for (std::size_t i = 0; i < text.size() && !any; ++i) any = control(i) > 0;
  if (any) {
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t n = control(i);
      shown += n ? printable(text.substr(i, n)) : std::string(1, text[i]);
      i += n ? n : 1;
    }
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

// Rows, handed on to `write` in pieces of about 1 MiB (a table of every rank's every
// update and region is hundreds of MB at thousands of ranks); done() hands on the rest.
class Writer {
 public:
  explicit Writer(const std::function<bool(std::string_view)>& write) : out_(write) {}
  void row(const std::vector<std::string>& cells) {
    std::string& text = out_.text();
    for (std::size_t i = 0; i < cells.size(); ++i) {
      if (i) text += ',';
      text += field(cells[i]);
    }
    text += "\r\n";
    out_.hand_on();
  }
  bool ok() const { return out_.ok(); }
  bool done() { return out_.finish(); }

 private:
  detail::Pieces out_;
};

// (Each rank's series is built, written and let go of in turn: every rank's at once took
// 1 GB more than the report at 16,384 ranks x 20 updates.)
bool updates_csv(const SeriesBuilder& b, const std::function<bool(std::string_view)>& write) {
  Writer w(write);
  std::vector<std::string> header{"rank", "step", "wall_ms", "outside_regions_ms", "padding_fraction"};
  for (const auto& c : b.head().counters) header.push_back("counts." + c);
  w.row(header);
  for (std::size_t i = 0; i < b.rank_count(); ++i) {
    const RankSeries r = b.rank(i, RankDetail::kTables);
    for (std::size_t k = 0; k < r.steps.size(); ++k) {
      std::vector<std::string> row{integer(r.rank), std::to_string(r.steps[k]), number(r.wall_ms[k]),
                                   number(r.outside_ms[k]), number(r.padding_fraction[k])};
      for (const auto& c : r.counters) row.push_back(number(c[k]));
      w.row(row);
      if (!w.ok()) return false;
    }
  }
  return w.done();
}

bool regions_csv(const SeriesBuilder& b, const std::function<bool(std::string_view)>& write) {
  Writer w(write);
  w.row({"rank", "step", "region", "parent", "depth", "device_ms", "host_ms", "calls", "device_self_ms",
         "host_self_ms"});
  for (std::size_t i = 0; i < b.rank_count(); ++i) {
    const RankSeries r = b.rank(i, RankDetail::kTables);
    for (const auto& p : r.regions) {
      const SeriesRegion& reg = b.head().regions[p.region];
      w.row({integer(r.rank), std::to_string(r.steps[p.update]), reg.name, reg.parent,
             reg.in_nesting ? std::to_string(reg.depth) : std::string(), number(p.device_ms), number(p.host_ms),
             integer(p.calls), number(p.device_self_ms), number(p.host_self_ms)});
      if (!w.ok()) return false;
    }
  }
  return w.done();
}

bool summary_csv(const RegionTable& t, const std::function<bool(std::string_view)>& write) {
  Writer w(write);
  w.row({"region", "parent", "depth", "in_nesting", "updates_present", "device_updates",
         "host_updates", "device_ms_median", "device_ms_p90",
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
           std::to_string(r.device_ms ? r.device_ms->n : 0), std::to_string(r.host_ms ? r.host_ms->n : 0),
           stat(r.device_ms, &Summary::median), stat(r.device_ms, &Summary::p90), stat(r.device_ms, &Summary::max),
           stat(r.device_ms, &Summary::mean), stat(r.host_ms, &Summary::median), stat(r.host_ms, &Summary::p90),
           stat(r.host_ms, &Summary::max), stat(r.host_ms, &Summary::mean), stat(r.calls, &Summary::median),
           stat(r.calls, &Summary::min), stat(r.calls, &Summary::max), stat(r.device_self_ms, &Summary::median),
           stat(r.host_self_ms, &Summary::median), number(r.share), nested ? number(r.self_share) : std::string(),
           number(r.gap_ms), r.gap_ms ? std::string(gap_name(r.gap)) : std::string()});
  }
  return w.done();
}

}  // namespace

std::vector<std::string> csv_table_names() { return {"updates.csv", "regions.csv", "summary.csv"}; }

std::vector<CsvTable> csv_tables(const Report& report, const SeriesBuilder& series) {
  const auto names = csv_table_names();
  return {{names[0], [&series](const auto& write) { return updates_csv(series, write); }},
          {names[1], [&series](const auto& write) { return regions_csv(series, write); }},
          {names[2], [&report](const auto& write) { return summary_csv(report.regions, write); }}};
}

std::vector<CsvFile> render_csv(const Report& report, const SeriesBuilder& series) {
  std::vector<CsvFile> out;
  for (const auto& table : csv_tables(report, series)) {
    CsvFile& f = out.emplace_back(CsvFile{table.name, {}});
    table.write([&](std::string_view piece) {
      f.text.append(piece);
      return true;
    });
  }
  return out;
}

}  // namespace stepprof
