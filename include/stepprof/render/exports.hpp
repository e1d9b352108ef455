// Exports for viewers and tools: a Chrome trace (Perfetto UI, chrome://tracing), a
// self-contained HTML report with charts, and CSV tables. Like the other renderers they
// compute nothing: they format a Timeline, a Report and per-update series
// (docs/exports.md describes every output).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "stepprof/analysis/report.hpp"
#include "stepprof/analysis/series.hpp"
#include "stepprof/analysis/timeline.hpp"
#include "stepprof/analysis/whatif.hpp"
#include "stepprof/diagnostics.hpp"

namespace stepprof {

/// Chrome Trace Event Format, JSON object form: {"traceEvents": [...],
/// "displayTimeUnit": "ms", "otherData": {...}}. One process per rank (pid = rank, with
/// process_name metadata), one thread per track, regions as complete ("X") events with
/// ts and dur in microseconds, counters as counter ("C") events. Every laid-out slice
/// carries args.layout saying how it was placed (timeline.hpp).
std::string render_trace(const Timeline& timeline);
/// The same, handed to `write` in pieces of about 1 MiB as it is made (a trace of
/// thousands of ranks is gigabytes, which render_trace() holds whole, twice while its
/// string grows). Stops and returns false as soon as `write` returns false.
bool render_trace(const Timeline& timeline, const std::function<bool(std::string_view)>& write);

/// The ranks whose per-rank charts render_html draws, one entry per rank of `data.ranks`:
/// every rank of a job of up to 32 ranks, else the slowest 8, the fastest 3 by median
/// update time and the stragglers and ranks that fell behind (docs/exports.md, "Large
/// jobs"). render_html builds only these ranks' series in full; give it to build_series for
/// the same series.
std::vector<bool> html_chart_ranks(const Report& report, const Dataset& data);

/// One HTML file that needs nothing else, online or offline: every section of the text
/// report (the same layout), plus charts drawn by the Apache ECharts bundle compiled
/// into stepprof. Text from the logs is HTML-escaped; the chart data sits in a
/// <script type="application/json"> element with <, >, &, U+2028 and U+2029 escaped;
/// a Content-Security-Policy lets only the bundled script run. `whatifs` (optional): the
/// what-if results shown in a last section, "What if", with a chart of the measured and
/// predicted update time per update. The page is handed to `write` in pieces of about
/// 1 MiB as it is made, and each charted rank's series is built by `series` (made from
/// the same input as `report`) as its charts are written, so neither the page nor every
/// rank's series is held whole. Stops and returns false as soon as `write` returns false.
bool render_html(const Report& report, const SeriesBuilder& series, const Diagnostics& diag,
                 const std::vector<WhatIfResult>& whatifs, const std::function<bool(std::string_view)>& write);

/// One CSV file: its name (no directory) and its RFC 4180 text (CRLF line ends, fields
/// with a comma, quote or line break quoted, quotes doubled). An absent value is an empty
/// field, never 0.
struct CsvFile {
  std::string name;
  std::string text;
};

/// updates.csv (one row per rank and update), regions.csv (one row per rank, update and
/// region present) and summary.csv (the region table); columns in docs/exports.md.
std::vector<CsvFile> render_csv(const Report& report, const SeriesBuilder& series);

/// One CSV table made as it is written: `write(piece)` is handed its text in pieces of
/// about 1 MiB, in order (it returns false to stop; write then returns false). Reads the
/// report and series builder given to csv_tables(), which must outlive it.
struct CsvTable {
  std::string name;
  std::function<bool(const std::function<bool(std::string_view)>& piece)> write;
};
/// The tables of render_csv(), to be written one piece at a time (regions.csv of 16,384
/// ranks x 20 updates is 496 MB, held whole by render_csv()), each rank's series built as
/// its rows are written.
std::vector<CsvTable> csv_tables(const Report& report, const SeriesBuilder& series);

/// The names of the files render_csv returns, in its order: {"updates.csv", "regions.csv",
/// "summary.csv"} (so that a command can check them before it analyzes anything).
std::vector<std::string> csv_table_names();

}  // namespace stepprof
